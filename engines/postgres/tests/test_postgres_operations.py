"""The ops profile on PostgreSQL (contract 1.1 §11): the error history as stored,
stats, job pages, redrive, dead-letter purges, and pauses seen by every process."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from pg_helpers import BackgroundClaim, StoreFactory, wait_until

from alkstore import EnqueueOpts, QueueOpts
from alkstore.constants import ERROR_NUL_STAND_IN, MAX_ERROR_HISTORY, MAX_ERROR_LENGTH
from alkstore.testing import FakeClock
from alkstore.values import JobError, JobState, QueueStats

NOW = 1_700_000_000


def _dead_job(queue: Any, payload: Any = "doomed", error: str = "bad input") -> int:
    """Enqueue a job, claim it and fail it: its id, now dead."""
    job_id: int = queue.enqueue(payload)
    handle = queue.claim("w")
    assert handle is not None
    assert handle.id == job_id
    assert handle.fail(error)
    return job_id


# -- the error history -----------------------------------------------------------------


def test_every_retry_appends_its_error_and_the_dead_row_keeps_them(
    open_store: StoreFactory,
) -> None:
    queue = open_store(clock=FakeClock(NOW)).queue("q", QueueOpts(max_attempts=3))
    job_id = queue.enqueue("flaky")
    for error in ("first", "second", "third"):
        handle = queue.claim("w")
        assert handle is not None
        assert handle.retry(error, delay=0)

    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, "max attempts exceeded")
    assert job.errors == (
        JobError(1, NOW, "first"),
        JobError(2, NOW, "second"),
        JobError(3, NOW, "third"),
    )


def test_a_claim_returns_the_history_so_far(open_store: StoreFactory) -> None:
    queue = open_store(clock=FakeClock(NOW)).queue("q")
    queue.enqueue("flaky")
    first = queue.claim("w")
    assert first is not None
    assert first.retry("timeout", delay=0)

    second = queue.claim("w")
    assert second is not None
    assert second.job.errors == (JobError(1, NOW, "timeout"),)


def test_the_history_keeps_the_latest_entries_only(open_store: StoreFactory) -> None:
    attempts = MAX_ERROR_HISTORY + 5
    queue = open_store(clock=FakeClock(NOW)).queue("q", QueueOpts(max_attempts=attempts + 1))
    job_id = queue.enqueue("flaky")
    for attempt in range(1, attempts + 1):
        handle = queue.claim("w")
        assert handle is not None
        assert handle.retry(f"error {attempt}", delay=0)

    job = queue.get_job(job_id)
    assert job is not None
    assert [e.attempt for e in job.errors] == list(range(6, attempts + 1))
    assert job.errors[-1].error == f"error {attempts}"


def test_a_long_error_is_kept_whole_up_to_the_limit(open_store: StoreFactory) -> None:
    queue = open_store().queue("q")
    job_id = queue.enqueue("x")
    handle = queue.claim("w")
    assert handle is not None
    longest = "é" * MAX_ERROR_LENGTH
    assert handle.retry(longest + "cut", delay=0)

    job = queue.get_job(job_id)
    assert job is not None
    assert [e.error for e in job.errors] == [longest]


def test_an_error_with_a_nul_character_is_stored_with_the_stand_in(
    open_store: StoreFactory,
) -> None:
    # PostgreSQL's text refuses NUL (last_error is text): the contract keeps each
    # NUL of an error as ERROR_NUL_STAND_IN, in last_error and the history alike.
    queue = open_store().queue("q")
    job_id = queue.enqueue("x")
    handle = queue.claim("w")
    assert handle is not None
    assert handle.retry("bad\x00byte", delay=0)
    again = queue.claim("w")
    assert again is not None
    assert again.fail("worse\x00byte")

    job = queue.get_job(job_id)
    assert job is not None
    assert job.last_error == f"worse{ERROR_NUL_STAND_IN}byte"
    assert [e.error for e in job.errors] == [
        f"bad{ERROR_NUL_STAND_IN}byte",
        f"worse{ERROR_NUL_STAND_IN}byte",
    ]


def test_expiry_moves_a_job_to_dead_keeping_its_history(open_store: StoreFactory) -> None:
    clock = FakeClock(NOW)
    queue = open_store(clock=clock).queue("q")
    job_id = queue.enqueue("x", EnqueueOpts(expires=60))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.retry("slow", delay=0)
    clock.advance(61)
    assert queue.sweep_expired().expired == 1

    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error, job.errors) == (
        JobState.DEAD,
        "expired",
        (JobError(1, NOW, "slow"),),
    )


# -- stats -------------------------------------------------------------------------------


def test_queue_stats_count_every_state(open_store: StoreFactory) -> None:
    clock = FakeClock(NOW)
    queue = open_store(clock=clock).queue("q", QueueOpts(visibility_timeout_s=30))
    queue.enqueue_many(["a", "b"])  # claimed below: one lapses, one stays in flight
    queue.claim_batch("w", 2)
    clock.advance(20)
    queue.enqueue_many(["c", "d"])
    queue.claim_batch("w", 2)
    queue.enqueue("late", EnqueueOpts(delay=3600))
    _dead_job(queue)
    clock.advance(15)  # the first two lapse
    queue.enqueue("ready")
    clock.advance(7)

    assert queue.stats() == QueueStats(
        queue="q",
        ready=1,
        scheduled=1,
        processing=2,
        lapsed=2,
        dead=1,
        oldest_ready_age_s=7,
        paused=False,
    )


def test_a_queue_with_nothing_has_zero_stats(open_store: StoreFactory) -> None:
    assert open_store().queue("empty").stats() == QueueStats("empty", 0, 0, 0, 0, 0, None, False)


def test_store_stats_list_every_queue_with_a_row_or_a_pause_by_name(
    open_store: StoreFactory,
) -> None:
    store = open_store(clock=FakeClock(NOW))
    store.queue("b-live").enqueue(1)
    _dead_job(store.queue("c-dead"))
    store.queue("a-paused").pause()
    store.queue("d-claimed").enqueue(1)
    assert store.queue("d-claimed").claim("w") is not None

    stats = store.stats()
    assert [s.queue for s in stats] == ["a-paused", "b-live", "c-dead", "d-claimed"]
    assert [(s.ready, s.processing, s.dead, s.paused) for s in stats] == [
        (0, 0, 0, True),
        (1, 0, 0, False),
        (0, 0, 1, False),
        (0, 1, 0, False),
    ]


# -- job pages ---------------------------------------------------------------------------


def test_jobs_pages_over_live_and_dead_rows_in_id_order(open_store: StoreFactory) -> None:
    store = open_store()
    queue = store.queue("q")
    ids = queue.enqueue_many(list(range(5)))
    store.queue("other").enqueue("not listed")
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("dead")

    first = queue.jobs(limit=3)
    second = queue.jobs(after_id=first[-1].id, limit=3)
    assert [j.id for j in first + second] == ids
    assert first[0].state is JobState.DEAD
    assert {j.state for j in first[1:] + second} == {JobState.PENDING}


@pytest.mark.parametrize(
    ("state", "count"), [(JobState.PENDING, 3), (JobState.PROCESSING, 1), (JobState.DEAD, 1)]
)
def test_jobs_of_one_state(open_store: StoreFactory, state: JobState, count: int) -> None:
    queue = open_store().queue("q")
    queue.enqueue_many(list(range(5)))
    assert queue.claim("w") is not None
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("dead")

    jobs = queue.jobs(state)
    assert len(jobs) == count
    assert {j.state for j in jobs} == {state}
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)


# -- redrive -----------------------------------------------------------------------------


def test_redrive_makes_a_new_pending_job_from_a_dead_one(open_store: StoreFactory) -> None:
    clock = FakeClock(NOW)
    opts = QueueOpts(max_attempts=4, visibility_timeout_s=45, backoff_base_s=3)
    queue = open_store(clock=clock).queue("q", opts)
    old_id = queue.enqueue({"n": 1}, EnqueueOpts(priority=7, expires=600))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("bad")
    clock.advance(100)

    (new_id,) = queue.redrive()

    old = queue.get_job(old_id)
    new = queue.get_job(new_id)
    assert old is None
    assert new is not None
    assert new_id > old_id
    assert (new.state, new.payload, new.priority, new.attempts) == (
        JobState.PENDING,
        {"n": 1},
        7,
        0,
    )
    assert (new.max_attempts, new.visibility_timeout_s, new.backoff_base_s) == (4, 45, 3)
    assert (new.created_at, new.run_at, new.expires_at) == (NOW + 100, NOW + 100, NOW + 700)
    assert (new.redriven_from, new.errors, new.last_error) == (old_id, (), None)


def test_redrive_of_named_ids_keeps_their_order_and_skips_the_others(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    queue = store.queue("q")
    first, second = _dead_job(queue, "first"), _dead_job(queue, "second")
    live = queue.enqueue("live")
    elsewhere = _dead_job(store.queue("other"))

    new_ids = queue.redrive([second, live, elsewhere, 10**12, first, second])

    assert len(new_ids) == 2
    redriven = [queue.get_job(i) for i in new_ids]
    assert [(j.payload, j.redriven_from) for j in redriven if j] == [
        ("second", second),
        ("first", first),
    ]
    assert store.queue("other").get_job(elsewhere) is not None


def test_redrive_takes_the_oldest_dead_first_up_to_the_limit(open_store: StoreFactory) -> None:
    clock = FakeClock(NOW)
    queue = open_store(clock=clock).queue("q")
    dead = []
    for n in range(4):
        dead.append(_dead_job(queue, n))
        clock.advance(1)

    new_ids = queue.redrive(limit=3)

    assert [j.redriven_from for j in map(queue.get_job, new_ids) if j] == dead[:3]
    assert queue.stats().dead == 1


def test_a_failed_redrive_leaves_the_dead_row_and_no_new_job(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    queue = open_store().queue("q")
    dead_id = _dead_job(queue)
    # The insert half fails: the delete half must not commit alone.
    admin.execute(
        f'ALTER TABLE "{schema}".alkstore_jobs'
        " ADD CONSTRAINT no_redrive CHECK (redriven_from IS NULL)"
    )

    with pytest.raises(psycopg.errors.CheckViolation):
        queue.redrive()

    job = queue.get_job(dead_id)
    assert job is not None
    assert job.state is JobState.DEAD
    assert queue.jobs(JobState.PENDING) == []


def test_concurrent_redrives_of_one_dead_job_make_one_new_job(open_store: StoreFactory) -> None:
    stores = [open_store() for _ in range(4)]
    dead_id = _dead_job(stores[0].queue("q"))
    start = threading.Barrier(len(stores))
    results: list[list[int]] = []

    def redrive(store: Any) -> None:
        start.wait()
        results.append(store.queue("q").redrive([dead_id]))

    threads = [threading.Thread(target=redrive, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(len(r) for r in results) == [0, 0, 0, 1]
    assert stores[0].queue("q").stats().ready == 1


def test_redrive_wakes_claim_wait_in_another_store(open_store: StoreFactory) -> None:
    worker = open_store(repoll_s=3600)  # only a NOTIFY can wake it
    operator = open_store()
    dead_id = _dead_job(operator.queue("q"))
    listener = worker.driver.listener  # type: ignore[attr-defined]
    waiting = BackgroundClaim(worker.queue("q"), "w")
    assert wait_until(lambda: listener.connections == 1)

    (new_id,) = operator.queue("q").redrive([dead_id])

    assert waiting.result().id == new_id


# -- purge_dead --------------------------------------------------------------------------


def test_purge_dead_deletes_the_named_dead_rows_of_the_queue_only(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    queue = store.queue("q")
    doomed, kept = _dead_job(queue), _dead_job(queue)
    live = queue.enqueue("live")
    elsewhere = _dead_job(store.queue("other"))

    assert queue.purge_dead([doomed, live, elsewhere]) == 1

    assert queue.get_job(doomed) is None
    assert all(queue.get_job(i) is not None for i in (kept, live))
    assert store.queue("other").get_job(elsewhere) is not None


def test_purge_dead_by_age_keeps_the_younger_ones(open_store: StoreFactory) -> None:
    clock = FakeClock(NOW)
    queue = open_store(clock=clock).queue("q")
    old = _dead_job(queue)
    clock.advance(100)
    young = _dead_job(queue)
    clock.advance(10)

    assert queue.purge_dead(older_than_s=50) == 1
    assert queue.get_job(old) is None
    assert queue.get_job(young) is not None


def test_purge_dead_without_arguments_deletes_every_dead_row(open_store: StoreFactory) -> None:
    queue = open_store().queue("q")
    for _ in range(3):
        _dead_job(queue)
    live = queue.enqueue("live")

    assert queue.purge_dead() == 3
    assert [j.id for j in queue.jobs()] == [live]


# -- pause -------------------------------------------------------------------------------


def test_a_pause_is_seen_by_another_store(open_store: StoreFactory) -> None:
    operator, worker = open_store(), open_store()
    assert operator.queue("q").pause() is True
    assert operator.queue("q").pause() is False
    job_id = worker.queue("q").enqueue("waits")

    assert worker.queue("q").paused()
    assert worker.queue("q").claim("w") is None
    assert worker.queue("q").claim_batch("w", 10) == []
    assert operator.queue("q").resume() is True
    handle = worker.queue("q").claim("w")
    assert handle is not None
    assert handle.id == job_id


def test_a_pause_leaves_other_queues_and_claimed_jobs_alone(open_store: StoreFactory) -> None:
    store = open_store()
    queue = store.queue("q")
    queue.enqueue("in flight")
    handle = queue.claim("w")
    assert handle is not None
    store.queue("other").enqueue("free")
    queue.pause()

    assert handle.ack()
    assert store.queue("other").claim("w") is not None


def test_resume_wakes_claim_wait_in_another_store(open_store: StoreFactory) -> None:
    worker = open_store(repoll_s=3600)  # only a NOTIFY can wake it
    operator = open_store()
    operator.queue("q").pause()
    job_id = operator.queue("q").enqueue("held")
    listener = worker.driver.listener  # type: ignore[attr-defined]
    waiting = BackgroundClaim(worker.queue("q"), "w")
    assert wait_until(lambda: listener.connections == 1)

    assert operator.queue("q").resume()

    assert waiting.result().id == job_id
