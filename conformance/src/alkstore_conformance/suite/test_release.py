"""§13: ``JobHandle.release`` gives a claim back as if it had never been made.

What ``alkstore.aio`` does with a claim whose caller was cancelled: the job must
be claimable again at once, without losing an attempt of its budget (a job
released at its last attempt must not be stranded or buried).
"""

from __future__ import annotations

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.support import unique_name


@pytest.mark.property("QUEUE-RELEASE-UNCOUNTED")
def test_a_released_job_is_pending_at_its_run_at_with_its_attempts_as_before(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("released"))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(priority=3))
    before = queue.get_job(job_id)
    handle = queue.claim("w1")
    assert handle is not None
    clock.advance(5)
    assert handle.release() is True
    after = queue.get_job(job_id)
    assert after == before


@pytest.mark.property("QUEUE-RELEASE-UNCOUNTED")
def test_a_released_job_is_claimable_at_once_by_anyone(store: Store) -> None:
    queue = store.queue(unique_name("released"))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.release() is True
    again = queue.claim("w2")
    assert again is not None
    assert (again.id, again.attempts, again.job.worker_id) == (job_id, 1, "w2")
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
        assert handle.attempts == 1
        assert handle.release() is True
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.attempts) == (JobState.PENDING, 0)
    last = queue.claim("w1")
    assert last is not None
    assert last.ack() is True


@pytest.mark.property("QUEUE-RELEASE-UNCOUNTED")
def test_release_of_a_handle_already_acked_or_released_is_refused(store: Store) -> None:
    queue = store.queue(unique_name("released"))
    queue.enqueue({"n": 1})
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.release() is True
    assert handle.release() is False
    again = queue.claim("w2")
    assert again is not None
    assert handle.release() is False
    assert again.ack() is True
    assert again.release() is False
