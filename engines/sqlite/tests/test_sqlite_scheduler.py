"""The scheduler's rows on SQLite: a one-statement upsert, a compare-and-set advance that
commits with its fire, and a leader that does not write when others commit."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import StoreFactory

from alkstore import StopToken, Store
from alkstore.core import CoreStore
from alkstore.driver import ScheduleRecord
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


class Boom(Exception):
    pass


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
