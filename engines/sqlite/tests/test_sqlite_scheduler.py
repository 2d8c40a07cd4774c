"""The scheduler's rows on SQLite: a one-statement upsert, a compare-and-set advance that
commits with its fire, and a leader that does not write when others commit."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import StoreFactory, tick_at

from alkstore import StopToken, Store
from alkstore.core import CoreStore
from alkstore.driver import ScheduleRecord
from alkstore.options import NewJob
from alkstore.testing import FakeClock
from alkstore_sqlite import SqliteDriver

START = 1_700_000_000


def _record(
    spec: str = "@every 10s", next_fire_at: int = START + 10, **fields: Any
) -> ScheduleRecord:
    values: dict[str, Any] = {
        "name": "s",
        "spec": spec,
        "queue": "q",
        "payload": '{"v": 1}',
        "priority": 0,
        "max_attempts": None,
        "expires_s": None,
        "interval_s": 10,
        "next_fire_at": next_fire_at,
    }
    values.update(fields)
    return ScheduleRecord(**values)


def _driver(store: Store) -> SqliteDriver:
    assert isinstance(store, CoreStore)
    driver = store.driver
    assert isinstance(driver, SqliteDriver)
    return driver


@pytest.fixture
def conn(db_path: Path, store: Store) -> Iterator[sqlite3.Connection]:
    """A connection of our own to the store's (migrated) file, in autocommit mode."""
    connection = sqlite3.connect(str(db_path), isolation_level=None)
    yield connection
    connection.close()


def _stored(store: Store) -> ScheduleRecord:
    driver = _driver(store)
    record = driver.read(lambda c: driver.schedule_get(c, "s"))
    assert record is not None
    return record


def test_upserting_a_schedule_is_one_statement(store: Store, conn: sqlite3.Connection) -> None:
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record()))
    statements: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    conn.set_trace_callback(statements.append)
    driver.schedule_upsert(conn, _record(payload='{"v": 2}'))
    conn.set_trace_callback(None)
    conn.execute("COMMIT")
    assert len(statements) == 1, statements
    assert _stored(store).payload == '{"v": 2}'


def test_an_unchanged_spec_keeps_its_stored_boundary(store: Store) -> None:
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    again = _record(next_fire_at=START + 99, queue="other", priority=5)
    driver.write(lambda c: driver.schedule_upsert(c, again))
    assert _stored(store) == _record(next_fire_at=START + 10, queue="other", priority=5)


def test_a_changed_spec_takes_the_new_boundary(store: Store) -> None:
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    changed = _record(spec="@every 60s", interval_s=60, next_fire_at=START + 60)
    driver.write(lambda c: driver.schedule_upsert(c, changed))
    assert _stored(store) == changed


def test_advancing_is_a_compare_and_set_on_the_boundary(store: Store) -> None:
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    assert driver.write(lambda c: driver.schedule_advance(c, "s", START + 10, START + 20))
    assert not driver.write(lambda c: driver.schedule_advance(c, "s", START + 10, START + 20))
    assert not driver.write(lambda c: driver.schedule_advance(c, "nope", START + 20, START + 30))
    assert _stored(store).next_fire_at == START + 20


class Boom(Exception):
    pass


def test_a_fire_that_fails_after_its_advance_leaves_the_boundary_and_no_job(store: Store) -> None:
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    job = NewJob(
        queue="q",
        payload="1",
        priority=0,
        created_at=START + 10,
        run_at=START + 10,
        expires_at=None,
        max_attempts=3,
        visibility_timeout_s=300,
        backoff_base_s=5,
        dead_letter_retention_s=None,
    )

    def fire_then_fail(c: sqlite3.Connection) -> None:
        assert driver.schedule_advance(c, "s", START + 10, START + 20)
        driver.insert_jobs(c, [job])
        raise Boom

    with pytest.raises(Boom):
        driver.write(fire_then_fail)
    assert _stored(store).next_fire_at == START + 10
    assert store.queue("q").claim("w") is None


def test_concurrent_tickers_fire_each_boundary_once(open_store: StoreFactory, url: str) -> None:
    open_store(clock=FakeClock(START)).schedule("s", "@every 10s", "q", {"v": 1})
    due = 40  # below the catch-up cap: every due boundary fires, none is skipped
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    # One worker id for all: each re-acquires "its own" leadership lock, so they all
    # tick at once and only the row's compare-and-set keeps them apart.
    tickers = [
        ctx.Process(target=tick_at, args=(url, START + due * 10, "rogue", 3, results))
        for _ in range(3)
    ]
    for ticker in tickers:
        ticker.start()
    fired = [results.get(timeout=120) for _ in tickers]
    for ticker in tickers:
        ticker.join(timeout=60)
    assert sum(fired) == due, fired
    store = open_store(clock=FakeClock(START + due * 10))
    assert len(store.queue("q").claim_batch("w", 1000)) == due
    schedule = store.get_schedule("s")
    assert schedule is not None
    assert schedule.next_fire_at == START + (due + 1) * 10


def test_a_leader_does_not_write_when_other_connections_commit(
    open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader = open_store()
    leader.schedule("s", "@every 1h", "q", {"v": 1})
    driver = _driver(leader)
    renewals: list[int] = []
    renew = driver.lock_renew

    def counted(c: sqlite3.Connection, *args: Any) -> bool:
        renewals.append(1)
        return renew(c, *args)

    monkeypatch.setattr(driver, "lock_renew", counted)
    stop = StopToken()
    leading = threading.Thread(target=leader.run_schedules, args=(stop,), kwargs={"worker_id": "L"})
    leading.start()
    try:
        queue = open_store().queue("work")
        for n in range(50):
            queue.enqueue({"n": n})  # each commit wakes every waiter of the process
            time.sleep(0.002)  # let the watcher see them one by one (sequencing only)
    finally:
        stop.stop()
        leading.join()
    # One renewal on taking the lead (the next is due a third of the lease later);
    # a leader that renewed on every wake would have written about 50 times.
    assert len(renewals) <= 2, len(renewals)
