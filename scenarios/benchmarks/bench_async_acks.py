"""Acks that need not wait for the disk (contract §12.11) beside durable acks, on
PostgreSQL with fsync on (a throwaway cluster: where a commit's flush costs).

Rows, each a median of alternating rounds (5; 3 with --quick: durable,
asynchronous, durable, ...) on fresh queues of one store per side, so a burst of
load on the shared machine lands on both sides alike:

- AA1 claim then ack, one job at a time (``handle.ack`` beside
  ``handle.ack_durably(durable=False)``): one commit per claim and one per ack;
- AA2 the worker, one ack per job chained to the next claim (``ack_and_claim``),
  ``Worker(durable_acks=True)`` beside ``durable_acks=False``, 8 slots;
- AA3 the worker with grouped acks (``ack_window_s=0.002``), 8 slots.

Printed and written as JSON, never asserted (the figures in docs/benchmarks.md
come from here).
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import alkstore
from alkstore.worker import Worker
from alkstore_postgres.testing.server import LocalPostgres

ROOT = Path(__file__).resolve().parents[2]
ASYNC_ACKS_JSON = ROOT / "reports" / "async-acks.json"
SLOTS = 8


@dataclass(frozen=True, slots=True)
class AckRow:
    row: str
    jobs: int
    rounds: int
    durable_jobs_s: float
    async_jobs_s: float

    @property
    def ratio(self) -> float:
        return self.async_jobs_s / self.durable_jobs_s

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": round(self.ratio, 3)}


def _one_at_a_time(store: Any, queue_name: str, jobs: int, durable: bool) -> float:
    queue = store.queue(queue_name)
    queue.enqueue_many([{"n": n} for n in range(jobs)])
    started = time.perf_counter()
    while (handle := queue.claim("bench")) is not None:
        if durable:
            handle.ack()
        else:
            handle.ack_durably(durable=False)
    return jobs / (time.perf_counter() - started)


def _worker(store: Any, queue_name: str, jobs: int, durable: bool, window_s: float) -> float:
    queue = store.queue(queue_name)
    ids = queue.enqueue_many([{"n": n} for n in range(jobs)])
    done = threading.Event()
    count = [0]
    lock = threading.Lock()
    worker = Worker(store, "bench", ack_window_s=window_s, durable_acks=durable)

    @worker.task(queue_name, concurrency=SLOTS)
    def handle(job: alkstore.Job) -> None:
        with lock:
            count[0] += 1
            if count[0] == jobs:
                done.set()

    started = time.perf_counter()
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    done.wait(600)
    while queue.get_job(ids[-1]) is not None or queue.stats().processing:  # acked, all
        time.sleep(0.002)
    elapsed = time.perf_counter() - started
    worker.stop()
    thread.join(60)
    return jobs / elapsed


def _row(
    name: str,
    stores: dict[bool, Any],
    jobs: int,
    rounds: int,
    measure: Callable[[Any, str, int, bool], float],
) -> AckRow:
    rates: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for durable in (True, False) if r % 2 == 0 else (False, True):
            queue = f"{name}-{r}-{'durable' if durable else 'async'}"
            rates[durable].append(measure(stores[durable], queue, jobs, durable))
    return AckRow(
        name, jobs, rounds, statistics.median(rates[True]), statistics.median(rates[False])
    )


def async_ack_rows(quick: bool) -> list[AckRow]:
    """The three rows on a throwaway cluster with fsync on."""
    jobs = 200 if quick else 1_000
    rounds = 3 if quick else 5
    with LocalPostgres(fsync=True) as pg:
        stores = {
            durable: alkstore.open(pg.dsn, schema="bench_durable" if durable else "bench_async")
            for durable in (True, False)
        }
        try:
            return [
                _row("AA1 claim, ack one at a time", stores, jobs, rounds, _one_at_a_time),
                _row(
                    "AA2 worker, ack_and_claim",
                    stores,
                    jobs,
                    rounds,
                    lambda s, q, n, d: _worker(s, q, n, d, 0.0),
                ),
                _row(
                    "AA3 worker, grouped acks (2 ms)",
                    stores,
                    jobs,
                    rounds,
                    lambda s, q, n, d: _worker(s, q, n, d, 0.002),
                ),
            ]
        finally:
            for store in stores.values():
                store.close()


def render_async_acks(rows: list[AckRow]) -> str:
    if not rows:
        return ""
    lines = [
        "Acks that need not wait for the disk (PostgreSQL, fsync on; jobs/s, medians):",
        f"  {'row':<34} {'durable':>10} {'async':>10} {'async/durable':>14}",
    ]
    lines += [
        f"  {r.row:<34} {r.durable_jobs_s:>10,.0f} {r.async_jobs_s:>10,.0f} {r.ratio:>13.2f}x"
        for r in rows
    ]
    return "\n".join(lines)


def write_async_acks(rows: list[AckRow], load: list[float] | None) -> None:
    ASYNC_ACKS_JSON.parent.mkdir(parents=True, exist_ok=True)
    document = {"loadavg": load, "rows": [r.as_json() for r in rows]}
    ASYNC_ACKS_JSON.write_text(json.dumps(document, indent=2) + "\n")


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


if __name__ == "__main__":
    import sys

    start = _loadavg()
    measured = async_ack_rows("--quick" in sys.argv)
    print(render_async_acks(measured))
    print(f"load average at start {start}, at end {_loadavg()}")
    write_async_acks(measured, _loadavg())
