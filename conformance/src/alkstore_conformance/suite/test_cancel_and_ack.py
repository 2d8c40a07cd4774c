"""§2: cancel, ack_batch and the id-global get_job."""

from __future__ import annotations

import pytest

from alkstore import JobState, QueueOpts, Store
from alkstore.testing import FakeClock

NEVER_ISSUED = 2**40

# -- QUEUE-CANCEL ------------------------------------------------------------------


@pytest.mark.property("QUEUE-CANCEL")
def test_cancel_deletes_a_pending_job(store: Store) -> None:
    queue = store.queue("cancel")
    job_id = queue.enqueue({"n": 1})
    assert queue.cancel(job_id) is True
    assert queue.get_job(job_id) is None
    assert queue.claim("worker") is None


@pytest.mark.property("QUEUE-CANCEL")
def test_cancel_deletes_a_processing_job_whoever_holds_it(store: Store) -> None:
    queue = store.queue("cancel")
    job_id = queue.enqueue({"n": 1})
    holder = queue.claim("someone-else")
    assert holder is not None
    assert queue.cancel(job_id) is True
    assert queue.get_job(job_id) is None
    assert holder.heartbeat(60) is False
    assert holder.ack() is False


@pytest.mark.property("QUEUE-CANCEL")
def test_cancel_leaves_a_dead_job_untouched(store: Store) -> None:
    queue = store.queue("cancel")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.fail("broken") is True
    dead = queue.get_job(job_id)
    assert queue.cancel(job_id) is False
    assert queue.get_job(job_id) == dead


@pytest.mark.property("QUEUE-CANCEL")
def test_cancel_of_an_absent_job_is_false(store: Store) -> None:
    queue = store.queue("cancel")
    job_id = queue.enqueue({"n": 1})
    assert queue.cancel(job_id) is True
    assert queue.cancel(job_id) is False
    assert queue.cancel(NEVER_ISSUED) is False


# -- QUEUE-ACK-BATCH ---------------------------------------------------------------


@pytest.mark.property("QUEUE-ACK-BATCH")
def test_ack_batch_acks_only_this_workers_live_claims(
    clocked_store: Store, clock: FakeClock
) -> None:
    short = clocked_store.queue("batch", QueueOpts(visibility_timeout_s=10, max_attempts=5))
    long = clocked_store.queue("batch", QueueOpts(visibility_timeout_s=100, max_attempts=5))
    lapsed = short.enqueue({"kind": "lapsed"})
    assert short.claim("w1") is not None
    mine = long.enqueue_many([{"kind": "mine"}] * 3)
    assert sorted(h.id for h in long.claim_batch("w1", 3)) == sorted(mine)
    theirs = long.enqueue({"kind": "theirs"})
    assert long.claim("w2") is not None
    pending = long.enqueue({"kind": "pending"})
    clock.advance(10)  # the first claim lapses; the others are live
    every_id = [lapsed, *mine, theirs, pending, NEVER_ISSUED]

    assert long.ack_batch(every_id, "w1") == 3
    assert [job_id for job_id in mine if long.get_job(job_id) is not None] == []
    states = {job_id: long.get_job(job_id) for job_id in (lapsed, theirs, pending)}
    assert {job_id: job.state for job_id, job in states.items() if job is not None} == {
        lapsed: JobState.PROCESSING,
        theirs: JobState.PROCESSING,
        pending: JobState.PENDING,
    }
    assert long.ack_batch(every_id, "w1") == 0


@pytest.mark.property("QUEUE-ACK-BATCH")
def test_ack_batch_of_nothing_is_zero(store: Store) -> None:
    assert store.queue("batch").ack_batch([], "w1") == 0


@pytest.mark.property("QUEUE-ACK-BATCH")
def test_ack_batch_ignores_other_queues_jobs(store: Store) -> None:
    other = store.queue("other")
    job_id = other.enqueue({"n": 1})
    assert other.claim("w1") is not None
    assert store.queue("batch").ack_batch([job_id], "w1") == 0
    assert other.get_job(job_id) is not None


# -- QUEUE-GET-JOB-ID-GLOBAL -------------------------------------------------------


@pytest.mark.property("QUEUE-GET-JOB-ID-GLOBAL")
def test_get_job_finds_a_job_of_any_queue(store: Store) -> None:
    emails = store.queue("emails")
    job_id = emails.enqueue({"to": "a@b"})
    found = store.queue("unrelated").get_job(job_id)
    assert found is not None
    assert found == emails.get_job(job_id)
    assert found.queue == "emails"


@pytest.mark.property("QUEUE-GET-JOB-ID-GLOBAL")
def test_get_job_finds_a_dead_job_of_any_queue(store: Store) -> None:
    emails = store.queue("emails")
    job_id = emails.enqueue({"to": "a@b"})
    handle = emails.claim("worker")
    assert handle is not None
    assert handle.fail("bounced") is True
    found = store.queue("unrelated").get_job(job_id)
    assert found is not None
    assert (found.queue, found.state, found.last_error) == ("emails", JobState.DEAD, "bounced")


@pytest.mark.property("QUEUE-GET-JOB-ID-GLOBAL")
def test_get_job_of_an_absent_id_is_none(store: Store) -> None:
    queue = store.queue("emails")
    assert queue.get_job(NEVER_ISSUED) is None
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.ack() is True
    assert queue.get_job(job_id) is None


@pytest.mark.property("QUEUE-CANCEL")
@pytest.mark.parametrize("job_id", [-1, 0, 2**63, 2**64], ids=["negative", "zero", "2^63", "2^64"])
def test_an_id_no_job_can_have_names_no_job(store: Store, job_id: int) -> None:
    queue = store.queue("q")
    queue.enqueue({"n": 1})
    queue.claim("worker")
    assert queue.get_job(job_id) is None
    assert queue.cancel(job_id) is False
    assert queue.ack_batch([job_id], "worker") == 0
