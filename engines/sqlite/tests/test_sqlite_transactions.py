"""store.transaction() and store.attach(conn) on SQLite connections."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_helpers import StoreFactory

from alkstore import EnqueueOpts, InvalidOptions, JobState, Store, WriteWouldDeadlock


class Boom(Exception):
    pass


@pytest.fixture
def caller(db_path: Path, store: Store) -> Iterator[sqlite3.Connection]:
    """The caller's own connection to the store's file, in its own transaction."""
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
    conn.execute("BEGIN IMMEDIATE")
    yield conn
    conn.close()


def test_the_transaction_handle_is_the_sqlite3_connection(store: Store) -> None:
    with store.transaction() as tx:
        assert isinstance(tx.connection, sqlite3.Connection)
        assert tx.connection.in_transaction


def test_execute_takes_qmark_parameters_and_commits_with_the_job(store: Store) -> None:
    with store.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        tx.execute("INSERT INTO orders (id) VALUES (?)", (7,))
        job_id = tx.enqueue("emails", {"order": 7})
    with store.transaction() as tx:
        assert tx.execute("SELECT id FROM orders").fetchall() == [(7,)]
    job = store.queue("emails").get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING


def test_a_rolled_back_transaction_leaves_no_job_and_no_business_row(store: Store) -> None:
    with store.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    job_ids: list[int] = []

    def order_then_fail() -> None:
        with store.transaction() as tx:
            tx.execute("INSERT INTO orders (id) VALUES (?)", (7,))
            job_ids.append(tx.enqueue("emails", {"order": 7}))
            raise Boom

    with pytest.raises(Boom):
        order_then_fail()
    assert store.queue("emails").get_job(job_ids[0]) is None
    assert store.queue("emails").claim("w") is None
    with store.transaction() as tx:
        assert tx.execute("SELECT count(*) FROM orders").fetchone() == (0,)


def test_a_store_write_inside_a_transaction_on_the_same_thread_is_refused(
    store: Store,
) -> None:
    queue = store.queue("emails")

    def nested_write() -> None:
        with store.transaction() as tx:
            tx.enqueue("emails", {"n": 1})
            queue.enqueue({"n": 2})

    with pytest.raises(WriteWouldDeadlock, match="one writer"):
        nested_write()
    # The refusal rolled the transaction back and released the writer lock.
    assert queue.claim("w") is None
    assert queue.enqueue({"n": 3}) > 0


def test_a_read_inside_a_transaction_sees_committed_state_only(store: Store) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue("emails", {"n": 1})
        assert store.queue("emails").get_job(job_id) is None  # another connection
        assert tx.get_job_tx("emails", job_id) is not None  # this transaction
    assert store.queue("emails").get_job(job_id) is not None


def test_a_transaction_the_caller_committed_itself_still_ends_cleanly(store: Store) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue("emails", {"n": 1})
        tx.execute("COMMIT")
    assert store.queue("emails").get_job(job_id) is not None
    assert store.queue("emails").enqueue({"n": 2}) > job_id


# -- attach -----------------------------------------------------------------------


def test_attach_runs_inside_the_callers_transaction_and_never_commits(
    store: Store, caller: sqlite3.Connection
) -> None:
    caller.execute("INSERT INTO orders (id) VALUES (?)", (7,))
    with store.attach(caller) as tx:
        assert tx.connection is caller
        job_id = tx.enqueue("emails", {"order": 7})
    assert caller.in_transaction
    assert store.queue("emails").get_job(job_id) is None  # not committed yet
    caller.execute("COMMIT")
    assert store.queue("emails").get_job(job_id) is not None


def test_attach_rolls_back_with_the_caller(store: Store, caller: sqlite3.Connection) -> None:
    with store.attach(caller) as tx:
        job_id = tx.enqueue("emails", {"order": 7})
    caller.execute("ROLLBACK")
    assert store.queue("emails").get_job(job_id) is None


def test_attach_accepts_sqlite3s_implicit_transactions(store: Store, db_path: Path) -> None:
    conn = sqlite3.connect(str(db_path))  # default isolation: DML opens a transaction
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        conn.execute("INSERT INTO orders (id) VALUES (7)")
        with store.attach(conn) as tx:
            job_id = tx.enqueue("emails", {"order": 7})
            job = tx.get_job_tx("emails", job_id)
            assert job is not None
            assert job.payload == {"order": 7}
        conn.commit()
    finally:
        conn.close()
    assert store.queue("emails").get_job(job_id) is not None


def test_attach_refuses_what_is_not_a_sqlite3_connection(store: Store) -> None:
    with pytest.raises(InvalidOptions, match=r"sqlite3\.Connection"), store.attach(object()):
        pass


def test_attach_refuses_a_connection_to_another_file(store: Store, tmp_path: Path) -> None:
    other = sqlite3.connect(str(tmp_path / "other.db"), isolation_level=None)
    other.execute("BEGIN")
    try:
        with pytest.raises(InvalidOptions, match="database file"), store.attach(other):
            pass
    finally:
        other.close()


def test_attach_refuses_an_in_memory_connection(store: Store) -> None:
    memory = sqlite3.connect(":memory:", isolation_level=None)
    memory.execute("BEGIN")
    try:
        with pytest.raises(InvalidOptions, match="in memory"), store.attach(memory):
            pass
    finally:
        memory.close()


def test_attach_refuses_a_connection_outside_a_transaction_and_says_why(
    store: Store, db_path: Path
) -> None:
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        with pytest.raises(InvalidOptions, match="autocommit") as refused, store.attach(conn):
            pass
        assert "commit on its own" in str(refused.value)
    finally:
        conn.close()


def test_attached_commit_wakes_a_waiter_of_the_same_process(
    open_store: StoreFactory, db_path: Path
) -> None:
    waiting = open_store(repoll_s=3600).queue("emails")
    result: list[object] = []
    waiter = threading.Thread(target=lambda: result.append(waiting.claim_wait("w", timeout=30)))
    waiter.start()
    time.sleep(0.2)  # let the waiter block first (sequencing only)
    writer = open_store()
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        with writer.attach(conn) as tx:
            job_id = tx.enqueue("emails", {"n": 1})
        conn.execute("COMMIT")
    finally:
        conn.close()
    waiter.join()
    (handle,) = result
    assert handle is not None
    assert handle.id == job_id  # type: ignore[attr-defined]


def test_an_attached_ack_releases_dependents_on_a_connection_without_recursive_triggers(
    store: Store, db_path: Path
) -> None:
    # The engine's own connections turn recursive_triggers on (a dead job's dependents
    # are dead-lettered level by level); a caller's connection has it off, and the
    # release an ack fires must not need it.
    q = store.queue("orders")
    first = q.enqueue({"step": 1})
    second = q.enqueue({"step": 2}, EnqueueOpts(after=[first]))
    third = q.enqueue({"step": 3}, EnqueueOpts(after=[second]))
    report = q.enqueue({"report": True}, EnqueueOpts(after_finished=[first]))
    handle = q.claim("w")
    assert handle is not None
    assert handle.id == first
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        assert conn.execute("PRAGMA recursive_triggers").fetchone() == (0,)
        conn.execute("BEGIN IMMEDIATE")
        with store.attach(conn) as tx:
            tx.ack(handle)
        conn.execute("COMMIT")
    finally:
        conn.close()
    states = {
        job_id: getattr(q.get_job(job_id), "state", None)
        for job_id in (first, second, third, report)
    }
    assert states == {
        first: None,
        second: JobState.PENDING,
        third: JobState.WAITING,
        report: JobState.PENDING,
    }


def test_an_attached_fail_dead_letters_dependents_on_a_connection_without_recursive_triggers(
    store: Store, db_path: Path
) -> None:
    # As for tx.ack above: a dead job's dependents die level by level, and the caller's
    # connection (recursive_triggers off) must see all of them die, as handle.fail does.
    q = store.queue("orders")
    first = q.enqueue({"step": 1})
    second = q.enqueue({"step": 2}, EnqueueOpts(after=[first]))
    third = q.enqueue({"step": 3}, EnqueueOpts(after=[second]))
    handle = q.claim("w")
    assert handle is not None
    assert handle.id == first
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        assert conn.execute("PRAGMA recursive_triggers").fetchone() == (0,)
        conn.execute("BEGIN IMMEDIATE")
        with store.attach(conn) as tx:
            tx.fail(handle, "no such card")
        conn.execute("COMMIT")
        assert conn.execute("PRAGMA recursive_triggers").fetchone() == (0,)  # left as it was
    finally:
        conn.close()
    states = [getattr(q.get_job(job_id), "state", None) for job_id in (first, second, third)]
    assert states == [JobState.DEAD, JobState.DEAD, JobState.DEAD]
