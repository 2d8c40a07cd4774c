"""Every workload the harness runs, in table order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench_aio import aio_claim_ack, aio_enqueue, aio_loop_lag
from bench_pgqueuer import pgqueuer_drain, pgqueuer_enqueue
from bench_scale import (
    backlog_large,
    backlog_small,
    big_payloads,
    cold_claim_ack,
    cold_claim_batch,
    many_queues,
    stats_at_large_backlog,
)
from bench_scheduler import cron_next_fire, tick_cron_schedules
from bench_worker import hand_four, hand_one, worker_four, worker_one, worker_quiet_one
from bench_workloads import (
    Workload,
    claim_ack,
    claim_batch,
    claim_wait_ack,
    enqueue_many,
    enqueue_single,
    four_processes,
    pubsub_latency,
    stream_append,
    stream_read,
    wake_latency,
)

from alkstore_sqlite.options import DEFAULT_PAGE_SIZE


@dataclass(frozen=True)
class Entry:
    key: str
    label: str
    run: Workload
    baseline: bool = True
    """Also run on the plain-driver baseline (latency workloads have no plain twin)."""
    only: str | None = None
    """Run on this engine only."""
    writer_gate: bool = True
    """``False``: the SQLite engine without its cross-process writer gate."""
    plain_page_size: int | None = None
    """Plain sqlite3 only: create its file with this page size (else SQLite's default)."""


WORKLOADS: Sequence[Entry] = (
    Entry("enqueue", "1 enqueue, one job per tx", enqueue_single),
    Entry("enqueue_many", "2 enqueue_many, batches of 1,000", enqueue_many),
    Entry("claim_ack", "3 claim+ack one at a time, depth N", claim_ack),
    Entry(
        "claim_ack_same_pages",
        f"3p row 3, plain sqlite3 at the engine's {DEFAULT_PAGE_SIZE // 1024} KiB pages",
        claim_ack,
        only="sqlite",
        plain_page_size=DEFAULT_PAGE_SIZE,
    ),
    Entry("claim_wait_ack", "3b claim_wait(timeout=0)+ack loop, depth N", claim_wait_ack),
    Entry("claim_batch", "4 claim_batch(100) + ack_batch", claim_batch),
    Entry("four_procs", "5 four processes draining (sqlite 1, pg 10/claim)", four_processes),
    Entry(
        "four_procs_no_gate",
        "5b the same, SQLite without its writer gate",
        four_processes,
        only="sqlite",
        writer_gate=False,
    ),
    Entry("wake", "6 claim_wait wake latency (cross-process)", wake_latency, baseline=False),
    Entry("stream_append", "7 stream append, one event per call", stream_append),
    Entry("stream_read", "8 stream read, pages of 100", stream_read),
    Entry("pubsub", "9 pub/sub latency (cross-process)", pubsub_latency, baseline=False),
    Entry("backlog_1k", "S1 claim+ack at a backlog of 1,000", backlog_small),
    Entry("backlog_1m", "S2 claim+ack at a backlog of 1,000,000", backlog_large),
    Entry("many_queues", "S3 1,000 queues x 10 jobs, claim+ack", many_queues),
    Entry("big_payload", "S4 64 KiB payloads, enqueue + claim+ack", big_payloads),
    Entry("cold_claim_ack", "S6 row 3 after claims on an empty queue", cold_claim_ack),
    Entry("cold_claim_batch", "S7 row 4 after claims on an empty queue", cold_claim_batch),
    Entry(
        "stats_1m",
        "S5 store.stats() (a metrics scrape) at 1,000,000 jobs",
        stats_at_large_backlog,
        baseline=False,
    ),
    # The scheduler: what a leader's tick costs when a thousand cron schedules come due
    # at once, and the next-fire computation the core makes once per fire (the
    # contract's alone: it runs on one engine).
    Entry(
        "cron_tick",
        "C1 tick firing 1,000 cron schedules, one boundary each",
        tick_cron_schedules,
        baseline=False,
    ),
    Entry(
        "cron_next_fire",
        "C2 one cron next-fire computation (the core's, no engine)",
        cron_next_fire,
        baseline=False,
        only="sqlite",
    ),
    # The worker rows run on the engine only: their baseline is the hand loop in
    # the row above each, on the same engine (bench_worker.render_worker_overhead).
    Entry("worker_hand_1p", "W1 hand claim+ack loop, 1 process", hand_one, baseline=False),
    Entry("worker_1p", "W2 worker, no-op handler, 1 process", worker_one, baseline=False),
    Entry(
        "worker_quiet_1p",
        "W2q worker, --log-level warning, 1 process",
        worker_quiet_one,
        baseline=False,
    ),
    Entry("worker_hand_4p", "W3 hand claim+ack loop, 4 processes", hand_four, baseline=False),
    Entry("worker_4p", "W4 worker, no-op handler, 4 processes", worker_four, baseline=False),
    # The async surface (alkstore.aio): rows 1 and 3 awaited, beside the sync rows above,
    # and the event loop's lag while an app's tasks enqueue and claim.
    Entry("aio_enqueue", "A1 aio: await enqueue, one job per tx", aio_enqueue, baseline=False),
    Entry("aio_claim_ack", "A3 aio: await claim+ack, depth N", aio_claim_ack, baseline=False),
    # pgqueuer (asyncpg) beside A1 and A3, on the same server in a database of its own.
    Entry(
        "pgqueuer_enqueue",
        "P1 pgqueuer enqueue, one job per call",
        pgqueuer_enqueue,
        baseline=False,
        only="postgresql",
    ),
    Entry(
        "pgqueuer_drain",
        "P3 pgqueuer drain, one QueueManager, depth N",
        pgqueuer_drain,
        baseline=False,
        only="postgresql",
    ),
    Entry(
        "aio_loop_lag",
        "A4 aio: 1 ms ticker's lag, 1k enqueues + 1k claim+acks",
        aio_loop_lag,
        baseline=False,
    ),
)

KEYS = [entry.key for entry in WORKLOADS]
