"""The scheduler's rows on PostgreSQL: a one-statement upsert, and a compare-and-set
advance that waits for the row lock and commits together with the job it fires,
although the engine's other write units run in autocommit."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import psycopg
import pytest
from pg_helpers import (
    BackgroundCall,
    CountingConnection,
    StoreFactory,
    blocked_on_a_lock,
    tick_at,
    wait_until,
)
from psycopg import pq

from alkstore import Store
from alkstore.driver import ScheduleRecord
from alkstore.options import NewJob
from alkstore.testing import FakeClock
from alkstore_postgres import PostgresDriver
from alkstore_postgres.handle import PgHandle

START = 1_700_000_000


class Boom(Exception):
    pass


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


def _job(queue: str = "q") -> NewJob:
    return NewJob(
        queue=queue,
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


def test_an_unchanged_spec_keeps_its_stored_boundary(open_store: StoreFactory) -> None:
    store = open_store()
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    again = _record(next_fire_at=START + 99, queue="other", priority=5, max_attempts=7)
    driver.write(lambda c: driver.schedule_upsert(c, again))
    expected = _record(next_fire_at=START + 10, queue="other", priority=5, max_attempts=7)
    assert _stored(store) == expected


def test_a_changed_spec_takes_the_new_boundary(open_store: StoreFactory) -> None:
    store = open_store()
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    changed = _record(spec="@every 60s", interval_s=60, next_fire_at=START + 60, expires_s=30)
    driver.write(lambda c: driver.schedule_upsert(c, changed))
    assert _stored(store) == changed


def test_advancing_is_a_compare_and_set_on_the_boundary(open_store: StoreFactory) -> None:
    store = open_store()
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    assert driver.write(lambda c: driver.schedule_advance(c, "s", START + 10, START + 20))
    assert not driver.write(lambda c: driver.schedule_advance(c, "s", START + 10, START + 20))
    assert not driver.write(lambda c: driver.schedule_advance(c, "nope", START + 20, START + 30))
    assert _stored(store).next_fire_at == START + 20


def test_a_second_advance_waits_for_the_row_lock_then_finds_the_boundary_moved(
    open_store: StoreFactory, admin: psycopg.Connection[Any]
) -> None:
    store = open_store()
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    with driver.transaction() as first:
        assert driver.schedule_advance(first, "s", START + 10, START + 20)
        second = BackgroundCall(
            lambda: driver.write(lambda c: driver.schedule_advance(c, "s", START + 10, START + 20))
        )
        assert wait_until(lambda: blocked_on_a_lock(admin, "alkstore_schedules"))
        assert not second.done
    assert second.result() is False
    assert _stored(store).next_fire_at == START + 20


def test_a_fire_that_fails_after_its_advance_leaves_the_boundary_and_no_job(
    open_store: StoreFactory,
) -> None:
    store = open_store(clock=FakeClock(START + 10))
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))

    def fire_then_fail(c: PgHandle) -> None:
        assert driver.schedule_advance(c, "s", START + 10, START + 20)
        driver.insert_jobs(c, [_job()])
        raise Boom

    with pytest.raises(Boom):
        driver.write(fire_then_fail)
    assert _stored(store).next_fire_at == START + 10
    assert store.queue("q").claim("w") is None


def test_a_fire_is_invisible_until_its_advance_and_job_commit_together(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store(clock=FakeClock(START + 10))
    driver = _driver(store)
    driver.write(lambda c: driver.schedule_upsert(c, _record(next_fire_at=START + 10)))
    seen_mid_fire: list[tuple[Any, ...]] = []

    def fire(c: PgHandle) -> None:
        assert driver.schedule_advance(c, "s", START + 10, START + 20)
        driver.insert_jobs(c, [_job()])
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
    driver.write(lambda c: driver.schedule_advance(c, "s", START + 10, START + 20))

    def state(c: PgHandle) -> tuple[bool, pq.TransactionStatus]:
        return c.conn.autocommit, c.conn.info.transaction_status

    assert driver.write(state) == (True, pq.TransactionStatus.IDLE)


def test_concurrent_tickers_fire_each_boundary_once(
    open_store: StoreFactory, pg_dsn: str, schema: str
) -> None:
    open_store(clock=FakeClock(START)).schedule("s", "@every 10s", "q", {"v": 1})
    due = 40  # below the catch-up cap: every due boundary fires, none is skipped
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    # One worker id for all: each re-acquires "its own" leadership lock, so they all
    # tick at once and only the row's compare-and-set keeps them apart.
    tickers = [
        ctx.Process(target=tick_at, args=(pg_dsn, schema, START + due * 10, "rogue", 3, results))
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
