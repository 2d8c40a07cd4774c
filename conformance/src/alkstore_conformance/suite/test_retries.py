"""§2: retry, backoff, fail, budget exhaustion."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alkstore import EnqueueOpts, JobState, Queue, QueueOpts, Store
from alkstore.backoff import retry_delay_range
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name

EXHAUSTED = "max attempts exceeded"

# -- QUEUE-RETRY-BACKOFF -----------------------------------------------------------


@pytest.mark.property("QUEUE-RETRY-BACKOFF")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.integers(0, 5000), retries=st.integers(1, 4))
def test_retry_without_delay_follows_the_backoff_curve(
    clocked_store: Store, clock: FakeClock, base: int, retries: int
) -> None:
    queue = clocked_store.queue(
        unique_name("backoff"), QueueOpts(backoff_base_s=base, max_attempts=retries + 1)
    )
    job_id = queue.enqueue({"n": 1})
    for attempt in range(1, retries + 1):
        handle = queue.claim("worker")
        assert handle is not None
        assert (handle.id, handle.attempts) == (job_id, attempt)
        assert handle.retry("boom") is True
        job = queue.get_job(job_id)
        assert job is not None
        assert job.state is JobState.PENDING
        low, high = retry_delay_range(base, attempt)
        assert low <= job.run_at - int(clock.now()) <= high
        clock.set(job.run_at)


@pytest.mark.property("QUEUE-RETRY-BACKOFF")
@pytest.mark.parametrize(
    ("delay", "seconds"), [(10, 10), (2.5, 3), (timedelta(seconds=4, milliseconds=1), 5)]
)
def test_retry_with_explicit_delay_waits_exactly_that_long(
    clocked_store: Store, clock: FakeClock, delay: float | timedelta, seconds: int
) -> None:
    queue = clocked_store.queue("explicit", QueueOpts(backoff_base_s=1000))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.retry("boom", delay=delay) is True
    job = queue.get_job(job_id)
    assert job is not None
    assert job.run_at == int(clock.now()) + seconds
    clock.advance(seconds - 1)
    assert queue.claim("worker") is None
    clock.advance(1)
    again = queue.claim("worker")
    assert again is not None
    assert (again.id, again.attempts) == (job_id, 2)


@pytest.mark.property("QUEUE-RETRY-BACKOFF")
def test_retry_with_zero_delay_is_claimable_at_once(clocked_store: Store) -> None:
    queue = clocked_store.queue("explicit", QueueOpts(backoff_base_s=1000))
    queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.retry("boom", delay=0) is True
    again = queue.claim("worker")
    assert again is not None
    assert (again.id, again.attempts) == (handle.id, 2)


@pytest.mark.property("QUEUE-RETRY-BACKOFF")
def test_retry_returns_the_job_to_pending_without_its_claim(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("pending-again", QueueOpts(max_attempts=3))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(priority=4))
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.retry("boom", delay=30) is True
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING
    assert (job.attempts, job.priority, job.payload) == (1, 4, {"n": 1})
    assert (job.worker_id, job.claimed_at) == (None, None)
    assert (job.last_error, job.died_at) == (None, None)


# -- QUEUE-RETRY-AT-BUDGET ---------------------------------------------------------


@pytest.mark.property("QUEUE-RETRY-AT-BUDGET")
@pytest.mark.parametrize("max_attempts", [1, 2])
def test_retry_with_the_budget_spent_dead_letters(
    clocked_store: Store, clock: FakeClock, max_attempts: int
) -> None:
    queue = clocked_store.queue("budget", QueueOpts(max_attempts=max_attempts))
    job_id = queue.enqueue({"n": 1})
    for _ in range(max_attempts - 1):
        handle = queue.claim("worker")
        assert handle is not None
        assert handle.retry("transient", delay=0) is True
    last = queue.claim("worker")
    assert last is not None
    assert last.attempts == max_attempts
    clock.advance(3)
    assert last.retry("still failing") is True
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.DEAD
    assert (job.last_error, job.died_at) == (EXHAUSTED, int(clock.now()))
    assert queue.claim("worker") is None


@pytest.mark.property("QUEUE-RETRY-AT-BUDGET")
def test_retry_with_explicit_delay_at_budget_still_dead_letters(clocked_store: Store) -> None:
    queue = clocked_store.queue("budget", QueueOpts(max_attempts=1))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.retry("boom", delay=5) is True
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, EXHAUSTED)


# -- QUEUE-FAIL-DEAD ---------------------------------------------------------------


@pytest.mark.property("QUEUE-FAIL-DEAD")
def test_fail_dead_letters_now_with_the_callers_error(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("failing", QueueOpts(max_attempts=5))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(priority=2))
    handle = queue.claim("worker")
    assert handle is not None
    clock.advance(4)
    assert handle.fail("bad input: ünïcode ✓") is True
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.DEAD
    assert (job.last_error, job.died_at) == ("bad input: ünïcode ✓", int(clock.now()))
    assert (job.id, job.queue, job.payload, job.priority, job.attempts) == (
        job_id,
        "failing",
        {"n": 1},
        2,
        1,
    )
    clock.advance(10_000)
    assert queue.claim("worker") is None


# -- QUEUE-EXHAUSTED-DEAD-LETTERED ---------------------------------------------------


def _lapsed_at_budget(store: Store, clock: FakeClock) -> tuple[Queue, int]:
    queue = store.queue("exhaust", QueueOpts(visibility_timeout_s=10, max_attempts=1))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker-1")
    assert handle is not None
    clock.advance(10)
    return queue, job_id


@pytest.mark.property("QUEUE-EXHAUSTED-DEAD-LETTERED")
def test_claim_dead_letters_a_lapsed_exhausted_job_instead_of_handing_it_out(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue, job_id = _lapsed_at_budget(clocked_store, clock)
    assert queue.claim("worker-2") is None
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.DEAD
    assert (job.last_error, job.died_at, job.attempts) == (EXHAUSTED, int(clock.now()), 1)


@pytest.mark.property("QUEUE-EXHAUSTED-DEAD-LETTERED")
def test_sweep_dead_letters_a_lapsed_exhausted_job(clocked_store: Store, clock: FakeClock) -> None:
    queue, job_id = _lapsed_at_budget(clocked_store, clock)
    result = queue.sweep_expired()
    assert (result.expired, result.exhausted, result.purged) == (0, 1, 0)
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error, job.died_at) == (
        JobState.DEAD,
        EXHAUSTED,
        int(clock.now()),
    )
    assert queue.claim("worker-2") is None


@pytest.mark.property("QUEUE-EXHAUSTED-DEAD-LETTERED")
def test_live_claim_at_budget_is_left_alone(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("exhaust", QueueOpts(visibility_timeout_s=10, max_attempts=1))
    queue.enqueue({"n": 1})
    handle = queue.claim("worker-1")
    assert handle is not None
    clock.advance(9)
    assert queue.claim("worker-2") is None
    assert queue.sweep_expired().exhausted == 0
    job = queue.get_job(handle.id)
    assert job is not None
    assert job.state is JobState.PROCESSING
    assert handle.ack() is True
