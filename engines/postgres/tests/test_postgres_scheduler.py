"""The scheduler's rows on PostgreSQL: a one-statement upsert, and a compare-and-set
advance that waits for the row lock and commits together with the job it fires,
although the engine's other write units run in autocommit."""

from __future__ import annotations

from typing import Any

import psycopg
from pg_helpers import (
    BackgroundCall,
    CountingConnection,
    StoreFactory,
    blocked_on_a_lock,
    wait_until,
)
from psycopg import pq

from alkstore import Store
from alkstore.options import JobStamps
from alkstore.params import ScheduleAdvance
from alkstore.rows import ScheduleRecord
from alkstore.testing import FakeClock
from alkstore_postgres import PostgresDriver
from alkstore_postgres.handle import PgHandle

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


FIRED = JobStamps(
    queue="q",
    priority=0,
    created_at=START + 10,
    run_at=START + 10,
    expires_at=None,
    max_attempts=3,
    visibility_timeout_s=300,
    backoff_base_s=5,
    dead_letter_retention_s=None,
)
"""The stamps of the job a fire of ``_record()`` at ``START + 10`` inserts."""

ADVANCE = ScheduleAdvance(name="s", expected=START + 10, new_fire_at=START + 20)
"""The fire of ``_record()``'s boundary at ``START + 10``."""


def _driver(store: Store) -> PostgresDriver:
    driver = getattr(store, "driver", None)
    assert isinstance(driver, PostgresDriver)
    return driver


def _stored(store: Store) -> ScheduleRecord:
    driver = _driver(store)
    record = driver.read(lambda c: driver.schedule_get(c, "s"))
    assert record is not None
    return record


def test_upserting_a_schedule_is_one_statement(open_store: StoreFactory, pg_dsn: str) -> None:
    store = open_store()
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record()))
    counting = CountingConnection.open(pg_dsn)
    try:
        with counting.transaction():
            driver.schedule_upsert(PgHandle(counting, standalone=False), _record(payload="2"))
        assert len(counting.executed) == 1
    finally:
        counting.close()
    assert _stored(store).payload == "2"


def test_a_second_advance_waits_for_the_row_lock_then_finds_the_boundary_moved(
    open_store: StoreFactory, admin: psycopg.Connection[Any]
) -> None:
    store = open_store()
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    with driver.transaction() as first:
        assert driver.schedule_advance(first, ADVANCE)
        second = BackgroundCall(lambda: driver.write(lambda c: driver.schedule_advance(c, ADVANCE)))
        assert wait_until(lambda: blocked_on_a_lock(admin, "alkstore_schedules"))
        assert not second.done
    assert second.result() is False
    assert _stored(store).next_fire_at == START + 20


def test_a_fire_is_invisible_until_its_advance_and_job_commit_together(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store(clock=FakeClock(START + 10))
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    seen_mid_fire: list[tuple[Any, ...]] = []

    def fire(c: PgHandle) -> None:
        assert driver.schedule_advance(c, ADVANCE)
        driver.insert_jobs(c, FIRED, ['{"v": 1}'])
        # From outside, before the unit returns: neither the advance nor the job.
        row = admin.execute(
            f'SELECT (SELECT next_fire_at FROM "{schema}".alkstore_schedules),'
            f' (SELECT count(*) FROM "{schema}".alkstore_jobs)'
        ).fetchone()
        assert row is not None
        seen_mid_fire.append(tuple(row))

    driver.write(fire)
    assert seen_mid_fire == [(START + 10, 0)]
    assert _stored(store).next_fire_at == START + 20
    assert store.queue("q").claim("w") is not None


def test_a_write_unit_leaves_its_connection_idle_in_autocommit(open_store: StoreFactory) -> None:
    store = open_store(pool_max_size=1)  # the unit's connection is the next unit's
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    driver.write(lambda c: driver.schedule_advance(c, ADVANCE))

    def state(c: PgHandle) -> tuple[bool, pq.TransactionStatus]:
        return c.conn.autocommit, c.conn.info.transaction_status

    assert driver.write(state) == (True, pq.TransactionStatus.IDLE)
