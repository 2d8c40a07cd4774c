"""``store.wake_watcher``: the wakes of some queues, waited on without claiming (§2.15)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from fakes import FakeDriver

from alkstore import StopToken
from alkstore.core import CoreStore
from alkstore.errors import InvalidName, InvalidOptions, StoreClosed
from alkstore.names import outbox_queue_name


def test_a_watcher_wakes_on_an_enqueue_into_its_queue(store: CoreStore) -> None:
    with store.wake_watcher(["q"]) as watcher:
        store.queue("q").enqueue({"n": 1})
        assert watcher.wait(5) is True


def test_a_watcher_of_several_queues_wakes_on_an_enqueue_into_any(store: CoreStore) -> None:
    with store.wake_watcher(["a", "b"]) as watcher:
        store.queue("b").enqueue({"n": 1})
        assert watcher.wait(5) is True


def test_a_watcher_is_not_woken_by_an_enqueue_into_another_queue(store: CoreStore) -> None:
    with store.wake_watcher(["a"]) as watcher:
        store.queue("b").enqueue({"n": 1})
        assert watcher.wait(0.05) is False


def test_wakes_before_a_wait_make_one_true(store: CoreStore) -> None:
    with store.wake_watcher(["q"]) as watcher:
        store.queue("q").enqueue({"n": 1})
        store.queue("q").enqueue({"n": 2})
        assert [watcher.wait(5), watcher.wait(0.05)] == [True, False]


def test_a_watcher_starts_the_engines_watch_before_it_is_returned(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.wake_watcher(["q"]).close()
    assert driver.watching.is_set()


def test_a_watcher_names_its_queues_in_the_order_given(store: CoreStore) -> None:
    with store.wake_watcher(("b", "a")) as watcher:
        assert watcher.queues == ("b", "a")


def test_a_stop_ends_a_wait_with_false(store: CoreStore) -> None:
    stop = StopToken()
    with store.wake_watcher(["q"]) as watcher:
        threading.Timer(0.05, stop.stop).start()
        assert watcher.wait(30, stop) is False


def test_closing_the_store_ends_a_wait_with_true(make_store: Callable[..., CoreStore]) -> None:
    store = make_store()
    watcher = store.wake_watcher(["q"])
    threading.Timer(0.05, store.close).start()
    assert watcher.wait(30) is True


def test_a_wait_on_a_closed_store_raises_store_closed(store: CoreStore) -> None:
    watcher = store.wake_watcher(["q"])
    store.close()
    with pytest.raises(StoreClosed):
        watcher.wait(0)


def test_a_wait_on_a_closed_watcher_raises_store_closed(store: CoreStore) -> None:
    watcher = store.wake_watcher(["q"])
    watcher.close()
    watcher.close()  # idempotent
    with pytest.raises(StoreClosed):
        watcher.wait(0)


def test_a_closed_store_refuses_a_new_watcher(store: CoreStore) -> None:
    store.close()
    with pytest.raises(StoreClosed):
        store.wake_watcher(["q"])


def test_a_watcher_of_an_outboxs_backing_queue_wakes_on_its_enqueue(store: CoreStore) -> None:
    with store.wake_watcher([outbox_queue_name("out")]) as watcher:
        store.outbox("out").enqueue({"n": 1})
        assert watcher.wait(5) is True


@pytest.mark.parametrize(
    ("queues", "error"),
    [
        ("q", InvalidOptions),
        ([], InvalidOptions),
        (["q", "q"], InvalidOptions),
        ([""], InvalidName),
        ([7], InvalidName),
    ],
    ids=["a-string", "empty", "twice", "empty-name", "not-a-name"],
)
def test_malformed_queues_are_refused(
    store: CoreStore, queues: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        store.wake_watcher(queues)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [-1, "soon"], ids=["negative", "text"])
def test_a_malformed_timeout_is_refused(store: CoreStore, timeout: object) -> None:
    with store.wake_watcher(["q"]) as watcher, pytest.raises(InvalidOptions):
        watcher.wait(timeout)  # type: ignore[arg-type]


def test_a_malformed_stop_is_refused(store: CoreStore) -> None:
    with store.wake_watcher(["q"]) as watcher, pytest.raises(InvalidOptions):
        watcher.wait(0, stop=object())  # type: ignore[arg-type]
