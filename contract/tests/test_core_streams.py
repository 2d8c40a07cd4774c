"""Durable streams with consumer offsets (contract §7), over the recording fake.

Waits use generous timeouts only as a safety net; no test asserts a duration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from background import InBackground
from conftest import START, StoreFactory
from fakes import FakeDriver, FakeProfilesDriver

from alkstore.constants import MAX_BATCH
from alkstore.core import CoreStore
from alkstore.driver import stream_topic
from alkstore.errors import (
    InvalidName,
    InvalidOptions,
    PayloadError,
    ProfileUnavailable,
    ReservedName,
)
from alkstore.stop import StopToken
from alkstore.testing import FakeClock
from alkstore.values import StreamEvent

SAFETY_NET_S = 10


class Boom(Exception):
    pass


@pytest.fixture
def driver() -> FakeProfilesDriver:
    return FakeProfilesDriver()


def wait_in_background(store: CoreStore, after: int, **kwargs: Any) -> InBackground:
    """``stream.wait`` on stream "s", run in a thread."""
    stream = store.stream("s")
    return InBackground(lambda: stream.wait(after, **kwargs), "wait")


def test_append_returns_offsets_from_one(store: CoreStore) -> None:
    stream = store.stream("s")
    assert [stream.append(n) for n in ("a", "b", "c")] == [1, 2, 3]


def test_offsets_are_per_stream(store: CoreStore) -> None:
    store.stream("a").append(1)
    assert store.stream("b").append(1) == 1


def test_read_returns_events_in_offset_order_with_their_payload_and_time(
    store: CoreStore, clock: FakeClock
) -> None:
    stream = store.stream("s")
    stream.append({"n": 1})
    clock.advance(5)
    stream.append({"n": 2})
    assert stream.read() == [
        StreamEvent(offset=1, payload={"n": 1}, created_at=START),
        StreamEvent(offset=2, payload={"n": 2}, created_at=START + 5),
    ]


def test_read_returns_only_events_after_the_given_offset(store: CoreStore) -> None:
    stream = store.stream("s")
    for n in range(5):
        stream.append(n)
    assert [event.offset for event in stream.read(after=3)] == [4, 5]


def test_read_returns_at_most_limit_events(store: CoreStore) -> None:
    stream = store.stream("s")
    for n in range(5):
        stream.append(n)
    assert [event.offset for event in stream.read(after=1, limit=2)] == [2, 3]


def test_read_of_an_empty_stream_returns_nothing(store: CoreStore) -> None:
    assert store.stream("s").read() == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"after": -1},
        {"after": 2**63},
        {"after": True},
        {"after": 1.0},
        {"limit": 0},
        {"limit": MAX_BATCH + 1},
        {"limit": True},
    ],
)
def test_read_refuses_bad_bounds(
    store: CoreStore, driver: FakeDriver, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidOptions):
        store.stream("s").read(**kwargs)
    assert driver.calls == []


def test_read_accepts_the_largest_limit(store: CoreStore) -> None:
    store.stream("s").append(1)
    assert len(store.stream("s").read(limit=MAX_BATCH)) == 1


def test_append_with_a_bad_payload_writes_nothing(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(PayloadError):
        store.stream("s").append({"bad": object()})
    assert driver.calls == []


def test_append_wakes_the_streams_waiters(store: CoreStore) -> None:
    with store._context.hub.waiter(stream_topic("s")) as waiter:
        store.stream("s").append(1)
        assert waiter.wait(timeout=0) is True


def test_store_stream_refuses_reserved_names(store: CoreStore) -> None:
    with pytest.raises(ReservedName):
        store.stream("__alkstore_s")


# -- consumer offsets ----------------------------------------------------------------


def test_offset_of_a_consumer_that_never_committed_is_zero(store: CoreStore) -> None:
    assert store.stream("s").offset("c") == 0


def test_commit_stores_the_consumers_offset(store: CoreStore) -> None:
    stream = store.stream("s")
    stream.commit("c", 7)
    assert stream.offset("c") == 7


def test_offsets_are_per_consumer_and_per_stream(store: CoreStore) -> None:
    store.stream("s").commit("c", 7)
    assert (store.stream("s").offset("d"), store.stream("t").offset("c")) == (0, 0)


def test_commit_refuses_a_negative_offset(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(InvalidOptions):
        store.stream("s").commit("c", -1)
    assert driver.calls == []


def test_commit_refuses_an_offset_beyond_int64(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(InvalidOptions):
        store.stream("s").commit("c", 2**63)
    assert driver.calls == []


def test_commit_refuses_a_malformed_consumer(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(InvalidName):
        store.stream("s").commit("", 1)
    assert driver.calls == []


# -- trimming ------------------------------------------------------------------------------


def test_trim_to_deletes_events_below_the_offset_and_counts_them(store: CoreStore) -> None:
    stream = store.stream("s")
    for n in range(5):
        stream.append(n)
    assert stream.trim_to(3) == 2
    assert [event.offset for event in stream.read()] == [3, 4, 5]


def test_offsets_are_never_reused_after_trimming_everything(store: CoreStore) -> None:
    stream = store.stream("s")
    for n in range(3):
        stream.append(n)
    assert stream.trim_to(4) == 3
    assert stream.append("next") == 4


def test_trim_to_refuses_a_negative_offset(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(InvalidOptions):
        store.stream("s").trim_to(-1)
    assert driver.calls == []


# -- wait ------------------------------------------------------------------------------


def test_wait_returns_true_at_once_when_an_event_exists_after(store: CoreStore) -> None:
    stream = store.stream("s")
    stream.append(1)
    assert stream.wait(0, timeout=SAFETY_NET_S) is True


def test_wait_returns_false_on_timeout(store: CoreStore) -> None:
    stream = store.stream("s")
    stream.append(1)
    assert stream.wait(1, timeout=0.05) is False


def test_wait_returns_false_when_already_stopped(store: CoreStore) -> None:
    stop = StopToken()
    stop.stop()
    assert store.stream("s").wait(0, timeout=SAFETY_NET_S, stop=stop) is False


def test_wait_returns_false_when_stopped_from_another_thread(
    make_store: StoreFactory, driver: FakeProfilesDriver
) -> None:
    # A re-poll of an hour and no timeout: only the stop token's wake ends this wait.
    store = make_store(repoll_s=3600)
    stop = StopToken()
    waiting = wait_in_background(store, 0, stop=stop)
    assert driver.stream_read_seen.wait(SAFETY_NET_S)
    stop.stop()
    assert waiting.join() is False


def test_wait_is_woken_by_an_append_from_another_thread(
    make_store: StoreFactory, driver: FakeProfilesDriver
) -> None:
    store = make_store(repoll_s=3600)
    waiting = wait_in_background(store, 0)
    assert driver.stream_read_seen.wait(SAFETY_NET_S)
    store.stream("s").append(1)
    assert waiting.join() is True


def test_wait_refuses_a_negative_after(store: CoreStore) -> None:
    with pytest.raises(InvalidOptions):
        store.stream("s").wait(-1, timeout=0)


def test_wait_refuses_a_stop_that_is_not_a_stop_token(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(InvalidOptions, match="stop"):
        store.stream("s").wait(0, timeout=0, stop=threading.Event())  # type: ignore[arg-type]
    assert driver.calls == []


# -- transactions -------------------------------------------------------------------------


def test_a_transaction_append_is_readable_after_commit(store: CoreStore) -> None:
    with store.transaction() as tx:
        assert tx.stream_append("s", {"n": 1}) == 1
    assert [event.payload for event in store.stream("s").read()] == [{"n": 1}]


def test_a_rolled_back_transaction_leaves_no_stream_event(store: CoreStore) -> None:
    def append_then_fail() -> None:
        with store.transaction() as tx:
            tx.stream_append("s", 1)
            raise Boom

    with pytest.raises(Boom):
        append_then_fail()
    assert store.stream("s").read() == []


def test_a_transaction_append_wakes_waiters_only_after_commit(store: CoreStore) -> None:
    with store._context.hub.waiter(stream_topic("s")) as waiter:
        with store.transaction() as tx:
            tx.stream_append("s", 1)
            assert waiter.wait(timeout=0) is False
        assert waiter.wait(timeout=0) is True


def test_a_transaction_append_refuses_reserved_names(store: CoreStore) -> None:
    with store.transaction() as tx, pytest.raises(ReservedName):
        tx.stream_append("__alkstore_s", 1)


# -- without the profile ----------------------------------------------------------------------


def _append_in_a_transaction(store: CoreStore) -> None:
    with store.transaction() as tx:
        tx.stream_append("s", 1)


@pytest.mark.parametrize(
    "use",
    [lambda store: store.stream("s"), _append_in_a_transaction],
    ids=["stream", "tx.stream_append"],
)
def test_an_engine_without_the_streams_profile_raises_not_implemented(
    clock: FakeClock, use: Callable[[CoreStore], object]
) -> None:
    plain = FakeDriver()
    with CoreStore(plain, clock=clock) as store, pytest.raises(ProfileUnavailable):
        use(store)
    assert plain.statements() == []
