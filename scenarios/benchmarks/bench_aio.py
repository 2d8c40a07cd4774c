"""The async surface rows: ``alkstore.aio`` throughput and event-loop lag.

Each row opens ``alkstore.aio.open(url)`` on the row's freshly provisioned
store (on PostgreSQL that is the engine's ``open_on_loop``: psycopg's async
connections on the loop; on SQLite the sync engine on the store's threads)
inside ``asyncio.run``, so the numbers are what an asyncio app sees:

- **aio enqueue** / **aio claim+ack**: rows 1 and 3 of the table, awaited one
  at a time, to read beside the sync rows of the same run.
- **aio loop lag**: a 1 ms ticker on the loop while a producer task awaits
  1,000 enqueues and a consumer task awaits 1,000 ``claim_wait`` + ``ack``; a
  sample is how late each tick fired (its gap minus the 1 ms asked for). A
  call run on the loop's own thread would show up as a lag of its whole length.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from bench_report import Measurement
from bench_workloads import QUEUE, Bench, payloads, prefill

import alkstore.aio

T = TypeVar("T")

LAG_JOBS = 1_000
"""Enqueues, then claim+acks, run while the loop-lag ticker ticks."""
TICK_S = 0.001
CLAIM_WAIT_S = 5.0
"""How long the loop-lag consumer waits for the producer's next job at most."""


def run_on_aio(bench: Bench, body: Callable[[alkstore.aio.AsyncStore], Awaitable[T]]) -> T:
    """``body(store)`` in ``asyncio.run``, on the row's store opened by ``alkstore.aio``."""

    async def main() -> T:
        spec = bench.spec
        async with alkstore.aio.open(spec.url, **spec.opts) as store:
            return await body(store)

    return asyncio.run(main())


def aio_enqueue(bench: Bench) -> Measurement:
    """A1. ``await q.enqueue(...)`` one job per transaction, one at a time."""
    items, deadline = payloads(bench.jobs), bench.deadline()

    async def body(store: alkstore.aio.AsyncStore) -> tuple[int, float]:
        queue = store.queue(QUEUE)
        done = 0
        started = time.perf_counter()
        for item in items:
            if time.perf_counter() > deadline:
                break
            await queue.enqueue(item)
            done += 1
        return done, time.perf_counter() - started

    done, seconds = run_on_aio(bench, body)
    return Measurement(jobs=done, seconds=seconds, capped=done < bench.jobs)


def aio_claim_ack(bench: Bench) -> Measurement:
    """A3. ``await q.claim(...)`` + ``await h.ack()`` one at a time, from a backlog of N."""
    prefill(bench, bench.jobs)
    deadline = bench.deadline()

    async def body(store: alkstore.aio.AsyncStore) -> tuple[int, int, float]:
        queue = store.queue(QUEUE)
        done = lost = 0
        started = time.perf_counter()
        while done + lost < bench.jobs and time.perf_counter() <= deadline:
            handle = await queue.claim("bench-aio")
            if handle is None:
                break
            if await handle.ack():
                done += 1
            else:
                lost += 1
        return done, lost, time.perf_counter() - started

    done, lost, seconds = run_on_aio(bench, body)
    m = Measurement(jobs=done, seconds=seconds, capped=done + lost < bench.jobs, errors=lost)
    if done + lost < bench.jobs and not m.capped:
        m.notes.append(f"queue ran dry after {done} of {bench.jobs} jobs")
    return m


def aio_loop_lag(bench: Bench) -> Measurement:
    """A-lag. How late a 1 ms ticker fires while 1,000 enqueues and 1,000
    claim_wait+acks are awaited by two tasks on the same loop."""
    jobs = min(LAG_JOBS, bench.jobs) if bench.quick else LAG_JOBS

    async def body(store: alkstore.aio.AsyncStore) -> tuple[list[float], int, float]:
        loop = asyncio.get_running_loop()
        queue = store.queue(QUEUE)
        lags_ms: list[float] = []
        finished = asyncio.Event()

        async def tick() -> None:
            last = loop.time()
            while not finished.is_set():
                await asyncio.sleep(TICK_S)
                now = loop.time()
                lags_ms.append(max(0.0, (now - last - TICK_S) * 1000))
                last = now

        async def produce() -> None:
            for item in payloads(jobs):
                await queue.enqueue(item)

        async def consume() -> int:
            acked = 0
            while acked < jobs:
                handle = await queue.claim_wait("bench-aio", timeout=CLAIM_WAIT_S)
                if handle is None:
                    break  # the producer stalled for seconds: the row notes the shortfall
                acked += await handle.ack()
            return acked

        ticker = asyncio.create_task(tick())
        started = time.perf_counter()
        try:
            _, acked = await asyncio.gather(produce(), consume())
        finally:
            finished.set()
            await ticker
        return lags_ms, acked, time.perf_counter() - started

    lags_ms, acked, seconds = run_on_aio(bench, body)
    m = Measurement(jobs=len(lags_ms), seconds=seconds, latencies_ms=lags_ms)
    m.notes.append(
        f"{jobs:,} enqueues + {acked:,} claim_wait+acks in {seconds:.2f} s, "
        f"{len(lags_ms):,} ticks, worst lag {max(lags_ms, default=0.0):.1f} ms"
    )
    if acked < jobs:
        m.errors = jobs - acked
    return m
