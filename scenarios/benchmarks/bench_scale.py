"""Scale rows: the same claim+ack at a small and a huge backlog, many queues, big payloads,
and the claims of a consumer that started on an empty queue (a cold start).

Each runs on the engine and on its plain-driver baseline like every other
workload. Backlogs are built untimed with ``enqueue_many`` in big batches.
"""

from __future__ import annotations

import time

from bench_report import Measurement
from bench_workloads import (
    QUEUE,
    Bench,
    claim_ack,
    claim_batch,
    drain_one_at_a_time,
    payloads,
    prefill,
    timed,
)

SMALL_BACKLOG = 1_000
LARGE_BACKLOG = 1_000_000
QUICK_LARGE_BACKLOG = 10_000
BACKLOG_SAMPLE = 500
"""claim+ack operations timed per round at each backlog (fewer than the small one holds)."""
BACKLOG_ROUNDS = 6
"""Rounds per backlog; before each the backlog is topped up again (untimed)."""
BACKLOG_FILL_BATCH = 10_000

QUEUES = 1_000
JOBS_PER_QUEUE = 10
QUICK_QUEUES = 50

COLD_START_ROUNDS = 20
"""Claims on a nearly empty queue before the backlog arrives: more than the five runs
after which psycopg prepares a statement (and PostgreSQL may keep its plan)."""

BIG_PAYLOAD_BYTES = 64 * 1024
BIG_PAYLOAD_JOBS = 500
QUICK_BIG_PAYLOAD_JOBS = 50


def large_backlog(bench: Bench) -> int:
    return QUICK_LARGE_BACKLOG if bench.quick else LARGE_BACKLOG


def backlog_small(bench: Bench) -> Measurement:
    """claim+ack one at a time, 6 rounds of 500 jobs, each from a backlog of 1,000."""
    prefill(bench, SMALL_BACKLOG, batch=BACKLOG_FILL_BATCH)
    return _backlog_rounds(bench, "backlog_1k")


def backlog_large(bench: Bench) -> Measurement:
    """claim+ack one at a time, 6 rounds of 500 jobs, each from a backlog of 1,000,000."""
    backlog = large_backlog(bench)
    started = time.perf_counter()
    prefill(bench, backlog, batch=BACKLOG_FILL_BATCH)
    filled_in = time.perf_counter() - started
    m = _backlog_rounds(bench, "backlog_1m")
    m.notes.append(f"backlog of {backlog:,} built in {filled_in:.1f} s (untimed)")
    return m


def _backlog_rounds(bench: Bench, key: str) -> Measurement:
    total = Measurement()
    for round_no in range(BACKLOG_ROUNDS):
        if round_no:
            prefill(bench, BACKLOG_SAMPLE)  # back to the backlog's size
        m = drain_one_at_a_time(bench, key, BACKLOG_SAMPLE)
        total.jobs += m.jobs
        total.seconds += m.seconds
        total.capped = total.capped or m.capped
        total.notes += m.notes
    return total


def many_queues(bench: Bench) -> Measurement:
    """1,000 queues with 10 jobs in each; claim+ack one at a time, a different queue each time."""
    count = QUICK_QUEUES if bench.quick else QUEUES
    names = [f"{QUEUE}-{n}" for n in range(count)]
    items = payloads(JOBS_PER_QUEUE)
    for name in names:
        bench.side.enqueue_many(name, items)
    return drain_one_at_a_time(bench, "many_queues", count * JOBS_PER_QUEUE, names)


def big_payloads(bench: Bench) -> Measurement:
    """64 KiB payloads: enqueue each (one per call), then claim+ack each; jobs per second."""
    jobs = QUICK_BIG_PAYLOAD_JOBS if bench.quick else BIG_PAYLOAD_JOBS
    items = payloads(jobs, BIG_PAYLOAD_BYTES)
    side, deadline = bench.side, bench.deadline()
    enqueued = 0

    def enqueue_all() -> int:
        nonlocal enqueued
        for item in items:
            if time.perf_counter() > deadline:
                break
            side.enqueue(QUEUE, item)
            enqueued += 1
        return enqueued

    _, enqueue_s = timed(bench, "big_payload_enqueue", enqueue_all)
    drained = drain_one_at_a_time(bench, "big_payload_claim", enqueued)
    m = Measurement(
        jobs=drained.jobs,
        seconds=enqueue_s + drained.seconds,
        capped=enqueued < jobs or drained.capped,
        notes=drained.notes,
    )
    if enqueue_s > 0 and drained.seconds > 0:
        m.notes.append(
            f"{BIG_PAYLOAD_BYTES // 1024} KiB: enqueue {enqueued / enqueue_s:,.0f}/s, "
            f"claim+ack {drained.jobs / drained.seconds:,.0f}/s"
        )
    return m


STATS_SCRAPES = 20
"""``store.stats()`` calls timed once the backlog is in place (a scrape each)."""


def stats_at_large_backlog(bench: Bench) -> Measurement:
    """S5: ``store.stats()`` over a backlog of 1,000,000 (plus some dead jobs): what one
    metrics scrape costs (``alkstore stats --format prometheus``, ``alkstore.metrics``)."""
    store = bench.store
    if store is None:
        raise RuntimeError("the stats row runs on engines only")
    backlog = large_backlog(bench)
    prefill(bench, backlog, batch=BACKLOG_FILL_BATCH)
    queue = store.queue(QUEUE)
    for handle in queue.claim_batch("bench-stats", 100):  # some dead rows to count too
        handle.fail("bench")
    latencies = []
    for _ in range(STATS_SCRAPES):
        started = time.perf_counter()
        stats = store.stats()
        latencies.append((time.perf_counter() - started) * 1000)
    m = Measurement(jobs=len(latencies), seconds=sum(latencies) / 1000, latencies_ms=latencies)
    m.notes.append(f"{sum(s.ready + s.scheduled for s in stats):,} live, 100 dead jobs counted")
    return m


def cold_claim_ack(bench: Bench) -> Measurement:
    """Row 3 on a side that first claimed from a nearly empty queue (untimed)."""
    _start_cold(bench)
    return claim_ack(bench)


def cold_claim_batch(bench: Bench) -> Measurement:
    """Row 4 on a side that first claimed from a nearly empty queue (untimed)."""
    _start_cold(bench)
    return claim_batch(bench)


def _start_cold(bench: Bench) -> None:
    """What a consumer started before its backlog does: claim and ack the odd job from
    a queue that is otherwise empty, in ones and in batches."""
    side = bench.side
    for _ in range(COLD_START_ROUNDS):
        side.enqueue_many(QUEUE, payloads(3))
        side.claim_ack(QUEUE, "bench-worker")
        side.claim_ack_batch(QUEUE, "bench-worker", 100)
        side.claim_ack(QUEUE, "bench-worker")  # the queue is empty: claims nothing
