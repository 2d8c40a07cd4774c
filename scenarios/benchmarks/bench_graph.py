"""A graph of jobs drained by worker processes (contract §18, the dependencies profile).

Each round provisions a fresh store and enqueues, one transaction per
``PER_TRANSACTION`` pieces, ``CHAINS`` chains of ``CHAIN_LENGTH`` jobs (each one
``after=`` the one before) and ``FAN_INS`` fan-ins of ``MEMBERS`` members and one
callback (``after_finished=`` the members): 10,000 jobs on one queue. ``WORKERS``
worker processes (``spawn``) then drain it, each claiming with ``claim_wait`` and
acking one job at a time, recording for every job the wall time its claim returned
and the wall time its ack returned (``time.time()``: every process runs on one
machine, so their wall clocks are the same clock).

The report gives the jobs per second from the first claim to the last ack, and the
wait from a dependency's ack to its dependent's claim: for a chain's job, from its
predecessor's ack; for a fan-in's callback, from its last member's ack (p50 and
p99, over every job that waited for another). A claim that returns before its
dependency's ``ack()`` call has returned in the other process (the commit happened,
the return had not) counts a wait of 0.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import alkstore
from alkstore import EnqueueOpts

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.sharedctypes import Synchronized

CHAINS, CHAIN_LENGTH = 1_000, 8
FAN_INS, MEMBERS = 200, 9
"""The full graph: 8,000 chained jobs and 200 fan-ins of 9 members and a callback."""
QUICK_CHAINS, QUICK_CHAIN_LENGTH = 40, 4
QUICK_FAN_INS, QUICK_MEMBERS = 10, 3
"""``--quick``: 160 chained jobs and 10 fan-ins of 3 members and a callback."""
WORKERS = 4
PER_TRANSACTION = 20
"""Chains (then fan-ins) enqueued per transaction."""
QUEUE = "graph"
BUDGET_S = 600.0
"""A drain that takes longer stops and reports what it did."""
JOIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Shape:
    chains: int
    chain_length: int
    fan_ins: int
    members: int

    @property
    def jobs(self) -> int:
        return self.chains * self.chain_length + self.fan_ins * (self.members + 1)


FULL = Shape(CHAINS, CHAIN_LENGTH, FAN_INS, MEMBERS)
QUICK = Shape(QUICK_CHAINS, QUICK_CHAIN_LENGTH, QUICK_FAN_INS, QUICK_MEMBERS)


@dataclass(frozen=True)
class GraphRun:
    engine: str
    jobs: int
    workers: int
    rate: float
    """Jobs per second, first claim to last ack."""
    waits: int
    """Jobs that waited for another (every one but the chains' heads and the members)."""
    wait_p50_ms: float
    wait_p99_ms: float
    raced: int
    """Waits counted 0: the dependent's claim returned before its dependency's ack()."""
    failure: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "jobs": self.jobs,
            "workers": self.workers,
            "rate_per_s": round(self.rate, 1),
            "waits": self.waits,
            "wait_p50_ms": round(self.wait_p50_ms, 2),
            "wait_p99_ms": round(self.wait_p99_ms, 2),
            "raced": self.raced,
            "failure": self.failure,
        }


def enqueue_graph(store: alkstore.Store, shape: Shape) -> dict[int, list[int]]:
    """The graph, in transactions; each waiting job's dependencies."""
    waits_for: dict[int, list[int]] = {}
    for start in range(0, shape.chains, PER_TRANSACTION):
        with store.transaction() as tx:
            for _ in range(start, min(start + PER_TRANSACTION, shape.chains)):
                before = int(tx.enqueue(QUEUE, {"link": 0}))
                for link in range(1, shape.chain_length):
                    job = int(tx.enqueue(QUEUE, {"link": link}, EnqueueOpts(after=[before])))
                    waits_for[job] = [before]
                    before = job
    for start in range(0, shape.fan_ins, PER_TRANSACTION):
        with store.transaction() as tx:
            for _ in range(start, min(start + PER_TRANSACTION, shape.fan_ins)):
                members = [int(tx.enqueue(QUEUE, {"member": n})) for n in range(shape.members)]
                callback = int(
                    tx.enqueue(QUEUE, {"members": members}, EnqueueOpts(after_finished=members))
                )
                waits_for[callback] = members
    return waits_for


def graph_worker(
    index: int,
    url: str,
    opts: dict[str, Any],
    total: int,
    acked: Synchronized[int],
    reports: Queue[tuple[int, dict[int, tuple[float, float]], str | None]],
) -> None:
    """Claim and ack one job at a time until every job of the graph is acked."""
    times: dict[int, tuple[float, float]] = {}
    failure: str | None = None
    deadline = time.monotonic() + BUDGET_S
    try:
        with alkstore.open(url, **opts) as store:
            queue = store.queue(QUEUE)
            worker = f"graph-{index}"
            while acked.value < total and time.monotonic() < deadline:
                handle = queue.claim_wait(worker, timeout=0.2)
                if handle is None:
                    continue
                claimed_at = time.time()
                if handle.ack():
                    times[handle.id] = (claimed_at, time.time())
                    with acked.get_lock():
                        acked.value += 1
    except Exception as exc:  # reported, the run fails
        failure = f"{type(exc).__name__}: {exc}"
    reports.put((index, times, failure))


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _drain(
    url: str, opts: dict[str, Any], total: int
) -> tuple[dict[int, tuple[float, float]], list[str]]:
    context = multiprocessing.get_context("spawn")
    acked = context.Value("q", 0)
    reports: Queue[tuple[int, dict[int, tuple[float, float]], str | None]] = context.Queue()
    workers = [
        context.Process(target=graph_worker, args=(n, url, opts, total, acked, reports))
        for n in range(WORKERS)
    ]
    for process in workers:
        process.start()
    times: dict[int, tuple[float, float]] = {}
    failures: list[str] = []
    for _ in workers:
        try:
            _, found, failure = reports.get(timeout=BUDGET_S + JOIN_TIMEOUT_S)
        except queue_module.Empty:
            failures.append("a worker never reported")
            break
        times.update(found)
        if failure is not None:
            failures.append(failure)
    for process in workers:
        process.join(JOIN_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            failures.append("a worker did not exit")
    return times, failures


def graph_run(engine: str, provider: alkstore.EngineProvider, quick: bool) -> GraphRun:
    """One drain of the graph on a fresh store of ``provider``."""
    shape = QUICK if quick else FULL
    with provider.provision() as spec:
        with provider.open(spec.url, **spec.opts) as store:
            waits_for = enqueue_graph(store, shape)
        times, failures = _drain(spec.url, dict(spec.opts), shape.jobs)
    if len(times) != shape.jobs and not failures:
        failures.append(f"{len(times)} of {shape.jobs} jobs acked")
    signed = [
        (times[job][0] - max(times[dep][1] for dep in deps)) * 1000
        for job, deps in waits_for.items()
        if job in times and all(dep in times for dep in deps)
    ]
    waits = [max(0.0, wait) for wait in signed]
    if times:
        first = min(claimed for claimed, _ in times.values())
        last = max(done for _, done in times.values())
        rate = len(times) / (last - first) if last > first else 0.0
    else:
        rate = 0.0
    return GraphRun(
        engine=engine,
        jobs=len(times),
        workers=WORKERS,
        rate=rate,
        waits=len(waits),
        wait_p50_ms=statistics.median(waits) if waits else 0.0,
        wait_p99_ms=_percentile(waits, 0.99),
        raced=sum(wait < 0 for wait in signed),
        failure="; ".join(failures) or None,
    )


def render_graph(runs: list[GraphRun]) -> str:
    if not runs:
        return ""
    lines = [
        f"Job graph: chains and fan-ins drained by {WORKERS} worker processes (claim_wait + "
        "ack one at a time); wait = a dependency's ack to its dependent's claim",
        f"  {'engine':<10} {'jobs':>7} {'jobs/s':>9} {'waits':>7} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'raced':>6}",
    ]
    for r in runs:
        line = (
            f"  {r.engine:<10} {r.jobs:>7} {r.rate:>9.0f} {r.waits:>7} "
            f"{r.wait_p50_ms:>8.2f} {r.wait_p99_ms:>8.2f} {r.raced:>6}"
        )
        if r.failure is not None:
            line += f"  FAILED: {r.failure}"
        lines.append(line)
    return "\n".join(lines)
