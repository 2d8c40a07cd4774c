"""§2: dead-letter storage — visible, never claimed, purged only by retention."""

from __future__ import annotations

import pytest

from alkstore import EnqueueOpts, JobState, Queue, QueueOpts, Store
from alkstore.testing import FakeClock

TEN_YEARS_S = 10 * 365 * 86_400


def _dead(queue: Queue, error: str = "broken") -> int:
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == job_id
    assert handle.fail(error) is True
    return job_id


# -- QUEUE-DEAD-VISIBLE --------------------------------------------------------------


@pytest.mark.property("QUEUE-DEAD-VISIBLE")
def test_dead_job_keeps_its_id_and_row_and_gains_last_error_and_died_at(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("dead", QueueOpts(visibility_timeout_s=45, max_attempts=4))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(priority=3, expires=10_000))
    handle = queue.claim("worker")
    assert handle is not None
    live = handle.job
    clock.advance(2)
    assert handle.fail("broken") is True
    dead = queue.get_job(job_id)
    assert dead is not None
    assert dead.state is JobState.DEAD
    assert (dead.last_error, dead.died_at) == ("broken", int(clock.now()))
    unchanged = (
        "id",
        "queue",
        "payload",
        "priority",
        "attempts",
        "max_attempts",
        "created_at",
        "run_at",
        "expires_at",
        "visibility_timeout_s",
        "backoff_base_s",
        "dead_letter_retention_s",
    )
    assert {f: getattr(dead, f) for f in unchanged} == {f: getattr(live, f) for f in unchanged}


@pytest.mark.property("QUEUE-DEAD-VISIBLE")
def test_live_jobs_have_no_last_error_or_died_at(store: Store) -> None:
    queue = store.queue("alive")
    pending = queue.get_job(queue.enqueue({"n": 1}))
    queue.enqueue({"n": 2})
    handle = queue.claim("worker")
    assert handle is not None
    processing = queue.get_job(handle.id)
    for job in (pending, processing):
        assert job is not None
        assert (job.last_error, job.died_at) == (None, None)


@pytest.mark.property("QUEUE-DEAD-VISIBLE")
def test_dead_jobs_are_never_claimed(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("dead", QueueOpts(visibility_timeout_s=5))
    _dead(queue)
    clock.advance(TEN_YEARS_S)
    assert queue.claim("worker") is None
    assert queue.claim_batch("worker", 10) == []


# -- QUEUE-DEAD-RETENTION ------------------------------------------------------------


@pytest.mark.property("QUEUE-DEAD-RETENTION")
def test_sweep_purges_dead_rows_older_than_their_retention(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("retained", QueueOpts(dead_letter_retention_s=100))
    job_id = _dead(queue)
    clock.advance(100)
    assert queue.sweep_expired().purged == 0
    assert queue.get_job(job_id) is not None
    clock.advance(1)
    assert queue.sweep_expired().purged == 1
    assert queue.get_job(job_id) is None


@pytest.mark.property("QUEUE-DEAD-RETENTION")
def test_without_retention_dead_rows_stay_forever(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("forever")
    job_id = _dead(queue)
    clock.advance(TEN_YEARS_S)
    assert queue.sweep_expired().purged == 0
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.DEAD


@pytest.mark.property("QUEUE-DEAD-RETENTION")
def test_retention_is_read_from_the_jobs_stamp(clocked_store: Store, clock: FakeClock) -> None:
    short = clocked_store.queue("mixed", QueueOpts(dead_letter_retention_s=10))
    kept = clocked_store.queue("mixed", QueueOpts(dead_letter_retention_s=None))
    goes = _dead(short)
    stays = _dead(kept)
    clock.advance(11)
    assert kept.sweep_expired().purged == 1  # swept through the no-retention handle
    assert kept.get_job(goes) is None
    assert kept.get_job(stays) is not None


@pytest.mark.property("QUEUE-DEAD-RETENTION")
def test_sweep_purges_only_its_own_queue(clocked_store: Store, clock: FakeClock) -> None:
    swept = clocked_store.queue("swept", QueueOpts(dead_letter_retention_s=0))
    untouched = clocked_store.queue("untouched", QueueOpts(dead_letter_retention_s=0))
    _dead(swept)
    other = _dead(untouched)
    clock.advance(1)
    assert swept.sweep_expired().purged == 1
    assert untouched.get_job(other) is not None
