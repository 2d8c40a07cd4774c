"""§2: what a claim takes, in which order, and what it changes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alkstore import EnqueueOpts, JobState, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name

# (priority, seconds the job has been due) for a handful of ready jobs; small
# ranges so ties on priority and on run_at are common.
ready_jobs = st.lists(st.tuples(st.integers(-2, 2), st.integers(0, 3)), min_size=1, max_size=12)

shared_store = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
"""Examples share the test's store; each example uses a fresh queue name instead."""


def _enqueue_ready(
    store: Store, clock: FakeClock, jobs: list[tuple[int, int]]
) -> tuple[str, list[int]]:
    name = unique_name("order")
    queue = store.queue(name)
    now = int(clock.now())
    ids = [
        queue.enqueue({"n": n}, EnqueueOpts(priority=priority, run_at=now - due_for))
        for n, (priority, due_for) in enumerate(jobs)
    ]
    expected = sorted(zip(ids, jobs, strict=True), key=lambda e: (-e[1][0], -e[1][1], e[0]))
    return name, [job_id for job_id, _ in expected]


@pytest.mark.property("QUEUE-CLAIM-ORDER")
@shared_store
@given(jobs=ready_jobs)
def test_claims_follow_priority_then_run_at_then_id(
    clocked_store: Store, clock: FakeClock, jobs: list[tuple[int, int]]
) -> None:
    name, expected = _enqueue_ready(clocked_store, clock, jobs)
    queue = clocked_store.queue(name)
    claimed = []
    for _ in expected:
        handle = queue.claim("worker")
        assert handle is not None
        claimed.append(handle.id)
    assert claimed == expected
    assert queue.claim("worker") is None


@pytest.mark.property("QUEUE-CLAIM-ORDER")
@shared_store
@given(jobs=ready_jobs, limit=st.integers(1, 5))
def test_claim_batch_takes_the_first_jobs_in_claim_order(
    clocked_store: Store, clock: FakeClock, jobs: list[tuple[int, int]], limit: int
) -> None:
    name, expected = _enqueue_ready(clocked_store, clock, jobs)
    queue = clocked_store.queue(name)
    batches = []
    for _ in range(len(expected) + 1):
        batch = queue.claim_batch("worker", limit)
        if not batch:
            break
        assert len(batch) <= limit
        batches.append([handle.id for handle in batch])
    else:
        raise AssertionError(f"claim_batch still claiming after {len(expected)} jobs were claimed")
    assert [job_id for batch in batches for job_id in batch] == expected
    assert all(len(batch) == limit for batch in batches[:-1])


@pytest.mark.property("QUEUE-CLAIM-TRANSITION")
def test_claim_marks_processing_and_counts_the_attempt(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("transition", QueueOpts(visibility_timeout_s=30))
    job_id = queue.enqueue({"to": "a@b"})
    enqueued = queue.get_job(job_id)
    clock.advance(7)
    handle = queue.claim("worker-1")
    assert handle is not None
    job = queue.get_job(job_id)
    assert job is not None
    assert enqueued is not None
    assert job.state is JobState.PROCESSING
    assert job.attempts == 1
    assert job.claimed_at == int(clock.now())
    assert job.worker_id == "worker-1"
    assert (job.created_at, job.run_at, job.payload) == (
        enqueued.created_at,
        enqueued.run_at,
        enqueued.payload,
    )
    assert handle.job == job
    assert (handle.id, handle.attempts, handle.payload) == (job_id, 1, {"to": "a@b"})


@pytest.mark.property("QUEUE-CLAIM-TRANSITION")
def test_claim_is_reclaimable_exactly_at_its_deadline(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("deadline", QueueOpts(visibility_timeout_s=30))
    job_id = queue.enqueue({"n": 1})
    first = queue.claim("worker-1")
    assert first is not None
    clock.advance(29)
    assert queue.claim("worker-2") is None
    clock.advance(1)
    second = queue.claim("worker-2")
    assert second is not None
    assert (second.id, second.attempts) == (job_id, 2)
    assert second.job.worker_id == "worker-2"
    assert second.job.claimed_at == int(clock.now())


@pytest.mark.property("QUEUE-CLAIM-TRANSITION")
def test_claim_of_an_empty_queue_is_none(store: Store) -> None:
    queue = store.queue("empty")
    assert queue.claim("worker") is None
    assert queue.claim_batch("worker", 10) == []


@pytest.mark.property("QUEUE-QUEUES-ISOLATED")
def test_a_queue_hands_out_only_its_own_jobs(store: Store) -> None:
    mine = store.queue("mine")
    theirs = store.queue("theirs")
    job_id = mine.enqueue({"n": 1})
    assert theirs.claim("worker") is None
    assert theirs.claim_batch("worker", 10) == []
    handle = mine.claim("worker")
    assert handle is not None
    assert handle.id == job_id
    assert handle.job.queue == "mine"


@pytest.mark.property("QUEUE-QUEUES-ISOLATED")
def test_queue_names_are_exact(store: Store) -> None:
    store.queue("emails").enqueue({"n": 1})
    for near_miss in ("Emails", "emails ", "email", "emails2"):
        assert store.queue(near_miss).claim("worker") is None
    assert store.queue("emails").claim("worker") is not None
