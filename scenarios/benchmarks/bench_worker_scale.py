"""The worker at 4, 16 and 64 handlers, grouped acks off and on (issue 28).

Every row runs the real ``Worker`` (one task, task concurrency = the row's
handlers) in child processes on a freshly provisioned store; each handler records
its job's id and ``time.time()`` when it starts, then sleeps 1 ms
(``time.sleep(0.001)``). Rows:

- **drain**: 4, 16 and 64 handlers in one process, and 4 processes of 16; each
  with ``ack_window_s=0`` (one commit per job: the path before grouped acks) and
  with each window of ``WINDOWS``. Once every process is up and has drained its
  warm-up, one transaction commits a backlog; a round times from that commit to
  the first ``stats()`` that sees the queue empty (polled every 10 ms). The row
  shows the median of ``DRAIN_ROUNDS`` rounds (completions/s).
- **light**: one process of 16 handlers and a producer that enqueues one job
  every 10 ms (100 jobs/s) for ``LIGHT_SECONDS``; window off and on.
- **failing** (``--failing`` only): the drain rows of ``FAILING_SHAPES`` twice
  each, side by side, all acks and with a share of jobs that do not ack (every
  ``FAILING_EVERY``-th job's first run raises ``Retry(delay=0)`` and it acks its
  second; every ``FAILING_EVERY``-th offset by half fails, ``Fail``), so a group
  carries retries and fails with its acks (contract §12.10) and window 0 writes
  each of them in its own commit.

Pickup latency is each job's handler start less the ``time.time()`` its enqueue
committed at (the parent notes it right after the commit returns; one clock for
every process of the machine): in a drain row that is mostly the wait behind the
backlog, in the light row it is the pickup itself. On PostgreSQL each row also
reads the job table's ``n_dead_tup`` (``pg_stat_user_tables``, after the workers
exited, so their backends have flushed their counters) and its table + index
size, before and after; dead tuples per job = the delta over the jobs the row ran
(an autovacuum that ran meanwhile lowers it: the row says how many ran).
Printed and written to the report, never asserted.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_children import run_children, serve_until_stopped
from bench_workloads import payloads

import alkstore
from alkstore.worker import Fail, Retry, Worker

QUEUE = "bench-scale"
HANDLER_SLEEP_S = 0.001
SHAPES: Sequence[tuple[int, int]] = ((1, 4), (1, 16), (1, 64), (4, 16))
"""(processes, handlers per process) of the drain rows."""
QUICK_SHAPES: Sequence[tuple[int, int]] = ((1, 4), (1, 16))
WINDOWS: Sequence[float] = (0.0, 0.002, 0.005, 0.010)
"""Each drain row's ``ack_window_s`` values; ``0`` is the path before grouped acks."""
QUICK_WINDOWS: Sequence[float] = (0.0, 0.005)
LIGHT_WINDOWS: Sequence[float] = (0.0, 0.005)
DRAIN_ROUNDS = 3
JOBS = {"sqlite": 3_000, "postgresql": 3_000}
QUICK_JOBS = 100
WARMUP_JOBS_PER_PROCESS = 20
LIGHT_RATE = 100
LIGHT_SECONDS = 10.0
QUICK_LIGHT_SECONDS = 1.0
LIGHT_PROCESSES, LIGHT_HANDLERS = 1, 16
FAILING_EVERY = 10
"""In a failing row, job ids ``% FAILING_EVERY == 0`` retry once and ids
``% FAILING_EVERY == FAILING_EVERY // 2`` fail: one job in five does not ack."""
FAILING_SHAPES: Sequence[tuple[int, int]] = ((1, 16), (1, 64), (4, 16))
FAILING_WINDOWS: Sequence[float] = (0.0, 0.005)
POLL_S = 0.01
CHILD_TIMEOUT_S = 300.0
SHUTDOWN_GRACE_S = 10.0
ROUND_TIMEOUT_S = 120.0

TABLE_STATS = """
SELECT coalesce(sum(s.n_dead_tup), 0), coalesce(sum(s.autovacuum_count), 0),
       coalesce(sum(pg_table_size(s.relid)), 0), coalesce(sum(pg_indexes_size(s.relid)), 0)
  FROM pg_stat_user_tables s WHERE s.schemaname = %s AND s.relname = 'alkstore_jobs'
"""

Start = tuple[int, float]
"""One handler run: its job's id and ``time.time()`` when the handler began."""


# --------------------------------------------------------------------------- the children


def _child(
    url: str,
    opts: dict[str, Any],
    handlers: int,
    window: float,
    failing: bool,
    ready: Any,
    stop: Any,
    results: Any,
) -> None:
    starts: list[Start] = []
    lock = threading.Lock()
    with alkstore.open(url, **opts) as store:
        worker = Worker(store, shutdown_grace_s=SHUTDOWN_GRACE_S, ack_window_s=window)

        @worker.task(QUEUE, concurrency=handlers)
        def handle(job: alkstore.Job) -> None:
            began = time.time()
            with lock:
                starts.append((job.id, began))
            time.sleep(HANDLER_SLEEP_S)
            if failing and job.id % FAILING_EVERY == 0 and job.attempts == 1:
                raise Retry(delay=0, error="bench: once more")
            if failing and job.id % FAILING_EVERY == FAILING_EVERY // 2:
                raise Fail("bench: no such card")

        serve_until_stopped(worker, ready, stop, CHILD_TIMEOUT_S, SHUTDOWN_GRACE_S)
    with lock:
        results.put(list(starts))


def _with_workers(
    spec: alkstore.EngineSpec,
    processes: int,
    handlers: int,
    window: float,
    body: Callable[[], None],
    failing: bool = False,
) -> list[Start]:
    """Start the worker processes, run ``body`` once all are up, stop them: every start."""
    args = (spec.url, dict(spec.opts), handlers, window, failing)
    return run_children(_child, args, processes, body, CHILD_TIMEOUT_S)


def _left(queue: alkstore.Queue) -> int:
    s = queue.stats()
    return s.ready + s.scheduled + s.processing + s.lapsed


def _wait_empty(queue: alkstore.Queue, deadline: float) -> int:
    while (left := _left(queue)) and time.perf_counter() < deadline:
        time.sleep(POLL_S)
    return left


# --------------------------------------------------------------------------- the table's size


@dataclass(frozen=True)
class TableStats:
    dead: int
    autovacuums: int
    table_bytes: int
    index_bytes: int


def table_stats(spec: alkstore.EngineSpec) -> TableStats | None:
    """The PostgreSQL job table's dead tuples, autovacuum runs and sizes; else ``None``."""
    if not spec.url.startswith("postgres"):
        return None
    import psycopg

    from alkstore_postgres.engine import libpq_url

    schema = str(spec.opts.get("schema", "public"))
    with psycopg.connect(libpq_url(spec.url), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(TABLE_STATS, (schema,)).fetchone()
    assert row is not None
    return TableStats(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


# --------------------------------------------------------------------------- the rows


@dataclass
class ScaleRow:
    engine: str
    kind: str
    """``drain``, ``light`` or ``fail`` (a drain with a share of retries and fails)."""
    processes: int
    handlers: int
    window_s: float
    jobs: int = 0
    rate: float | None = None
    rates: list[float] = field(default_factory=list)
    pickup_p50_ms: float | None = None
    pickup_p99_ms: float | None = None
    dead_per_job: float | None = None
    autovacuums: int | None = None
    table_bytes: int | None = None
    index_bytes: int | None = None
    failure: str | None = None

    @property
    def total_handlers(self) -> int:
        return self.processes * self.handlers

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "kind": self.kind,
            "processes": self.processes,
            "handlers_per_process": self.handlers,
            "ack_window_s": self.window_s,
            "jobs": self.jobs,
            "completions_per_s": None if self.rate is None else round(self.rate, 1),
            "rounds_per_s": [round(r, 1) for r in self.rates],
            "pickup_p50_ms": _round(self.pickup_p50_ms),
            "pickup_p99_ms": _round(self.pickup_p99_ms),
            "dead_tuples_per_job": _round(self.dead_per_job, 3),
            "autovacuums": self.autovacuums,
            "table_bytes": self.table_bytes,
            "index_bytes": self.index_bytes,
            "failure": self.failure,
        }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _pickups(row: ScaleRow, starts: list[Start], committed: dict[int, float]) -> None:
    waits = [(began - committed[job]) * 1000 for job, began in starts if job in committed]
    if waits:
        row.pickup_p50_ms = _percentile(waits, 0.50)
        row.pickup_p99_ms = _percentile(waits, 0.99)


def _sizes(row: ScaleRow, before: TableStats | None, after: TableStats | None) -> None:
    if before is None or after is None or not row.jobs:
        return
    row.dead_per_job = (after.dead - before.dead) / row.jobs
    row.autovacuums = after.autovacuums - before.autovacuums
    row.table_bytes, row.index_bytes = after.table_bytes, after.index_bytes


def drain_row(
    engine: str,
    provider: alkstore.EngineProvider,
    processes: int,
    handlers: int,
    window: float,
    jobs: int,
    rounds: int,
    failing: bool = False,
) -> ScaleRow:
    row = ScaleRow(engine, "fail" if failing else "drain", processes, handlers, window)
    committed: dict[int, float] = {}
    backlog = payloads(jobs)
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        queue = store.queue(QUEUE)

        def body() -> None:
            queue.enqueue_many(payloads(WARMUP_JOBS_PER_PROCESS * processes))
            if _wait_empty(queue, time.perf_counter() + ROUND_TIMEOUT_S):
                raise RuntimeError("warm-up jobs not drained")
            for _ in range(rounds):
                with store.transaction() as tx:
                    ids = [tx.enqueue(QUEUE, item) for item in backlog]
                at, started = time.time(), time.perf_counter()
                committed.update(dict.fromkeys(ids, at))
                left = _wait_empty(queue, started + ROUND_TIMEOUT_S)
                row.rates.append((jobs - left) / (time.perf_counter() - started))
                row.jobs += jobs - left
                if left:
                    row.failure = f"{left} jobs left after {ROUND_TIMEOUT_S:g} s"
                    return

        before = table_stats(spec)
        try:
            starts = _with_workers(spec, processes, handlers, window, body, failing)
        except RuntimeError as error:
            row.failure = str(error)
            return row
        time.sleep(0.1)
        after = table_stats(spec)
    row.rate = statistics.median(row.rates) if row.rates else None
    _pickups(row, starts, committed)
    _sizes(row, before, after)
    return row


def light_row(
    engine: str, provider: alkstore.EngineProvider, window: float, seconds: float
) -> ScaleRow:
    row = ScaleRow(engine, "light", LIGHT_PROCESSES, LIGHT_HANDLERS, window)
    committed: dict[int, float] = {}
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        queue = store.queue(QUEUE)
        item = payloads(1)[0]

        def body() -> None:
            queue.enqueue_many(payloads(WARMUP_JOBS_PER_PROCESS))
            if _wait_empty(queue, time.perf_counter() + ROUND_TIMEOUT_S):
                raise RuntimeError("warm-up jobs not drained")
            count = int(LIGHT_RATE * seconds)
            began = time.perf_counter()
            for n in range(count):
                time.sleep(max(0.0, began + n / LIGHT_RATE - time.perf_counter()))
                job = queue.enqueue(item)
                committed[job] = time.time()
            _wait_empty(queue, time.perf_counter() + ROUND_TIMEOUT_S)
            row.jobs = count
            row.rate = count / (time.perf_counter() - began)

        before = table_stats(spec)
        try:
            starts = _with_workers(spec, LIGHT_PROCESSES, LIGHT_HANDLERS, window, body)
        except RuntimeError as error:
            row.failure = str(error)
            return row
        time.sleep(0.1)
        after = table_stats(spec)
    _pickups(row, starts, committed)
    _sizes(row, before, after)
    return row


def scale_rows(
    engine: str,
    provider: alkstore.EngineProvider,
    quick: bool,
    progress: Callable[[ScaleRow], None] = lambda row: None,
) -> list[ScaleRow]:
    """Every drain row, then the light rows, on one engine (windows > 0 need the
    transactions profile; without it only the window-0 rows run)."""
    grouped = provider.capabilities.transactions
    windows = [w for w in (QUICK_WINDOWS if quick else WINDOWS) if grouped or not w]
    jobs = QUICK_JOBS if quick else JOBS.get(engine, JOBS["sqlite"])
    rows: list[ScaleRow] = []
    for processes, handlers in QUICK_SHAPES if quick else SHAPES:
        for window in windows:
            row = drain_row(
                engine, provider, processes, handlers, window, jobs, 1 if quick else DRAIN_ROUNDS
            )
            rows.append(row)
            progress(row)
    for window in (w for w in LIGHT_WINDOWS if grouped or not w):
        row = light_row(engine, provider, window, QUICK_LIGHT_SECONDS if quick else LIGHT_SECONDS)
        rows.append(row)
        progress(row)
    return rows


def chosen_rows(
    engine: str,
    provider: alkstore.EngineProvider,
    shapes: Sequence[tuple[int, int]],
    windows: Sequence[float],
    progress: Callable[[ScaleRow], None] = lambda row: None,
) -> list[ScaleRow]:
    """The drain rows of ``shapes`` at ``windows`` only (``--shape``), each of
    ``DRAIN_ROUNDS`` rounds: one pair of rows to run side by side with another tree."""
    jobs = JOBS.get(engine, JOBS["sqlite"])
    rows: list[ScaleRow] = []
    for processes, handlers in shapes:
        for window in windows:
            row = drain_row(engine, provider, processes, handlers, window, jobs, DRAIN_ROUNDS)
            rows.append(row)
            progress(row)
    return rows


def failing_rows(
    engine: str,
    provider: alkstore.EngineProvider,
    quick: bool,
    progress: Callable[[ScaleRow], None] = lambda row: None,
) -> list[ScaleRow]:
    """Each shape of ``FAILING_SHAPES`` at each window of ``FAILING_WINDOWS``, all
    acks and then with the failing share, side by side in one run."""
    grouped = provider.capabilities.transactions
    jobs = QUICK_JOBS if quick else JOBS.get(engine, JOBS["sqlite"])
    rows: list[ScaleRow] = []
    for processes, handlers in QUICK_SHAPES if quick else FAILING_SHAPES:
        for window in (w for w in FAILING_WINDOWS if grouped or not w):
            for failing in (False, True):
                rounds = 1 if quick else DRAIN_ROUNDS
                row = drain_row(
                    engine, provider, processes, handlers, window, jobs, rounds, failing
                )
                rows.append(row)
                progress(row)
    return rows


# --------------------------------------------------------------------------- the report


def render_row(row: ScaleRow) -> str:
    shape = f"{row.processes}x{row.handlers}"
    if row.failure is not None:
        where = f"  {row.engine:<10} {row.kind:<5} {shape:>5} {row.window_s * 1000:>5g} ms"
        return f"{where}  FAILED: {row.failure}"
    dead = "-" if row.dead_per_job is None else f"{row.dead_per_job:.2f}"
    size = (
        "-"
        if row.table_bytes is None or row.index_bytes is None
        else f"{row.table_bytes // 1024:,}+{row.index_bytes // 1024:,} kB"
        + (f" ({row.autovacuums} av)" if row.autovacuums else "")
    )
    rounds = ", ".join(f"{r:,.0f}" for r in row.rates) if len(row.rates) > 1 else ""
    return (
        f"  {row.engine:<10} {row.kind:<5} {shape:>5} {row.window_s * 1000:>5g} ms "
        f"{row.rate or 0:>9,.0f}/s {row.pickup_p50_ms or 0:>9.1f} {row.pickup_p99_ms or 0:>9.1f} "
        f"{dead:>6} {size:>20}  {rounds}"
    )


def render_scale(rows: Sequence[ScaleRow]) -> str:
    if not rows:
        return ""
    lines = [
        f"The worker at 4/16/64 handlers, {HANDLER_SLEEP_S * 1000:g} ms jobs, grouped acks "
        f"off (0 ms) and on: drain = median of {DRAIN_ROUNDS} backlogs, light = "
        f"{LIGHT_RATE} jobs/s enqueued steadily; pickup = enqueue commit -> handler start "
        "(a drain's includes the wait behind its backlog); dead/job and table+index size "
        "on PostgreSQL:",
        f"  {'engine':<10} {'kind':<5} {'shape':>5} {'window':>8} {'completions':>11} "
        f"{'p50 ms':>9} {'p99 ms':>9} {'dead':>6} {'size':>20}  rounds/s",
    ]
    lines += [render_row(row) for row in rows]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the sustained run

SUSTAINED_RATE = 2_000
SUSTAINED_SHAPE = (4, 16)
SUSTAINED_TICK_S = 0.05
SAMPLE_STATS = """
SELECT n_live_tup, n_dead_tup, n_tup_upd + n_tup_del, autovacuum_count,
       pg_table_size(relid), pg_indexes_size(relid)
  FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'alkstore_jobs'
"""


@dataclass
class SustainedRun:
    seconds: int
    rate: int
    window_s: float
    enqueued: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    """Per second: handler starts (the jobs picked up)."""
    live: list[int | None] = field(default_factory=list)
    dead: list[int | None] = field(default_factory=list)
    written: list[int | None] = field(default_factory=list)
    """Per second, cumulative: updated + deleted rows (each leaves a dead tuple)."""
    autovacuums: list[int | None] = field(default_factory=list)
    table_kb: list[int | None] = field(default_factory=list)
    index_kb: list[int | None] = field(default_factory=list)
    pickup_p50_ms: float | None = None
    pickup_p99_ms: float | None = None
    label: str = ""
    """What the plot calls this run (default: its window)."""

    @property
    def jobs(self) -> int:
        return sum(self.started)

    def dead_per_job(self) -> float | None:
        marks = [w for w in self.written if w is not None]
        return (marks[-1] - marks[0]) / self.jobs if len(marks) > 1 and self.jobs else None

    def summary(self) -> str:
        settled = sorted(self.started[5:-1] or self.started)
        dead = [d for d in self.dead if d is not None]
        vacuums = [v for v in self.autovacuums if v is not None]
        table = [t for t in self.table_kb if t is not None]
        index = [t for t in self.index_kb if t is not None]
        per_job = self.dead_per_job()
        return "\n".join(
            [
                f"worker sustained run, {SUSTAINED_SHAPE[0]} processes x {SUSTAINED_SHAPE[1]} "
                f"handlers, ack window {self.window_s * 1000:g} ms: offered {self.rate}/s for "
                f"{self.seconds} s, enqueued {sum(self.enqueued):,}, picked up {self.jobs:,}",
                f"  picked up per second: min {settled[0] if settled else 0:,}, median "
                f"{settled[len(settled) // 2] if settled else 0:,}, max "
                f"{settled[-1] if settled else 0:,}; pickup p50 {self.pickup_p50_ms or 0:.1f} ms, "
                f"p99 {self.pickup_p99_ms or 0:.1f} ms",
                f"  dead tuples: peak {max(dead, default=0):,}, dead tuples made per job "
                f"{'-' if per_job is None else f'{per_job:.2f}'}, autovacuums "
                f"{(vacuums[-1] - vacuums[0]) if vacuums else 0}; "
                f"table {table[-1] if table else 0:,} kB (peak {max(table, default=0):,}), "
                f"indexes {index[-1] if index else 0:,} kB (peak {max(index, default=0):,})",
            ]
        )

    def as_json(self) -> dict[str, Any]:
        document = {
            name: getattr(self, name)
            for name in (
                "seconds",
                "rate",
                "window_s",
                "enqueued",
                "started",
                "live",
                "dead",
                "written",
                "autovacuums",
                "table_kb",
                "index_kb",
                "pickup_p50_ms",
                "pickup_p99_ms",
            )
        }
        document["processes"], document["handlers"] = SUSTAINED_SHAPE
        document["dead_tuples_per_job"] = self.dead_per_job()
        return document


def sustained_run(
    provider: alkstore.EngineProvider, seconds: int, window: float, rate: int = SUSTAINED_RATE
) -> SustainedRun:
    """A producer at ``rate`` jobs/s and the worker processes for ``seconds``, the job
    table's tuples and size sampled every second (PostgreSQL)."""
    import psycopg

    from alkstore_postgres.engine import libpq_url

    run = SustainedRun(seconds, rate, window)
    committed: dict[int, float] = {}
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        queue = store.queue(QUEUE)
        schema = str(spec.opts.get("schema", "public"))
        per_tick = max(1, round(rate * SUSTAINED_TICK_S))
        batch = payloads(per_tick)
        begun: list[float] = []

        def sample(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(SAMPLE_STATS, (schema,)).fetchone()
            values = list(row) if row is not None else [None] * 6
            run.live.append(values[0])
            run.dead.append(values[1])
            run.written.append(values[2])
            run.autovacuums.append(values[3])
            run.table_kb.append(None if values[4] is None else values[4] // 1024)
            run.index_kb.append(None if values[5] is None else values[5] // 1024)

        def body() -> None:
            with psycopg.connect(libpq_url(spec.url), autocommit=True) as conn:
                start = time.perf_counter()
                begun.append(time.time())
                tick = 0
                for second in range(seconds):
                    enqueued = 0
                    while (tick + 1) * SUSTAINED_TICK_S <= second + 1:
                        time.sleep(max(0.0, start + tick * SUSTAINED_TICK_S - time.perf_counter()))
                        ids = queue.enqueue_many(batch)
                        at = time.time()
                        committed.update(dict.fromkeys(ids, at))
                        enqueued += len(ids)
                        tick += 1
                    run.enqueued.append(enqueued)
                    sample(conn)
                _wait_empty(queue, time.perf_counter() + ROUND_TIMEOUT_S)

        processes, handlers = SUSTAINED_SHAPE
        starts = _with_workers(spec, processes, handlers, window, body)
    origin = begun[0] if begun else 0.0
    run.started = [0] * seconds
    for _, at in starts:
        second = int(at - origin)
        if 0 <= second < seconds:
            run.started[second] += 1
    waits = [(at - committed[job]) * 1000 for job, at in starts if job in committed]
    if waits:
        run.pickup_p50_ms = _percentile(waits, 0.50)
        run.pickup_p99_ms = _percentile(waits, 0.99)
    return run


def plot_sustained(runs: Sequence[SustainedRun], path: Any) -> None:
    import matplotlib  # type: ignore[import-not-found,unused-ignore]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]

    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    for run in runs:
        label = run.label or f"window {run.window_s * 1000:g} ms"
        xs = list(range(len(run.started)))
        top.plot(xs, run.started, label=f"picked up/s, {label}")
        middle.plot(range(len(run.dead)), [d or 0 for d in run.dead], label=label)
        bottom.plot(
            range(len(run.table_kb)), [t or 0 for t in run.table_kb], label=f"table, {label}"
        )
        bottom.plot(
            range(len(run.index_kb)),
            [t or 0 for t in run.index_kb],
            "--",
            label=f"indexes, {label}",
        )
        vacuums = [v or 0 for v in run.autovacuums]
        for second in range(1, len(vacuums)):
            if vacuums[second] > vacuums[second - 1]:
                middle.axvline(second, linestyle=":", linewidth=0.8)
    top.set_ylabel("jobs/s")
    middle.set_ylabel("n_dead_tup")
    bottom.set_ylabel("kB")
    bottom.set_xlabel("seconds")
    for axis in (top, middle, bottom):
        axis.legend(loc="upper right", fontsize="small")
    top.set_title(
        f"The worker, sustained ({SUSTAINED_SHAPE[0]}x{SUSTAINED_SHAPE[1]} handlers, 1 ms jobs): "
        "dotted lines = autovacuum of the job table"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """``python bench_worker_scale.py [--engine E] [--quick] [--json PATH]``: these rows only."""
    import argparse
    import json
    import os
    import sys
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--engine", action="append", choices=("sqlite", "postgresql"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--sustained",
        type=int,
        metavar="SECONDS",
        help="only the sustained PostgreSQL worker run, this long, for each --window",
    )
    parser.add_argument(
        "--window", type=float, action="append", help="(with --sustained or --shape)"
    )
    parser.add_argument(
        "--shape",
        action="append",
        metavar="PxH",
        help="only the drain rows of P processes of H handlers (repeatable), at each "
        "--window (default 0.005)",
    )
    parser.add_argument("--plot", type=Path, help="(with --sustained) the PNG to write")
    parser.add_argument(
        "--failing",
        action="store_true",
        help="only the drain rows all acks beside a share of retries and fails",
    )
    args = parser.parse_args(argv)
    if args.sustained is not None:
        provider = alkstore.load_engine("postgresql")
        done = []
        for window in args.window or [0.0]:
            run = sustained_run(provider, args.sustained, window)
            print(run.summary(), flush=True)
            done.append(run)
        print(f"load average at end {os.getloadavg()}")
        if args.json is not None:
            text = json.dumps([run.as_json() for run in done], indent=2) + "\n"
            args.json.write_text(text, encoding="utf-8")
        if args.plot is not None:
            plot_sustained(done, args.plot)
        return 0
    rows: list[ScaleRow] = []
    loadavg_start = os.getloadavg()
    for engine in args.engine or ("sqlite", "postgresql"):
        provider = alkstore.load_engine(engine)
        shown = lambda row: print(render_row(row), file=sys.stderr)  # noqa: E731
        if args.shape:
            shapes = [tuple(int(n) for n in shape.split("x")) for shape in args.shape]
            windows = args.window or [0.005]
            rows += chosen_rows(engine, provider, shapes, windows, shown)  # type: ignore[arg-type]
        else:
            rows += (failing_rows if args.failing else scale_rows)(
                engine, provider, args.quick, shown
            )
    print(render_scale(rows))
    print(f"load average at start {loadavg_start}, at end {os.getloadavg()}")
    if args.json is not None:
        document = {
            "loadavg": [loadavg_start, os.getloadavg()],
            "rows": [row.as_json() for row in rows],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 1 if any(row.failure for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
