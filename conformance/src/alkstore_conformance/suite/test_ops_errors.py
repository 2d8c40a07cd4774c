"""§11: every failed attempt's error, kept on the job (ops profile)."""

from __future__ import annotations

import pytest

from alkstore import EnqueueOpts, JobError, JobHandle, JobState, QueueOpts, Store
from alkstore.constants import MAX_ERROR_HISTORY, MAX_ERROR_LENGTH
from alkstore.driver import ERROR_EXHAUSTED
from alkstore.testing import FakeClock

PROPERTY = "OPS-ERROR-HISTORY"
NO_BACKOFF = QueueOpts(backoff_base_s=0, max_attempts=50)


def _claim(clocked_store: Store, name: str) -> JobHandle:
    handle = clocked_store.queue(name, NO_BACKOFF).claim("w")
    assert handle is not None
    return handle


@pytest.mark.property(PROPERTY)
def test_each_retry_and_the_final_fail_append_attempt_time_and_error_newest_last(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("history", NO_BACKOFF)
    job_id = queue.enqueue({"n": 1})
    expected = []
    for attempt, error in enumerate(["timeout", "bad gateway"], start=1):
        assert _claim(clocked_store, "history").retry(error, 0) is True
        expected.append(JobError(attempt, int(clock.now()), error))
        clock.advance(5)
        pending = queue.get_job(job_id)
        assert pending is not None
        assert pending.state is JobState.PENDING
        assert pending.errors == tuple(expected)
        assert pending.last_error is None
    assert _claim(clocked_store, "history").fail("gave up") is True
    expected.append(JobError(3, int(clock.now()), "gave up"))
    dead = queue.get_job(job_id)
    assert dead is not None
    assert (dead.state, dead.last_error, dead.errors) == (JobState.DEAD, "gave up", tuple(expected))


@pytest.mark.property(PROPERTY)
def test_a_job_dead_of_exhaustion_still_shows_why_each_attempt_failed(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("exhausted", QueueOpts(backoff_base_s=0))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(max_attempts=2))
    first = queue.claim("w")
    assert first is not None
    assert first.retry("first cause", 0) is True
    at_first = int(clock.now())
    clock.advance(1)
    second = queue.claim("w")
    assert second is not None
    assert second.retry("second cause", 0) is True
    dead = queue.get_job(job_id)
    assert dead is not None
    assert (dead.state, dead.last_error) == (JobState.DEAD, ERROR_EXHAUSTED)
    assert dead.errors == (
        JobError(1, at_first, "first cause"),
        JobError(2, at_first + 1, "second cause"),
    )


@pytest.mark.property(PROPERTY)
def test_only_the_latest_twenty_five_errors_are_kept(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("many", NO_BACKOFF)
    job_id = queue.enqueue({"n": 1})
    attempts = MAX_ERROR_HISTORY + 5
    for attempt in range(1, attempts + 1):
        assert _claim(clocked_store, "many").retry(f"failure {attempt}", 0) is True
        clock.advance(1)
    job = queue.get_job(job_id)
    assert job is not None
    assert [e.attempt for e in job.errors] == list(range(6, attempts + 1))
    assert [e.error for e in job.errors] == [f"failure {n}" for n in range(6, attempts + 1)]


@pytest.mark.property(PROPERTY)
@pytest.mark.parametrize("length", [MAX_ERROR_LENGTH - 1, MAX_ERROR_LENGTH])
def test_an_error_up_to_the_limit_is_kept_whole(clocked_store: Store, length: int) -> None:
    error = ("Traceback line\n" * (length // 15 + 1))[: length - 1] + "!"
    queue = clocked_store.queue("whole", NO_BACKOFF)
    job_id = queue.enqueue({"n": 1})
    assert _claim(clocked_store, "whole").retry(error, 0) is True
    assert _claim(clocked_store, "whole").fail(error) is True
    job = queue.get_job(job_id)
    assert job is not None
    assert [e.error for e in job.errors] == [error, error]
    assert job.last_error == error


@pytest.mark.property(PROPERTY)
def test_a_longer_error_keeps_its_first_characters_in_the_history(clocked_store: Store) -> None:
    error = "é" * MAX_ERROR_LENGTH + "the tail that goes"
    queue = clocked_store.queue("cut", NO_BACKOFF)
    job_id = queue.enqueue({"n": 1})
    assert _claim(clocked_store, "cut").retry(error, 0) is True
    assert _claim(clocked_store, "cut").fail(error) is True
    job = queue.get_job(job_id)
    assert job is not None
    assert [e.error for e in job.errors] == [error[:MAX_ERROR_LENGTH]] * 2
    assert job.last_error == error  # last_error keeps its contract 1.0 rule: whole


@pytest.mark.property(PROPERTY)
def test_a_refused_retry_of_a_stale_claim_adds_no_error(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("stale", QueueOpts(visibility_timeout_s=5, max_attempts=5))
    job_id = queue.enqueue({"n": 1})
    stale = queue.claim("w")
    assert stale is not None
    clock.advance(5)
    assert stale.retry("too late") is False
    assert stale.fail("too late") is False
    job = queue.get_job(job_id)
    assert job is not None
    assert job.errors == ()
