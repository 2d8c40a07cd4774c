"""``claim_wait``: wake-driven waiting, timeouts, stop tokens and database outages.

Waits use generous timeouts only as a safety net; no test asserts a duration.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from background import InBackground
from conftest import StoreFactory
from fakes import FakeDriver

from alkstore.core import CoreStore
from alkstore.errors import EngineUnavailable, InvalidOptions, StoreClosed
from alkstore.stop import StopToken

SAFETY_NET_S = 10


def wait_in_background(store: CoreStore, **kwargs: Any) -> InBackground:
    """``claim_wait`` on queue "q", run in a thread."""
    queue = store.queue("q")
    return InBackground(lambda: queue.claim_wait("w1", **kwargs), "claim_wait")


def test_claim_wait_returns_a_ready_job_at_once(store: CoreStore) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim_wait("w1", timeout=SAFETY_NET_S)
    assert handle is not None
    assert handle.id == job_id


def test_claim_wait_returns_none_on_timeout(store: CoreStore) -> None:
    assert store.queue("q").claim_wait("w1", timeout=0.05) is None


def test_claim_wait_with_zero_timeout_still_tries_once(store: CoreStore) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    assert queue.claim_wait("w1", timeout=0) is not None


def test_claim_wait_starts_the_engines_watcher(store: CoreStore, driver: FakeDriver) -> None:
    store.queue("q").claim_wait("w1", timeout=0)
    assert driver.sink is store._context.hub


def test_claim_wait_returns_none_when_stopped_from_another_thread(
    make_store: StoreFactory, driver: FakeDriver
) -> None:
    # A re-poll of an hour: only the stop token's wake can end this wait in time.
    store = make_store(repoll_s=3600)
    stop = StopToken()
    waiting = wait_in_background(store, timeout=None, stop=stop)
    assert driver.looked_ahead.wait(SAFETY_NET_S)
    stop.stop()
    assert waiting.join() is None


def test_claim_wait_with_a_stopped_token_returns_none_without_claiming(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    stop = StopToken()
    stop.stop()
    driver.calls.clear()
    assert queue.claim_wait("w1", timeout=SAFETY_NET_S, stop=stop) is None
    assert "claim" not in driver.statement_names()


def test_claim_wait_wakes_on_an_enqueue_from_another_thread(
    make_store: StoreFactory, driver: FakeDriver
) -> None:
    store = make_store(repoll_s=3600)
    waiting = wait_in_background(store, timeout=None)
    assert driver.looked_ahead.wait(SAFETY_NET_S)
    job_id = store.queue("q").enqueue({"n": 1})
    handle = waiting.join()
    assert handle is not None
    assert handle.id == job_id


def test_claim_wait_unregisters_its_stop_callback(store: CoreStore) -> None:
    stop = StopToken()
    store.queue("q").claim_wait("w1", timeout=0, stop=stop)
    assert stop._callbacks == []


def test_claim_wait_refuses_a_stop_that_is_not_a_stop_token(store: CoreStore) -> None:
    with pytest.raises(InvalidOptions, match="stop"):
        store.queue("q").claim_wait("w1", timeout=0, stop=threading.Event())  # type: ignore[arg-type]


def test_claim_wait_refuses_a_negative_timeout(store: CoreStore) -> None:
    with pytest.raises(InvalidOptions, match="timeout"):
        store.queue("q").claim_wait("w1", timeout=-1)


def test_claim_wait_keeps_waiting_across_an_outage_and_returns_the_job(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    driver.fail_next = 3
    handle = queue.claim_wait("w1", timeout=SAFETY_NET_S)
    assert driver.refused == 3
    assert handle is not None
    assert handle.id == job_id


def test_claim_wait_recovers_when_the_database_comes_back_later(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    driver.down = True
    waiting = wait_in_background(store, timeout=SAFETY_NET_S)
    while driver.refused < 3 and waiting.thread.is_alive():
        waiting.thread.join(0.01)
    driver.down = False
    handle = waiting.join()
    assert driver.refused >= 3
    assert handle is not None
    assert handle.id == job_id


def test_claim_wait_finds_no_work_when_an_outage_outlasts_its_timeout(
    store: CoreStore, driver: FakeDriver
) -> None:
    driver.down = True
    assert store.queue("q").claim_wait("w1", timeout=0.05) is None
    assert driver.refused >= 1


def test_claim_wait_hands_the_engine_no_more_time_than_its_own_timeout(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.queue("q").claim_wait("w1", timeout=0.2)
    budgets = [wait_s for _, wait_s in driver.wait_budgets]
    assert budgets  # it claimed and looked ahead at least once
    assert all(wait_s is not None and 0 < wait_s <= 0.2 for wait_s in budgets)


def test_calls_without_a_timeout_leave_the_engine_its_own_limit(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue({"n": 1})
    assert queue.claim("w1") is not None
    assert [wait_s for _, wait_s in driver.wait_budgets] == [None, None]


def test_an_outage_still_reaches_a_caller_that_does_not_wait(
    store: CoreStore, driver: FakeDriver
) -> None:
    driver.down = True
    with pytest.raises(EngineUnavailable) as caught:
        store.queue("q").claim("w1")
    assert isinstance(caught.value.__cause__, ConnectionError)


def test_claim_wait_raises_store_closed_when_the_store_closes_meanwhile(
    make_store: StoreFactory, driver: FakeDriver
) -> None:
    store = make_store(repoll_s=3600)
    waiting = wait_in_background(store, timeout=None)
    assert driver.looked_ahead.wait(SAFETY_NET_S)
    store.close()
    with pytest.raises(StoreClosed):
        waiting.join()
