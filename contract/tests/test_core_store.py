"""The shared core's store-level rules: transactions and wakes, close, reserved names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from conftest import StoreFactory
from fakes import FakeDriver

from alkstore import Capabilities
from alkstore.core import CoreStore
from alkstore.driver import queue_topic
from alkstore.errors import InvalidOptions, ProfileUnavailable, ReservedName, StoreClosed
from alkstore.names import outbox_queue_name
from alkstore.options import OUTBOX_QUEUE_OPTS, QueueOpts


class Boom(Exception):
    pass


def test_a_rolled_back_transaction_wakes_no_waiter(store: CoreStore, driver: FakeDriver) -> None:
    enqueued: list[int] = []

    def enqueue_then_fail() -> None:
        with store.transaction() as tx:
            enqueued.append(tx.enqueue("q", {"n": 1}))
            raise Boom

    with store._context.hub.waiter(queue_topic("q")) as waiter:
        with pytest.raises(Boom):
            enqueue_then_fail()
        assert waiter.wait(timeout=0) is False
    assert driver.calls_named("rollback")
    assert store.queue("q").get_job(enqueued[0]) is None


def test_a_committed_transaction_wakes_waiters_only_after_commit(store: CoreStore) -> None:
    with store._context.hub.waiter(queue_topic("q")) as waiter:
        with store.transaction() as tx:
            tx.enqueue("q", {"n": 1})
            assert waiter.wait(timeout=0) is False
        assert waiter.wait(timeout=0) is True


def test_a_transaction_announces_each_queue_it_enqueued_to(
    store: CoreStore, driver: FakeDriver
) -> None:
    with store.transaction() as tx:
        tx.enqueue("q", 1)
        tx.enqueue("q", 2)
        tx.enqueue("r", 3)
    assert set(driver.committed_announcements) == {queue_topic("q"), queue_topic("r")}


def test_a_transaction_enqueue_stamps_the_engine_defaults(store: CoreStore) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue("q", 1)
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert (job.visibility_timeout_s, job.max_attempts, job.backoff_base_s) == (300, 3, 5)


def test_a_transaction_refuses_reserved_queue_names(store: CoreStore, driver: FakeDriver) -> None:
    with store.transaction() as tx, pytest.raises(ReservedName):
        tx.enqueue(outbox_queue_name("sync"), 1)
    assert driver.calls_named("insert_jobs") == []


def test_a_transaction_reaches_the_outbox_through_outbox_enqueue(store: CoreStore) -> None:
    with store.transaction() as tx:
        job_id = tx.outbox_enqueue("sync", {"order": 7})
    job = store.outbox("sync").get_job(job_id)
    assert job is not None
    assert job.queue == outbox_queue_name("sync")
    assert job.max_attempts == OUTBOX_QUEUE_OPTS.max_attempts


def test_get_job_tx_is_queue_filtered(store: CoreStore) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue("a", 1)
        assert tx.get_job_tx("a", job_id) is not None
        assert tx.get_job_tx("b", job_id) is None


def test_a_finished_transaction_refuses_further_use(store: CoreStore) -> None:
    with store.transaction() as tx:
        pass
    with pytest.raises(StoreClosed):
        tx.enqueue("q", 1)


def test_store_queue_refuses_the_outbox_backing_name(store: CoreStore) -> None:
    with pytest.raises(ReservedName):
        store.queue(outbox_queue_name("x"))


def test_store_lock_refuses_reserved_names(store: CoreStore) -> None:
    with pytest.raises(ReservedName):
        store.lock("__alkstore_scheduler")


def test_store_queue_refuses_opts_of_the_wrong_type(store: CoreStore) -> None:
    with pytest.raises(InvalidOptions, match="opts"):
        store.queue("q", {"max_attempts": 3})  # type: ignore[arg-type]


def test_outbox_uses_its_reserved_backing_queue_and_defaults(store: CoreStore) -> None:
    outbox = store.outbox("sync")
    job = outbox.get_job(outbox.enqueue({"n": 1}))
    assert job is not None
    assert job.queue == outbox_queue_name("sync")
    assert (
        job.visibility_timeout_s,
        job.max_attempts,
        job.backoff_base_s,
        job.dead_letter_retention_s,
    ) == (60, 5, 5, None)


def test_outbox_and_queue_of_the_same_name_are_separate(store: CoreStore) -> None:
    store.queue("sync").enqueue("queue job")
    handle = store.outbox("sync").claim("w1")
    assert handle is None


@pytest.mark.parametrize("repoll_s", [0, -1, 3601, True, "1"], ids=repr)
def test_store_refuses_a_bad_repoll_interval(driver: FakeDriver, repoll_s: Any) -> None:
    with pytest.raises(InvalidOptions, match="repoll_s"):
        CoreStore(driver, repoll_s=repoll_s)


def _claimed(store: CoreStore) -> Any:
    queue = store.queue("q", QueueOpts())
    queue.enqueue(1)
    return queue.claim("w1")


AFTER_CLOSE: dict[str, Callable[[CoreStore, Any, Any], object]] = {
    "store.queue": lambda store, queue, handle: store.queue("other"),
    "store.outbox": lambda store, queue, handle: store.outbox("sync"),
    "store.lock": lambda store, queue, handle: store.lock("l"),
    "store.transaction": lambda store, queue, handle: store.transaction().__enter__(),
    "store.attach": lambda store, queue, handle: store.attach(object()).__enter__(),
    "enqueue": lambda store, queue, handle: queue.enqueue(1),
    "enqueue_many": lambda store, queue, handle: queue.enqueue_many([1, 2]),
    "claim": lambda store, queue, handle: queue.claim("w1"),
    "claim_batch": lambda store, queue, handle: queue.claim_batch("w1", 5),
    "claim_wait": lambda store, queue, handle: queue.claim_wait("w1", timeout=5),
    "ack_batch": lambda store, queue, handle: queue.ack_batch([1], "w1"),
    "cancel": lambda store, queue, handle: queue.cancel(1),
    "get_job": lambda store, queue, handle: queue.get_job(1),
    "sweep_expired": lambda store, queue, handle: queue.sweep_expired(),
    "handle.ack": lambda store, queue, handle: handle.ack(),
    "handle.heartbeat": lambda store, queue, handle: handle.heartbeat(5),
    "handle.retry": lambda store, queue, handle: handle.retry("x"),
    "handle.fail": lambda store, queue, handle: handle.fail("x"),
}


@pytest.mark.parametrize("operation", sorted(AFTER_CLOSE))
def test_operations_after_close_raise_store_closed(
    make_store: StoreFactory, driver: FakeDriver, operation: str
) -> None:
    store = make_store()
    queue = store.queue("q")
    handle = _claimed(store)
    store.close()
    driver.calls.clear()
    with pytest.raises(StoreClosed):
        AFTER_CLOSE[operation](store, queue, handle)
    assert driver.calls == []


def test_lock_operations_after_close_raise_store_closed(make_store: StoreFactory) -> None:
    store = make_store()
    lock = store.lock("l")
    store.close()
    with pytest.raises(StoreClosed):
        lock.acquire("me", 10)


def test_close_is_idempotent_and_closes_the_driver_once(
    make_store: StoreFactory, driver: FakeDriver
) -> None:
    store = make_store()
    store.close()
    store.close()
    assert store.closed
    assert driver.close_count == 1


def test_the_store_is_a_context_manager_that_closes(
    make_store: StoreFactory, driver: FakeDriver
) -> None:
    with make_store() as store:
        assert driver.close_count == 0
    assert store.closed
    assert driver.close_count == 1


def _lock(store: CoreStore) -> object:
    return store.lock("leader")


def _transaction(store: CoreStore) -> object:
    with store.transaction():
        return None


@pytest.mark.parametrize(
    ("profile", "use"), [("locks", _lock), ("transactions", _transaction)], ids=["locks", "tx"]
)
def test_a_profile_the_engine_declares_absent_is_refused_before_any_statement(
    profile: str, use: Callable[[CoreStore], object]
) -> None:
    driver = FakeDriver()
    capabilities = dataclasses.replace(Capabilities(), **{profile: False})
    with CoreStore(driver, capabilities=capabilities) as store:
        with pytest.raises(ProfileUnavailable, match=profile):
            use(store)
        assert driver.statements() == []
