"""§2: sweep_expired and the no-stranded-rows property (decision 010 §5)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alkstore import EnqueueOpts, Job, JobState, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name

EXPIRED = "expired"
EXHAUSTED = "max attempts exceeded"
LIVE = (JobState.PENDING, JobState.PROCESSING)

FATES = ("pending", "processing", "lapsed", "retried", "dead", "exhausted")
"""What happens to a job before the clock moves and the queue is swept:
pending (never claimed), processing (claimed, long visibility), lapsed
(claimed, 1 s visibility), retried (claimed then retried with a delay), dead
(claimed then failed), exhausted (claimed with a budget of one, 1 s visibility)."""


@dataclass(frozen=True)
class Plan:
    fate: str
    expires: int | None
    retry_delay: int


plans = st.builds(
    Plan,
    fate=st.sampled_from(FATES),
    expires=st.none() | st.integers(1, 60),
    retry_delay=st.integers(0, 60),
)


def _enact(store: Store, name: str, plan: Plan, priority: int) -> int:
    """Enqueue one job and give it its fate. Each job has a higher priority than
    the ones before it, so the claim that follows its enqueue takes exactly it."""
    short = plan.fate in ("lapsed", "exhausted")
    queue = store.queue(name, QueueOpts(visibility_timeout_s=1 if short else 1000, max_attempts=2))
    opts = EnqueueOpts(
        priority=priority,
        expires=plan.expires,
        max_attempts=1 if plan.fate == "exhausted" else None,
    )
    job_id = queue.enqueue({"fate": plan.fate}, opts)
    if plan.fate == "pending":
        return job_id
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == job_id
    if plan.fate == "retried":
        assert handle.retry("retried", delay=plan.retry_delay)
    elif plan.fate == "dead":
        assert handle.fail("failed before the sweep")
    return job_id


def _live_and_expired(job: Job | None, now: int) -> bool:
    return (
        job is not None
        and job.state in LIVE
        and job.expires_at is not None
        and job.expires_at <= now
    )


def _lapsed_at_budget(job: Job | None, now: int) -> bool:
    return (
        job is not None
        and job.state is JobState.PROCESSING
        and job.attempts >= job.max_attempts
        and job.claimed_at is not None
        and job.claimed_at + job.visibility_timeout_s <= now
    )


@pytest.mark.property("QUEUE-NO-STRANDED-ROWS")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(plans, min_size=1, max_size=10), advance=st.integers(0, 90))
def test_no_live_row_is_past_its_expiry_after_a_sweep(
    clocked_store: Store, clock: FakeClock, jobs: list[Plan], advance: int
) -> None:
    name = unique_name("stranded")
    ids = [_enact(clocked_store, name, plan, priority) for priority, plan in enumerate(jobs)]
    clock.advance(advance)
    now = int(clock.now())
    queue = clocked_store.queue(name)
    before = {job_id: queue.get_job(job_id) for job_id in ids}

    result = queue.sweep_expired()

    after = {job_id: queue.get_job(job_id) for job_id in ids}
    stranded = [job for job in after.values() if _live_and_expired(job, now)]
    assert stranded == []
    swept = [job_id for job_id, job in before.items() if _live_and_expired(job, now)]
    for job_id in swept:
        job = after[job_id]
        assert job is not None
        assert (job.state, job.last_error, job.died_at) == (JobState.DEAD, EXPIRED, now)
    assert result.expired == len(swept)
    exhausted = [
        job_id
        for job_id, job in before.items()
        if job_id not in swept and _lapsed_at_budget(job, now)
    ]
    for job_id in exhausted:
        job = after[job_id]
        assert job is not None
        assert (job.state, job.last_error, job.died_at) == (JobState.DEAD, EXHAUSTED, now)
    assert result.exhausted == len(exhausted)
    for job_id in set(ids) - set(swept) - set(exhausted):
        assert after[job_id] == before[job_id], "the sweep leaves every other row alone"
    assert result.purged == 0


@pytest.mark.property("QUEUE-NO-STRANDED-ROWS")
def test_sweep_dead_letters_expired_pending_and_processing_rows(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("expiring", QueueOpts(visibility_timeout_s=1000))
    processing = queue.enqueue({"n": 1}, EnqueueOpts(expires=30, priority=1))
    pending = queue.enqueue({"n": 2}, EnqueueOpts(expires=30))
    holder = queue.claim("worker")
    assert holder is not None
    assert holder.id == processing
    clock.advance(30)
    assert queue.sweep_expired().expired == 2
    for job_id in (processing, pending):
        job = queue.get_job(job_id)
        assert job is not None
        assert (job.state, job.last_error, job.died_at) == (
            JobState.DEAD,
            EXPIRED,
            int(clock.now()),
        )
    assert holder.ack() is False


@pytest.mark.property("QUEUE-NO-STRANDED-ROWS")
def test_sweep_leaves_rows_before_their_expiry(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("expiring")
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(expires=30))
    clock.advance(29)
    assert queue.sweep_expired().expired == 0
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING


@pytest.mark.property("QUEUE-NO-STRANDED-ROWS")
def test_expired_and_exhausted_row_is_swept_as_expired(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("both", QueueOpts(visibility_timeout_s=5, max_attempts=1))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(expires=5))
    assert queue.claim("worker") is not None
    clock.advance(5)
    result = queue.sweep_expired()
    assert (result.expired, result.exhausted) == (1, 0)
    job = queue.get_job(job_id)
    assert job is not None
    assert job.last_error == EXPIRED


@pytest.mark.property("QUEUE-NO-STRANDED-ROWS")
def test_sweep_touches_only_its_own_queue(clocked_store: Store, clock: FakeClock) -> None:
    swept = clocked_store.queue("swept")
    untouched = clocked_store.queue("untouched")
    swept.enqueue({"n": 1}, EnqueueOpts(expires=1))
    other = untouched.enqueue({"n": 2}, EnqueueOpts(expires=1))
    clock.advance(1)
    assert swept.sweep_expired().expired == 1
    job = untouched.get_job(other)
    assert job is not None
    assert job.state is JobState.PENDING
