"""Pub/sub on PostgreSQL: a NOTIFY on the store's message channel, sent on commit only;
messages too large for NOTIFY are stored and referenced, and pruned when a store opens
or publishes (never on a timer).

``get`` timeouts are safety nets for a broken engine, not timing assertions.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from typing import Any

import psycopg
import pytest
from pg_helpers import (
    LARGE,
    BackgroundCall,
    StoreFactory,
    publish_messages,
)

from alkstore import Store
from alkstore_conformance.driver_suite.support import RecordingSink
from alkstore_postgres import PostgresDriver
from alkstore_postgres.messages import (
    NOTIFY_PAYLOAD_LIMIT,
    decode_message,
    inline_message,
    reference_id,
)

SAFETY_NET_S = 30


class Boom(Exception):
    pass


def _stored_payloads(admin: psycopg.Connection[Any], schema: str) -> list[str]:
    rows = admin.execute(f'SELECT payload FROM "{schema}".alkstore_messages ORDER BY id').fetchall()
    return [row[0] for row in rows]


def _n(payload: str) -> Any:
    return json.loads(payload)["n"]


def _driver(store: Store) -> PostgresDriver:
    driver = getattr(store, "driver", None)
    assert isinstance(driver, PostgresDriver)
    return driver


# -- the transport ----------------------------------------------------------------------


def test_messages_published_by_another_process_reach_a_subscription_here(
    open_store: StoreFactory, pg_dsn: str, schema: str
) -> None:
    with open_store().subscribe("c") as subscription:
        publisher = mp.get_context("spawn").Process(
            target=publish_messages, args=(pg_dsn, schema, "c", 30)
        )
        publisher.start()
        received: list[Any] = []
        while (message := subscription.get(timeout=SAFETY_NET_S)) not in ("done", None):
            received.append(message)
        publisher.join(timeout=60)
    assert publisher.exitcode == 0
    # In publish order, large (stored) ones and transactions' included, the rolled-back
    # transaction's not.
    assert received == [{"n": n, "blob": LARGE} if n % 5 == 0 else n for n in range(30)]


def test_a_payload_over_the_notify_limit_arrives_whole(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store()
    payload = {"blob": "é" * 200_000, "n": 1}
    with store.subscribe("c") as subscription:
        store.notify("c", payload)
        assert subscription.get(timeout=SAFETY_NET_S) == payload
    assert len(_stored_payloads(admin, schema)) == 1


def test_a_small_message_is_not_stored(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store()
    with store.subscribe("c") as subscription:
        store.notify("c", {"small": True})
        assert subscription.get(timeout=SAFETY_NET_S) == {"small": True}
    assert _stored_payloads(admin, schema) == []


def test_a_rolled_back_transaction_notify_delivers_nothing(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store()

    def notify_then_fail() -> None:
        with store.transaction() as tx:
            tx.notify("c", "rolled back")
            tx.notify("c", {"rolled back": LARGE})
            raise Boom

    with store.subscribe("c") as subscription:
        with pytest.raises(Boom):
            notify_then_fail()
        store.notify("c", "committed")
        # Messages arrive in commit order: had the rollback sent anything, it came first.
        assert subscription.get(timeout=SAFETY_NET_S) == "committed"
    assert _stored_payloads(admin, schema) == []


def test_a_message_published_through_attach_arrives_on_the_callers_commit_only(
    open_store: StoreFactory, pg_dsn: str
) -> None:
    store = open_store()
    with store.subscribe("c") as subscription, psycopg.connect(pg_dsn) as conn:
        with store.attach(conn) as tx:
            tx.notify("c", "rolled back")
        conn.rollback()
        with store.attach(conn) as tx:
            tx.notify("c", "committed")
        store.notify("c", "published meanwhile")
        assert subscription.get(timeout=SAFETY_NET_S) == "published meanwhile"
        conn.commit()
        assert subscription.get(timeout=SAFETY_NET_S) == "committed"


def test_a_subscription_receives_what_commits_right_after_it_opened(
    open_store: StoreFactory,
) -> None:
    # The first subscription of a store starts its listener; subscribe() returns once
    # LISTEN is in place, so a message published at once is not lost.
    publisher = open_store()
    for n in range(5):
        with open_store().subscribe("c") as subscription:
            publisher.notify("c", n)
            assert subscription.get(timeout=SAFETY_NET_S) == n


def test_messages_keep_their_order_across_channels_and_sizes(open_store: StoreFactory) -> None:
    store = open_store()
    sent = [("a", 1), ("b", {"big": LARGE}), ("a", {"big": LARGE}), ("b", 2), ("a", 3)]
    sink = RecordingSink()
    _driver(store).start_watching(sink)
    for channel, payload in sent:
        store.notify(channel, payload)
    assert sink.wait_for(lambda s: len(s.messages) >= len(sent))
    received = [(channel, json.loads(payload)) for channel, payload in sink.messages]
    assert received == sent


def test_the_listener_skips_a_reference_to_a_pruned_message(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store()
    sink = RecordingSink()
    driver = _driver(store)
    driver.start_watching(sink)
    admin.execute("SELECT pg_notify(%s, '#123456789')", (driver.message_channel,))
    store.notify("c", "after")
    assert sink.wait_for(lambda s: len(s.messages) >= 1)
    assert sink.messages == [("c", '"after"')]


# -- hygiene: the stored messages, pruned at open and when publishing ------------------


def test_opening_a_store_prunes_stored_messages_to_the_newest(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    publisher = open_store()
    for n in range(10):
        publisher.notify("c", {"n": n, "blob": LARGE})
    assert len(_stored_payloads(admin, schema)) == 10
    open_store(messages_keep=3)
    assert [_n(p) for p in _stored_payloads(admin, schema)] == [7, 8, 9]


def test_a_stored_publish_prunes_beyond_the_newest(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    publisher = open_store(messages_keep=2)
    for n in range(6):
        publisher.notify("c", {"n": n, "blob": LARGE})
    # Each stored publish keeps the newest two rows, its own included.
    assert [_n(p) for p in _stored_payloads(admin, schema)] == [4, 5]


def test_pruning_skips_messages_an_open_transaction_is_pruning(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    pruner = open_store(messages_keep=2)
    publisher = open_store()
    for n in range(3):
        publisher.notify("c", {"n": n, "blob": LARGE})
    with pruner.transaction() as tx:
        tx.notify("c", {"n": 3, "blob": LARGE})  # deletes (and locks) messages 0 and 1
        # Opening a store prunes to the newest one: it skips the locked rows rather
        # than wait for a transaction its caller may keep open for long.
        opened = BackgroundCall(lambda: open_store(messages_keep=1))
        assert opened.result() is not None
        assert [_n(p) for p in _stored_payloads(admin, schema)] == [0, 1, 2]
    assert [_n(p) for p in _stored_payloads(admin, schema)] == [2, 3]


def test_a_message_beyond_the_notify_limit_is_stored_not_inlined() -> None:
    assert inline_message("c", '"' + "x" * NOTIFY_PAYLOAD_LIMIT + '"') is None
    small = inline_message("c", '"x"')
    assert small is not None
    assert decode_message(small, {}) == ("c", '"x"')


def test_inline_messages_carry_any_channel_name() -> None:
    for channel in ["a:b", "12:3", "é:#", "x" * 200]:
        encoded = inline_message(channel, '{"k": ":"}')
        assert encoded is not None
        assert reference_id(encoded) is None
        assert decode_message(encoded, {}) == (channel, '{"k": ":"}')


def test_equal_messages_are_encoded_distinctly() -> None:
    assert inline_message("c", "1") != inline_message("c", "1")


def test_a_reference_resolves_to_the_stored_message() -> None:
    assert reference_id("#42") == 42
    assert decode_message("#42", {42: ("c", '"big"')}) == ("c", '"big"')
    assert decode_message("#43", {42: ("c", '"big"')}) is None


def test_messages_either_side_of_the_notify_limit_arrive(open_store: StoreFactory) -> None:
    store = open_store()
    # Encoded inline, these straddle NOTIFY's limit: the last few must be stored.
    sizes = range(NOTIFY_PAYLOAD_LIMIT - 24, NOTIFY_PAYLOAD_LIMIT - 4)
    with store.subscribe("c") as subscription:
        for size in sizes:
            store.notify("c", "x" * size)
        received = [subscription.get(timeout=SAFETY_NET_S) for _ in sizes]
    assert [len(message) for message in received] == list(sizes)
