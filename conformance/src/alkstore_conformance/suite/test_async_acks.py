"""§12.11: acks that need not wait for the disk (the ``async_acks`` profile).

A worker with ``durable_acks=False`` asks the core for acks whose commit may return
before it is durable; an engine with the profile may then lose the last of them in
an engine crash (the jobs run again), and nothing else. What the kit can check
without crashing the engine is that such an ack is still an ack, guarded by its
claim like any other, and that the unit or transaction after it writes as before;
that an engine crash loses no other write is an engine's own crash test (the
PostgreSQL engine's ``test_postgres_async_acks``, on a cluster it stops with
``pg_ctl stop -m immediate``). On every engine, with the profile or not, a worker
asked for asynchronous acks acks each job once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from alkstore import EngineProvider, EngineSpec, Job, JobHandle, JobState, QueueOpts, Store
from alkstore.core.queues import CoreJobHandle
from alkstore.core.transaction import CoreTransaction
from alkstore.testing import FakeClock
from alkstore.worker import Worker
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.workers import RunningWorker, eventually

VISIBILITY_S = 30
LIMIT_S = 20.0
"""The bound on every wait: far above what a passing engine needs."""


@pytest.fixture
def core_store(engine: EngineProvider, engine_spec: EngineSpec) -> Iterator[Store]:
    """The engine's own store on the system clock, never through ``alkstore.aio``: the
    ack asked not to wait is the core handle's (``ack_durably``), which the worker
    calls and the async surface does not have, so a ``--via aio`` run leaves these
    tests to the ordinary run."""
    with engine.open(engine_spec.url, **engine_spec.opts) as opened:
        yield opened


@pytest.fixture
def clocked_core_store(
    engine: EngineProvider, engine_spec: EngineSpec, clock: FakeClock
) -> Iterator[Store]:
    """``core_store`` on the test's ``clock``."""
    with engine.open(engine_spec.url, clock=clock, **engine_spec.opts) as opened:
        yield opened


def _claimed(store: Store, name: str, opts: QueueOpts | None = None) -> CoreJobHandle:
    queue = store.queue(name, opts or QueueOpts(visibility_timeout_s=VISIBILITY_S))
    queue.enqueue({"order": 7})
    handle = queue.claim("w1")
    assert isinstance(handle, CoreJobHandle)
    return handle


def _state(store: Store, handle: JobHandle) -> JobState | None:
    job = store.queue(handle.job.queue).get_job(handle.id)
    return None if job is None else job.state


# -- ASYNC-ACKS-AS-ACKS ----------------------------------------------------------------


@pytest.mark.property("ASYNC-ACKS-AS-ACKS")
def test_an_ack_without_waiting_ends_a_valid_claim(core_store: Store) -> None:
    handle = _claimed(core_store, unique_name("async-ack"))
    assert handle.ack_durably(durable=False)
    assert _state(core_store, handle) is None
    assert not handle.ack()  # the claim is finished


@pytest.mark.property("ASYNC-ACKS-AS-ACKS")
def test_an_ack_without_waiting_refuses_a_lapsed_claim(
    clocked_core_store: Store, clock: FakeClock
) -> None:
    handle = _claimed(clocked_core_store, unique_name("async-lapsed"))
    clock.advance(VISIBILITY_S)
    assert not handle.ack_durably(durable=False)
    assert _state(clocked_core_store, handle) is JobState.PROCESSING  # lapsed, not acked
    again = clocked_core_store.queue(handle.job.queue).claim("w2")
    assert again is not None
    assert again.id == handle.id


@pytest.mark.property("ASYNC-ACKS-AS-ACKS")
def test_an_ack_without_waiting_refuses_a_superseded_claim(
    clocked_core_store: Store, clock: FakeClock
) -> None:
    name = unique_name("async-superseded")
    handle = _claimed(clocked_core_store, name)
    clock.advance(VISIBILITY_S)
    newer = clocked_core_store.queue(name).claim("w2")
    assert newer is not None
    assert not handle.ack_durably(durable=False)
    assert _state(clocked_core_store, newer) is JobState.PROCESSING
    assert newer.ack()


@pytest.mark.requires("results")
@pytest.mark.property("ASYNC-ACKS-AS-ACKS")
def test_an_ack_without_waiting_keeps_a_retained_job_completed_with_its_result(
    core_store: Store,
) -> None:
    kept = QueueOpts(visibility_timeout_s=VISIBILITY_S, completed_retention_s=3600)
    handle = _claimed(core_store, unique_name("async-kept"), kept)
    assert handle.ack_durably({"total": 3}, durable=False)
    job = core_store.queue(handle.job.queue).get_job(handle.id)
    assert job is not None
    assert (job.state, job.result) == (JobState.COMPLETED, {"total": 3})


@pytest.mark.property("ASYNC-ACKS-AS-ACKS")
def test_an_ack_and_claim_without_waiting_acks_and_claims_the_next_job(core_store: Store) -> None:
    name = unique_name("async-chain")
    handle = _claimed(core_store, name)
    next_id = core_store.queue(name).enqueue({"order": 8})
    acked, claimed = handle.ack_durably_and_claim("w1", 1, durable=False)
    assert acked
    assert [h.id for h in claimed] == [next_id]
    assert _state(core_store, handle) is None
    assert _state(core_store, claimed[0]) is JobState.PROCESSING


@pytest.mark.property("ASYNC-ACKS-AS-ACKS")
def test_a_write_after_an_ack_without_waiting_is_written_as_before(core_store: Store) -> None:
    name = unique_name("async-then")
    handle = _claimed(core_store, name)
    assert handle.ack_durably(durable=False)
    queue = core_store.queue(name)
    later = queue.enqueue({"order": 9})
    job = queue.get_job(later)
    assert job is not None
    assert job.state is JobState.PENDING


@pytest.mark.requires("transactions")
@pytest.mark.property("ASYNC-ACKS-AS-ACKS")
def test_a_transaction_of_acks_without_waiting_commits_each_valid_ack(
    clocked_core_store: Store, clock: FakeClock
) -> None:
    lapsed = _claimed(clocked_core_store, unique_name("async-group-lapsed"))
    clock.advance(VISIBILITY_S)
    valid = _claimed(clocked_core_store, unique_name("async-group-valid"))
    refused = []
    with clocked_core_store.transaction() as tx:
        assert isinstance(tx, CoreTransaction)
        tx.commit_acks_without_waiting()
        for handle in (lapsed, valid):
            try:
                tx.ack(handle)
            except Exception as exc:
                refused.append((handle.id, type(exc).__name__))
    assert refused == [(lapsed.id, "StaleHandle")]
    assert _state(clocked_core_store, valid) is None
    assert _state(clocked_core_store, lapsed) is JobState.PROCESSING


# -- ASYNC-ACKS-WORKER ------------------------------------------------------------------


def _run_backlog(store: Store, ack_window_s: float) -> tuple[Counter[int], list[int]]:
    """A worker with ``durable_acks=False`` over 30 jobs: each job's runs, and the
    ids still in the store once every job ran."""
    name = unique_name("async-worker")
    queue = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S))
    ids = [int(queue.enqueue({"n": n})) for n in range(30)]
    runs: Counter[int] = Counter()
    worker = Worker(store, "async-w", ack_window_s=ack_window_s, durable_acks=False)

    @worker.task(name, concurrency=4)
    def handle(job: Job) -> None:
        runs[job.id] += 1

    with RunningWorker(worker, LIMIT_S) as running:
        eventually(lambda: all(queue.get_job(i) is None for i in ids), "every job acked", LIMIT_S)
        running.stop()
    return runs, [i for i in ids if queue.get_job(i) is not None]


@pytest.mark.property("ASYNC-ACKS-WORKER")
def test_a_worker_without_durable_acks_acks_each_job_once(store: Store) -> None:
    runs, left = _run_backlog(store, 0.0)
    assert left == []
    assert len(runs) == 30
    assert set(runs.values()) == {1}


@pytest.mark.requires("transactions")
@pytest.mark.property("ASYNC-ACKS-WORKER")
def test_a_worker_without_durable_acks_acks_each_grouped_job_once(store: Store) -> None:
    runs, left = _run_backlog(store, 0.002)
    assert left == []
    assert len(runs) == 30
    assert set(runs.values()) == {1}
