"""§14 (snooze profile): ``JobHandle.snooze(delay)`` puts a live claim back to wait.

A snoozed job is pending at ``now + delay`` with no attempt of its budget spent
(as a release refunds it), its stamps and error history as they were, and one
more in ``Job.snoozes``; at ``MAX_SNOOZES`` a snooze dead-letters it instead. A
stale handle's snooze changes nothing, and a snoozed job is claimable at its
new ``run_at`` by anyone, a waiting claimer included.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from alkstore import EnqueueOpts, InvalidOptions, Job, JobState, QueueOpts, Store
from alkstore.constants import MAX_SNOOZES
from alkstore.testing import FakeClock
from alkstore.worker import JobContext, Snooze, Worker
from alkstore_conformance.helpers.common import claim_wait_in_thread, unique_name
from alkstore_conformance.helpers.workers import RunningWorker, eventually

GENEROUS_S = 60.0
SETTLE_S = 0.2
ERROR_SNOOZES = "max snoozes exceeded"


def _claimed(queue: Any, worker: str = "w1") -> Any:
    handle = queue.claim(worker)
    assert handle is not None
    return handle


@pytest.mark.property("SNOOZE-ATTEMPT-UNSPENT")
def test_a_snoozed_job_is_pending_at_now_plus_delay_with_its_budget_whole(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("snoozed"))
    job_id = queue.enqueue({"n": 1})
    before = queue.get_job(job_id)
    assert before is not None
    handle = _claimed(queue)
    clock.advance(5)
    assert handle.snooze(30) is True
    after = queue.get_job(job_id)
    assert after is not None
    assert (after.state, after.run_at) == (JobState.PENDING, clock.now() + 30)
    assert (after.worker_id, after.claimed_at) == (None, None)
    # attempts counts claims; the budget left is what it was before the claim.
    assert after.attempts == 1
    assert after.max_attempts - after.attempts == before.max_attempts - before.attempts


@pytest.mark.property("SNOOZE-ATTEMPT-UNSPENT")
def test_a_job_snoozed_at_its_last_attempt_is_neither_buried_nor_stranded(
    clocked_store: Store,
) -> None:
    queue = clocked_store.queue(unique_name("snoozed"), QueueOpts(max_attempts=1))
    job_id = queue.enqueue({"n": 1})
    for _ in range(3):
        assert _claimed(queue).snooze(0) is True
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.max_attempts - job.attempts) == (JobState.PENDING, 1)
    assert _claimed(queue).ack() is True


@pytest.mark.property("SNOOZE-KEEPS-HISTORY")
def test_a_snooze_keeps_the_stamps_and_the_error_history(
    clocked_store: Store, clock: FakeClock
) -> None:
    opts = QueueOpts(max_attempts=5, visibility_timeout_s=40, backoff_base_s=3)
    queue = clocked_store.queue(unique_name("snoozed"), opts)
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(priority=7, expires=3600))
    assert _claimed(queue).retry("first try failed", delay=0) is True
    before = queue.get_job(job_id)
    assert before is not None
    assert _claimed(queue).snooze(10) is True
    after = queue.get_job(job_id)
    assert after is not None
    assert after.errors == before.errors
    kept = ("priority", "created_at", "expires_at", "visibility_timeout_s", "backoff_base_s")
    assert [getattr(after, f) for f in kept] == [getattr(before, f) for f in kept]
    assert after.dead_letter_retention_s == before.dead_letter_retention_s
    assert after.last_error is None


@pytest.mark.property("SNOOZE-COUNTED")
def test_get_job_counts_every_snooze(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("snoozed"))
    job_id = queue.enqueue({"n": 1})
    fresh = queue.get_job(job_id)
    assert fresh is not None
    assert fresh.snoozes == 0
    for expected in (1, 2, 3):
        handle = _claimed(queue)
        assert handle.job.snoozes == expected - 1
        assert handle.snooze(0) is True
        job = queue.get_job(job_id)
        assert job is not None
        assert job.snoozes == expected


@pytest.mark.property("SNOOZE-COUNTED")
def test_a_dead_job_keeps_its_snooze_count(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("snoozed"))
    job_id = queue.enqueue({"n": 1})
    assert _claimed(queue).snooze(0) is True
    assert _claimed(queue).fail("broken") is True
    dead = queue.get_job(job_id)
    assert dead is not None
    assert (dead.state, dead.snoozes) == (JobState.DEAD, 1)


@pytest.mark.property("SNOOZE-COUNTED")
@pytest.mark.requires("ops")
def test_a_redriven_job_starts_with_no_snoozes(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("snoozed"))
    queue.enqueue({"n": 1})
    assert _claimed(queue).snooze(0) is True
    assert _claimed(queue).fail("broken") is True
    (new_id,) = queue.redrive()
    redriven = queue.get_job(new_id)
    assert redriven is not None
    assert redriven.snoozes == 0


@pytest.mark.property("SNOOZE-BOUND")
def test_the_snooze_after_max_snoozes_dead_letters_the_job(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("snoozed"), QueueOpts(max_attempts=1))
    job_id = queue.enqueue({"n": 1})
    for _ in range(MAX_SNOOZES):
        assert _claimed(queue).snooze(0) is True
    last = _claimed(queue)
    assert last.job.snoozes == MAX_SNOOZES
    assert last.snooze(0) is True
    dead = queue.get_job(job_id)
    assert dead is not None
    assert (dead.state, dead.last_error, dead.snoozes) == (
        JobState.DEAD,
        ERROR_SNOOZES,
        MAX_SNOOZES,
    )
    assert dead.errors == ()  # a snooze is no failed attempt: nothing joins the history
    assert queue.claim("w1") is None


@pytest.mark.property("SNOOZE-ARGUMENTS")
@pytest.mark.parametrize("delay", [-1, "5", None, float("nan")])
def test_a_malformed_delay_is_refused_before_anything_is_written(
    clocked_store: Store, delay: Any
) -> None:
    queue = clocked_store.queue(unique_name("snoozed"))
    job_id = queue.enqueue({"n": 1})
    handle = _claimed(queue)
    with pytest.raises(InvalidOptions):
        handle.snooze(delay)
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.snoozes) == (JobState.PROCESSING, 0)
    assert handle.ack() is True


@pytest.mark.property("SNOOZE-STALE-HANDLE")
def test_a_stale_handles_snooze_is_false_and_changes_nothing(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("snoozed"), QueueOpts(visibility_timeout_s=10))
    job_id = queue.enqueue({"n": 1})
    stale = _claimed(queue, "w1")
    clock.advance(10)  # the claim lapses
    fresh = _claimed(queue, "w2")
    before = queue.get_job(job_id)
    assert stale.snooze(0) is False
    assert queue.get_job(job_id) == before
    assert fresh.snooze(0) is True
    assert fresh.snooze(0) is False  # a snoozed handle is stale too
    job = queue.get_job(job_id)
    assert job is not None
    assert job.snoozes == 1


@pytest.mark.property("SNOOZE-DUE-AND-WAKES")
def test_a_snoozed_job_is_claimable_at_its_new_run_at_and_not_before(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("snoozed"))
    job_id = queue.enqueue({"n": 1})
    assert _claimed(queue).snooze(30) is True
    clock.advance(29)
    assert queue.claim("w2") is None
    clock.advance(1)
    again = _claimed(queue, "w2")
    assert (again.id, again.attempts) == (job_id, 2)
    assert again.ack() is True


@pytest.mark.property("SNOOZE-DUE-AND-WAKES")
def test_a_waiting_claimer_wakes_for_a_job_snoozed_to_now(store: Store) -> None:
    queue = store.queue(unique_name("snoozed"))
    job_id = queue.enqueue({"n": 1})
    held = _claimed(queue, "w1")
    got = claim_wait_in_thread(queue, timeout=GENEROUS_S)
    time.sleep(SETTLE_S)
    assert held.snooze(0) is True
    handle = got()
    assert handle is not None
    assert handle.id == job_id
    assert handle.ack() is True


@pytest.mark.property("WORKER-SNOOZE")
def test_a_handler_raising_snooze_runs_again_without_spending_its_only_attempt(
    store: Store,
) -> None:
    name = unique_name("snoozing")
    job_id = store.queue(name, QueueOpts(max_attempts=1)).enqueue({"n": 0})
    seen: list[tuple[int, int]] = []
    worker = Worker(store, name="snoozer")

    @worker.task(name)
    def snooze_once(job: Job) -> None:
        seen.append((job.attempts, job.snoozes))
        if job.snoozes == 0:
            raise Snooze(0)

    with RunningWorker(worker, GENEROUS_S):
        eventually(
            lambda: store.queue(name).get_job(job_id) is None, "the second run acked it", GENEROUS_S
        )
    assert seen == [(1, 0), (2, 1)]


# -- WORKER-SNOOZE-ON-STOP -------------------------------------------------------------

STOP_GRACE_S = 0.5
LONG_VISIBILITY_S = 600


@pytest.mark.property("WORKER-SNOOZE-ON-STOP")
def test_a_job_cut_off_by_a_stop_is_snoozed_to_now_with_its_only_attempt_unspent(
    store: Store,
) -> None:
    name = unique_name("cutoff")
    opts = QueueOpts(max_attempts=1, visibility_timeout_s=LONG_VISIBILITY_S)
    job_id = store.queue(name, opts).enqueue({"n": 0})
    started, release = threading.Event(), threading.Event()
    worker = Worker(store, name="cutoff", shutdown_grace_s=STOP_GRACE_S, snooze_on_stop=True)

    @worker.task(name)
    def outlive(job: Job) -> None:
        started.set()
        release.wait(GENEROUS_S)

    try:
        with RunningWorker(worker, GENEROUS_S) as run:
            assert started.wait(GENEROUS_S)
            run.stop()  # graceful: the handler outlives the grace
        left = store.queue(name).get_job(job_id)
        assert left is not None
        budget_left = left.max_attempts - left.attempts
        assert (left.state, budget_left, left.snoozes) == (JobState.PENDING, 1, 1)
        # Claimable now, not after the 600 s visibility timeout, with the attempt the cut
        # off run spent refunded (max_attempts=1: a spent one would leave nothing).
        again = store.queue(name).claim("next-worker")
        assert again is not None
        assert again.id == job_id
    finally:
        release.set()
    assert again.ack() is True


@pytest.mark.property("WORKER-SNOOZE-ON-STOP")
def test_a_handler_that_snoozes_when_told_to_stop_spends_no_attempt(store: Store) -> None:
    name = unique_name("polite")
    job_id = store.queue(name, QueueOpts(max_attempts=1)).enqueue({"n": 0})
    started = threading.Event()
    worker = Worker(store, name="polite", shutdown_grace_s=GENEROUS_S)

    @worker.task(name)
    def wrap_up(job: Job, context: JobContext) -> None:
        started.set()
        if context.stop.wait(GENEROUS_S):
            raise Snooze(0)

    with RunningWorker(worker, GENEROUS_S) as run:
        assert started.wait(GENEROUS_S)
        run.stop()
    left = store.queue(name).get_job(job_id)
    assert left is not None
    budget_left = left.max_attempts - left.attempts
    assert (left.state, budget_left, left.snoozes) == (JobState.PENDING, 1, 1)
