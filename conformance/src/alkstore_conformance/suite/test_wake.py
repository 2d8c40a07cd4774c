"""§2 (decision 006): claim_wait is wake-driven, bounded by timeout and stop.

These tests are functional: generous timeouts, no latency assertions (speed
belongs in benchmarks). Short sleeps only sequence "the waiter has started
waiting" before "the job is enqueued"; if a sleep were too short the test
would still pass, just checking less.
"""

from __future__ import annotations

import time

import pytest

from alkstore import EngineSpec, EnqueueOpts, StopToken, Store
from alkstore_conformance.helpers.common import claim_wait_in_thread
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.processes import enqueuer_process
from alkstore_conformance.helpers.profiles import Children

GENEROUS_S = 60.0
SETTLE_S = 0.2

# -- WAKE-CLAIM-WAIT-RETURNS-NEW-JOB --------------------------------------------------


@pytest.mark.property("WAKE-CLAIM-WAIT-RETURNS-NEW-JOB")
def test_claim_wait_returns_a_ready_job_at_once(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim_wait("worker", timeout=GENEROUS_S)
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property("WAKE-CLAIM-WAIT-RETURNS-NEW-JOB")
def test_claim_wait_returns_a_job_enqueued_on_the_same_store(store: Store) -> None:
    queue = store.queue("jobs")
    got = claim_wait_in_thread(queue, timeout=GENEROUS_S)
    time.sleep(SETTLE_S)
    job_id = queue.enqueue({"n": 1})
    handle = got()
    assert handle is not None
    assert handle.id == job_id
    assert handle.ack() is True


@pytest.mark.property("WAKE-CLAIM-WAIT-RETURNS-NEW-JOB")
def test_claim_wait_returns_a_job_enqueued_by_another_store(
    store: Store, open_store: StoreFactory
) -> None:
    got = claim_wait_in_thread(store.queue("jobs"), timeout=GENEROUS_S)
    time.sleep(SETTLE_S)
    job_id = open_store().queue("jobs").enqueue({"n": 1})
    handle = got()
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property("WAKE-CLAIM-WAIT-RETURNS-NEW-JOB")
@pytest.mark.requires("multi_process")
def test_claim_wait_returns_a_job_enqueued_by_another_process(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store
) -> None:
    with Children(GENEROUS_S) as children:
        go = children.context.Event()
        children.start(
            enqueuer_process,
            engine_name,
            engine_group,
            engine_spec,
            "jobs",
            go,
            GENEROUS_S,
            children.results,
        )
        children.expect("ready")
        got = claim_wait_in_thread(store.queue("jobs"), timeout=GENEROUS_S)
        time.sleep(SETTLE_S)
        go.set()
        value = children.expect("enqueued")
        handle = got()
    assert handle is not None
    assert handle.id == value


# -- WAKE-CLAIM-WAIT-TIMEOUT-AND-STOP -------------------------------------------------


@pytest.mark.property("WAKE-CLAIM-WAIT-TIMEOUT-AND-STOP")
@pytest.mark.parametrize("timeout", [0, 0.3])
def test_claim_wait_on_an_empty_queue_times_out_with_none(store: Store, timeout: float) -> None:
    assert store.queue("empty").claim_wait("worker", timeout=timeout) is None


@pytest.mark.property("WAKE-CLAIM-WAIT-TIMEOUT-AND-STOP")
def test_claim_wait_returns_none_when_stopped(store: Store) -> None:
    stop = StopToken()
    got = claim_wait_in_thread(store.queue("empty"), timeout=None, stop=stop)
    time.sleep(SETTLE_S)
    stop.stop()
    assert got() is None


@pytest.mark.property("WAKE-CLAIM-WAIT-TIMEOUT-AND-STOP")
def test_claim_wait_with_stop_already_set_returns_none(store: Store) -> None:
    queue = store.queue("jobs")
    queue.enqueue({"n": 1})
    stop = StopToken()
    stop.stop()
    assert queue.claim_wait("worker", timeout=GENEROUS_S, stop=stop) is None


@pytest.mark.property("WAKE-CLAIM-WAIT-TIMEOUT-AND-STOP")
def test_claim_wait_ignores_jobs_of_other_queues(store: Store) -> None:
    got = claim_wait_in_thread(store.queue("watched"), timeout=1.0)
    time.sleep(SETTLE_S)
    store.queue("elsewhere").enqueue({"n": 1})
    assert got() is None


# -- WAKE-DELAYED-JOB ----------------------------------------------------------------


@pytest.mark.property("WAKE-DELAYED-JOB")
def test_claim_wait_takes_a_delayed_job_once_due(store: Store) -> None:
    queue = store.queue("later")
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(delay=1))
    job = queue.get_job(job_id)
    assert job is not None
    handle = queue.claim_wait("worker", timeout=GENEROUS_S)
    assert handle is not None
    assert handle.id == job_id
    assert handle.job.claimed_at is not None
    assert handle.job.claimed_at >= job.run_at


@pytest.mark.property("WAKE-DELAYED-JOB")
def test_claim_wait_takes_a_job_delayed_by_another_store(
    store: Store, open_store: StoreFactory
) -> None:
    got = claim_wait_in_thread(store.queue("later"), timeout=GENEROUS_S)
    time.sleep(SETTLE_S)
    job_id = open_store().queue("later").enqueue({"n": 1}, EnqueueOpts(delay=1))
    handle = got()
    assert handle is not None
    assert handle.id == job_id
