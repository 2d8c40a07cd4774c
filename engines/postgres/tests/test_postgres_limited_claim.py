"""A limited queue's claim in one statement (migration 17, the limits profile): the
store remembers which queues a claim found limited and claims them through
``alkstore_claim_limited``, which locks the limit row, claims and records the starts
itself; a hint, not a copy of the limit, so a cleared limit falls back."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pg_helpers import StoreFactory

import alkstore
from alkstore import EnqueueOpts, Limits
from alkstore.core.store import Store as CoreStore
from alkstore.testing import FakeClock
from alkstore_postgres import driver as driver_module
from alkstore_postgres import statements

START = 1_700_000_000
NEVER_BINDS = Limits(concurrency=10_000, rate=100_000, per=1)


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every statement the driver's claims and acks send, in order."""
    sent: list[bytes] = []
    real = driver_module.execute

    def traced(c: Any, statement: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(bytes(statement))
        return real(c, statement, *args, **kwargs)

    monkeypatch.setattr(driver_module, "execute", traced)
    return sent


def _statements(store: CoreStore) -> Any:
    return store.driver._sql  # type: ignore[attr-defined]


def _limited_queue(store: CoreStore, limits: Limits, jobs: int) -> alkstore.Queue:
    queue = store.queue("limited")
    assert queue.set_limits(limits)
    queue.enqueue_many(list(range(jobs)))
    first = queue.claim("w")  # the claim that finds the queue limited
    assert first is not None
    assert first.ack()
    return queue


def test_a_claim_of_a_queue_found_limited_is_one_statement(
    open_store: StoreFactory, executed: list[bytes]
) -> None:
    store = open_store()
    queue = _limited_queue(store, NEVER_BINDS, 3)
    sent = executed
    sent.clear()
    handle = queue.claim("w")
    assert handle is not None
    assert sent == [_statements(store).call_claim_limited]


def test_a_batch_claim_of_a_queue_found_limited_is_one_statement(
    open_store: StoreFactory, executed: list[bytes]
) -> None:
    store = open_store()
    queue = _limited_queue(store, NEVER_BINDS, 5)
    sent = executed
    sent.clear()
    assert len(queue.claim_batch("w", 3)) == 3
    assert sent == [_statements(store).call_claim_limited]


def test_ack_and_claim_on_a_queue_found_limited_claims_in_one_statement(
    open_store: StoreFactory, executed: list[bytes]
) -> None:
    store = open_store()
    queue = _limited_queue(store, NEVER_BINDS, 3)
    handle = queue.claim("w")
    assert handle is not None
    sent = executed
    sent.clear()
    outcome = handle.ack_and_claim("w")
    assert len(outcome.claimed) == 1
    claims = [s for s in sent if s != _statements(store).ack]
    assert claims == [_statements(store).call_claim_limited]


def test_a_keyed_claim_of_a_queue_found_limited_is_one_statement(
    open_store: StoreFactory, executed: list[bytes]
) -> None:
    store = open_store()
    queue = store.queue("keyed")
    assert queue.set_limits(Limits(concurrency_per_key=1, rate_per_key=100, per=60))
    for key in ("a", "a", "b", "c"):
        queue.enqueue(key, EnqueueOpts(limit_key=key))
    assert queue.claim_batch("w", 1) != []  # the claim that finds the queue limited
    sent = executed
    sent.clear()
    assert sorted(h.job.limit_key or "" for h in queue.claim_batch("w", 10)) == ["b", "c"]
    assert sent == [_statements(store).call_claim_limited]


def test_a_limit_cleared_by_another_store_falls_back_to_the_unlimited_claim(
    open_store: StoreFactory,
) -> None:
    store, other = open_store(), open_store()
    queue = _limited_queue(store, Limits(concurrency=1), 3)
    held = queue.claim("w")
    assert held is not None
    assert queue.claim("w") is None  # the bound holds
    assert other.queue("limited").clear_limits()
    second = queue.claim("w")  # the hint is stale: the function says so
    assert second is not None
    assert store.driver._limited == set()  # type: ignore[attr-defined]


def test_a_limit_set_by_another_store_binds_the_next_claim(open_store: StoreFactory) -> None:
    store, other = open_store(), open_store()
    queue = store.queue("later")
    queue.enqueue_many([1, 2, 3])
    first = queue.claim("w")
    assert first is not None
    assert other.queue("later").set_limits(Limits(concurrency=1))
    assert queue.claim("w") is None  # no hint yet: the unlimited claim's cue finds the limit
    assert first.ack()
    assert queue.claim("w") is not None


def test_the_function_counts_the_starts_a_claim_recorded_against_the_rate(
    open_store: StoreFactory,
) -> None:
    clock = FakeClock(1_000)
    store = open_store(clock=clock)
    queue = _limited_queue(store, Limits(rate=3, per=10), 10)  # one start recorded
    assert len(queue.claim_batch("w", 10)) == 2
    assert queue.claim("w") is None
    clock.advance(10)
    assert len(queue.claim_batch("w", 10)) == 3


def test_claim_wait_on_a_queue_found_limited_claims_in_one_statement(
    open_store: StoreFactory, executed: list[bytes]
) -> None:
    store = open_store()
    queue = _limited_queue(store, NEVER_BINDS, 3)
    executed.clear()
    handle = queue.claim_wait("w", timeout=5)
    assert handle is not None
    assert executed == [_statements(store).call_claim_limited]


def test_claim_wait_any_on_a_queue_found_limited_claims_in_one_statement(
    open_store: StoreFactory, executed: list[bytes]
) -> None:
    store = open_store()
    queue = _limited_queue(store, NEVER_BINDS, 3)
    executed.clear()
    handle = store.claim_wait_any([queue], "w", timeout=5)
    assert handle is not None
    assert executed == [_statements(store).call_claim_limited]


# -- the rate's count in the queue's claims row (migration 19) -----------------------


def _claims_row(admin: psycopg.Connection[Any], schema: str, queue: str) -> tuple[Any, ...]:
    row = admin.execute(
        f'SELECT rate_second, rate_second_claims, rate_older_latest FROM "{schema}".'
        "alkstore_queue_claims WHERE queue = %s",
        (queue,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def _starts(admin: psycopg.Connection[Any], schema: str, queue: str) -> list[tuple[Any, ...]]:
    return admin.execute(
        f'SELECT started_at, claims FROM "{schema}".alkstore_claim_starts WHERE queue = %s'
        " ORDER BY started_at",
        (queue,),
    ).fetchall()


def test_claims_of_one_second_count_their_starts_in_the_claims_row_alone(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store(clock=FakeClock(START))
    queue = _limited_queue(store, Limits(rate=100, per=1), 10)  # one start
    assert len(queue.claim_batch("w", 3)) == 3
    assert queue.claim("w") is not None
    assert _claims_row(admin, schema, "limited") == (START, 5, None)
    assert _starts(admin, schema, "limited") == []


def test_a_claim_of_a_later_second_moves_the_count_to_the_starts_while_the_window_holds_it(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    clock = FakeClock(START)
    store = open_store(clock=clock)
    queue = _limited_queue(store, Limits(rate=100, per=10), 10)
    assert len(queue.claim_batch("w", 2)) == 2
    clock.advance(4)
    assert queue.claim("w") is not None
    assert _starts(admin, schema, "limited") == [(START, 3)]
    assert _claims_row(admin, schema, "limited") == (START + 4, 1, START)


def test_a_second_that_left_the_window_is_dropped_not_moved(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    clock = FakeClock(START)
    store = open_store(clock=clock)
    queue = _limited_queue(store, Limits(rate=100, per=10), 10)
    assert queue.claim("w") is not None
    clock.advance(4)
    assert queue.claim("w") is not None  # START's two starts moved
    clock.advance(20)
    assert queue.claim("w") is not None  # both seconds out of the window
    assert _starts(admin, schema, "limited") == []
    assert _claims_row(admin, schema, "limited") == (START + 24, 1, None)


def test_a_window_of_many_seconds_counts_the_moved_seconds_and_the_current_one(
    open_store: StoreFactory,
) -> None:
    clock = FakeClock(START)
    store = open_store(clock=clock)
    queue = _limited_queue(store, Limits(rate=4, per=10), 20)  # one start at START
    clock.advance(3)
    assert len(queue.claim_batch("w", 2)) == 2  # START + 3: three in the window
    clock.advance(3)
    assert len(queue.claim_batch("w", 5)) == 1  # START + 6: the fourth
    assert queue.claim("w") is None
    clock.advance(4)
    assert len(queue.claim_batch("w", 5)) == 1  # START + 10: START's start left
    clock.advance(3)
    assert len(queue.claim_batch("w", 5)) == 2  # START + 13: START + 3's two left


def test_a_claim_that_takes_nothing_in_a_new_second_still_moves_the_count(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    clock = FakeClock(START)
    store = open_store(clock=clock)
    queue = _limited_queue(store, Limits(rate=2, per=10), 2)  # one start
    assert queue.claim("w") is not None
    clock.advance(1)
    assert queue.claim("w") is None  # at the rate and nothing pending
    assert _starts(admin, schema, "limited") == [(START, 2)]
    assert _claims_row(admin, schema, "limited") == (None, 0, START)


def test_a_rate_cleared_and_set_again_counts_the_starts_of_its_current_second(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store(clock=FakeClock(START))
    queue = _limited_queue(store, Limits(rate=2, per=60), 5)  # one start
    assert queue.claim("w") is not None
    assert queue.clear_limits()
    assert _starts(admin, schema, "limited") == [(START, 2)]
    assert queue.set_limits(Limits(rate=2, per=60))
    assert queue.claim("w") is None  # the two starts still count
    assert _claims_row(admin, schema, "limited") == (None, 0, START)


def test_a_waiter_at_the_rate_limit_is_timed_to_the_oldest_start_of_the_window(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    clock = FakeClock(START)
    store = open_store(clock=clock)
    queue = _limited_queue(store, Limits(rate=2, per=10), 5)  # one start at START
    clock.advance(3)
    assert queue.claim("w") is not None  # START + 3: the window is full
    wake = admin.execute(
        statements.render(statements.NEXT_WAKE_AT, schema), {"queue": "limited", "now": START + 3}
    ).fetchone()
    assert wake is not None
    assert wake[3] == START + 10


def test_a_limit_set_without_its_claims_row_is_claimed_under_its_bound(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    # As a store of a release before migration 19 sets a limit: the limit row alone.
    store = open_store()
    queue = store.queue("older")
    queue.enqueue_many([1, 2, 3])
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_queue_limits (queue, concurrency) VALUES (%s, 2)',
        ("older",),
    )
    assert len(queue.claim_batch("w", 10)) == 2
    assert queue.claim("w") is None
    assert _claims_row(admin, schema, "older") == (None, 0, None)
