"""Pub/sub on SQLite: committed rows in the notifications table, read by each process's
watcher after its cursor, and pruned when a store opens (never on a timer).

``get`` timeouts are safety nets for a broken engine, not timing assertions.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import StoreFactory, publish_messages, shared_state

from alkstore import Store
from alkstore_sqlite.migrations import NOTIFICATIONS

SAFETY_NET_S = 30


class Boom(Exception):
    pass


def _rows(db_path: Path) -> list[tuple[int, str, str]]:
    conn = sqlite3.connect(str(db_path))
    try:
        return conn.execute(
            f"SELECT id, channel, payload FROM {NOTIFICATIONS} ORDER BY id"
        ).fetchall()
    finally:
        conn.close()


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def test_messages_published_by_another_process_reach_a_subscription_here(
    store: Store, url: str
) -> None:
    with store.subscribe("c") as subscription:
        publisher = mp.get_context("spawn").Process(target=publish_messages, args=(url, "c", 30))
        publisher.start()
        received: list[Any] = []
        while (message := subscription.get(timeout=SAFETY_NET_S)) not in ("done", None):
            received.append(message)
        publisher.join(timeout=60)
    assert publisher.exitcode == 0
    # In publish order, the transactions' messages included, the rolled-back one not.
    assert received == list(range(30))


def test_a_rolled_back_transaction_notify_delivers_nothing(store: Store, db_path: Path) -> None:
    def notify_then_fail() -> None:
        with store.transaction() as tx:
            tx.notify("c", "rolled back")
            raise Boom

    with store.subscribe("c") as subscription:
        with pytest.raises(Boom):
            notify_then_fail()
        store.notify("c", "committed")
        assert subscription.get(timeout=SAFETY_NET_S) == "committed"
        assert subscription.get(timeout=0.2) is None
    assert [payload for _, _, payload in _rows(db_path)] == ['"committed"']


def test_a_message_published_through_attach_arrives_on_the_callers_commit_only(
    store: Store, db_path: Path
) -> None:
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        with store.subscribe("c") as subscription:
            conn.execute("BEGIN IMMEDIATE")
            with store.attach(conn) as tx:
                tx.notify("c", "rolled back")
            conn.execute("ROLLBACK")
            conn.execute("BEGIN IMMEDIATE")
            with store.attach(conn) as tx:
                tx.notify("c", "committed")
            assert subscription.get(timeout=0.2) is None  # the caller has not committed
            conn.execute("COMMIT")
            assert subscription.get(timeout=SAFETY_NET_S) == "committed"
            assert subscription.get(timeout=0.2) is None
    finally:
        conn.close()


def test_a_subscription_does_not_receive_what_committed_while_the_watcher_was_idle(
    store: Store, url: str
) -> None:
    with store.subscribe("c") as first:
        store.notify("c", "seen")
        assert first.get(timeout=SAFETY_NET_S) == "seen"
    shared = shared_state(url)
    assert shared is not None
    give_up_at = time.monotonic() + SAFETY_NET_S
    while shared.watcher._cursor is not None and time.monotonic() < give_up_at:
        time.sleep(0.01)  # wait for the watcher to go idle (sequencing only)
    assert shared.watcher._cursor is None
    store.notify("c", "while idle")
    with store.subscribe("c") as second:
        store.notify("c", "after")
        assert second.get(timeout=SAFETY_NET_S) == "after"
        assert second.get(timeout=0.2) is None


# -- hygiene: pruned when a store opens ------------------------------------------------


def test_opening_a_store_prunes_notifications_to_the_newest_rows(
    open_store: StoreFactory, db_path: Path
) -> None:
    publisher = open_store()
    for n in range(10):
        publisher.notify("c", n)
    open_store(notifications_keep=3)
    assert [payload for _, _, payload in _rows(db_path)] == ["7", "8", "9"]


def test_opening_a_store_within_the_cap_writes_nothing(
    open_store: StoreFactory, db_path: Path
) -> None:
    publisher = open_store()
    for n in range(10):
        publisher.notify("c", n)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        before = _data_version(conn)
        open_store(notifications_keep=10)
        assert _data_version(conn) == before  # no other connection committed
    finally:
        conn.close()
    assert len(_rows(db_path)) == 10


def test_message_ids_are_never_reused_even_once_the_table_is_empty(
    open_store: StoreFactory, db_path: Path
) -> None:
    publisher = open_store()
    for n in range(5):
        publisher.notify("c", n)
    conn = sqlite3.connect(str(db_path))
    with conn:
        conn.execute(f"DELETE FROM {NOTIFICATIONS}")
    conn.close()
    publisher.notify("c", "next")
    # AUTOINCREMENT: a watcher's cursor (an id) stays below every new message's id.
    assert [row_id for row_id, _, _ in _rows(db_path)] == [6]
