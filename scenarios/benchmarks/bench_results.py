"""Finished jobs kept beside deleted ones, and ``tx.ack`` beside ``ack`` (contract §17, §3.8).

Each round provisions a fresh store, enqueues N jobs on each of two queues, and
times claim + ack one job at a time on both, the two sides taking turns of 100
jobs (which goes first flips every turn, so a burst of load on the shared
machine lands on both alike):

* ``retention``: a queue that deletes on ack (the default) beside one that keeps
  its jobs completed (``completed_retention_s``) with a small result each;
* ``tx.ack``: ``handle.ack()`` beside ``tx.ack(handle)`` in ``store.transaction()``,
  both deleting.

The report gives each side's median rate and the median over rounds of the
ratio (the second side's rate over the first's), in wall time and in this
process's CPU time. The issue's target: claim + ack with retention at least 0.8x
of delete-on-ack.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from bench_turns import Timing, alternating, start_timing, timing_since
from bench_workloads import payloads

import alkstore
from alkstore import QueueOpts

ROUNDS = 5
QUICK_ROUNDS = 2
JOBS_CAP = 5_000
"""Jobs per side and round, at most: a round of both sides stays short."""
CHUNK = 100
RETENTION_S = 3600
TARGET = 0.8
"""The issue's target: claim + ack with retention at least 0.8x of delete-on-ack."""

Side = Callable[[alkstore.Store, alkstore.Queue, int], Timing]
"""Claim and ack ``count`` jobs of the queue; the time it took."""


@dataclass(frozen=True)
class Ratio:
    engine: str
    workload: str
    first: str
    second: str
    jobs: int
    first_rate: float
    second_rate: float
    ratio: float
    """Median over rounds of the second side's rate over the first's."""
    ratios: tuple[float, ...]
    cpu_ratio: float

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "workload": self.workload,
            "first": self.first,
            "second": self.second,
            "jobs": self.jobs,
            "first_rate_per_s": round(self.first_rate, 1),
            "second_rate_per_s": round(self.second_rate, 1),
            "ratio": round(self.ratio, 3),
            "ratios": [round(r, 3) for r in self.ratios],
            "cpu_ratio": round(self.cpu_ratio, 3),
        }


def _ack(store: alkstore.Store, queue: alkstore.Queue, count: int) -> Timing:
    started = start_timing()
    for _ in range(count):
        handle = queue.claim("bench")
        assert handle is not None
        assert handle.ack()
    return timing_since(started)


def _ack_kept(store: alkstore.Store, queue: alkstore.Queue, count: int) -> Timing:
    started = start_timing()
    for n in range(count):
        handle = queue.claim("bench")
        assert handle is not None
        assert handle.ack({"n": n, "ok": True})
    return timing_since(started)


def _tx_ack(store: alkstore.Store, queue: alkstore.Queue, count: int) -> Timing:
    started = start_timing()
    for _ in range(count):
        handle = queue.claim("bench")
        assert handle is not None
        with store.transaction() as tx:
            tx.ack(handle)
    return timing_since(started)


WORKLOADS: dict[str, tuple[tuple[str, Side, QueueOpts | None], tuple[str, Side, QueueOpts]]] = {
    "retention": (
        ("delete-on-ack", _ack, None),
        ("kept completed", _ack_kept, QueueOpts(completed_retention_s=RETENTION_S)),
    ),
    "tx.ack": (
        ("ack", _ack, None),
        ("tx.ack", _tx_ack, QueueOpts()),
    ),
}


def _chunk(
    sides: Any,
    store: alkstore.Store,
    queues: list[alkstore.Queue],
    second: bool,
    start: int,
    end: int,
) -> Timing:
    _, run, _ = sides[second]
    timing: Timing = run(store, queues[second], end - start)
    return timing


def _rounds(
    provider: alkstore.EngineProvider, workload: str, jobs: int, rounds: int
) -> tuple[list[Timing], list[Timing]]:
    sides = WORKLOADS[workload]
    firsts: list[Timing] = []
    seconds: list[Timing] = []
    for number in range(rounds):
        with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
            queues = [
                store.queue(f"bench-{index}", opts) for index, (_, _, opts) in enumerate(sides)
            ]
            for queue in queues:
                queue.enqueue_many(payloads(jobs))

            chunk = partial(_chunk, sides, store, queues)
            first_total, second_total = alternating(jobs, CHUNK, number, chunk)
            firsts.append(first_total)
            seconds.append(second_total)
    return firsts, seconds


def results_ratios(
    engine: str, provider: alkstore.EngineProvider, jobs: int, quick: bool
) -> list[Ratio]:
    """Both workloads on one engine (one with the results and transactions profiles)."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    count = min(jobs, JOBS_CAP)
    found: list[Ratio] = []
    for workload, ((first, _, _), (second, _, _)) in WORKLOADS.items():
        a, b = _rounds(provider, workload, count, rounds)
        pairs = list(zip(a, b, strict=True))
        ratios = tuple(x[0] / y[0] for x, y in pairs)  # rate ratio = time ratio inverted
        found.append(
            Ratio(
                engine=engine,
                workload=workload,
                first=first,
                second=second,
                jobs=count,
                first_rate=count / statistics.median(x[0] for x in a),
                second_rate=count / statistics.median(y[0] for y in b),
                ratio=statistics.median(ratios),
                ratios=ratios,
                cpu_ratio=statistics.median(x[1] / y[1] for x, y in pairs),
            )
        )
    return found


def render_results_ratios(found: dict[str, list[Ratio]]) -> str:
    if not found:
        return ""
    lines = [
        "Finished jobs and tx.ack: claim + ack one at a time, the two sides taking turns "
        f"of {CHUNK} jobs; ratio = second side's rate / first side's (median of rounds; "
        f"target for retention >= {TARGET}x)",
        f"  {'engine':<10} {'workload':<10} {'first':<15} {'rate/s':>9} {'second':<15} "
        f"{'rate/s':>9} {'ratio':>6} {'cpu':>6}",
    ]
    for engine, rows in found.items():
        for r in rows:
            lines.append(
                f"  {engine:<10} {r.workload:<10} {r.first:<15} {r.first_rate:>9.0f} "
                f"{r.second:<15} {r.second_rate:>9.0f} {r.ratio:>5.2f}x {r.cpu_ratio:>5.2f}x"
            )
    return "\n".join(lines)
