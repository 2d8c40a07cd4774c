"""Helpers for the SQLite engine's tests: query plans, and work run in child processes.

Child-process targets live here (not in test modules) so ``spawn`` children can
import them by name.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

import alkstore
from alkstore import Store
from alkstore.testing import FakeClock
from alkstore_sqlite import database_path
from alkstore_sqlite.shared import SharedDatabase, _shared

StoreFactory = Callable[..., Store]
"""``open_store(**opts)``: a new store on the test's database file."""

PlanRow = tuple[int, int, str]

WATCHER_THREAD = "alkstore-sqlite-watcher"


def shared_state(url: str) -> SharedDatabase | None:
    """This process's shared state (gate, watcher) for the file ``url`` names, if open."""
    return _shared.get(os.path.realpath(database_path(url)))


def watcher_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == WATCHER_THREAD}


def query_plan(conn: sqlite3.Connection, statement: str, params: Any) -> list[PlanRow]:
    """``EXPLAIN QUERY PLAN`` rows as ``(id, parent, detail)``."""
    rows = conn.execute("EXPLAIN QUERY PLAN " + statement, params).fetchall()
    return [(row[0], row[1], row[3]) for row in rows]


def sorted_beside(plan: list[PlanRow]) -> list[str]:
    """For every temp b-tree sort, the steps whose rows it sorts (its siblings)."""
    parents = {parent for _, parent, detail in plan if detail.startswith("USE TEMP B-TREE")}
    return [
        detail for _, parent, detail in plan if parent in parents and "TEMP B-TREE" not in detail
    ]


def instructions(conn: sqlite3.Connection, statement: str, params: Any) -> int:
    """How many SQLite VM instructions one run of ``statement`` executes (a
    deterministic measure of its work: it grows with the rows a statement visits)."""
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    conn.set_progress_handler(tick, 1)
    try:
        conn.execute(statement, params).fetchall()
    finally:
        conn.set_progress_handler(None, 1)
    return count


def drain(url: str, queue: str, worker: str, threads: int, results: Any) -> None:
    """Claim and ack until the queue is empty, from ``threads`` threads of this process;
    put ``(acked ids, errors)`` on ``results``."""
    store = alkstore.open(url)
    acked: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        q = store.queue(queue)
        while True:
            try:
                handle = q.claim(name)
                if handle is None:
                    return
                if handle.ack():
                    with lock:
                        acked.append(handle.id)
            except Exception as exc:
                with lock:
                    errors.append(repr(exc))

    pool = [threading.Thread(target=work, args=(f"{worker}-{i}",)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    store.close()
    results.put((acked, errors))


def produce(url: str, queue: str, first: int, count: int, results: Any) -> None:
    """Enqueue ``count`` jobs one by one; put ``(ids, errors)`` on ``results``."""
    store = alkstore.open(url)
    q = store.queue(queue)
    ids: list[int] = []
    errors: list[str] = []
    for n in range(first, first + count):
        try:
            ids.append(q.enqueue({"n": n}))
        except Exception as exc:
            errors.append(repr(exc))
    store.close()
    results.put((ids, errors))


def consume_until_stop(url: str, queue: str, worker: str, results: Any) -> None:
    """``claim_wait`` and ack until a ``{"stop": true}`` job; put ``(payload numbers,
    errors)`` on ``results``. The re-poll is an hour: only wakes make progress."""
    store = alkstore.open(url, repoll_s=3600)
    q = store.queue(queue)
    seen: list[int] = []
    errors: list[str] = []
    while True:
        try:
            handle = q.claim_wait(worker, timeout=60)
            if handle is None:
                errors.append("claim_wait timed out")
                break
            handle.ack()
            if handle.payload.get("stop"):
                break
            seen.append(handle.payload["n"])
        except Exception as exc:
            errors.append(repr(exc))
            break
    store.close()
    results.put((seen, errors))


def wait_for_one(url: str, queue: str, ready: Any, results: Any) -> None:
    """Signal ``ready``, then ``claim_wait`` once with an hour-long re-poll (so only the
    watcher can wake it in time); put the claimed job's id (or None) on ``results``."""
    with alkstore.open(url, repoll_s=3600) as store:
        q = store.queue(queue)
        ready.set()
        handle = q.claim_wait("waiter", timeout=60)
        results.put(None if handle is None else (handle.id, handle.payload))
        if handle is not None:
            handle.ack()


def open_and_enqueue(url: str, results: Any) -> None:
    """Open a store (racing other processes through the first migration) and enqueue one job."""
    try:
        with alkstore.open(url, clock=FakeClock(1_700_000_000)) as store:
            results.put(store.queue("q").enqueue({"opened": True}))
    except Exception as exc:
        results.put(repr(exc))


# -- profiles: scheduler, streams, pub/sub ------------------------------------------


def append_events(
    url: str, stream: str, writer: str, threads: int, count: int, results: Any
) -> None:
    """From ``threads`` threads, append ``count`` events each to ``stream``, alternating
    lone appends with transactions that hold the offsets they took for a moment
    before committing; put ``(offsets, errors)`` on ``results``."""
    store = alkstore.open(url)
    offsets: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def work(thread: int) -> None:
        stream_handle = store.stream(stream)
        for n in range(count):
            payload = {"writer": writer, "thread": thread, "n": n}
            try:
                if n % 2:
                    taken = [stream_handle.append(payload)]
                else:
                    with store.transaction() as tx:
                        taken = [tx.stream_append(stream, payload), tx.stream_append(stream, n)]
                        time.sleep(0.001)  # a reader polls meanwhile (widening the window)
                with lock:
                    offsets.extend(taken)
            except Exception as exc:
                with lock:
                    errors.append(repr(exc))

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    store.close()
    results.put((offsets, errors))


def publish_messages(url: str, channel: str, count: int) -> None:
    """Publish ``0 .. count - 1`` on ``channel`` (every third in a transaction, plus one
    rolled-back transaction's message), then ``"done"``."""
    with alkstore.open(url) as store:
        for n in range(count):
            if n % 3:
                store.notify(channel, n)
            else:
                with store.transaction() as tx:
                    tx.notify(channel, n)
        try:
            with store.transaction() as tx:
                tx.notify(channel, "rolled back")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        store.notify(channel, "done")


def tick_at(url: str, now: int, worker_id: str, rounds: int, results: Any) -> None:
    """Tick the schedules ``rounds`` times at ``now`` as ``worker_id``; put the total of
    fired boundaries (or the error) on ``results``."""
    try:
        with alkstore.open(url, clock=FakeClock(now)) as store:
            results.put(sum(store.tick_schedules(worker_id).fired for _ in range(rounds)))
    except Exception as exc:
        results.put(repr(exc))
