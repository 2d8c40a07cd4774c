"""Streams on PostgreSQL: offsets from a per-stream counter row that a concurrent
append waits on and a rollback takes back; a lone append is one statement.

The seam's stream rules run in the kit's driver suite
(``test_postgres_driver_suite.py``); gap safety under concurrent appenders is the
kit's STREAM-OFFSETS-MONOTONIC-GAP-SAFE."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pg_helpers import (
    BackgroundCall,
    CountingConnection,
    StoreFactory,
    blocked_on_a_lock,
    wait_until,
)

from alkstore import Store
from alkstore_postgres import PostgresDriver


class Boom(Exception):
    pass


def _offsets(store: Store, stream: str = "s") -> list[int]:
    return [event.offset for event in store.stream(stream).read(limit=1000)]


def _driver(store: Store) -> PostgresDriver:
    driver = getattr(store, "driver", None)
    assert isinstance(driver, PostgresDriver)
    return driver


def test_a_rolled_back_append_leaves_no_event_and_no_gap(open_store: StoreFactory) -> None:
    store = open_store()
    stream = store.stream("s")
    stream.append("kept")

    def append_then_fail() -> None:
        with store.transaction() as tx:
            tx.stream_append("s", "rolled back")
            raise Boom

    with pytest.raises(Boom):
        append_then_fail()
    assert [event.payload for event in stream.read()] == ["kept"]
    # The counter rolled back with the event: the offset never existed, and the
    # next committed event follows the last committed one.
    assert stream.append("next") == 2


def test_an_attached_append_commits_and_rolls_back_with_the_caller(
    open_store: StoreFactory, pg_dsn: str
) -> None:
    store = open_store()
    with psycopg.connect(pg_dsn) as conn:
        with store.attach(conn) as tx:
            tx.stream_append("s", "rolled back")
        conn.rollback()
        assert _offsets(store) == []
        with store.attach(conn) as tx:
            offset = tx.stream_append("s", "committed")
        assert _offsets(store) == []  # not before the caller commits
        conn.commit()
    assert _offsets(store) == [offset] == [1]


def test_the_largest_offsets_fit(open_store: StoreFactory) -> None:
    stream = open_store().stream("s")
    stream.append(1)
    stream.append(2)
    largest = 2**63 - 1
    stream.commit("c", largest)
    assert stream.offset("c") == largest
    assert stream.read(after=largest) == []
    assert stream.trim_to(largest) == 2
    assert stream.append(3) == 3


def test_an_appender_waits_for_an_open_append_to_the_same_stream(
    open_store: StoreFactory, admin: psycopg.Connection[Any]
) -> None:
    store = open_store()
    stream = store.stream("s")
    with store.transaction() as tx:
        held = tx.stream_append("s", "held open")
        later = BackgroundCall(lambda: stream.append("later"))
        # The later append waits on the stream's counter row: nothing is readable,
        # in particular not an offset above the uncommitted one.
        assert wait_until(lambda: blocked_on_a_lock(admin, "alkstore_streams"))
        assert stream.read() == []
        assert not later.done
        other = store.stream("other").append("another stream is not held up")
    assert (held, later.result(), other) == (1, 2, 1)
    assert _offsets(store) == [1, 2]


def test_a_lone_append_is_one_statement(open_store: StoreFactory, pg_dsn: str) -> None:
    store = open_store()
    counting = CountingConnection.open(pg_dsn)
    try:
        with counting.transaction(), store.attach(counting) as tx:
            counting.executed.clear()
            tx.stream_append("s", "one")
        # The offset allocation, the insert and the wake's NOTIFY: one statement.
        assert len(counting.executed) == 1
    finally:
        counting.close()
