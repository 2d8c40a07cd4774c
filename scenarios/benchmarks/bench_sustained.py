"""The sustained PostgreSQL run: a paced producer and two consumers for minutes on end.

Every second it records what was enqueued and acked, what a claim_batch +
ack_batch round cost the consumers, and the jobs table's live/dead tuple
counts and autovacuum runs from ``pg_stat_user_tables``, so table bloat and
autovacuum show up against the throughput. Writes the series as JSON and a
plot as PNG (matplotlib, Agg backend). Printed and plotted, never asserted.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import queue as queue_module
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_workloads import JOIN_TIMEOUT_S, payloads

import alkstore

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

ROOT = Path(__file__).resolve().parents[2]
SUSTAINED_JSON = ROOT / "reports" / "sustained-postgres.json"
SUSTAINED_PNG = ROOT / "reports" / "sustained-postgres.png"
QUEUE = "sustained"
CONSUMERS = 2
CLAIM_BATCH = 10
PRODUCER_TICK_S = 0.05
"""The producer enqueues ``rate * tick`` jobs in one enqueue_many every tick."""
START_DELAY_S = 5.0
"""Time the children get to spawn and connect before the common start instant."""
IDLE_WAIT_S = 0.5

STATS = """
SELECT n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count
  FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'alkstore_jobs'
"""


@dataclass
class WorkerSeries:
    role: str
    per_second: dict[int, int] = field(default_factory=dict)
    """Second (since the start instant) -> jobs enqueued or acked in it."""
    busy_s: dict[int, float] = field(default_factory=dict)
    """Consumers: second -> time spent inside claim_batch + ack_batch rounds that found work."""
    rounds: dict[int, int] = field(default_factory=dict)
    error: str | None = None

    def add(self, second: int, jobs: int, busy: float = 0.0) -> None:
        self.per_second[second] = self.per_second.get(second, 0) + jobs
        if busy:
            self.busy_s[second] = self.busy_s.get(second, 0.0) + busy
            self.rounds[second] = self.rounds.get(second, 0) + 1


def _producer(
    spec: alkstore.EngineSpec, start_at: float, stop_at: float, rate: int, out: Queue[WorkerSeries]
) -> None:
    series = WorkerSeries("producer")
    try:
        with alkstore.load_engine("postgresql").open(spec.url, **spec.opts) as store:
            queue = store.queue(QUEUE)
            per_tick = max(1, round(rate * PRODUCER_TICK_S))
            batch = payloads(per_tick)
            time.sleep(max(0.0, start_at - time.time()))
            tick = 0
            while (now := time.time()) < stop_at:
                queue.enqueue_many(batch)
                series.add(int(now - start_at), per_tick)
                tick += 1
                time.sleep(max(0.0, start_at + tick * PRODUCER_TICK_S - time.time()))
    except Exception as exc:
        series.error = f"{type(exc).__name__}: {exc}"
    out.put(series)


def _consumer(
    index: int, spec: alkstore.EngineSpec, start_at: float, stop_at: float, out: Queue[WorkerSeries]
) -> None:
    series = WorkerSeries(f"consumer-{index}")
    worker = f"sustained-{index}"
    try:
        with alkstore.load_engine("postgresql").open(spec.url, **spec.opts) as store:
            queue = store.queue(QUEUE)
            time.sleep(max(0.0, start_at - time.time()))
            while time.time() < stop_at:
                began = time.perf_counter()
                handles = queue.claim_batch(worker, CLAIM_BATCH)
                if not handles:
                    handle = queue.claim_wait(worker, timeout=IDLE_WAIT_S)
                    if handle is not None:
                        series.add(int(time.time() - start_at), 1 if handle.ack() else 0)
                    continue
                acked = queue.ack_batch([h.id for h in handles], worker)
                busy = time.perf_counter() - began
                series.add(int(time.time() - start_at), acked, busy)
    except Exception as exc:
        series.error = f"{type(exc).__name__}: {exc}"
    out.put(series)


@dataclass
class Sustained:
    seconds: int
    rate: int
    enqueued: list[int]
    acked: list[int]
    round_ms: list[float | None]
    live_tuples: list[int | None]
    dead_tuples: list[int | None]
    autovacuums: list[int | None]
    loadavg: list[float | None]
    errors: list[str]

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        settled = self.acked[5:] or self.acked
        rounds = [r for r in self.round_ms if r is not None]
        vacuums = [v for v in self.autovacuums if v is not None]
        lines = [
            f"offered {self.rate}/s for {self.seconds} s: enqueued {sum(self.enqueued):,}, "
            f"acked {sum(self.acked):,}",
            f"acked per second: min {min(settled, default=0):,}, "
            f"median {sorted(settled)[len(settled) // 2] if settled else 0:,}, "
            f"max {max(settled, default=0):,}",
        ]
        if rounds:
            ordered = sorted(rounds)
            lines.append(
                f"claim_batch({CLAIM_BATCH}) + ack_batch round, per-second mean: "
                f"median {ordered[len(ordered) // 2]:.2f} ms, worst {ordered[-1]:.2f} ms"
            )
        dead = [d for d in self.dead_tuples if d is not None]
        if dead:
            lines.append(f"dead tuples in the jobs table: peak {max(dead):,}")
        if vacuums:
            lines.append(f"autovacuum runs on the jobs table: {vacuums[-1] - vacuums[0]}")
        lines += [f"error: {e}" for e in self.errors]
        return "\n".join(lines)


def sustained_postgres(provider: alkstore.EngineProvider, seconds: float, rate: int) -> Sustained:
    import psycopg

    duration = math.ceil(seconds)
    ctx = multiprocessing.get_context("spawn")
    with provider.provision() as spec:
        provider.open(spec.url, **spec.opts).close()  # the schema, before the children race
        schema = str(spec.opts.get("schema", "public"))
        start_at = time.time() + START_DELAY_S
        stop_at = start_at + duration
        out: Queue[WorkerSeries] = ctx.Queue()
        procs = [ctx.Process(target=_producer, args=(spec, start_at, stop_at, rate, out))]
        procs += [
            ctx.Process(target=_consumer, args=(i, spec, start_at, stop_at, out))
            for i in range(CONSUMERS)
        ]
        samples: dict[int, tuple[Any, ...]] = {}
        loads: dict[int, float] = {}
        collected: list[WorkerSeries] = []
        try:
            for proc in procs:
                proc.start()
            with psycopg.connect(spec.url, autocommit=True) as conn:
                while time.time() < stop_at:
                    second = int(time.time() - start_at)
                    time.sleep(max(0.0, start_at + second + 1 - time.time()))
                    if second >= 0:
                        samples[second] = conn.execute(STATS, (schema,)).fetchone() or ()
                        loads[second] = _load1()
            wait_until = time.monotonic() + 60.0
            while len(collected) < len(procs) and time.monotonic() < wait_until:
                try:
                    collected.append(out.get(timeout=1.0))
                except queue_module.Empty:
                    if not any(p.is_alive() for p in procs) and out.empty():
                        break
        finally:
            for proc in procs:
                proc.join(JOIN_TIMEOUT_S)
                if proc.is_alive():
                    proc.terminate()
                    proc.join(JOIN_TIMEOUT_S)
            out.close()
            out.join_thread()
    result = _assemble(duration, rate, collected, samples, loads)
    _write(result)
    return result


def _load1() -> float:
    try:
        import os

        return round(os.getloadavg()[0], 2)
    except OSError:
        return math.nan


def _assemble(
    duration: int,
    rate: int,
    collected: list[WorkerSeries],
    samples: dict[int, tuple[Any, ...]],
    loads: dict[int, float],
) -> Sustained:
    seconds = range(duration)
    producers = [s for s in collected if s.role == "producer"]
    consumers = [s for s in collected if s.role != "producer"]
    errors = [f"{s.role}: {s.error}" for s in collected if s.error]
    if len(collected) < 1 + CONSUMERS:
        errors.append(f"{1 + CONSUMERS - len(collected)} worker(s) never reported")

    def total(group: list[WorkerSeries], second: int) -> int:
        return sum(s.per_second.get(second, 0) for s in group)

    def round_ms(second: int) -> float | None:
        busy = sum(s.busy_s.get(second, 0.0) for s in consumers)
        rounds = sum(s.rounds.get(second, 0) for s in consumers)
        return busy / rounds * 1000.0 if rounds else None

    def stat(second: int, column: int) -> int | None:
        row = samples.get(second)
        return int(row[column]) if row and row[column] is not None else None

    return Sustained(
        seconds=duration,
        rate=rate,
        enqueued=[total(producers, s) for s in seconds],
        acked=[total(consumers, s) for s in seconds],
        round_ms=[round_ms(s) for s in seconds],
        live_tuples=[stat(s, 0) for s in seconds],
        dead_tuples=[stat(s, 1) for s in seconds],
        autovacuums=[stat(s, 2) for s in seconds],
        loadavg=[loads.get(s) for s in seconds],
        errors=errors,
    )


def _write(result: Sustained) -> None:
    SUSTAINED_JSON.parent.mkdir(parents=True, exist_ok=True)
    SUSTAINED_JSON.write_text(json.dumps(asdict(result), indent=1) + "\n", encoding="utf-8")
    plot(result, SUSTAINED_PNG)


def plot(result: Sustained, path: Path) -> None:
    import matplotlib  # type: ignore[import-not-found,unused-ignore]

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]

    xs = list(range(result.seconds))
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    top.plot(xs, result.enqueued, label="enqueued/s", linewidth=0.8)
    top.plot(xs, result.acked, label="acked/s", linewidth=0.8)
    top.set_ylabel("jobs per second")
    top.set_title(
        f"alkstore PostgreSQL, sustained: 1 producer at {result.rate}/s, "
        f"{CONSUMERS} consumers claim_batch({CLAIM_BATCH}) + ack_batch"
    )
    top.legend(loc="lower right")
    middle.plot(xs, [r if r is not None else math.nan for r in result.round_ms], linewidth=0.8)
    middle.set_ylabel("ms per claim+ack round\n(mean per second)")
    bottom.plot(xs, _nan(result.dead_tuples), label="dead tuples", linewidth=0.8)
    bottom.plot(xs, _nan(result.live_tuples), label="live tuples", linewidth=0.8)
    vacuumed = [
        x
        for x, (before, after) in enumerate(
            zip(result.autovacuums, result.autovacuums[1:], strict=False)
        )
        if before is not None and after is not None and after > before
    ]
    for x in vacuumed:
        for axis in (top, middle, bottom):
            axis.axvline(x + 1, color="grey", linestyle=":", linewidth=0.8)
    bottom.set_ylabel("jobs table tuples")
    bottom.set_xlabel("seconds (dotted lines: autovacuum of the jobs table finished)")
    bottom.legend(loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _nan(values: list[int | None]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]
