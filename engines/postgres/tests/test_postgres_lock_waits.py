"""Locks held by another session: every call waits at most lock_timeout_s, a waiting
call no longer than its own remaining time (lock_waits)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pg_helpers import StoreFactory
from psycopg import sql

from alkstore import EngineUnavailable
from alkstore_postgres.lock_waits import SLICE_MS
from alkstore_postgres.testing.contention import ENGINE_TABLES

GENEROUS_S = 3.0
"""Each call below is limited to 1 s or less; without the limit it waits for the holder."""


@pytest.fixture
def holder(pg_dsn: str, schema: str, open_store: StoreFactory) -> Iterator[psycopg.Connection[Any]]:
    """Another session holding every engine table of the schema IN EXCLUSIVE MODE
    (writes wait, plain reads go on); rolled back afterwards. Open the test's stores
    before asking for it (opening writes too)."""
    with psycopg.connect(pg_dsn) as conn:
        tables = [row[0] for row in conn.execute(ENGINE_TABLES, {"schema": schema})]
        conn.execute(
            sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(
                sql.SQL(", ").join(sql.Identifier(schema, t) for t in tables)
            )
        )
        yield conn
        conn.rollback()


def _elapsed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    try:
        outcome = call()
    except EngineUnavailable as exc:
        outcome = exc
    return outcome, time.monotonic() - started


@pytest.fixture
def held(request: pytest.FixtureRequest) -> Any:
    """``held(store)``: ``store`` once ``holder`` holds its tables."""

    def hold(store: Any) -> Any:
        request.getfixturevalue("holder")
        return store

    return hold


def test_a_write_behind_a_held_lock_raises_engine_unavailable_after_lock_timeout_s(
    open_store: StoreFactory, held: Any
) -> None:
    queue = held(open_store(lock_timeout_s=1)).queue("q")
    outcome, elapsed = _elapsed(lambda: queue.enqueue({"n": 1}))
    assert isinstance(outcome, EngineUnavailable)
    assert "lock_timeout_s=1" in str(outcome)
    assert isinstance(outcome.__cause__, psycopg.errors.LockNotAvailable)
    assert 0.8 <= elapsed < GENEROUS_S


def test_a_transaction_behind_a_held_lock_raises_engine_unavailable(
    open_store: StoreFactory, held: Any
) -> None:
    store = held(open_store(lock_timeout_s=1))

    def transact() -> None:
        with store.transaction() as tx:
            tx.enqueue("q", {"n": 1})

    outcome, elapsed = _elapsed(transact)
    assert isinstance(outcome, EngineUnavailable)
    assert elapsed < GENEROUS_S


def test_claim_wait_returns_none_at_its_timeout_behind_a_held_lock(
    open_store: StoreFactory, held: Any
) -> None:
    queue = held(open_store(lock_timeout_s=30)).queue("q")  # only the caller's timeout is short
    outcome, elapsed = _elapsed(lambda: queue.claim_wait("w", timeout=0.5))
    assert outcome is None
    assert elapsed < GENEROUS_S


def test_plain_reads_go_on_beside_a_lock_that_excludes_writers(
    open_store: StoreFactory, held: Any
) -> None:
    queue = held(open_store(lock_timeout_s=30)).queue("q")
    outcome, elapsed = _elapsed(lambda: queue.get_job(1))
    assert outcome is None
    assert elapsed < GENEROUS_S


def test_opening_a_store_behind_a_held_lock_raises_engine_unavailable(
    open_store: StoreFactory, held: Any
) -> None:
    held(open_store())  # the tables exist, then they are held
    outcome, elapsed = _elapsed(lambda: open_store(lock_timeout_s=1))
    assert isinstance(outcome, EngineUnavailable)
    assert elapsed < GENEROUS_S


def test_a_write_after_a_waiting_call_still_waits_out_a_short_hold(
    pg_dsn: str, schema: str, open_store: StoreFactory
) -> None:
    # One pooled connection: the claim_wait leaves it at the short slice, and the
    # enqueue after it must still wait its whole limit (in slices), not give up.
    store = open_store(pool_min_size=1, pool_max_size=1, lock_timeout_s=30)
    queue = store.queue("q")
    assert queue.claim_wait("w", timeout=0.01) is None
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(
                sql.Identifier(schema, "alkstore_jobs")
            )
        )
        release = threading.Timer(5 * SLICE_MS / 1000, conn.rollback)
        release.start()
        try:
            job_id = queue.enqueue({"n": 1})
        finally:
            release.join()
    assert queue.get_job(job_id) is not None


def test_a_transaction_waits_its_whole_limit_on_a_connection_a_waiting_call_used(
    open_store: StoreFactory,
) -> None:
    store = open_store(pool_min_size=1, pool_max_size=1, lock_timeout_s=7)
    assert store.queue("q").claim_wait("w", timeout=0.01) is None
    with store.transaction() as tx:
        (setting,) = tx.connection.execute("SHOW lock_timeout").fetchone()
    assert setting == "7s"


def test_lock_timeout_s_is_the_setting_of_a_call_without_a_timeout(
    open_store: StoreFactory,
) -> None:
    store = open_store(pool_min_size=1, pool_max_size=1, lock_timeout_s=2.5)
    store.queue("q").enqueue({"n": 1})
    with store.transaction() as tx:
        (setting,) = tx.connection.execute("SHOW lock_timeout").fetchone()
    assert setting == "2500ms"
