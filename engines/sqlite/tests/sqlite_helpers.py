"""Helpers for the SQLite engine's tests: query plans, and work run in child processes.

Child-process targets live here (not in test modules) so ``spawn`` children can
import them by name.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import alkstore
from alkstore import Store
from alkstore.core import CoreStore
from alkstore.testing import FakeClock
from alkstore_sqlite import SqliteDriver, database_path
from alkstore_sqlite.shared import SharedDatabase, _shared

StoreFactory = Callable[..., Store]
"""``open_store(**opts)``: a new store on the test's database file."""

PlanRow = tuple[int, int, str]

WATCHER_THREAD = "alkstore-sqlite-watcher"


def sqlite_driver(store: Store) -> SqliteDriver:
    """The engine driver under ``store``."""
    assert isinstance(store, CoreStore)
    driver = store.driver
    assert isinstance(driver, SqliteDriver)
    return driver


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


# -- faults: a stalled writer, a full disk ------------------------------------------

HOLD_AT_MOST_S = 60.0
"""A holding child lets go after this long even if the parent never says so."""


def hold_transaction(url: str, holding: Any, let_go: Any) -> None:
    """Open ``store.transaction()``, enqueue in it, set ``holding``, and keep it open
    until ``let_go`` is set (then commit)."""
    with alkstore.open(url) as store, store.transaction() as tx:
        tx.enqueue("q", {"held": True})
        holding.set()
        let_go.wait(HOLD_AT_MOST_S)


def _file_sizes(directory: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)}


def _limit_file_size(limit: int) -> None:
    """No file this process writes may grow past ``limit`` bytes: a write beyond it
    fails with EFBIG (SIGXFSZ ignored), which SQLite reports like a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def _lift_file_size_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def _outcome(call: Callable[[], Any]) -> str:
    """``"ok"``, or the exception as ``"<type>: <message>"``."""
    try:
        call()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def run_out_of_space(url: str, results: Any) -> None:
    """Fill a store, then make every file size limit its current size (a full disk),
    try each kind of write, lift the limit and use the same store again; put what
    happened on ``results`` as a dict."""
    seen: dict[str, Any] = {}
    directory = os.path.dirname(database_path(url))
    wal = database_path(url) + "-wal"
    with alkstore.open(url, busy_timeout_s=1) as store:
        queue = store.queue("q")
        queue.enqueue_many([{"n": n, "pad": "x" * 1000} for n in range(50)])
        # Like a full disk, no file can grow: the next commit must append to the
        # WAL, and a checkpoint must grow the database file.
        _limit_file_size(min(os.path.getsize(wal), os.path.getsize(database_path(url))))

        def in_transaction() -> None:
            with store.transaction() as tx:
                tx.enqueue("q", {"n": "in a transaction"})

        seen["while full"] = {
            "enqueue": _outcome(lambda: queue.enqueue({"n": "while full"})),
            "claim": _outcome(lambda: queue.claim("w")),
            "transaction": _outcome(in_transaction),
            "notify": _outcome(lambda: store.notify("c", "while full")),
            "get_job": _outcome(lambda: queue.get_job(1)),
        }
        seen["wal while full"] = os.path.getsize(wal)
        _lift_file_size_limit()
        seen["enqueue after"] = _outcome(lambda: queue.enqueue({"n": "after"}))
        seen["wal after"] = os.path.getsize(wal)
        handles = queue.claim_batch("w", 100)
        seen["claimed"] = [h.payload["n"] for h in handles]
        seen["acked"] = queue.ack_batch([h.id for h in handles], "w")
        with store.transaction() as tx:
            seen["integrity"] = tx.execute("PRAGMA integrity_check").fetchall()
    seen["files"] = _file_sizes(directory)
    results.put(seen)


def open_out_of_space(url: str, limit: int, results: Any) -> None:
    """Open a store while no file may grow past ``limit`` bytes; put ``(the open's
    outcome, the directory's files afterwards)`` on ``results``."""
    _limit_file_size(limit)
    outcome = _outcome(lambda: alkstore.open(url).close())
    results.put((outcome, _file_sizes(os.path.dirname(database_path(url)))))


def open_at_once(url: str, file_size_limit: int | None, barrier: Any, results: Any) -> None:
    """Wait at ``barrier``, then open a store and enqueue one job (with no file
    allowed to grow past ``file_size_limit`` bytes, if given); put the job id or
    the error on ``results``."""
    if file_size_limit is not None:
        _limit_file_size(file_size_limit)
    barrier.wait(HOLD_AT_MOST_S)
    try:
        with alkstore.open(url) as store:
            results.put(store.queue("q").enqueue({"by": os.getpid()}))
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}")
