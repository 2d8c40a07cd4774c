"""Contract 1.1's operations profile in the core (contract §11), over the recording fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import FakeDriver, FakeOpsDriver

from alkstore.constants import MAX_ERROR_HISTORY, MAX_ERROR_LENGTH
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions, ProfileUnavailable, ReservedName
from alkstore.options import QueueOpts
from alkstore.testing import FakeClock
from alkstore.values import JobError, JobState, QueueStats

START = 1_700_000_000


@pytest.fixture
def ops_store(clock: FakeClock) -> Iterator[CoreStore]:
    driver = FakeOpsDriver()
    with CoreStore(driver, clock=clock, capabilities=driver.capabilities) as store:
        yield store


def fail_every_attempt(store: CoreStore, queue: str, errors: list[str]) -> int:
    q = store.queue(queue, QueueOpts(max_attempts=len(errors)))
    job_id = q.enqueue({"n": 1})
    for error in errors:
        handle = q.claim("w1")
        assert handle is not None
        assert handle.retry(error, delay=0) is True
    return job_id


def test_every_retry_appends_its_error_and_the_dead_job_keeps_them(ops_store: CoreStore) -> None:
    job_id = fail_every_attempt(ops_store, "q", ["first", "second", "third"])
    job = ops_store.queue("q").get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, "max attempts exceeded")
    assert job.errors == (
        JobError(1, START, "first"),
        JobError(2, START, "second"),
        JobError(3, START, "third"),
    )


def test_fail_appends_its_error_and_sets_last_error(ops_store: CoreStore) -> None:
    queue = ops_store.queue("q")
    job_id = queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.fail("bad input") is True
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.last_error, job.errors) == ("bad input", (JobError(1, START, "bad input"),))


def test_the_history_keeps_the_latest_entries_only(ops_store: CoreStore) -> None:
    errors = [f"boom {n}" for n in range(MAX_ERROR_HISTORY + 5)]
    job_id = fail_every_attempt(ops_store, "q", errors)
    job = ops_store.queue("q").get_job(job_id)
    assert job is not None
    assert [e.error for e in job.errors] == errors[-MAX_ERROR_HISTORY:]
    assert job.errors[-1].attempt == len(errors)


def test_a_long_error_keeps_its_first_characters_in_the_history(ops_store: CoreStore) -> None:
    long = "x" * MAX_ERROR_LENGTH + "cut"
    queue = ops_store.queue("q")
    job_id = queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.fail(long) is True
    job = queue.get_job(job_id)
    assert job is not None
    assert job.errors[0].error == "x" * MAX_ERROR_LENGTH
    assert job.last_error == long  # last_error keeps its 1.0 meaning: the whole string


def test_a_refused_retry_records_no_error(ops_store: CoreStore, clock: FakeClock) -> None:
    queue = ops_store.queue("q", QueueOpts(visibility_timeout_s=10))
    job_id = queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    clock.advance(10)  # the claim lapsed
    assert handle.retry("too late") is False
    job = queue.get_job(job_id)
    assert job is not None
    assert job.errors == ()


def test_a_queue_handle_in_a_transaction_stamps_its_own_opts(ops_store: CoreStore) -> None:
    queue = ops_store.queue("emails", QueueOpts(visibility_timeout_s=42, max_attempts=9))
    with ops_store.transaction() as tx:
        by_handle = tx.enqueue(queue, 1)
        by_name = tx.enqueue("emails", 2)
    stamped = [queue.get_job(i) for i in (by_handle, by_name)]
    assert [(j.visibility_timeout_s, j.max_attempts) for j in stamped if j] == [(42, 9), (300, 3)]


def test_an_outbox_handle_is_refused_in_a_transaction(ops_store: CoreStore) -> None:
    with pytest.raises(ReservedName), ops_store.transaction() as tx:
        tx.enqueue(ops_store.outbox("sync"), 1)


def test_stats_of_an_empty_queue_are_zero(ops_store: CoreStore) -> None:
    assert ops_store.queue("nothing").stats() == QueueStats("nothing", 0, 0, 0, 0, 0, None, False)


def test_store_stats_list_every_queue_with_a_job_or_a_pause(ops_store: CoreStore) -> None:
    ops_store.queue("b").enqueue(1)
    ops_store.queue("a").pause()
    assert [s.queue for s in ops_store.stats()] == ["a", "b"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"state": "finished"}, "state"),
        ({"state": 3}, "state"),
        ({"after_id": -1}, "after_id"),
        ({"after_id": "7"}, "job_id"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
    ],
)
def test_jobs_refuses_a_bad_page(
    ops_store: CoreStore, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidOptions, match=field):
        ops_store.queue("q").jobs(**kwargs)  # type: ignore[arg-type]


def test_jobs_takes_a_state_by_name(ops_store: CoreStore) -> None:
    queue = ops_store.queue("q")
    job_id = queue.enqueue(1)
    assert [j.id for j in queue.jobs("PENDING")] == [job_id]
    assert queue.jobs(JobState.DEAD) == []


@pytest.mark.parametrize("limit", [0, 10_001, True, "5"])
def test_redrive_refuses_a_bad_limit(ops_store: CoreStore, limit: object) -> None:
    with pytest.raises(InvalidOptions, match="limit"):
        ops_store.queue("q").redrive(limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("ids", ["12", 12, [1, "2"]])
def test_redrive_and_purge_refuse_malformed_ids(ops_store: CoreStore, ids: object) -> None:
    queue = ops_store.queue("q")
    with pytest.raises(InvalidOptions):
        queue.redrive(ids)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions):
        queue.purge_dead(ids)  # type: ignore[arg-type]


def test_purge_refuses_a_negative_age(ops_store: CoreStore) -> None:
    with pytest.raises(InvalidOptions, match="older_than_s"):
        ops_store.queue("q").purge_dead(older_than_s=-1)


def test_redrive_wakes_this_processes_waiters(ops_store: CoreStore) -> None:
    queue = ops_store.queue("q", QueueOpts(max_attempts=1))
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.fail("bad") is True
    with ops_store._context.hub.waiter("queue:q") as waiter:
        assert len(queue.redrive()) == 1
        assert waiter.event.is_set()


def test_resume_wakes_this_processes_waiters_and_pause_does_not(ops_store: CoreStore) -> None:
    queue = ops_store.queue("q")
    with ops_store._context.hub.waiter("queue:q") as waiter:
        assert queue.pause() is True
        assert not waiter.event.is_set()
        assert queue.resume() is True
        assert waiter.event.is_set()


def test_pausing_twice_changes_nothing_the_second_time(ops_store: CoreStore) -> None:
    queue = ops_store.queue("q")
    assert (queue.pause(), queue.pause(), queue.paused()) == (True, False, True)
    assert (queue.resume(), queue.resume(), queue.paused()) == (True, False, False)


def test_an_engine_without_ops_refuses_every_operation(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    for call in (
        store.stats,
        queue.stats,
        queue.jobs,
        queue.redrive,
        queue.purge_dead,
        queue.pause,
        queue.resume,
        queue.paused,
    ):
        with pytest.raises(ProfileUnavailable, match="ops"):
            call()
    assert driver.statements() == []
