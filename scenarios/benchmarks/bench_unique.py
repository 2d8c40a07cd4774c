"""Unique enqueue beside plain enqueue, on each engine (contract §15).

Each round provisions a fresh store and times, in one process and one after the
other (the order flipped every round, so a burst of load on the shared machine
does not land on one side): N single enqueues without a key, N with a fresh key
each (every one a new job: the cost of holding a key, not of finding it held),
then N jobs by ``enqueue_many`` in batches of 1,000, without a key and with
``Unique()`` (each payload its own key). The report gives each side's median
rate and the median of the per-round cost (unique time over plain time, minus
one). The issue's target: a key costs at most 15% on a single enqueue.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench_workloads import ENQUEUE_MANY_BATCH, payloads

import alkstore
from alkstore import EnqueueOpts, Unique

ROUNDS = 5
QUICK_ROUNDS = 2
SINGLE_CAP = 5_000
"""Single enqueues per side and round, at most: a round of both sides stays short."""
TARGET = 0.15
"""The issue's target for a single enqueue: a unique key costs at most 15%."""


@dataclass(frozen=True)
class Overhead:
    workload: str
    jobs: int
    plain_rate: float
    unique_rate: float
    cost: float
    """Median over rounds of unique seconds / plain seconds - 1."""
    costs: tuple[float, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "jobs": self.jobs,
            "plain_rate_per_s": round(self.plain_rate, 1),
            "unique_rate_per_s": round(self.unique_rate, 1),
            "cost": round(self.cost, 4),
            "costs": [round(c, 4) for c in self.costs],
        }


def _single(queue: alkstore.Queue, items: list[Any], keyed: bool, tag: str) -> float:
    started = time.perf_counter()
    if keyed:
        for n, item in enumerate(items):
            queue.enqueue(item, EnqueueOpts(unique=f"{tag}-{n}"))
    else:
        for item in items:
            queue.enqueue(item)
    return time.perf_counter() - started


def _many(queue: alkstore.Queue, items: list[Any], keyed: bool, tag: str) -> float:
    opts = EnqueueOpts(unique=Unique()) if keyed else None
    started = time.perf_counter()
    for start in range(0, len(items), ENQUEUE_MANY_BATCH):
        queue.enqueue_many(items[start : start + ENQUEUE_MANY_BATCH], opts)
    return time.perf_counter() - started


def _rounds(
    provider: alkstore.EngineProvider,
    jobs: int,
    rounds: int,
    run: Callable[[alkstore.Queue, list[Any], bool, str], float],
) -> tuple[list[float], list[float]]:
    plain: list[float] = []
    unique: list[float] = []
    for number in range(rounds):
        with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
            # Distinct payloads per side and round: Unique() keys of one side never meet
            # the other's, and every keyed enqueue makes a job.
            sides = [(False, plain), (True, unique)]
            if number % 2:
                sides.reverse()
            for keyed, times in sides:
                items = [{**p, "side": keyed, "round": number} for p in payloads(jobs)]
                queue = store.queue("bench-unique" if keyed else "bench-plain")
                times.append(run(queue, items, keyed, f"r{number}"))
    return plain, unique


def _overhead(workload: str, jobs: int, plain: list[float], unique: list[float]) -> Overhead:
    costs = tuple(u / p - 1 for p, u in zip(plain, unique, strict=True))
    return Overhead(
        workload=workload,
        jobs=jobs,
        plain_rate=jobs / statistics.median(plain),
        unique_rate=jobs / statistics.median(unique),
        cost=statistics.median(costs),
        costs=costs,
    )


def unique_overhead(provider: alkstore.EngineProvider, jobs: int, quick: bool) -> list[Overhead]:
    """Both comparisons on one engine."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    single = min(jobs, SINGLE_CAP)
    results = []
    plain, unique = _rounds(provider, single, rounds, _single)
    results.append(_overhead("1 enqueue", single, plain, unique))
    plain, unique = _rounds(provider, jobs, rounds, _many)
    results.append(_overhead("2 enqueue_many (1,000)", jobs, plain, unique))
    return results


def render_unique_overhead(overheads: dict[str, Sequence[Overhead]]) -> str:
    if not overheads:
        return ""
    lines = [
        "Unique enqueue against plain enqueue, same engine, medians of each run's rounds "
        f"(target for a single enqueue: a key costs at most {TARGET:.0%}):"
    ]
    for engine, rows in overheads.items():
        for o in rows:
            verdict = ""
            if o.workload.startswith("1 "):
                verdict = "  ok" if o.cost <= TARGET else "  ABOVE"
            lines.append(
                f"  {engine:<12} {o.workload:<24} N={o.jobs:,}: plain {o.plain_rate:,.0f}/s, "
                f"unique {o.unique_rate:,.0f}/s: {o.cost:+.0%}{verdict}"
            )
    return "\n".join(lines)
