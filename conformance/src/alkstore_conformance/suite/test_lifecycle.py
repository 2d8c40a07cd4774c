"""§1: providers, provisioning, opening, reopening and closing stores."""

from __future__ import annotations

import dataclasses
import pickle
import threading
from collections.abc import Callable
from typing import Any

import pytest

import alkstore
from alkstore import (
    Capabilities,
    EngineNotFound,
    EngineProvider,
    EngineSpec,
    JobState,
    QueueOpts,
    Store,
    StoreClosed,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.processes import opener_process
from alkstore_conformance.helpers.profiles import Children

CHILD_TIME_LIMIT_S = 60.0


@pytest.mark.property("ENGINE-PROVIDER-SURFACE")
def test_provider_names_itself_and_its_contract_version(engine: EngineProvider) -> None:
    assert isinstance(engine.name, str)
    assert engine.name
    assert isinstance(engine.version, str)
    assert engine.version
    assert engine.contract_version == alkstore.CONTRACT_VERSION


@pytest.mark.property("ENGINE-PROVIDER-SURFACE")
def test_provider_capabilities_are_frozen_data(engine: EngineProvider) -> None:
    capabilities = engine.capabilities
    assert isinstance(capabilities, Capabilities)
    with pytest.raises(dataclasses.FrozenInstanceError):
        capabilities.locks = not capabilities.locks  # type: ignore[misc]


@pytest.mark.property("ENGINE-PROVIDER-SURFACE")
def test_provisioned_spec_survives_pickling(engine_spec: EngineSpec) -> None:
    assert isinstance(engine_spec, EngineSpec)
    assert pickle.loads(pickle.dumps(engine_spec)) == engine_spec


@pytest.mark.property("ENGINE-PROVISION-ISOLATED")
def test_provisioned_store_starts_empty(store: Store) -> None:
    queue = store.queue("fresh")
    assert queue.claim("worker") is None
    assert queue.get_job(1) is None
    assert queue.sweep_expired() == alkstore.SweepResult(expired=0, exhausted=0, purged=0)


@pytest.mark.property("ENGINE-PROVISION-ISOLATED")
def test_provisioned_stores_share_nothing(engine: EngineProvider, store: Store) -> None:
    store.queue("same-name").enqueue({"store": "first"})
    with engine.provision() as other_spec, engine.open(other_spec.url, **other_spec.opts) as other:
        assert other.queue("same-name").claim("worker") is None
        other.queue("same-name").enqueue({"store": "second"})
    handle = store.queue("same-name").claim("worker")
    assert handle is not None
    assert handle.payload == {"store": "first"}
    assert store.queue("same-name").claim("worker") is None


@pytest.mark.property("ENGINE-NOT-FOUND")
def test_unknown_scheme_raises_engine_not_found_naming_installed_engines() -> None:
    with pytest.raises(EngineNotFound) as raised:
        alkstore.open("nope://somewhere")
    message = str(raised.value)
    assert "nope" in message
    for name in alkstore.installed_engines():
        assert name in message


@pytest.mark.property("STORE-OPEN-IDEMPOTENT")
@pytest.mark.unopened_store  # the openers race to build it
@pytest.mark.usefixtures("trial")  # a race: repeated as the mode demands
def test_threads_open_one_fresh_store_at_once(open_store: StoreFactory) -> None:
    openers = 4
    barrier = threading.Barrier(openers)
    ids: list[int] = []
    errors: list[BaseException] = []

    def open_and_enqueue() -> None:
        try:
            barrier.wait(timeout=CHILD_TIME_LIMIT_S)
            ids.append(open_store().queue("opened").enqueue({"by": "thread"}))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_enqueue) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(CHILD_TIME_LIMIT_S)
    assert errors == []
    assert len(set(ids)) == openers
    checker = open_store().queue("opened")
    assert sorted(h.id for h in checker.claim_batch("checker", 10)) == sorted(ids)


@pytest.mark.property("STORE-OPEN-IDEMPOTENT")
@pytest.mark.requires("multi_process")
@pytest.mark.unopened_store  # the openers race to build it
@pytest.mark.usefixtures("trial")  # a race: repeated as the mode demands
def test_processes_open_one_fresh_store_at_once(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, open_store: StoreFactory
) -> None:
    openers = 3
    with Children(CHILD_TIME_LIMIT_S * 2) as children:
        barrier = children.context.Barrier(openers)
        for _ in range(openers):
            children.start(
                opener_process,
                engine_name,
                engine_group,
                engine_spec,
                "opened",
                barrier,
                CHILD_TIME_LIMIT_S,
                results=children.results,
            )
        ids = [children.expect("enqueued") for _ in range(openers)]
    assert len(set(ids)) == openers
    checker = open_store().queue("opened")
    assert sorted(h.id for h in checker.claim_batch("checker", 10)) == sorted(ids)


@pytest.mark.property("STORE-REOPEN-DURABLE")
def test_jobs_survive_reopening_the_store(open_store: StoreFactory, clock: FakeClock) -> None:
    first = open_store(clock=clock)
    queue = first.queue("durable", QueueOpts(visibility_timeout_s=60))
    waiting = queue.enqueue({"n": 1})
    working = queue.enqueue({"n": 2}, alkstore.EnqueueOpts(priority=5))
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == working
    before = {job_id: queue.get_job(job_id) for job_id in (waiting, working)}
    first.close()

    reopened = open_store(clock=clock).queue("durable")
    assert {job_id: reopened.get_job(job_id) for job_id in (waiting, working)} == before
    again = reopened.claim("worker")
    assert again is not None
    assert again.id == waiting
    clock.advance(60)
    lapsed = reopened.claim("worker")
    assert lapsed is not None
    assert (lapsed.id, lapsed.attempts) == (working, 2)


def _closed_store_calls() -> dict[str, Callable[[Store], object]]:
    return {
        "queue": lambda s: s.queue("late"),
        "outbox": lambda s: s.outbox("late"),
        "transaction": lambda s: s.transaction().__enter__(),
    }


@pytest.mark.property("STORE-CLOSED")
@pytest.mark.parametrize("call", list(_closed_store_calls()))
def test_store_methods_after_close_raise_store_closed(store: Store, call: str) -> None:
    store.close()
    assert store.closed
    with pytest.raises(StoreClosed):
        _closed_store_calls()[call](store)


_QUEUE_CALLS: dict[str, Callable[[Any, int], object]] = {
    "enqueue": lambda q, _: q.enqueue({"late": True}),
    "enqueue_many": lambda q, _: q.enqueue_many([1, 2]),
    "claim": lambda q, _: q.claim("worker"),
    "claim_batch": lambda q, _: q.claim_batch("worker", 5),
    "claim_wait": lambda q, _: q.claim_wait("worker", timeout=0.1),
    "ack_batch": lambda q, job_id: q.ack_batch([job_id], "worker"),
    "cancel": lambda q, job_id: q.cancel(job_id),
    "get_job": lambda q, job_id: q.get_job(job_id),
    "sweep_expired": lambda q, _: q.sweep_expired(),
}


@pytest.mark.property("STORE-CLOSED")
@pytest.mark.parametrize("call", list(_QUEUE_CALLS))
def test_queue_calls_after_close_raise_store_closed(store: Store, call: str) -> None:
    queue = store.queue("closing")
    job_id = queue.enqueue({"n": 1})
    store.close()
    with pytest.raises(StoreClosed):
        _QUEUE_CALLS[call](queue, job_id)


_HANDLE_CALLS: dict[str, Callable[[Any], object]] = {
    "ack": lambda h: h.ack(),
    "heartbeat": lambda h: h.heartbeat(30),
    "retry": lambda h: h.retry("late"),
    "fail": lambda h: h.fail("late"),
}


@pytest.mark.property("STORE-CLOSED")
@pytest.mark.parametrize("call", list(_HANDLE_CALLS))
def test_handle_calls_after_close_raise_store_closed(store: Store, call: str) -> None:
    queue = store.queue("closing")
    queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    store.close()
    with pytest.raises(StoreClosed):
        _HANDLE_CALLS[call](handle)


_LOCK_CALLS: dict[str, Callable[[Any], object]] = {
    "acquire": lambda lock: lock.acquire("owner", 30),
    "renew": lambda lock: lock.renew("owner", 30),
    "release": lambda lock: lock.release("owner"),
    "holder": lambda lock: lock.holder(),
}


@pytest.mark.property("STORE-CLOSED")
@pytest.mark.requires("locks")
@pytest.mark.parametrize("call", list(_LOCK_CALLS))
def test_lock_calls_after_close_raise_store_closed(store: Store, call: str) -> None:
    lock = store.lock("closing")
    store.close()
    with pytest.raises(StoreClosed):
        _LOCK_CALLS[call](lock)


@pytest.mark.property("STORE-CLOSED")
def test_store_context_manager_closes_the_store(open_store: StoreFactory) -> None:
    with open_store() as store:
        queue = store.queue("scoped")
        queue.enqueue({"n": 1})
    assert store.closed
    with pytest.raises(StoreClosed):
        queue.claim("worker")


@pytest.mark.property("STORE-REOPEN-DURABLE")
def test_closing_keeps_committed_work(open_store: StoreFactory) -> None:
    with open_store() as first:
        job_id = first.queue("kept").enqueue({"n": 1})
    job = open_store().queue("kept").get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING
