"""§13: ``JobHandle.release`` gives a claim back without spending the job's budget.

What ``alkstore.aio`` does with a claim whose caller was cancelled: the job must
be claimable again at once, without losing an attempt of its budget (a job
released at its last attempt must be neither stranded nor buried), and the
released handle -- like any stale handle -- must match no later claim.
"""

from __future__ import annotations

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name


@pytest.mark.property("QUEUE-RELEASE-UNCOUNTED")
def test_a_released_job_is_pending_at_its_run_at_with_its_budget_whole(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("released"))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(priority=3))
    before = queue.get_job(job_id)
    assert before is not None
    handle = queue.claim("w1")
    assert handle is not None
    clock.advance(5)
    assert handle.release() is True
    after = queue.get_job(job_id)
    assert after is not None
    assert (after.state, after.run_at, after.priority) == (JobState.PENDING, before.run_at, 3)
    assert (after.worker_id, after.claimed_at, after.errors) == (None, None, ())
    # attempts counts claims; the budget left is what it was before the claim.
    assert after.attempts == 1
    assert after.max_attempts - after.attempts == before.max_attempts - before.attempts


@pytest.mark.property("QUEUE-RELEASE-UNCOUNTED")
def test_a_released_job_is_claimable_at_once_by_anyone(store: Store) -> None:
    queue = store.queue(unique_name("released"))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.release() is True
    again = queue.claim("w2")
    assert again is not None
    assert (again.id, again.job.worker_id) == (job_id, "w2")
    assert again.attempts == handle.attempts + 1
    assert again.ack() is True


@pytest.mark.property("QUEUE-RELEASE-UNCOUNTED")
def test_a_job_released_at_its_last_attempt_is_neither_stranded_nor_buried(
    store: Store,
) -> None:
    queue = store.queue(unique_name("released"), QueueOpts(max_attempts=1))
    job_id = queue.enqueue({"n": 1})
    for _ in range(3):
        handle = queue.claim("w1")
        assert handle is not None
        assert handle.release() is True
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING
    assert job.max_attempts - job.attempts == 1
    last = queue.claim("w1")
    assert last is not None
    assert last.ack() is True


@pytest.mark.property("QUEUE-RELEASE-UNCOUNTED")
def test_a_released_handle_matches_no_later_claim(store: Store) -> None:
    queue = store.queue(unique_name("released"))
    job_id = queue.enqueue({"n": 1})
    released = queue.claim("w1")
    assert released is not None
    assert released.release() is True
    assert released.release() is False
    again = queue.claim("w1")  # the same worker: only the claim's identity tells them apart
    assert again is not None
    before = queue.get_job(job_id)
    for stale_op in (released.release, released.ack, lambda: released.fail("stale")):
        assert stale_op() is False
    assert queue.get_job(job_id) == before
    assert again.ack() is True
    assert again.release() is False
