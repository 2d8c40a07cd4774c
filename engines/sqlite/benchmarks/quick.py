"""A quick throughput and wake-latency check of the SQLite engine (not the official bench).

    python engines/sqlite/benchmarks/quick.py [--jobs 20000] [--repeat 3] [--only NAME ...]

Each workload runs on a fresh database file in a temp dir, ``--repeat`` times;
the best run is reported (the machine is shared, so the best is the least
disturbed). Payloads are ~100-byte JSON objects. Numbers are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import alkstore
from alkstore.core import CoreStore
from alkstore_sqlite import SqliteDriver, database_path, database_url, parse_options

QUEUE = "bench"
PAYLOAD = {"to": "someone@example.com", "subject": "Your order has shipped", "order": 123456}


def payload(i: int) -> dict[str, Any]:
    return {**PAYLOAD, "n": i}


@contextmanager
def fresh_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="alkstore-bench-") as directory:
        yield database_url(os.path.join(directory, "bench.db"))


def open_store(url: str, *, gate: bool = True) -> alkstore.Store:
    if gate:
        return alkstore.open(url)
    return CoreStore(SqliteDriver(database_path(url), parse_options({}), serialize_writers=False))


def fill(store: alkstore.Store, n: int) -> None:
    queue = store.queue(QUEUE)
    for start in range(0, n, 1000):
        queue.enqueue_many([payload(i) for i in range(start, min(n, start + 1000))])


class Timer:
    """Wall time and this process's CPU time (the machine is shared: CPU time is
    what the engine itself costs, wall time includes waiting for a core)."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def rates(self, n: int) -> tuple[float, float]:
        return n / self.wall, n / self.cpu


# -- single-process workloads: each returns (per second by wall, by CPU) -------


def enqueue_single(url: str, n: int) -> tuple[float, float]:
    with alkstore.open(url) as store:
        queue = store.queue(QUEUE)
        items = [payload(i) for i in range(n)]
        with Timer() as timer:
            for item in items:
                queue.enqueue(item)
        return timer.rates(n)


def enqueue_many_1000(url: str, n: int) -> tuple[float, float]:
    with alkstore.open(url) as store:
        queue = store.queue(QUEUE)
        batches = [[payload(i) for i in range(s, s + 1000)] for s in range(0, n, 1000)]
        with Timer() as timer:
            for batch in batches:
                queue.enqueue_many(batch)
        return timer.rates(n)


def claim_ack_single(url: str, n: int) -> tuple[float, float]:
    with alkstore.open(url) as store:
        fill(store, n)
        queue = store.queue(QUEUE)
        done = 0
        with Timer() as timer:
            while (handle := queue.claim("w")) is not None:
                done += handle.ack()
        assert done == n, done
        return timer.rates(n)


def claim_wait_ack(url: str, n: int) -> tuple[float, float]:
    """A worker loop over a full queue: every claim_wait registers with the watcher."""
    with alkstore.open(url) as store:
        fill(store, n)
        queue = store.queue(QUEUE)
        done = 0
        with Timer() as timer:
            while (handle := queue.claim_wait("w", timeout=0)) is not None:
                done += handle.ack()
        assert done == n, done
        return timer.rates(n)


def claim_batch_100(url: str, n: int) -> tuple[float, float]:
    with alkstore.open(url) as store:
        fill(store, n)
        queue = store.queue(QUEUE)
        done = 0
        with Timer() as timer:
            while handles := queue.claim_batch("w", 100):
                done += queue.ack_batch([h.id for h in handles], "w")
        assert done == n, done
        return timer.rates(n)


# -- plain sqlite3 on this machine, for calibration ------------------------------


def _plain(url: str) -> sqlite3.Connection:
    conn = sqlite3.connect(database_path(url), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload TEXT NOT NULL, "
        "state TEXT NOT NULL DEFAULT 'pending')"
    )
    return conn


def plain_insert(url: str, n: int) -> tuple[float, float]:
    conn = _plain(url)
    text = json.dumps(PAYLOAD)
    with Timer() as timer:
        for _ in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO jobs (payload) VALUES (?)", (text,))
            conn.execute("COMMIT")
    conn.close()
    return timer.rates(n)


def plain_insert_many_1000(url: str, n: int) -> tuple[float, float]:
    conn = _plain(url)
    rows = [(json.dumps(PAYLOAD),)] * 1000
    with Timer() as timer:
        for _ in range(n // 1000):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO jobs (payload) VALUES (?)", rows)
            conn.execute("COMMIT")
    conn.close()
    return timer.rates(n)


def plain_claim_ack(url: str, n: int) -> tuple[float, float]:
    conn = _plain(url)
    conn.executemany("INSERT INTO jobs (payload) VALUES (?)", [(json.dumps(PAYLOAD),)] * n)
    claim = (
        "UPDATE jobs SET state = 'processing' WHERE id = (SELECT min(id) FROM jobs "
        "WHERE state = 'pending') RETURNING id, payload"
    )
    conn.execute("CREATE INDEX pending ON jobs (id) WHERE state = 'pending'")
    with Timer() as timer:
        for _ in range(n):
            conn.execute("BEGIN IMMEDIATE")
            (job_id, _text) = conn.execute(claim).fetchone()
            conn.execute("COMMIT")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
            conn.execute("COMMIT")
    conn.close()
    return timer.rates(n)


# -- four processes draining one queue ----------------------------------------


def _drainer(url: str, gate: bool, ready: Any, go: Any, results: Any) -> None:
    store = open_store(url, gate=gate)
    queue = store.queue(QUEUE)
    ids: list[int] = []
    errors: list[str] = []
    ready.put(os.getpid())
    go.wait()
    while True:
        try:
            handle = queue.claim(f"w{os.getpid()}")
            if handle is None:
                break
            if handle.ack():
                ids.append(handle.id)
        except Exception as exc:  # counted: the target is zero
            errors.append(repr(exc))
    store.close()
    results.put((ids, errors))


def drain_4_processes(url: str, n: int, gate: bool = True) -> tuple[float, int, int]:
    with alkstore.open(url) as store:
        fill(store, n)
    ctx = mp.get_context("spawn")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_drainer, args=(url, gate, ready, go, results)) for _ in range(4)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    started = time.perf_counter()
    go.set()
    collected = [results.get() for _ in procs]
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
    all_ids = [i for ids, _ in collected for i in ids]
    errors = sum(len(errs) for _, errs in collected)
    duplicates = len(all_ids) - len(set(all_ids))
    assert len(set(all_ids)) == n, (len(set(all_ids)), n)
    return n / elapsed, errors, duplicates


def drain_4_processes_no_gate(url: str, n: int) -> tuple[float, int, int]:
    return drain_4_processes(url, n, gate=False)


# -- cross-process wake latency ------------------------------------------------


def _waiter(url: str, rounds: int, idle_s: float, conn: Any) -> None:
    with alkstore.open(url) as store:
        queue = store.queue(QUEUE)
        # The watcher's CPU cost while a claim_wait blocks with nothing arriving.
        before = resource.getrusage(resource.RUSAGE_SELF)
        assert queue.claim_wait("waiter", timeout=idle_s) is None
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        conn.send(cpu / idle_s)
        for _ in range(rounds):
            conn.send("waiting")
            handle = queue.claim_wait("waiter", timeout=10)
            arrived = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process
            assert handle is not None
            handle.ack()
            conn.send(arrived)


def wake_latency(url: str, rounds: int = 300, idle_s: float = 3.0) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, watcher CPU fraction of one core while waiting), measured from
    the moment the producer's enqueue returned (committed) to claim_wait returning."""
    with alkstore.open(url):
        pass  # create the schema before the waiter starts
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_waiter, args=(url, rounds, idle_s, child))
    proc.start()
    latencies = []
    with alkstore.open(url) as store:
        queue = store.queue(QUEUE)
        cpu = parent.recv()
        for i in range(rounds):
            assert parent.recv() == "waiting"
            time.sleep(0.005)  # let the waiter block
            queue.enqueue(payload(i))
            committed = time.monotonic()
            latencies.append(parent.recv() - committed)
    proc.join()
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    return p50, p99, cpu


# -- the profiles ------------------------------------------------------------------

STREAM = "bench-stream"
CHANNEL = "bench-channel"


def stream_append_single(url: str, n: int) -> tuple[float, float]:
    with alkstore.open(url) as store:
        stream = store.stream(STREAM)
        items = [payload(i) for i in range(n)]
        with Timer() as timer:
            for item in items:
                stream.append(item)
        return timer.rates(n)


def stream_read_100(url: str, n: int) -> tuple[float, float]:
    with alkstore.open(url) as store:
        for start in range(0, n, 1000):
            with store.transaction() as tx:
                for i in range(start, min(n, start + 1000)):
                    tx.stream_append(STREAM, payload(i))
        stream = store.stream(STREAM)
        seen = 0
        with Timer() as timer:
            while events := stream.read(after=seen, limit=100):
                seen = events[-1].offset
        assert seen == n, seen
        return timer.rates(n)


def _subscriber(url: str, rounds: int, idle_s: float, conn: Any) -> None:
    with alkstore.open(url) as store, store.subscribe(CHANNEL) as subscription:
        # The watcher's CPU cost while a subscription is open and nothing arrives.
        before = resource.getrusage(resource.RUSAGE_SELF)
        assert subscription.get(timeout=idle_s) is None
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        conn.send(cpu / idle_s)
        for _ in range(rounds):
            message = subscription.get(timeout=10)
            arrived = time.monotonic()
            assert message is not None
            conn.send(arrived)


def pubsub_latency(url: str, rounds: int = 300, idle_s: float = 3.0) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, subscriber CPU fraction of one core while idle), from the moment
    the publisher's notify returned (committed) to the other process's get returning."""
    with alkstore.open(url):
        pass  # create the schema before the subscriber starts
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_subscriber, args=(url, rounds, idle_s, child))
    proc.start()
    latencies = []
    with alkstore.open(url) as store:
        cpu = parent.recv()
        for i in range(rounds):
            time.sleep(0.005)  # one message in flight at a time
            store.notify(CHANNEL, payload(i))
            committed = time.monotonic()
            latencies.append(parent.recv() - committed)
    proc.join()
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    return p50, p99, cpu


LATENCIES = ("wake_latency", "pubsub_latency")

WORKLOADS: dict[str, Callable[..., Any]] = {
    "plain_insert": plain_insert,
    "plain_insert_many_1000": plain_insert_many_1000,
    "plain_claim_ack": plain_claim_ack,
    "enqueue": enqueue_single,
    "enqueue_many_1000": enqueue_many_1000,
    "claim_ack": claim_ack_single,
    "claim_wait_ack": claim_wait_ack,
    "claim_batch_100": claim_batch_100,
    "drain_4_processes": drain_4_processes,
    "drain_4_processes_no_gate": drain_4_processes_no_gate,
    "wake_latency": wake_latency,
    "stream_append": stream_append_single,
    "stream_read_100": stream_read_100,
    "pubsub_latency": pubsub_latency,
}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS))
    args = parser.parse_args(argv)
    for name in args.only:
        runs = []
        for _ in range(args.repeat):
            with fresh_url() as url:
                if name in LATENCIES:
                    runs.append(WORKLOADS[name](url))
                else:
                    runs.append(WORKLOADS[name](url, args.jobs))
        if name in LATENCIES:
            best = min(runs)
            print(
                f"{name:28} p50 {best[0]:.3f} ms  p99 {best[1]:.3f} ms  "
                f"waiting CPU {best[2] * 100:.1f}% of a core  (all: "
                + ", ".join(f"{r[0]:.2f}/{r[1]:.2f}" for r in runs)
                + ")"
            )
        elif name.startswith("drain"):
            best = max(runs)
            print(
                f"{name:28} {best[0]:>10,.0f} jobs/s  errors {best[1]}  duplicates {best[2]}  "
                "(all: " + ", ".join(f"{r[0]:,.0f}" for r in runs) + ")"
            )
        else:
            print(
                f"{name:28} {max(r[0] for r in runs):>10,.0f} /s wall  "
                f"{max(r[1] for r in runs):>10,.0f} /s CPU  (wall: "
                + ", ".join(f"{r[0]:,.0f}" for r in runs)
                + ")"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
