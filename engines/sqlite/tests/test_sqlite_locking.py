"""Locks held outside alkstore: waited for up to busy_timeout_s, then EngineUnavailable."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_helpers import StoreFactory

from alkstore import EngineUnavailable


@pytest.fixture
def outsider(db_path: Path, open_store: StoreFactory) -> Iterator[sqlite3.Connection]:
    """A connection alkstore does not control, holding the database's write lock."""
    open_store().close()  # the schema exists
    conn = sqlite3.connect(str(db_path), isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    yield conn
    conn.close()


def test_a_write_waits_for_an_outside_writer_and_then_succeeds(
    open_store: StoreFactory, outsider: sqlite3.Connection
) -> None:
    store = open_store(busy_timeout_s=30)
    release = threading.Timer(0.2, lambda: outsider.execute("COMMIT"))
    release.start()
    try:
        job_id = store.queue("q").enqueue({"n": 1})
    finally:
        release.join()
    assert store.queue("q").get_job(job_id) is not None


def test_a_lock_held_past_the_busy_timeout_is_engine_unavailable(
    open_store: StoreFactory, outsider: sqlite3.Connection
) -> None:
    store = open_store(busy_timeout_s=0.2)
    with pytest.raises(EngineUnavailable, match="busy_timeout_s") as raised:
        store.queue("q").enqueue({"n": 1})
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    outsider.execute("ROLLBACK")
    assert store.queue("q").enqueue({"n": 2}) > 0  # the store is fine afterwards


def test_reads_do_not_wait_for_writers(
    open_store: StoreFactory, outsider: sqlite3.Connection
) -> None:
    store = open_store(busy_timeout_s=0.2)
    assert store.queue("q").get_job(1) is None
    assert store.lock("l").holder() is None
