"""Locks held outside alkstore: waited for up to busy_timeout_s, then EngineUnavailable."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_helpers import StoreFactory, sqlite_driver

from alkstore import EngineUnavailable
from alkstore_sqlite.migrations import JOBS


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


def test_busy_timeout_s_is_the_whole_wait_not_a_wait_per_mechanism(
    open_store: StoreFactory, outsider: sqlite3.Connection
) -> None:
    # A documented option, checked both ways: SQLite's busy handler and the
    # driver's retries once waited busy_timeout_s each (2 s here).
    store = open_store(busy_timeout_s=1)
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match="busy_timeout_s=1"):
        store.queue("q").enqueue({"n": 1})
    assert 0.8 <= time.monotonic() - started <= 1.8


def test_a_shorter_caller_timeout_bounds_the_wait(
    open_store: StoreFactory, outsider: sqlite3.Connection
) -> None:
    driver = sqlite_driver(open_store(busy_timeout_s=30))
    started = time.monotonic()
    with pytest.raises(EngineUnavailable, match="caller's remaining timeout"):
        driver.write(lambda c: c.execute(f"DELETE FROM {JOBS} WHERE id = 0"), wait_s=0.3)
    assert 0.2 <= time.monotonic() - started <= 1.5


def test_claim_wait_returns_none_at_its_timeout_behind_an_outside_writer(
    open_store: StoreFactory, outsider: sqlite3.Connection
) -> None:
    queue = open_store(busy_timeout_s=30).queue("q")
    started = time.monotonic()
    assert queue.claim_wait("w", timeout=1) is None
    assert time.monotonic() - started < 3.0


def test_reads_do_not_wait_for_writers(
    open_store: StoreFactory, outsider: sqlite3.Connection
) -> None:
    store = open_store(busy_timeout_s=0.2)
    assert store.queue("q").get_job(1) is None
    assert store.lock("l").holder() is None
