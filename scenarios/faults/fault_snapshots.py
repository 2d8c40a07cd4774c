"""PostgreSQL under steady load while old snapshots hold back vacuum.

A paced producer and two consumers run for a baseline, a pressure phase and an
after phase. The pressure is one of:

* ``xmin-pin`` -- an idle-in-transaction session that took a transaction id
  (``BEGIN; SELECT txid_current()``) and then does nothing: every row deleted
  meanwhile stays as a dead tuple vacuum may not remove, in the table and its
  indexes;
* ``rr-readers`` -- four ``REPEATABLE READ`` readers, each scanning the jobs
  table every half second inside a transaction of ``reader_txn_s`` seconds,
  then starting another.

Sampled every second: jobs enqueued and acked, each job's pickup latency (from
its enqueue to its claim; p50 and p99 of the second), the jobs table's dead
tuples (``pg_stat_user_tables``), the table's and its indexes' size, and the
server's oldest snapshot age. Judged:
every job enqueued is acked by the end (lost and stranded must be 0) and no
call raised; the rest are figures, and a plot.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import queue as queue_module
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from fault_report import ScenarioResult, count, must_be_zero
from psycopg import sql

import alkstore
from alkstore import EngineSpec, QueueStats

QUEUE = "fault_snapshots"
PRODUCER_TICK_S = 0.05
START_DELAY_S = 3.0
CLAIM_WAIT_S = 0.5
JOIN_TIMEOUT_S = 30.0
REPORTS = Path(__file__).resolve().parents[2] / "reports"
TABLE_STATS = """
SELECT n_dead_tup, autovacuum_count,
       pg_table_size(relid), pg_indexes_size(relid)
  FROM pg_stat_user_tables WHERE schemaname = %(schema)s AND relname = 'alkstore_jobs'
"""
OLDEST_SNAPSHOT = """
SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL
"""
READ_SCAN = "SELECT count(*), max(id) FROM {schema}.alkstore_jobs"
BASELINE_FACTOR = 1.5
"""After the pressure, a figure is back at its baseline once a 5 s window is within
this factor of the baseline's (dead tuples: of the baseline's peak)."""
WINDOW_S = 5


@dataclass(frozen=True, slots=True)
class SnapshotsConfig:
    pressure: str = "xmin-pin"
    rate: int = 200
    """Jobs enqueued per second."""
    consumers: int = 2
    baseline_s: int = 60
    pressure_s: int = 600
    after_s: int = 240
    readers: int = 4
    reader_txn_s: float = 10.0
    plot: bool = True


# --------------------------------------------------------------------------- children


@dataclass
class Series:
    role: str
    jobs: dict[int, int] = field(default_factory=dict)
    """Second since the start -> jobs enqueued (producer) or acked (consumer)."""
    latencies_ms: dict[int, list[float]] = field(default_factory=dict)
    """Consumers: second -> each claimed job's pickup latency (its enqueue to its claim)."""
    error: str | None = None


def _producer(spec: EngineSpec, start_at: float, stop_at: float, rate: int, out: Any) -> None:
    series = Series("producer")
    try:
        with alkstore.load_engine("postgresql").open(spec.url, **spec.opts) as store:
            queue = store.queue(QUEUE)
            per_tick = max(1, round(rate * PRODUCER_TICK_S))
            time.sleep(max(0.0, start_at - time.time()))
            tick = 0
            while (now := time.time()) < stop_at:
                queue.enqueue_many([{"t": now}] * per_tick)
                second = int(now - start_at)
                series.jobs[second] = series.jobs.get(second, 0) + per_tick
                tick += 1
                time.sleep(max(0.0, start_at + tick * PRODUCER_TICK_S - time.time()))
    except Exception as exc:
        series.error = f"{type(exc).__name__}: {exc}"
    out.put(series)


def _consumer(index: int, spec: EngineSpec, start_at: float, drain_until: Any, out: Any) -> None:
    series = Series(f"consumer-{index}")
    worker = f"snapshots-{index}"
    try:
        with alkstore.load_engine("postgresql").open(spec.url, **spec.opts) as store:
            queue = store.queue(QUEUE)
            time.sleep(max(0.0, start_at - time.time()))
            while time.time() < drain_until.value:
                handle = queue.claim_wait(worker, timeout=CLAIM_WAIT_S)
                if handle is None:
                    continue
                claimed = time.time()
                second = int(claimed - start_at)
                pickup_ms = (claimed - handle.payload["t"]) * 1000.0
                series.latencies_ms.setdefault(second, []).append(pickup_ms)
                if handle.ack():
                    series.jobs[second] = series.jobs.get(second, 0) + 1
    except Exception as exc:
        series.error = f"{type(exc).__name__}: {exc}"
    out.put(series)


# --------------------------------------------------------------------------- pressure


@contextlib.contextmanager
def _pinned_xmin(dsn: str, schema: str, config: SnapshotsConfig) -> Iterator[None]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("BEGIN")
        conn.execute("SELECT txid_current()")  # idle in transaction from here, holding an xid
        try:
            yield
        finally:
            conn.execute("ROLLBACK")


@contextlib.contextmanager
def _rr_readers(dsn: str, schema: str, config: SnapshotsConfig) -> Iterator[None]:
    stop = threading.Event()
    scan = sql.SQL(READ_SCAN).format(schema=sql.Identifier(schema))

    def read() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                ends = time.monotonic() + config.reader_txn_s
                while time.monotonic() < ends and not stop.is_set():
                    conn.execute(scan).fetchone()
                    stop.wait(0.5)
                conn.execute("COMMIT")

    threads = [threading.Thread(target=read, daemon=True) for _ in range(config.readers)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)


PRESSURES: dict[str, Callable[[str, str, SnapshotsConfig], contextlib.AbstractContextManager[None]]]
PRESSURES = {"xmin-pin": _pinned_xmin, "rr-readers": _rr_readers}


# --------------------------------------------------------------------------- the run


@dataclass
class Samples:
    dead: dict[int, int] = field(default_factory=dict)
    vacuums: dict[int, int] = field(default_factory=dict)
    table_bytes: dict[int, int] = field(default_factory=dict)
    index_bytes: dict[int, int] = field(default_factory=dict)
    snapshot_age: dict[int, int] = field(default_factory=dict)

    def take(self, conn: psycopg.Connection[Any], schema: str, second: int) -> None:
        row = conn.execute(TABLE_STATS, {"schema": schema}).fetchone()
        if row is not None:
            self.dead[second], self.vacuums[second] = int(row[0]), int(row[1])
            self.table_bytes[second], self.index_bytes[second] = int(row[2]), int(row[3])
        age = conn.execute(OLDEST_SNAPSHOT).fetchone()
        self.snapshot_age[second] = int(age[0]) if age else 0


def run_snapshots(
    admin_dsn: str,
    spec: EngineSpec,
    config: SnapshotsConfig,
    progress: Callable[[str], None] = lambda _: None,
) -> ScenarioResult:
    started = time.monotonic()
    schema = str(spec.opts["schema"])
    # The schema exists before the children race to make it.
    alkstore.load_engine("postgresql").open(spec.url, **spec.opts).close()
    total = config.baseline_s + config.pressure_s + config.after_s
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + START_DELAY_S
    stop_at = start_at + total
    drain_until = ctx.Value("d", stop_at + JOIN_TIMEOUT_S)
    out = ctx.Queue()
    procs = [ctx.Process(target=_producer, args=(spec, start_at, stop_at, config.rate, out))]
    procs += [
        ctx.Process(target=_consumer, args=(i, spec, start_at, drain_until, out))
        for i in range(config.consumers)
    ]
    samples = Samples()
    collected: list[Series] = []
    pressure = PRESSURES[config.pressure]
    progress(
        f"{config.pressure}: {config.baseline_s} s baseline, {config.pressure_s} s "
        f"pressure, {config.after_s} s after, {config.rate} jobs/s"
    )
    try:
        for proc in procs:
            proc.start()
        with psycopg.connect(admin_dsn, autocommit=True) as conn, contextlib.ExitStack() as held:
            for second in range(total):
                time.sleep(max(0.0, start_at + second + 1 - time.time()))
                if second == config.baseline_s:
                    held.enter_context(pressure(admin_dsn, schema, config))
                    progress(f"{config.pressure}: pressure on")
                if second == config.baseline_s + config.pressure_s:
                    held.close()
                    progress(f"{config.pressure}: pressure off")
                samples.take(conn, schema, second)
        with alkstore.load_engine("postgresql").open(spec.url, **spec.opts) as store:
            remaining = store.queue(QUEUE).stats()
            deadline = time.monotonic() + JOIN_TIMEOUT_S
            while _left(remaining) and time.monotonic() < deadline:
                time.sleep(0.5)
                remaining = store.queue(QUEUE).stats()
        drain_until.value = 0.0
        while len(collected) < len(procs):
            try:
                collected.append(out.get(timeout=JOIN_TIMEOUT_S))
            except queue_module.Empty:
                break
    finally:
        drain_until.value = 0.0
        for proc in procs:
            proc.join(JOIN_TIMEOUT_S)
            if proc.is_alive():
                proc.kill()
                proc.join()
    result = _judge(config, collected, samples, remaining, time.monotonic() - started)
    if config.plot:
        _plot(config, collected, samples, REPORTS / f"faults-{config.pressure}.png")
    return result


# --------------------------------------------------------------------------- figures


def _per_second(collected: list[Series], role: str, total: int) -> list[int]:
    group = [s for s in collected if s.role.startswith(role)]
    return [sum(s.jobs.get(t, 0) for s in group) for t in range(total)]


def _latencies(collected: list[Series], seconds: range) -> list[float]:
    return [ms for s in collected for t in seconds for ms in s.latencies_ms.get(t, [])]


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _back_after(series: dict[int, float], baseline: float, begin: int, end: int) -> int | None:
    """Seconds from ``begin`` until a window's mean is within BASELINE_FACTOR of ``baseline``."""
    for t in range(begin, end - WINDOW_S + 1):
        window = [series[s] for s in range(t, t + WINDOW_S) if s in series]
        if window and statistics.fmean(window) <= baseline * BASELINE_FACTOR:
            return t - begin
    return None


def _judge(
    config: SnapshotsConfig,
    collected: list[Series],
    samples: Samples,
    remaining: QueueStats,
    seconds: float,
) -> ScenarioResult:
    total = config.baseline_s + config.pressure_s + config.after_s
    phases = {
        "baseline": range(min(5, config.baseline_s), config.baseline_s),
        "pressure": range(config.baseline_s, config.baseline_s + config.pressure_s),
        "after": range(config.baseline_s + config.pressure_s, total),
    }
    acked = _per_second(collected, "consumer", total)
    enqueued = sum(_per_second(collected, "producer", total))
    errors = [f"{s.role}: {s.error}" for s in collected if s.error]
    figures = [count("jobs enqueued", enqueued)]
    for name, span in phases.items():
        lat = _latencies(collected, span)
        figures += [
            count(
                f"{name}: acked/s (median)",
                round(statistics.median(acked[t] for t in span)) if span else 0,
            ),
            count(f"{name}: pickup p50 (ms)", round(_quantile(lat, 0.5), 2)),
            count(f"{name}: pickup p99 (ms)", round(_quantile(lat, 0.99), 2)),
        ]
    end_of = {name: span[-1] for name, span in phases.items() if span}
    for name, t in end_of.items():
        figures += [
            count(f"{name} end: dead tuples", samples.dead.get(t, 0)),
            count(
                f"{name} end: table + indexes (kB)",
                (samples.table_bytes.get(t, 0) + samples.index_bytes.get(t, 0)) // 1024,
            ),
        ]
    figures.append(
        count(
            "pressure: oldest snapshot age (xids, max)",
            max((samples.snapshot_age.get(t, 0) for t in phases["pressure"]), default=0),
        )
    )
    after = phases["after"]
    base_dead = max((samples.dead.get(t, 0) for t in phases["baseline"]), default=0)
    dead_back = _back_after(
        {t: float(v) for t, v in samples.dead.items()}, max(base_dead, 1), after.start, after.stop
    )
    p99_by_second = {
        t: _quantile(_latencies(collected, range(t, t + 1)), 0.99) for t in range(total)
    }
    base_p99 = _quantile(_latencies(collected, phases["baseline"]), 0.99)
    p99_back = _back_after(
        {t: v for t, v in p99_by_second.items() if not math.isnan(v)},
        base_p99,
        after.start,
        after.stop,
    )
    figures += [
        count(
            "after: dead tuples back to baseline (s)", "never" if dead_back is None else dead_back
        ),
        count("after: pickup p99 back to baseline (s)", "never" if p99_back is None else p99_back),
        count("autovacuums of the jobs table", _vacuums(samples)),
        must_be_zero("lost or stranded", _left(remaining)),
        must_be_zero("calls that raised", len(errors)),
    ]
    return ScenarioResult(config.pressure, "postgresql", tuple(figures), seconds, tuple(errors))


def _left(stats: QueueStats) -> int:
    """Jobs not acked: every enqueued job must be acked by the end."""
    return stats.ready + stats.scheduled + stats.processing + stats.lapsed + stats.dead


def _vacuums(samples: Samples) -> int:
    values = [samples.vacuums[t] for t in sorted(samples.vacuums)]
    return values[-1] - values[0] if values else 0


def _plot(config: SnapshotsConfig, collected: list[Series], samples: Samples, path: Path) -> None:
    import matplotlib  # type: ignore[import-not-found,unused-ignore]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]

    total = config.baseline_s + config.pressure_s + config.after_s
    xs = list(range(total))
    acked = _per_second(collected, "consumer", total)
    p50 = [_quantile(_latencies(collected, range(t, t + 1)), 0.5) for t in xs]
    p99 = [_quantile(_latencies(collected, range(t, t + 1)), 0.99) for t in xs]
    fig, axes = plt.subplots(4, 1, figsize=(11, 11), sharex=True)
    axes[0].plot(xs, acked, linewidth=0.8, label="acked/s")
    axes[0].set_ylabel("jobs per second")
    axes[0].set_title(
        f"alkstore PostgreSQL under {config.pressure}: {config.rate} jobs/s offered, "
        f"{config.consumers} consumers"
    )
    axes[1].plot(xs, p50, linewidth=0.8, label="p50")
    axes[1].plot(xs, p99, linewidth=0.8, label="p99")
    axes[1].set_ylabel("pickup latency (ms)\nenqueue to claim")
    axes[1].legend(loc="upper left")
    axes[2].plot(xs, [samples.dead.get(t, math.nan) for t in xs], linewidth=0.8)
    axes[2].set_ylabel("dead tuples")
    size = [
        (samples.table_bytes.get(t, 0) + samples.index_bytes.get(t, 0)) / 1024 / 1024 for t in xs
    ]
    axes[3].plot(xs, size, linewidth=0.8, label="table + indexes")
    axes[3].plot(
        xs,
        [samples.index_bytes.get(t, 0) / 1024 / 1024 for t in xs],
        linewidth=0.8,
        label="indexes",
    )
    axes[3].set_ylabel("MiB")
    axes[3].legend(loc="upper left")
    axes[3].set_xlabel("seconds (shaded: the pressure)")
    for axis in axes:
        axis.axvspan(
            config.baseline_s, config.baseline_s + config.pressure_s, color="grey", alpha=0.15
        )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
