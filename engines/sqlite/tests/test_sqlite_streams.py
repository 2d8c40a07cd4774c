"""Streams on SQLite: offsets from a per-stream counter row, never reused, and gap-safe
for readers while appenders in several threads and processes commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from alkstore import Store


class Boom(Exception):
    pass


def _offsets(store: Store, stream: str = "s") -> list[int]:
    return [event.offset for event in store.stream(stream).read(limit=1000)]


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
