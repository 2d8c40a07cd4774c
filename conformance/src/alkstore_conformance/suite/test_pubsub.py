"""§7: ephemeral pub/sub -- delivered to every subscription open at commit, across
processes; ``tx.notify`` only on commit.

Tests never assert how fast a message arrives: they wait generously for what
must come. What must *not* come is checked by sending a committed marker
after it and reading on until the marker (plus a short quiet read), so a
ghost delivered before or just after the marker is seen.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from alkstore import EngineSpec, PayloadError, Store, Subscription
from alkstore_conformance.helpers.common import Rollback, raise_inside
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import notifier_process, subscriber_process
from alkstore_conformance.helpers.profiles import Children, in_thread, payload_key

pytestmark = pytest.mark.requires("pubsub")

TIME_LIMIT_S = 90.0
GENEROUS_S = 60.0
QUIET_S = 0.3
MARKER = {"marker": True}


def _until_marker(subscription: Subscription) -> list[Any]:
    """Every message before the marker, then a quiet read that must find nothing."""
    before: list[Any] = []
    for _ in range(100):
        message = subscription.get(timeout=GENEROUS_S)
        assert message is not None, "the committed marker never arrived"
        if message == MARKER:
            assert subscription.get(timeout=QUIET_S) is None, "nothing follows the marker"
            return before
        before.append(message)
    raise AssertionError(f"no marker among {before!r}")


# -- PUBSUB-DELIVERY -----------------------------------------------------------------


@pytest.mark.property("PUBSUB-DELIVERY")
@pytest.mark.requires("multi_process")
def test_a_notify_reaches_every_subscription_in_every_process(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    store: Store,
    open_store: StoreFactory,
) -> None:
    with Children(TIME_LIMIT_S) as children:
        children.start(
            subscriber_process,
            engine_name,
            engine_group,
            engine_spec,
            "news",
            1,
            children.results,
            TIME_LIMIT_S,
        )
        children.expect("subscribed")
        with store.subscribe("news") as same_store, open_store().subscribe("news") as other:
            store.notify("news", {"headline": "hello"})
            assert same_store.get(timeout=GENEROUS_S) == {"headline": "hello"}
            assert other.get(timeout=GENEROUS_S) == {"headline": "hello"}
        assert children.expect("received") == [{"headline": "hello"}]


@pytest.mark.property("PUBSUB-DELIVERY")
@pytest.mark.requires("multi_process")
def test_a_notify_from_another_process_is_delivered(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store
) -> None:
    with Children(TIME_LIMIT_S) as children, store.subscribe("news") as subscription:
        go = children.context.Event()
        children.start(
            notifier_process,
            engine_name,
            engine_group,
            engine_spec,
            "news",
            {"from": "child"},
            go,
            children.results,
            TIME_LIMIT_S,
        )
        children.expect("ready")
        go.set()
        children.expect("notified")
        assert subscription.get(timeout=GENEROUS_S) == {"from": "child"}


@pytest.mark.property("PUBSUB-DELIVERY")
def test_every_message_reaches_the_subscriber(store: Store) -> None:
    payloads: list[Any] = [1, "two", [3], {"four": 4}, False, 6.5]
    with store.subscribe("news") as subscription:
        for payload in payloads:
            store.notify("news", payload)
        received = [subscription.get(timeout=GENEROUS_S) for _ in payloads]
    assert sorted(map(payload_key, received)) == sorted(map(payload_key, payloads))


@pytest.mark.property("PUBSUB-DELIVERY")
def test_a_closed_subscription_receives_nothing(store: Store) -> None:
    kept = store.subscribe("news")
    closed = store.subscribe("news")
    try:
        closed.close()
        store.notify("news", {"n": 1})
        assert kept.get(timeout=GENEROUS_S) == {"n": 1}
        assert closed.get(timeout=QUIET_S) is None
    finally:
        kept.close()


@pytest.mark.property("PUBSUB-DELIVERY")
def test_a_subscription_receives_nothing_sent_before_it_opened(
    store: Store, open_store: StoreFactory
) -> None:
    store.notify("news", {"early": True})
    with open_store().subscribe("news") as late:
        store.notify("news", MARKER)
        assert _until_marker(late) == []


@pytest.mark.property("PUBSUB-DELIVERY")
def test_channels_are_independent(store: Store) -> None:
    with store.subscribe("a") as subscription:
        store.notify("b", {"for": "b"})
        store.notify("a", MARKER)
        assert _until_marker(subscription) == []


@pytest.mark.property("PUBSUB-DELIVERY")
def test_get_times_out_with_none(store: Store) -> None:
    with store.subscribe("quiet") as subscription:
        assert subscription.get(timeout=0) is None
        assert subscription.get(timeout=QUIET_S) is None


@pytest.mark.property("PUBSUB-DELIVERY")
def test_iteration_yields_messages_until_closed(store: Store) -> None:
    subscription = store.subscribe("news")
    received: list[Any] = []

    def iterate() -> None:
        for message in subscription:
            received.append(message)

    iterating = in_thread(iterate)
    try:
        store.notify("news", {"n": 1})
        store.notify("news", {"n": 2})
        give_up_at = time.monotonic() + GENEROUS_S
        while len(received) < 2 and time.monotonic() < give_up_at:
            time.sleep(0.01)
    finally:
        subscription.close()
    iterating.join(GENEROUS_S)
    assert sorted(map(payload_key, received)) == [payload_key({"n": 1}), payload_key({"n": 2})]


@pytest.mark.property("PAYLOAD-INVALID-REFUSED")
def test_a_notify_that_does_not_serialize_is_refused_and_sends_nothing(store: Store) -> None:
    with store.subscribe("news") as subscription:
        with pytest.raises(PayloadError):
            store.notify("news", {"x": {1, 2}})
        store.notify("news", MARKER)
        assert _until_marker(subscription) == []


# -- PUBSUB-ROLLBACK -----------------------------------------------------------------


@pytest.mark.property("PUBSUB-ROLLBACK")
@pytest.mark.requires("transactions")
def test_a_rolled_back_tx_notify_is_never_delivered(store: Store, open_store: StoreFactory) -> None:
    with store.subscribe("news") as same_store, open_store().subscribe("news") as other:
        with pytest.raises(Rollback):
            raise_inside(store.transaction(), lambda tx: tx.notify("news", {"ghost": True}))
        store.notify("news", MARKER)
        assert _until_marker(same_store) == []
        assert _until_marker(other) == []


@pytest.mark.property("PUBSUB-ROLLBACK")
@pytest.mark.requires("transactions", "multi_process")
def test_a_rolled_back_tx_notify_never_reaches_another_process(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store
) -> None:
    with Children(TIME_LIMIT_S) as children:
        children.start(
            subscriber_process,
            engine_name,
            engine_group,
            engine_spec,
            "news",
            1,
            children.results,
            TIME_LIMIT_S,
        )
        children.expect("subscribed")
        with pytest.raises(Rollback):
            raise_inside(store.transaction(), lambda tx: tx.notify("news", {"ghost": True}))
        store.notify("news", MARKER)
        assert children.expect("received") == [MARKER]


# -- PUBSUB-COMMIT-ONLY --------------------------------------------------------------


@pytest.mark.property("PUBSUB-COMMIT-ONLY")
@pytest.mark.requires("transactions")
def test_a_tx_notify_is_delivered_only_after_commit(store: Store, open_store: StoreFactory) -> None:
    with store.subscribe("news") as same_store, open_store().subscribe("news") as other:
        with store.transaction() as tx:
            tx.notify("news", {"n": 1})
            tx.notify("news", {"n": 2})
            assert same_store.get(timeout=QUIET_S) is None, "delivered before the commit"
            assert other.get(timeout=0) is None, "delivered before the commit"
        for subscription in (same_store, other):
            received = [subscription.get(timeout=GENEROUS_S) for _ in range(2)]
            assert sorted(map(payload_key, received)) == [
                payload_key({"n": 1}),
                payload_key({"n": 2}),
            ]
