"""``claim_wait_any``: one waiting loop over several queues (contract §12.1).

What the kit cannot see from outside: which statements the core issues, in
which order, whether it registers a waiter, and that nothing at all reaches
the driver before a bad argument is refused. The fake driver delivers no
engine wakes, so with an hour-long re-poll only the core's own per-topic
wakes can end a wait in time. Waits use generous timeouts only as a safety
net; no test asserts a duration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from background import InBackground
from conftest import StoreFactory
from fakes import Call, FakeDriver

from alkstore.constants import MAX_WAIT_QUEUES
from alkstore.core import CoreStore
from alkstore.core.queues import CoreQueue
from alkstore.errors import InvalidName, InvalidOptions, StoreClosed
from alkstore.stop import StopToken

SAFETY_NET_S = 10
NAMES = ("a", "b", "c")


def wait_any_in_background(
    store: CoreStore, queues: Sequence[CoreQueue], **kwargs: Any
) -> InBackground:
    """``claim_wait_any`` over ``queues``, run in a thread."""
    return InBackground(lambda: store.claim_wait_any(queues, "w1", **kwargs), "claim_wait_any")


def _queues(store: CoreStore) -> list[CoreQueue]:
    return [store.queue(name) for name in NAMES]


def _claimed_queues(driver: FakeDriver) -> list[str]:
    # claim(c, queue, worker_id, now, limit): the queue each claim attempt named.
    return [call.args[0] for call in driver.calls_named("claim")]


def _statements(driver: FakeDriver) -> list[Call]:
    # Unit numbers differ from one call to the next; the statements must not.
    return [Call(call.name, 0, call.args) for call in driver.statements()]


# -- claim_wait is claim_wait_any over one queue ------------------------------------


@pytest.mark.parametrize("ready", [True, False], ids=["ready-job", "empty-queue"])
def test_claim_wait_issues_the_statements_of_claim_wait_any_over_its_queue(
    store: CoreStore, driver: FakeDriver, ready: bool
) -> None:
    queue = store.queue("a")
    if ready:
        queue.enqueue({"n": 1})
        queue.enqueue({"n": 2})
    driver.calls.clear()
    alone = queue.claim_wait("w1", timeout=0)
    one = _statements(driver)
    driver.calls.clear()
    listed = store.claim_wait_any([queue], "w1", timeout=0)
    assert _statements(driver) == one
    assert (alone is not None, listed is not None) == (ready, ready)


# -- order and stopping early ---------------------------------------------------------


def test_empty_queues_are_each_tried_in_the_order_given(
    store: CoreStore, driver: FakeDriver
) -> None:
    queues = _queues(store)
    assert store.claim_wait_any(queues[::-1], "w1", timeout=0) is None
    claimed = _claimed_queues(driver)
    # One round on entry and one once the waiter is in place: each in that order.
    assert claimed
    assert claimed == ["c", "b", "a"] * (len(claimed) // 3)


def test_queues_after_the_first_with_a_job_are_not_tried(
    store: CoreStore, driver: FakeDriver
) -> None:
    queues = _queues(store)
    job_id = queues[1].enqueue({"n": 1})
    queues[2].enqueue({"n": 2})
    driver.calls.clear()
    handle = store.claim_wait_any(queues, "w1", timeout=SAFETY_NET_S)
    assert handle is not None
    assert handle.id == job_id
    assert _claimed_queues(driver) == ["a", "b"]


def test_a_ready_job_is_taken_without_starting_the_engines_watcher(
    store: CoreStore, driver: FakeDriver
) -> None:
    queues = _queues(store)
    queues[2].enqueue({"n": 1})
    assert store.claim_wait_any(queues, "w1", timeout=SAFETY_NET_S) is not None
    assert not driver.watching.is_set()
    assert not store._context.hub.has_waiters()


# -- waking ----------------------------------------------------------------------------


@pytest.mark.parametrize("position", [0, 1, 2], ids=NAMES)
def test_an_enqueue_to_any_listed_queue_from_another_thread_ends_the_wait(
    make_store: StoreFactory, driver: FakeDriver, position: int
) -> None:
    # A re-poll of an hour: only the enqueue's own wake can end this wait in time.
    store = make_store(repoll_s=3600)
    queues = _queues(store)
    waiting = wait_any_in_background(store, queues, timeout=None)
    assert driver.looked_ahead.wait(SAFETY_NET_S)
    job_id = store.queue(NAMES[position]).enqueue({"n": 1})
    handle = waiting.join()
    assert handle is not None
    assert (handle.id, handle.queue) == (job_id, NAMES[position])


def test_the_waiter_leaves_every_topic_when_the_wait_ends(
    make_store: StoreFactory, driver: FakeDriver
) -> None:
    store = make_store(repoll_s=3600)
    stop = StopToken()
    waiting = wait_any_in_background(store, _queues(store), timeout=None, stop=stop)
    assert driver.looked_ahead.wait(SAFETY_NET_S)
    assert store._context.hub.has_waiters()
    stop.stop()
    assert waiting.join() is None
    assert not store._context.hub.has_waiters()
    assert stop._callbacks == []


def test_a_stop_already_set_claims_nothing(store: CoreStore, driver: FakeDriver) -> None:
    queues = _queues(store)
    for queue in queues:
        queue.enqueue({"n": 1})
    stop = StopToken()
    stop.stop()
    driver.calls.clear()
    assert store.claim_wait_any(queues, "w1", timeout=SAFETY_NET_S, stop=stop) is None
    assert "claim" not in driver.statement_names()


def test_the_engine_gets_no_more_time_than_the_callers_timeout_on_any_queue(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.claim_wait_any(_queues(store), "w1", timeout=0.2)
    budgets = [wait_s for _, wait_s in driver.wait_budgets]
    assert len(budgets) >= len(NAMES)  # a claim on each queue at least
    assert all(wait_s is not None and 0 < wait_s <= 0.2 for wait_s in budgets)


def test_an_outage_is_waited_out_and_a_later_queues_job_returned(
    store: CoreStore, driver: FakeDriver
) -> None:
    queues = _queues(store)
    job_id = queues[2].enqueue({"n": 1})
    driver.fail_next = 4
    handle = store.claim_wait_any(queues, "w1", timeout=SAFETY_NET_S)
    assert driver.refused == 4
    assert handle is not None
    assert handle.id == job_id


def test_a_closed_store_refuses_the_wait(store: CoreStore) -> None:
    queues = _queues(store)
    store.close()
    with pytest.raises(StoreClosed):
        store.claim_wait_any(queues, "w1", timeout=0)


# -- arguments: refused before any statement ---------------------------------------------

QueueList = Callable[[CoreStore, StoreFactory], Any]
BAD_QUEUE_LISTS: dict[str, QueueList] = {
    "empty": lambda s, m: [],
    "str": lambda s, m: "a",
    "generator": lambda s, m: (s.queue(name) for name in NAMES),
    "too-many": lambda s, m: [s.queue(f"q{n}") for n in range(MAX_WAIT_QUEUES + 1)],
    "one-name-twice": lambda s, m: [s.queue("a"), s.queue("b"), s.queue("a")],
    "one-outbox-twice": lambda s, m: [s.outbox("o"), s.outbox("o")],
    "another-stores-handle": lambda s, m: [s.queue("a"), m().queue("b")],
    "a-name": lambda s, m: [s.queue("a"), "b"],
}


@pytest.mark.parametrize("case", list(BAD_QUEUE_LISTS))
def test_a_bad_queue_list_is_refused_before_any_statement(
    store: CoreStore, make_store: StoreFactory, driver: FakeDriver, case: str
) -> None:
    queues = BAD_QUEUE_LISTS[case](store, make_store)
    with pytest.raises(InvalidOptions, match="queue"):
        store.claim_wait_any(queues, "w1", timeout=0)
    assert driver.calls == []


def test_max_wait_queues_handles_are_accepted(store: CoreStore) -> None:
    queues = [store.queue(f"q{n}") for n in range(MAX_WAIT_QUEUES)]
    job_id = queues[-1].enqueue({"n": 1})
    handle = store.claim_wait_any(queues, "w1", timeout=SAFETY_NET_S)
    assert handle is not None
    assert handle.id == job_id


def test_a_queue_and_an_outbox_of_one_name_are_not_a_duplicate(store: CoreStore) -> None:
    outbox = store.outbox("a")
    job_id = outbox.enqueue({"n": 1})
    handle = store.claim_wait_any([store.queue("a"), outbox], "w1", timeout=SAFETY_NET_S)
    assert handle is not None
    assert handle.id == job_id


BAD_CALLS: dict[str, tuple[dict[str, Any], type[Exception], str]] = {
    "worker-id-empty": ({"worker_id": ""}, InvalidName, "worker_id"),
    "worker-id-int": ({"worker_id": 7}, InvalidName, "worker_id"),
    "timeout-negative": ({"timeout": -1}, InvalidOptions, "timeout"),
    "stop-event": ({"stop": threading.Event()}, InvalidOptions, "stop"),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_a_bad_worker_id_timeout_or_stop_is_refused_before_any_statement(
    store: CoreStore, driver: FakeDriver, case: str
) -> None:
    changes, error, field = BAD_CALLS[case]
    call: dict[str, Any] = {"worker_id": "w1", "timeout": 0, **changes}
    with pytest.raises(error, match=field):
        store.claim_wait_any(_queues(store), **call)
    assert driver.calls == []
