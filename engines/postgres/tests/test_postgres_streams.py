"""Streams on PostgreSQL: offsets from a per-stream counter row, never reused, and
gap-safe for readers while appenders in several threads and processes commit."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import psycopg
import pytest
from pg_helpers import (
    BackgroundCall,
    CountingConnection,
    StoreFactory,
    append_events,
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


def test_offsets_continue_after_trim_to_deleted_every_event(open_store: StoreFactory) -> None:
    stream = open_store().stream("s")
    for n in range(3):
        stream.append(n)
    assert stream.trim_to(10) == 3
    assert stream.read() == []
    assert stream.append("next") == 4
    assert open_store().stream("s").append("after reopening") == 5


def test_each_stream_counts_its_own_offsets(open_store: StoreFactory) -> None:
    store = open_store()
    store.stream("a").append(1)
    store.stream("a").append(2)
    assert store.stream("b").append(1) == 1


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


def test_appends_of_one_call_take_consecutive_offsets_in_order(open_store: StoreFactory) -> None:
    store = open_store()
    driver = _driver(store)
    store.stream("s").append("first")
    offsets = driver.write(lambda c: driver.stream_append(c, "s", ['"a"', '"b"', '"c"'], 7))
    assert offsets == [2, 3, 4]
    assert [(e.offset, e.payload, e.created_at) for e in store.stream("s").read(after=1)] == [
        (2, "a", 7),
        (3, "b", 7),
        (4, "c", 7),
    ]


def test_consumer_offsets_are_kept_per_stream_and_consumer(open_store: StoreFactory) -> None:
    store = open_store()
    store.stream("a").commit("c1", 5)
    store.stream("a").commit("c2", 7)
    store.stream("b").commit("c1", 9)
    store.stream("a").commit("c1", 3)  # a consumer may rewind to replay
    assert [store.stream("a").offset("c1"), store.stream("a").offset("c2")] == [3, 7]
    assert [store.stream("b").offset("c1"), store.stream("b").offset("c3")] == [9, 0]


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


def test_concurrent_appenders_never_let_a_reader_see_an_offset_before_a_smaller_one(
    open_store: StoreFactory, pg_dsn: str, schema: str
) -> None:
    writers, threads, count = 3, 3, 30
    # Even appends are transactions of two events, odd ones lone appends.
    total = writers * threads * (count // 2 * 2 + count // 2)
    store = open_store()
    stream = store.stream("s")
    stream.append("first")  # the counter row exists: appenders only ever update it
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    appenders = [
        ctx.Process(
            target=append_events, args=(pg_dsn, schema, "s", f"w{i}", threads, count, results)
        )
        for i in range(writers)
    ]
    for appender in appenders:
        appender.start()
    seen = 1
    out_of_order: list[tuple[int, list[int]]] = []
    reads = 0
    give_up_at = time.monotonic() + 180  # a safety net for a broken engine, not a timing check
    while seen < total + 1 and time.monotonic() < give_up_at:
        offsets = [event.offset for event in stream.read(after=seen, limit=1000)]
        reads += 1
        if offsets != list(range(seen + 1, seen + 1 + len(offsets))):
            out_of_order.append((seen, offsets[:10]))
            break
        if offsets:
            seen = offsets[-1]
    appended: list[int] = []
    errors: list[str] = []
    for _ in appenders:
        offsets, failures = results.get(timeout=180)
        appended.extend(offsets)
        errors.extend(failures)
    for appender in appenders:
        appender.join(timeout=60)
    assert errors == []
    assert out_of_order == []
    assert seen == total + 1
    assert sorted(appended) == list(range(2, total + 2))  # every offset once, no holes
    assert reads > 1  # the reader did read while appenders were committing


def test_an_append_in_another_store_wakes_a_stream_wait(open_store: StoreFactory) -> None:
    # The safety-net re-poll is an hour: only the NOTIFY riding on the append can wake it.
    waiting_store = open_store(repoll_s=3600)
    listener = _driver(waiting_store).listener
    waiting = BackgroundCall(lambda: waiting_store.stream("s").wait(0, timeout=120))
    assert wait_until(lambda: listener.connections == 1)
    open_store().stream("s").append("wake up")
    assert waiting.result() is True


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
