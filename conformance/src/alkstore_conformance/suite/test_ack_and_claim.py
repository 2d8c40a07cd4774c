"""§12.7: ``JobHandle.ack_and_claim`` -- ack a job and claim the next, one write.

What a worker does when a handler returns and its slot goes straight to the
queue's next job. It must be exactly ``ack()`` followed by
``claim_batch(worker_id, limit)``: the same refusal of a lost claim, the same
claim order, the same handles; only the number of writes differs.
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import EnqueueOpts, InvalidName, InvalidOptions, JobState, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name


@pytest.mark.property("QUEUE-ACK-AND-CLAIM")
def test_ack_and_claim_deletes_the_job_and_claims_the_next_in_claim_order(store: Store) -> None:
    queue = store.queue(unique_name("chained"))
    first = queue.enqueue({"n": 0}, EnqueueOpts(priority=9))
    low, high, middle = (
        queue.enqueue({"n": 1}, EnqueueOpts(priority=1)),
        queue.enqueue({"n": 2}, EnqueueOpts(priority=5)),
        queue.enqueue({"n": 3}, EnqueueOpts(priority=3)),
    )
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == first
    acked, claimed = handle.ack_and_claim("w1", 2)
    assert acked is True
    assert queue.get_job(first) is None
    assert [h.id for h in claimed] == [high, middle]
    assert [(h.job.state, h.job.worker_id, h.attempts) for h in claimed] == [
        (JobState.PROCESSING, "w1", 1),
        (JobState.PROCESSING, "w1", 1),
    ]
    # The handles are live claims like any other.
    assert all(h.ack() for h in claimed)
    remaining = queue.claim("w1")
    assert remaining is not None
    assert remaining.id == low


@pytest.mark.property("QUEUE-ACK-AND-CLAIM")
def test_ack_and_claim_on_an_emptied_queue_acks_and_claims_nothing(store: Store) -> None:
    queue = store.queue(unique_name("chained"))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.ack_and_claim("w1") == (True, [])
    assert queue.get_job(job_id) is None


@pytest.mark.property("QUEUE-ACK-AND-CLAIM")
@pytest.mark.requires("ops")
def test_ack_and_claim_on_a_paused_queue_acks_and_claims_nothing(store: Store) -> None:
    queue = store.queue(unique_name("chained"))
    first = queue.enqueue({"n": 1})
    waiting = queue.enqueue({"n": 2})
    handle = queue.claim("w1")
    assert handle is not None
    assert queue.pause() is True
    assert handle.ack_and_claim("w1") == (True, [])
    assert queue.get_job(first) is None
    job = queue.get_job(waiting)
    assert job is not None
    assert job.state is JobState.PENDING


@pytest.mark.property("QUEUE-ACK-AND-CLAIM-LOST")
def test_ack_and_claim_on_a_lost_claim_acks_nothing_and_still_claims(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("chained"), QueueOpts(visibility_timeout_s=5))
    job_id = queue.enqueue({"n": 1})
    next_id = queue.enqueue({"n": 2})
    stale = queue.claim("w1")
    assert stale is not None
    assert stale.id == job_id
    clock.advance(6)
    reclaimed = queue.claim("w2")
    assert reclaimed is not None
    assert reclaimed.id == job_id
    acked, claimed = stale.ack_and_claim("w1")
    assert acked is False
    assert [h.id for h in claimed] == [next_id]
    # The other worker's claim is untouched: still its to finish.
    assert reclaimed.ack() is True
    assert claimed[0].ack() is True


@pytest.mark.property("QUEUE-ACK-AND-CLAIM-LOST")
def test_ack_and_claim_after_the_job_was_finished_acks_nothing_and_still_claims(
    store: Store,
) -> None:
    queue = store.queue(unique_name("chained"))
    queue.enqueue({"n": 1})
    next_id = queue.enqueue({"n": 2})
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.ack() is True
    acked, claimed = handle.ack_and_claim("w1")
    assert (acked, [h.id for h in claimed]) == (False, [next_id])


@pytest.mark.property("QUEUE-ACK-AND-CLAIM-ARGUMENTS")
@pytest.mark.parametrize(
    ("worker_id", "limit", "error"),
    [
        ("", 1, InvalidName),
        ("w\x00", 1, InvalidName),
        (7, 1, InvalidName),
        ("w1", 0, InvalidOptions),
        ("w1", 10_001, InvalidOptions),
        ("w1", "1", InvalidOptions),
        ("w1", True, InvalidOptions),
    ],
)
def test_ack_and_claim_refuses_bad_arguments_before_acking(
    store: Store, worker_id: Any, limit: Any, error: type[Exception]
) -> None:
    queue = store.queue(unique_name("chained"))
    job_id = queue.enqueue({"n": 1})
    other = queue.enqueue({"n": 2})
    handle = queue.claim("w1")
    assert handle is not None
    with pytest.raises(error):
        handle.ack_and_claim(worker_id, limit)
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.PROCESSING
    pending = queue.get_job(other)
    assert pending is not None
    assert pending.state is JobState.PENDING
    assert handle.ack() is True
