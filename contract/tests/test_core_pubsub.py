"""Ephemeral pub/sub (contract §7), over the recording fake.

The fake delivers a published message when its transaction commits, to the
sink given to ``start_watching``, as a real engine's listener would.
Waits use generous timeouts only as a safety net; no test asserts a duration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fakes import FakeDriver, FakeProfilesDriver

from alkstore.core import CoreStore
from alkstore.errors import PayloadError, ProfileUnavailable, ReservedName, StoreClosed
from alkstore.testing import FakeClock

SAFETY_NET_S = 10


class Boom(Exception):
    pass


@pytest.fixture
def driver() -> FakeProfilesDriver:
    return FakeProfilesDriver()


def test_subscribe_starts_the_engines_listener(store: CoreStore, driver: FakeDriver) -> None:
    store.subscribe("c")
    assert driver.sink is store._context.hub


def test_notify_delivers_to_a_subscription(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    store.notify("c", {"n": 1})
    assert subscription.get(timeout=SAFETY_NET_S) == {"n": 1}


def test_a_subscription_receives_messages_in_publish_order(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    for n in range(3):
        store.notify("c", n)
    assert [subscription.get(timeout=SAFETY_NET_S) for _ in range(3)] == [0, 1, 2]


def test_a_subscription_sees_only_messages_published_after_it_opened(store: CoreStore) -> None:
    store.notify("c", "before")
    subscription = store.subscribe("c")
    store.notify("c", "after")
    assert subscription.get(timeout=SAFETY_NET_S) == "after"
    assert subscription.get(timeout=0) is None


def test_every_open_subscription_receives_a_message(store: CoreStore) -> None:
    first = store.subscribe("c")
    second = store.subscribe("c")
    store.notify("c", 1)
    assert (first.get(timeout=SAFETY_NET_S), second.get(timeout=SAFETY_NET_S)) == (1, 1)


def test_a_subscription_receives_only_its_channel(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    store.notify("other", 1)
    assert subscription.get(timeout=0) is None


def test_get_returns_none_on_timeout(store: CoreStore) -> None:
    assert store.subscribe("c").get(timeout=0.05) is None


def test_a_closed_subscription_receives_nothing(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    subscription.close()
    store.notify("c", 1)
    assert subscription.get(timeout=SAFETY_NET_S) is None
    assert subscription.closed


def test_a_closed_subscription_drops_messages_not_yet_taken(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    store.notify("c", 1)
    subscription.close()
    assert subscription.get(timeout=0) is None
    assert list(subscription) == []


def test_closing_one_subscription_leaves_the_others_listening(store: CoreStore) -> None:
    closed = store.subscribe("c")
    open_ = store.subscribe("c")
    closed.close()
    store.notify("c", 1)
    assert open_.get(timeout=SAFETY_NET_S) == 1


def test_a_subscription_closes_at_the_end_of_its_with_block(store: CoreStore) -> None:
    with store.subscribe("c") as subscription:
        pass
    assert subscription.closed
    with pytest.raises(StoreClosed):
        subscription.__enter__()


def test_iteration_yields_messages_and_ends_when_closed(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    received: list[Any] = []
    got_two = threading.Event()

    def consume() -> None:
        for message in subscription:
            received.append(message)
            if len(received) == 2:
                got_two.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    store.notify("c", 1)
    store.notify("c", 2)
    assert got_two.wait(SAFETY_NET_S)
    subscription.close()
    consumer.join(SAFETY_NET_S)
    assert not consumer.is_alive(), "iteration did not end on close"
    assert received == [1, 2]


def test_get_returns_none_once_the_store_is_closed(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    store.close()
    assert subscription.get(timeout=SAFETY_NET_S) is None


def test_notify_with_a_bad_payload_publishes_nothing(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(PayloadError):
        store.notify("c", {"bad": object()})
    assert driver.calls == []


@pytest.mark.parametrize(
    "use",
    [lambda store: store.notify("__alkstore_c", 1), lambda store: store.subscribe("__alkstore_c")],
    ids=["notify", "subscribe"],
)
def test_pubsub_refuses_reserved_channel_names(
    store: CoreStore, use: Callable[[CoreStore], object]
) -> None:
    with pytest.raises(ReservedName):
        use(store)


# -- transactions --------------------------------------------------------------------


def test_a_transaction_notify_delivers_only_after_commit(store: CoreStore) -> None:
    subscription = store.subscribe("c")
    with store.transaction() as tx:
        tx.notify("c", {"n": 1})
        assert subscription.get(timeout=0) is None
    assert subscription.get(timeout=SAFETY_NET_S) == {"n": 1}


def test_a_rolled_back_transaction_notify_delivers_nothing(store: CoreStore) -> None:
    subscription = store.subscribe("c")

    def notify_then_fail() -> None:
        with store.transaction() as tx:
            tx.notify("c", 1)
            raise Boom

    with pytest.raises(Boom):
        notify_then_fail()
    assert subscription.get(timeout=0.05) is None


def test_a_transaction_notify_refuses_reserved_names(store: CoreStore) -> None:
    with store.transaction() as tx, pytest.raises(ReservedName):
        tx.notify("__alkstore_c", 1)


# -- without the profile -------------------------------------------------------------


def _notify_in_a_transaction(store: CoreStore) -> None:
    with store.transaction() as tx:
        tx.notify("c", 1)


@pytest.mark.parametrize(
    "use",
    [
        lambda store: store.notify("c", 1),
        lambda store: store.subscribe("c"),
        _notify_in_a_transaction,
    ],
    ids=["notify", "subscribe", "tx.notify"],
)
def test_an_engine_without_the_pubsub_profile_raises_not_implemented(
    clock: FakeClock, use: Callable[[CoreStore], object]
) -> None:
    plain = FakeDriver()
    with CoreStore(plain, clock=clock) as store, pytest.raises(ProfileUnavailable):
        use(store)
    assert plain.statements() == []
    assert plain.sink is None
