"""A freed slot is announced only when it can matter (contract §16.4, migration 21): a
claim held back by the concurrency limit marks the queue's live claims, and an ack of a
limited queue NOTIFYs only for a marked claim (or with a per-key limit or rate); a fail
and a cancel announce a limited queue always. The two racy orders of "claim held back"
and "ack frees the slot" are played with two connections: either the claim sees the
slot or the ack sees the mark."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from pg_helpers import StoreFactory

import alkstore
from alkstore import Limits
from alkstore.core.store import Store as CoreStore
from alkstore.driver import queue_topic
from alkstore.testing import FakeClock

START = 1_700_000_000
SYNC_S = 30.0
"""How long a test waits for another connection to reach a lock (a bound, not a
measurement: the statement is there within milliseconds)."""


def _limited(store: CoreStore, limits: Limits, jobs: int) -> alkstore.Queue:
    queue = store.queue("limited")
    assert queue.set_limits(limits)
    queue.enqueue_many(list(range(jobs)))
    return queue


def _marked(admin: psycopg.Connection[Any], schema: str) -> bool:
    """Whether some live claim of the queue ``limited`` carries the held-back mark."""
    row = admin.execute(
        f'SELECT count(*) FROM "{schema}".alkstore_jobs'
        " WHERE queue = %s AND state = 'processing' AND held_back",
        ("limited",),
    ).fetchone()
    assert row is not None
    return bool(row[0])


@pytest.fixture
def announced(pg_dsn: str, admin: psycopg.Connection[Any]) -> Iterator[Callable[[str], bool]]:
    """``announced(channel)``: whether the queue ``limited`` was NOTIFYed on ``channel``
    since the previous call. A sentinel NOTIFY, sent after everything the test did,
    marks the end: notifications arrive in commit order."""
    listener = psycopg.connect(pg_dsn, autocommit=True)
    listening: set[str] = set()

    def check(channel: str) -> bool:
        if channel not in listening:
            listener.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
            listening.add(channel)
            return False
        admin.execute("SELECT pg_notify(%s, 'sentinel')", (channel,))
        topics: list[str] = []
        for notice in listener.notifies(timeout=SYNC_S):
            topics.append(notice.payload)
            if notice.payload == "sentinel":
                break
        assert topics[-1:] == ["sentinel"]
        return queue_topic("limited") in topics

    yield check
    listener.close()


def _channel(store: CoreStore) -> str:
    return str(store.driver.channel)  # type: ignore[attr-defined]


def test_an_ack_of_a_limited_queue_with_no_claim_held_back_announces_nothing(
    open_store: StoreFactory, announced: Callable[[str], bool]
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=5), 2)
    announced(_channel(store))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.ack()
    assert not announced(_channel(store))


def test_a_claim_held_back_by_the_concurrency_limit_marks_the_live_claim_and_its_ack_announces(
    open_store: StoreFactory,
    announced: Callable[[str], bool],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=1), 2)
    announced(_channel(store))
    handle = queue.claim("w")
    assert handle is not None
    assert queue.claim("w2") is None  # held back
    assert _marked(admin, schema)
    assert handle.ack()
    assert announced(_channel(store))


def test_a_claim_made_after_the_held_back_one_is_unmarked_and_its_ack_announces_nothing(
    open_store: StoreFactory,
    announced: Callable[[str], bool],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=1), 3)
    first = queue.claim("w")
    assert first is not None
    assert queue.claim("w2") is None
    assert first.ack()
    announced(_channel(store))
    second = queue.claim("w2")  # room: no claim waits while it holds its slot
    assert second is not None
    assert not _marked(admin, schema)
    assert second.ack()
    assert not announced(_channel(store))


def test_a_claim_held_back_by_a_rate_alone_sets_no_mark(
    open_store: StoreFactory,
    announced: Callable[[str], bool],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    store = open_store(clock=FakeClock(START))
    queue = _limited(store, Limits(concurrency=10, rate=1, per=60), 3)
    announced(_channel(store))
    handle = queue.claim("w")
    assert handle is not None
    assert queue.claim("w2") is None  # the rate holds it back, not the concurrency
    assert not _marked(admin, schema)
    assert handle.ack()
    assert not announced(_channel(store))


def test_a_claim_held_back_by_the_rate_and_the_concurrency_limit_marks_the_live_claim(
    open_store: StoreFactory,
    announced: Callable[[str], bool],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    # Its waiter waits for the window and for a slot: the slot's ack must tell it.
    store = open_store(clock=FakeClock(START))
    queue = _limited(store, Limits(concurrency=1, rate=1, per=60), 3)
    announced(_channel(store))
    handle = queue.claim("w")
    assert handle is not None
    assert queue.claim("w2") is None
    assert _marked(admin, schema)
    assert handle.ack()
    assert announced(_channel(store))


def test_a_fail_and_a_cancel_of_a_limited_queue_announce_it(
    open_store: StoreFactory, announced: Callable[[str], bool]
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=5), 3)
    announced(_channel(store))
    failed = queue.claim("w")
    assert failed is not None
    assert failed.fail("broken")
    assert announced(_channel(store))
    cancelled = queue.claim("w")
    assert cancelled is not None
    assert queue.cancel(cancelled.id)
    assert announced(_channel(store))


def test_an_ack_of_a_queue_with_a_per_key_limit_always_announces(
    open_store: StoreFactory, announced: Callable[[str], bool]
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=5, concurrency_per_key=5), 2)
    announced(_channel(store))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.ack()
    assert announced(_channel(store))


def _ack_all(store: CoreStore, *handles: alkstore.JobHandle) -> None:
    with store.transaction() as tx:
        assert tx.ack_all(list(handles)) == ()


def test_acks_in_one_statement_with_no_claim_held_back_announce_nothing(
    open_store: StoreFactory, announced: Callable[[str], bool]
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=5), 3)
    announced(_channel(store))
    handles = queue.claim_batch("w", 3)
    assert len(handles) == 3
    _ack_all(store, *handles)
    assert not announced(_channel(store))


def test_acks_in_one_statement_announce_a_queue_whose_claim_was_held_back(
    open_store: StoreFactory,
    announced: Callable[[str], bool],
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=2), 3)
    announced(_channel(store))
    handles = queue.claim_batch("w", 2)
    assert len(handles) == 2
    assert queue.claim("w2") is None  # held back
    assert _marked(admin, schema)
    _ack_all(store, *handles)
    assert announced(_channel(store))


def test_acks_in_one_statement_of_a_queue_with_a_per_key_limit_announce_it(
    open_store: StoreFactory, announced: Callable[[str], bool]
) -> None:
    store = open_store()
    queue = _limited(store, Limits(concurrency=5, concurrency_per_key=5), 2)
    announced(_channel(store))
    handles = queue.claim_batch("w", 2)
    assert len(handles) == 2
    _ack_all(store, *handles)
    assert announced(_channel(store))


# -- the two racy orders -------------------------------------------------------------


def _await_lock_wait(admin: psycopg.Connection[Any]) -> None:
    """Until some other session waits for a lock (a row lock of a claim)."""
    deadline = time.monotonic() + SYNC_S
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ).fetchone()
        if row is not None and row[0] > 0:
            return
        time.sleep(0.01)
    raise AssertionError("no session came to wait for a claim's row lock")


def _ack_statement(store: CoreStore) -> bytes:
    return bytes(store.driver._sql.ack)  # type: ignore[attr-defined]


def _ack_params(store: CoreStore, handle: alkstore.JobHandle) -> dict[str, Any]:
    return {
        "job_id": handle.id,
        "attempt": handle.job.attempts,
        "now": START,
        "wake_channel": _channel(store),
        "topic_prefix": queue_topic(""),
    }


def test_a_claim_held_back_while_an_ack_is_uncommitted_waits_for_it_and_takes_the_slot(
    open_store: StoreFactory, pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    # The racy order: the ack's statement runs (and reads no mark) before the claim
    # counts the slot as taken; it commits only after the claim has set the mark.
    store = open_store(clock=FakeClock(START))
    queue = _limited(store, Limits(concurrency=1), 2)
    held = queue.claim("w")
    assert held is not None
    acker = psycopg.connect(pg_dsn)  # a transaction: the ack stays uncommitted
    try:
        acked, woken = acker.execute(_ack_statement(store), _ack_params(store, held)).fetchone()
        assert (acked, woken) == (1, 0)  # no claim was held back when it read the mark
        claimed: list[alkstore.JobHandle | None] = []
        claimer = threading.Thread(target=lambda: claimed.append(queue.claim("w2")))
        claimer.start()
        _await_lock_wait(admin)  # held back, marking, waiting for the ack's commit
        acker.commit()
        claimer.join(SYNC_S)
    finally:
        acker.close()
    assert not claimer.is_alive()
    assert claimed[0] is not None  # the claim counted again after the ack committed


def test_an_ack_after_a_held_back_claim_locked_waits_for_its_commit_and_announces(
    open_store: StoreFactory, pg_dsn: str, admin: psycopg.Connection[Any], schema: str
) -> None:
    # The other order: the claim has marked the live claims, uncommitted; an ack then
    # waits for that commit and reads the mark in the row it deletes.
    store = open_store(clock=FakeClock(START))
    queue = _limited(store, Limits(concurrency=1), 2)
    held = queue.claim("w")
    assert held is not None
    claimer = psycopg.connect(pg_dsn)  # a transaction: the claim stays uncommitted
    results: list[tuple[int, int]] = []
    try:
        rows = claimer.execute(
            f'SELECT id FROM "{schema}".alkstore_claim_limited(%s, %s, %s, 1, %s)',
            ("limited", "w2", START, "exhausted"),
        ).fetchall()
        assert rows == []  # held back
        acker = psycopg.connect(pg_dsn, autocommit=True)
        try:
            statement, params = _ack_statement(store), _ack_params(store, held)
            ack = threading.Thread(
                target=lambda: results.append(acker.execute(statement, params).fetchone())
            )
            ack.start()
            _await_lock_wait(admin)  # the ack waits for the claim's commit
            claimer.commit()
            ack.join(SYNC_S)
        finally:
            acker.close()
    finally:
        claimer.close()
    assert not ack.is_alive()
    assert results == [(1, 1)]  # acked, and the queue NOTIFYed


def test_a_batch_claim_held_back_midway_counts_the_starts_of_both_its_rounds(
    open_store: StoreFactory, pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    # Its first round takes the one free slot and finds the limit reached; an ack that
    # committed while it marked the claims frees another, which its second round takes.
    # Both rounds' starts count against the rate.
    store = open_store(clock=FakeClock(START))
    queue = _limited(store, Limits(concurrency=2, rate=3, per=60), 6)
    held = queue.claim("w")  # start 1
    assert held is not None
    acker = psycopg.connect(pg_dsn)
    try:
        acker.execute(_ack_statement(store), _ack_params(store, held)).fetchone()
        claimed: list[list[alkstore.JobHandle]] = []
        claimer = threading.Thread(target=lambda: claimed.append(queue.claim_batch("w2", 3)))
        claimer.start()
        _await_lock_wait(admin)  # one claimed, held back, marking: waits for the ack
        acker.commit()
        claimer.join(SYNC_S)
    finally:
        acker.close()
    assert not claimer.is_alive()
    (batch,) = claimed
    assert len(batch) == 2  # starts 2 and 3
    for handle in batch:
        assert handle.ack()
    assert queue.claim_batch("w3", 10) == []  # three starts in the window: the rate binds
