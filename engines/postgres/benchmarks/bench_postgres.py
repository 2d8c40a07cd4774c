"""Quick throughput and wake-latency numbers for the PostgreSQL engine.

    python engines/postgres/benchmarks/bench_postgres.py [--dsn URL] [--quick]

Uses ``--dsn``, else ``$ALKSTORE_PG_DSN``, else a throwaway local server with
default durability (fsync on, synchronous_commit on). Every run works in its
own fresh schemas, dropped afterwards.

The in-process workloads run interleaved with a plain-psycopg baseline doing
the same work (a round of ours, a round of the baseline, ...), so both see the
same machine: on a shared machine the absolute numbers drift with the load,
the ratio much less. Numbers, not assertions: tests never time.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg

import alkstore
import alkstore.testing
from alkstore.payload import encode_payload
from alkstore_postgres.testing.provisioning import SCHEMA_PREFIX, drop_schema
from alkstore_postgres.testing.server import DSN_ENV, provision_server

Step = Callable[[], int]
"""One round of a workload; returns how many jobs it handled."""

PAYLOAD = {"to": "someone@example.com", "subject": "hello", "pad": "x" * 100}


@contextmanager
def fresh_schema(dsn: str, label: str) -> Iterator[str]:
    schema = f"{SCHEMA_PREFIX}bench_{label}_{os.getpid()}"
    drop_schema(dsn, schema)
    try:
        yield schema
    finally:
        drop_schema(dsn, schema)


def rate_line(
    name: str, jobs: int, seconds: float, target: int | None = None, unit: str = "jobs"
) -> str:
    rate = jobs / seconds
    verdict = (
        "" if target is None else f"  target {target:>7,}/s {'ok' if rate >= target else 'MISS'}"
    )
    return f"  {name:<40} {rate:>9,.0f} {unit}/s{verdict}"


def interleaved(
    title: str, rounds: int, ours: Step, baseline: Step, target: int | None = None
) -> None:
    """Alternate rounds of ``ours`` and ``baseline``; report both rates and their ratio."""
    ours(), baseline()  # warm up: connections, prepared statements
    totals = {"ours": [0, 0.0], "baseline": [0, 0.0]}
    for _ in range(rounds):
        for name, step in (("ours", ours), ("baseline", baseline)):
            start = time.perf_counter()
            totals[name][0] += step()
            totals[name][1] += time.perf_counter() - start
    (jobs, seconds), (base_jobs, base_seconds) = totals["ours"], totals["baseline"]
    ratio = (jobs / seconds) / (base_jobs / base_seconds)
    print(f"{title}  (alkstore / plain psycopg = {ratio:.2f})", flush=True)
    print(rate_line("alkstore", int(jobs), seconds, target), flush=True)
    print(rate_line("plain psycopg", int(base_jobs), base_seconds), flush=True)


def plain_table(conn: psycopg.Connection[Any], schema: str) -> str:
    table = f'"{schema}".t'
    conn.execute(f'CREATE SCHEMA "{schema}"')
    conn.execute(
        f"CREATE TABLE {table} (id bigserial PRIMARY KEY, payload text NOT NULL, "
        "state text NOT NULL DEFAULT 'pending', worker text)"
    )
    conn.execute(f"CREATE INDEX ON {table} (id) WHERE state = 'pending'")
    conn.commit()
    return table


def bench_enqueue(dsn: str, rounds: int) -> None:
    """One job per call: ours is insert + NOTIFY in one autocommit statement; the
    baseline an INSERT and a COMMIT."""
    with (
        fresh_schema(dsn, "enq") as schema,
        fresh_schema(dsn, "enqplain") as plain_schema,
        alkstore.open(dsn, schema=schema) as store,
        psycopg.connect(dsn) as conn,
    ):
        queue = store.queue("bench")
        table = plain_table(conn, plain_schema)
        insert = f"INSERT INTO {table} (payload) VALUES (%s) RETURNING id"

        def ours() -> int:
            for _ in range(50):
                queue.enqueue(PAYLOAD)
            return 50

        def baseline() -> int:
            for _ in range(50):
                conn.execute(insert, (encode_payload(PAYLOAD),)).fetchone()
                conn.commit()
            return 50

        interleaved("enqueue, one job per call", rounds, ours, baseline, 3_400)


def bench_enqueue_many(dsn: str, rounds: int) -> None:
    """1,000 jobs per call: ours is one INSERT ... unnest statement; the baseline COPY."""
    with (
        fresh_schema(dsn, "many") as schema,
        fresh_schema(dsn, "manyplain") as plain_schema,
        alkstore.open(dsn, schema=schema) as store,
        psycopg.connect(dsn) as conn,
    ):
        queue = store.queue("bench")
        table = plain_table(conn, plain_schema)
        batch = [dict(PAYLOAD, n=i) for i in range(1000)]

        def ours() -> int:
            return len(queue.enqueue_many(batch))

        def baseline() -> int:
            with conn.cursor().copy(f"COPY {table} (payload) FROM STDIN") as copy:
                for item in batch:
                    copy.write_row((encode_payload(item),))
            conn.commit()
            return len(batch)

        interleaved("enqueue_many(1000)", rounds, ours, baseline, 100_000)


def bench_claim_ack(dsn: str, rounds: int, batch: int) -> None:
    """claim_batch(batch) + ack_batch from a backlog; the baseline claims with
    UPDATE ... SKIP LOCKED RETURNING and deletes, committing each."""
    jobs = (rounds + 1) * batch
    with (
        fresh_schema(dsn, "claim") as schema,
        fresh_schema(dsn, "claimplain") as plain_schema,
        alkstore.open(dsn, schema=schema) as store,
        psycopg.connect(dsn) as conn,
    ):
        queue = store.queue("bench")
        for start in range(0, jobs, 1000):
            queue.enqueue_many([PAYLOAD] * min(1000, jobs - start))
        table = plain_table(conn, plain_schema)
        conn.execute(
            f"INSERT INTO {table} (payload) SELECT %s FROM generate_series(1, %s)",
            (encode_payload(PAYLOAD), jobs),
        )
        conn.commit()
        conn.execute(f'ANALYZE "{schema}".alkstore_jobs')
        conn.execute(f"ANALYZE {table}")
        conn.commit()
        claim = (
            f"UPDATE {table} SET state = 'processing', worker = 'w' WHERE id IN ("
            f"SELECT id FROM {table} WHERE state = 'pending' ORDER BY id LIMIT %s "
            "FOR UPDATE SKIP LOCKED) RETURNING id, payload"
        )
        ack = f"DELETE FROM {table} WHERE id = ANY(%s)"

        def ours() -> int:
            handles = queue.claim_batch("bench", batch)
            return queue.ack_batch([h.id for h in handles], "bench")

        def baseline() -> int:
            rows = conn.execute(claim, (batch,)).fetchall()
            conn.commit()
            done = conn.execute(ack, ([r[0] for r in rows],)).rowcount
            conn.commit()
            return done

        interleaved(f"claim_batch({batch}) + ack_batch", rounds, ours, baseline, 30_000)


def _consumer(dsn: str, schema: str, batch: int, start: Any, out: Any) -> None:
    with alkstore.open(dsn, schema=schema) as store:
        queue = store.queue("bench")
        queue.claim_batch("warm", 1)  # connect before the clock starts
        worker = f"w{os.getpid()}"
        done = 0
        start.wait()
        while handles := queue.claim_batch(worker, batch):
            done += queue.ack_batch([h.id for h in handles], worker)
        out.put(done)


def bench_parallel_consumers(dsn: str, jobs: int, processes: int, batch: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    with fresh_schema(dsn, "par") as schema:
        with alkstore.open(dsn, schema=schema) as store:
            queue = store.queue("bench")
            for first in range(0, jobs, 1000):
                queue.enqueue_many([PAYLOAD] * min(1000, jobs - first))
        start, out = ctx.Event(), ctx.Queue()
        workers = [
            ctx.Process(target=_consumer, args=(dsn, schema, batch, start, out))
            for _ in range(processes)
        ]
        for w in workers:
            w.start()
        time.sleep(3)  # let every worker import, connect and warm up
        began = time.perf_counter()
        start.set()
        done = sum(out.get() for _ in workers)
        elapsed = time.perf_counter() - began
        for w in workers:
            w.join()
    print(f"{processes} processes x claim_batch({batch}) + ack_batch", flush=True)
    print(rate_line("alkstore", done, elapsed, 10_000), flush=True)


def _waiting_consumer(dsn: str, schema: str, count: int, ready: Any, out: Any) -> None:
    with alkstore.open(dsn, schema=schema) as store:
        queue = store.queue("wake")
        queue.claim_batch("warm", 1)
        claimed: dict[int, float] = {}
        ready.set()
        for _ in range(count):
            handle = queue.claim_wait("waiter", timeout=10)
            got = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
            assert handle is not None
            claimed[handle.payload["seq"]] = got
            handle.ack()
        out.put(claimed)


def bench_wake_latency(dsn: str, count: int) -> None:
    """A consumer process blocked in claim_wait; this process enqueues one job at a
    time. Latency from the enqueue's return (its commit done) and from its call."""
    ctx = multiprocessing.get_context("spawn")
    called: dict[int, float] = {}
    committed: dict[int, float] = {}
    with fresh_schema(dsn, "wake") as schema, alkstore.open(dsn, schema=schema) as store:
        queue = store.queue("wake")
        ready, out = ctx.Event(), ctx.Queue()
        consumer = ctx.Process(target=_waiting_consumer, args=(dsn, schema, count, ready, out))
        consumer.start()
        ready.wait()
        time.sleep(0.5)
        for seq in range(count):
            time.sleep(0.02)  # the consumer is back in claim_wait, idle
            called[seq] = time.perf_counter()
            queue.enqueue({"seq": seq})
            committed[seq] = time.perf_counter()
        claimed = out.get()
        consumer.join()

    def percentiles(start: dict[int, float]) -> tuple[float, float]:
        ms = sorted((claimed[seq] - start[seq]) * 1000 for seq in claimed)
        return statistics.median(ms), ms[int(len(ms) * 0.95) - 1]

    p50, p95 = percentiles(committed)
    call_p50, call_p95 = percentiles(called)
    verdict = "ok" if p50 <= 2 else "MISS"
    print("wake latency, cross-process", flush=True)
    print(
        f"  {'from the enqueue commit':<40} p50 {p50:.2f} ms, p95 {p95:.2f} ms  "
        f"target p50 <= 2 ms {verdict}\n"
        f"  {'from the enqueue call':<40} p50 {call_p50:.2f} ms, p95 {call_p95:.2f} ms",
        flush=True,
    )


def bench_stream_append(dsn: str, rounds: int) -> None:
    """One event per call: ours allocates the offset from the stream's counter row,
    inserts and NOTIFYs in one autocommit statement; the baseline an INSERT and a
    COMMIT into a table with a bigserial key (no per-stream order)."""
    with (
        fresh_schema(dsn, "sapp") as schema,
        fresh_schema(dsn, "sappplain") as plain_schema,
        alkstore.open(dsn, schema=schema) as store,
        psycopg.connect(dsn) as conn,
    ):
        stream = store.stream("bench")
        table = plain_table(conn, plain_schema)
        insert = f"INSERT INTO {table} (payload) VALUES (%s) RETURNING id"

        def ours() -> int:
            for _ in range(50):
                stream.append(PAYLOAD)
            return 50

        def baseline() -> int:
            for _ in range(50):
                conn.execute(insert, (encode_payload(PAYLOAD),)).fetchone()
                conn.commit()
            return 50

        interleaved("stream append, one event per call", rounds, ours, baseline)


def _appender(dsn: str, schema: str, count: int, start: Any, out: Any) -> None:
    with alkstore.open(dsn, schema=schema) as store:
        stream = store.stream("hot")
        stream.append("warm")  # connect before the clock starts
        start.wait()
        for _ in range(count):
            stream.append(PAYLOAD)
        out.put(count + 1)


def bench_hot_stream(dsn: str, events: int, processes: int) -> None:
    """Several processes appending to ONE stream: the counter row's lock orders them
    until each commit (the price of gap safety), then a reader drains the stream."""
    ctx = multiprocessing.get_context("spawn")
    with fresh_schema(dsn, "hot") as schema:
        alkstore.open(dsn, schema=schema).close()
        start, out = ctx.Event(), ctx.Queue()
        per_process = events // processes
        appenders = [
            ctx.Process(target=_appender, args=(dsn, schema, per_process, start, out))
            for _ in range(processes)
        ]
        for appender in appenders:
            appender.start()
        time.sleep(3)  # let every appender import, connect and warm up
        began = time.perf_counter()
        start.set()
        appended = sum(out.get() for _ in appenders)
        elapsed = time.perf_counter() - began
        for appender in appenders:
            appender.join()
        with alkstore.open(dsn, schema=schema) as store:
            stream = store.stream("hot")
            read_began, after, read = time.perf_counter(), 0, 0
            while events_read := stream.read(after=after, limit=1000):
                after, read = events_read[-1].offset, read + len(events_read)
            read_elapsed = time.perf_counter() - read_began
    assert read == appended
    print(f"{processes} processes appending to one stream", flush=True)
    print(rate_line("alkstore append", appended, elapsed, unit="events"), flush=True)
    print(rate_line("alkstore read(limit=1000)", read, read_elapsed, unit="events"), flush=True)


def _subscriber(dsn: str, schema: str, count: int, ready: Any, out: Any) -> None:
    with alkstore.open(dsn, schema=schema) as store, store.subscribe("bench") as subscription:
        ready.set()
        received: dict[int, float] = {}
        for _ in range(count):
            message = subscription.get(timeout=10)
            received[message["seq"]] = time.perf_counter()
        out.put(received)


def bench_pubsub_latency(dsn: str, count: int, blob: str, label: str) -> None:
    """A subscriber in another process; this process publishes one message at a time.
    Latency from the notify's return (its commit done) to the subscriber's get."""
    ctx = multiprocessing.get_context("spawn")
    committed: dict[int, float] = {}
    with fresh_schema(dsn, "pubsub") as schema, alkstore.open(dsn, schema=schema) as store:
        ready, out = ctx.Event(), ctx.Queue()
        subscriber = ctx.Process(target=_subscriber, args=(dsn, schema, count, ready, out))
        subscriber.start()
        ready.wait()
        time.sleep(0.5)
        for seq in range(count):
            time.sleep(0.02)  # the subscriber is idle in get()
            store.notify("bench", {"seq": seq, "blob": blob})
            committed[seq] = time.perf_counter()
        received = out.get()
        subscriber.join()
    ms = sorted((received[seq] - committed[seq]) * 1000 for seq in received)
    p50, p95 = statistics.median(ms), ms[int(len(ms) * 0.95) - 1]
    print(f"pub/sub latency, cross-process, {label}", flush=True)
    print(f"  {'from the notify commit':<40} p50 {p50:.2f} ms, p95 {p95:.2f} ms", flush=True)


def bench_schedule_fires(dsn: str, schedules: int) -> None:
    """One tick firing 64 overdue boundaries of each schedule: each fire is its own
    transaction (BEGIN, compare-and-set advance, insert + NOTIFY, COMMIT)."""
    clock = alkstore.testing.FakeClock(1_700_000_000)
    with (
        fresh_schema(dsn, "sched") as schema,
        alkstore.open(dsn, schema=schema, clock=clock) as store,
    ):
        for n in range(schedules):
            store.schedule(f"s{n}", "@every 1s", "bench", {"n": n})
        clock.advance(64)
        began = time.perf_counter()
        fired = store.tick_schedules("bench").fired
        elapsed = time.perf_counter() - began
    print(f"tick_schedules, {schedules} schedules x 64 overdue boundaries", flush=True)
    print(rate_line("alkstore", fired, elapsed, unit="fires"), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV))
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    args = parser.parse_args()
    scale = 1 if args.quick else 3
    with ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(provision_server()).dsn
        with psycopg.connect(dsn) as conn:
            version = conn.info.server_version
        print(f"PostgreSQL {version // 10000}.{version % 10000}; load {os.getloadavg()}")
        bench_enqueue(dsn, 30 * scale)
        bench_enqueue_many(dsn, 10 * scale)
        bench_claim_ack(dsn, 100 * scale, 100)
        bench_parallel_consumers(dsn, 20_000 * scale, 4, 10)
        bench_wake_latency(dsn, 100 * scale)
        bench_stream_append(dsn, 30 * scale)
        bench_hot_stream(dsn, 4_000 * scale, 4)
        bench_pubsub_latency(dsn, 100 * scale, "", "small (NOTIFY payload)")
        bench_pubsub_latency(dsn, 100 * scale, "x" * 10_000, "10 kB (stored, referenced)")
        bench_schedule_fires(dsn, 10 * scale)
        print(f"load at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
