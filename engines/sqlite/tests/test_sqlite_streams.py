"""Streams on SQLite: offsets from a per-stream counter row, never reused, and gap-safe
for readers while appenders in several threads and processes commit."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import pytest
from sqlite_helpers import StoreFactory, append_events

from alkstore import Store
from alkstore.core import CoreStore
from alkstore_sqlite import SqliteDriver


class Boom(Exception):
    pass


def _offsets(store: Store, stream: str = "s") -> list[int]:
    return [event.offset for event in store.stream(stream).read(limit=1000)]


def test_offsets_continue_after_trim_to_deleted_every_event(
    store: Store, open_store: StoreFactory
) -> None:
    stream = store.stream("s")
    for n in range(3):
        stream.append(n)
    assert stream.trim_to(10) == 3
    assert _offsets(store) == []
    assert stream.append("next") == 4
    assert open_store().stream("s").append("after reopening") == 5


def test_each_stream_counts_its_own_offsets(store: Store) -> None:
    store.stream("a").append(1)
    store.stream("a").append(2)
    assert store.stream("b").append(1) == 1


def test_a_rolled_back_append_leaves_no_event_and_no_gap(store: Store) -> None:
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
    store: Store, db_path: Path
) -> None:
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        with store.attach(conn) as tx:
            tx.stream_append("s", "rolled back")
        conn.execute("ROLLBACK")
        assert _offsets(store) == []
        conn.execute("BEGIN IMMEDIATE")
        with store.attach(conn) as tx:
            offset = tx.stream_append("s", "committed")
        assert _offsets(store) == []  # not before the caller commits
        conn.execute("COMMIT")
    finally:
        conn.close()
    assert _offsets(store) == [offset] == [1]


def test_appends_of_one_call_take_consecutive_offsets_in_order(store: Store) -> None:
    assert isinstance(store, CoreStore)
    driver = store.driver
    assert isinstance(driver, SqliteDriver)
    store.stream("s").append("first")
    offsets = driver.write(lambda c: driver.stream_append(c, "s", ['"a"', '"b"', '"c"'], 7))
    assert offsets == [2, 3, 4]
    assert [(e.offset, e.payload, e.created_at) for e in store.stream("s").read(after=1)] == [
        (2, "a", 7),
        (3, "b", 7),
        (4, "c", 7),
    ]


def test_consumer_offsets_are_kept_per_stream_and_consumer(store: Store) -> None:
    store.stream("a").commit("c1", 5)
    store.stream("a").commit("c2", 7)
    store.stream("b").commit("c1", 9)
    store.stream("a").commit("c1", 3)  # a consumer may rewind to replay
    assert [store.stream("a").offset("c1"), store.stream("a").offset("c2")] == [3, 7]
    assert [store.stream("b").offset("c1"), store.stream("b").offset("c3")] == [9, 0]


def test_concurrent_appenders_never_let_a_reader_see_an_offset_before_a_smaller_one(
    store: Store, url: str
) -> None:
    writers, threads, count = 3, 2, 30
    # Even appends are transactions of two events, odd ones lone appends.
    total = writers * threads * (count // 2 * 2 + count // 2)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    appenders = [
        ctx.Process(target=append_events, args=(url, "s", f"w{i}", threads, count, results))
        for i in range(writers)
    ]
    for appender in appenders:
        appender.start()
    stream = store.stream("s")
    seen = 0
    out_of_order: list[tuple[int, list[int]]] = []
    give_up_at = time.monotonic() + 120  # a safety net for a broken engine, not a timing check
    while seen < total and time.monotonic() < give_up_at:
        offsets = [event.offset for event in stream.read(after=seen, limit=1000)]
        if offsets != list(range(seen + 1, seen + 1 + len(offsets))):
            out_of_order.append((seen, offsets[:10]))
            break
        if offsets:
            seen = offsets[-1]
    appended: list[int] = []
    errors: list[str] = []
    for _ in appenders:
        offsets, failures = results.get(timeout=120)
        appended.extend(offsets)
        errors.extend(failures)
    for appender in appenders:
        appender.join(timeout=60)
    assert errors == []
    assert out_of_order == []
    assert seen == total
    assert sorted(appended) == list(range(1, total + 1))  # every offset once, no holes
