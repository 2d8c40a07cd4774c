"""Write units in autocommit: a lone statement commits on its own, without BEGIN or
COMMIT; a statement method whose statements must commit together makes its unit
one transaction; a unit part of which has committed is never run twice."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlite_helpers import sqlite_driver

from alkstore import EngineUnavailable, Store
from alkstore_sqlite.migrations import DEAD, JOBS, STREAM_EVENTS

BOOM = '"boom"'
"""A payload (as stored: JSON text) that the test's trigger refuses."""


@pytest.fixture
def raw(db_path: Path, store: Store) -> Iterator[sqlite3.Connection]:
    """A plain connection to the store's file (the schema exists: ``store`` opened it)."""
    conn = sqlite3.connect(str(db_path), isolation_level=None, check_same_thread=False)
    yield conn
    conn.close()


def _refuse(raw: sqlite3.Connection, table: str, event: str, when: str) -> None:
    """A trigger that makes a statement on ``table`` fail when ``when`` holds."""
    raw.execute(
        f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON {table} "
        f"WHEN {when} BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    )


def _count(raw: sqlite3.Connection, table: str) -> int:
    (count,) = raw.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(count)


def _traced(store: Store, call: Callable[[], object]) -> list[str]:
    """The statements ``call`` ran on the store's pooled connection (one thread: one)."""
    statements: list[str] = []
    pool = sqlite_driver(store)._pool
    conn = pool.take()
    pool.give(conn)
    conn.set_trace_callback(lambda statement: statements.append(statement.strip()))
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return statements


def test_a_lone_statement_write_runs_without_begin_or_commit(store: Store) -> None:
    queue = store.queue("q")
    queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    statements = _traced(store, handle.ack)
    # One statement, which fires no trigger (version 20: a job no other waits for
    # releases nothing, and its delete says so itself).
    assert [s.split()[0] for s in statements] == ["DELETE"]


def test_ack_and_claim_commits_the_ack_and_the_claim_as_one(store: Store) -> None:
    queue = store.queue("q")
    queue.enqueue_many([{"n": 1}, {"n": 2}])
    handle = queue.claim("w")
    assert handle is not None
    words = [s.split()[0] for s in _traced(store, lambda: handle.ack_and_claim("w"))]
    # (SQLite traces the claim's UPDATE again as its trigger programs start.)
    assert (words[0], words[1], words[-1]) == ("BEGIN", "DELETE", "COMMIT")
    assert set(words[2:-1]) == {"UPDATE"}


def test_an_enqueue_of_many_jobs_is_all_or_nothing_when_a_later_batch_fails(
    store: Store, raw: sqlite3.Connection
) -> None:
    _refuse(raw, JOBS, "INSERT", f"NEW.payload = '{BOOM}'")
    payloads: list[object] = [{"n": n} for n in range(100)]
    payloads[70] = "boom"  # in the second batch: the first 64 rows were inserted already
    with pytest.raises(sqlite3.IntegrityError, match="refused by the test"):
        store.queue("q").enqueue_many(payloads)
    assert _count(raw, JOBS) == 0


def test_a_stream_append_that_fails_skips_no_offset(store: Store, raw: sqlite3.Connection) -> None:
    _refuse(raw, STREAM_EVENTS, "INSERT", f"NEW.payload = '{BOOM}'")
    stream = store.stream("s")
    assert stream.append("first") == 1
    with pytest.raises(sqlite3.IntegrityError, match="refused by the test"):
        stream.append("boom")  # its offset was allocated before its insert failed
    assert stream.append("second") == 2


def test_a_redrive_that_fails_leaves_the_dead_job_and_no_copy(
    store: Store, raw: sqlite3.Connection
) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("gave up")
    _refuse(raw, DEAD, "DELETE", "1")  # the copy is inserted before its dead row goes
    with pytest.raises(sqlite3.IntegrityError, match="refused by the test"):
        queue.redrive([job_id])
    assert _count(raw, JOBS) == 0
    assert _count(raw, DEAD) == 1


def test_a_write_part_of_which_committed_is_not_run_again_behind_an_outside_lock(
    store: Store, raw: sqlite3.Connection
) -> None:
    # The unit's first insert commits; then a connection outside alkstore takes the
    # write lock, so the second insert is refused. Running the unit again once the
    # lock is free would insert the first row twice.
    driver = sqlite_driver(store)

    def work(c: sqlite3.Connection) -> None:
        c.execute("CREATE TABLE IF NOT EXISTS marks (n INTEGER)")
        c.execute("INSERT INTO marks (n) VALUES (1)")
        if not raw.in_transaction:
            raw.execute("BEGIN IMMEDIATE")
        c.execute("INSERT INTO marks (n) VALUES (2)")

    try:
        with pytest.raises(EngineUnavailable, match="cannot be tried again"):
            driver.write(work)
    finally:
        if raw.in_transaction:
            raw.execute("COMMIT")
    assert raw.execute("SELECT n FROM marks").fetchall() == [(1,)]


def test_a_write_whose_statements_so_far_changed_nothing_is_run_again(
    store: Store, raw: sqlite3.Connection
) -> None:
    # A refused ack (no row changed) commits nothing: the unit may run again.
    driver = sqlite_driver(store)
    runs: list[int] = []

    def work(c: sqlite3.Connection) -> None:
        runs.append(1)
        if len(runs) > 1 and raw.in_transaction:
            raw.execute("COMMIT")  # the outside lock is gone by the second run
        c.execute(f"DELETE FROM {JOBS} WHERE id = 0")
        if len(runs) == 1:
            raw.execute("BEGIN IMMEDIATE")
        c.execute(f"UPDATE {JOBS} SET priority = 1 WHERE id = 0")

    driver.write(work)
    assert len(runs) == 2


def test_a_write_refused_before_anything_committed_is_run_again(
    store: Store, raw: sqlite3.Connection
) -> None:
    driver = sqlite_driver(store)
    raw.execute("BEGIN IMMEDIATE")
    runs: list[int] = []

    def work(c: sqlite3.Connection) -> None:
        runs.append(1)
        if len(runs) > 1 and raw.in_transaction:
            raw.execute("COMMIT")  # the outside lock is gone by the second run
        c.execute("CREATE TABLE IF NOT EXISTS marks (n INTEGER)")
        c.execute("INSERT INTO marks (n) VALUES (1)")

    driver.write(work)
    assert len(runs) == 2
    assert raw.execute("SELECT n FROM marks").fetchall() == [(1,)]


def test_an_ack_batch_longer_than_one_statement_is_all_or_nothing(
    store: Store, raw: sqlite3.Connection
) -> None:
    queue = store.queue("q")
    ids = queue.enqueue_many([{"n": n} for n in range(300)])
    assert len(queue.claim_batch("w", 300)) == 300
    # ACK_SIZES[-1] ids per statement: the refused id is in the second statement.
    _refuse(raw, JOBS, "DELETE", f"OLD.id = {ids[280]}")
    with pytest.raises(sqlite3.IntegrityError, match="refused by the test"):
        queue.ack_batch(ids, "w")
    assert _count(raw, JOBS) == 300
