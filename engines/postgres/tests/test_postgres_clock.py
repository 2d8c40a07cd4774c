"""The default clock follows the database server's clock."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from pg_helpers import StoreFactory

from alkstore import OffsetClock
from alkstore.testing import FakeClock
from alkstore_postgres import ServerClock

SKEW = 3600.0
"""A worker host whose clock is an hour behind the server's."""


def _server_now(conn: psycopg.Connection[Any]) -> float:
    row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    return float(row[0])


def test_default_clock_is_a_server_clock_measured_on_open(
    open_store: StoreFactory, admin: psycopg.Connection[Any]
) -> None:
    clock = open_store().clock
    assert isinstance(clock, ServerClock)
    assert isinstance(clock, OffsetClock)
    assert clock.measured
    assert abs(clock.now() - _server_now(admin)) < 1.0


def test_server_clock_corrects_a_skewed_host_clock(admin: psycopg.Connection[Any]) -> None:
    clock = ServerClock(local_time=lambda: time.time() - SKEW)
    offset = clock.measure(admin)
    assert abs(offset - SKEW) < 1.0
    assert abs(clock.now() - _server_now(admin)) < 1.0


def test_server_clock_passed_to_open_is_measured_and_refreshed_lazily(
    open_store: StoreFactory, admin: psycopg.Connection[Any]
) -> None:
    skew = [0.0]
    clock = ServerClock(local_time=lambda: time.time() - skew[0], refresh_s=0.0)
    store = open_store(clock=clock)
    assert store.clock is clock
    assert abs(clock.offset) < 1.0

    skew[0] = SKEW  # the host's clock jumps back an hour
    assert clock.now() < _server_now(admin) - SKEW + 1.0
    store.queue("q").enqueue("any call re-measures a due clock")

    assert abs(clock.offset - SKEW) < 1.0
    assert abs(clock.now() - _server_now(admin)) < 1.0


def test_fresh_measurement_is_not_due_again_before_its_refresh_interval(
    admin: psycopg.Connection[Any],
) -> None:
    clock = ServerClock(refresh_s=60.0)
    assert clock.due()
    clock.measure(admin)
    assert not clock.due()


def test_a_clock_given_to_open_is_used_as_is(open_store: StoreFactory) -> None:
    clock = FakeClock(1_700_000_000)
    store = open_store(clock=clock)
    assert store.clock is clock
    job_id = store.queue("q").enqueue("x")
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert job.created_at == 1_700_000_000
