"""§17 (results profile): finished jobs you can see.

A queue whose ``QueueOpts.completed_retention_s`` is set stamps it on each job; an
ack of such a job keeps it as ``completed``, with ``completed_at`` and the result
(``ack(result=...)``, or a worker handler's return value), until ``sweep_expired``
deletes it once the retention has passed. Without the stamp an ack deletes the job,
as it always did. A result follows the payload's rules, up to ``MAX_RESULT_BYTES``.
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import (
    MAX_RESULT_BYTES,
    EngineProvider,
    Job,
    JobState,
    PayloadError,
    ProfileUnavailable,
    QueueOpts,
    ResultError,
    Store,
)
from alkstore.testing import FakeClock
from alkstore.worker import Worker
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.workers import RunningWorker, eventually

KEEP_S = 100
"""The retention of the queues below."""
KEEPS = QueueOpts(completed_retention_s=KEEP_S)
LIMIT_S = 20.0
"""The bound on a worker test's waits: far above what a passing engine needs."""


def _acked(queue: Any, result: Any = None) -> int:
    """A job of ``queue`` enqueued, claimed and acked with ``result``; its id."""
    job_id = int(queue.enqueue({"n": 1}))
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == job_id
    assert handle.ack(result=result)
    return job_id


def _completed(queue: Any, job_id: int) -> Job:
    job: Job | None = queue.get_job(job_id)
    assert job is not None, "an acked job of a queue with a completed retention is kept"
    assert job.state is JobState.COMPLETED
    return job


def _result_of_size(size: int) -> str:
    """A JSON string whose text is ``size`` bytes of UTF-8 (quotes included), with
    multibyte characters: two-byte 'é' then ASCII to fill."""
    inner = size - 2
    twos = min(inner // 2, 1000)
    return "é" * twos + "x" * (inner - 2 * twos)


# -- RESULTS-PROFILE-DECLARED (every engine) ---------------------------------------------


@pytest.mark.property("RESULTS-PROFILE-DECLARED")
def test_a_completed_retention_works_exactly_when_the_engine_declares_the_profile(
    store: Store, engine: EngineProvider
) -> None:
    name = unique_name("declared")
    if engine.capabilities.results:
        job_id = _acked(store.queue(name, KEEPS), {"ok": True})
        assert _completed(store.queue(name), job_id).result == {"ok": True}
        return
    with pytest.raises(ProfileUnavailable):
        store.queue(name, KEEPS)
    plain = store.queue(name)
    job_id = plain.enqueue(1)
    handle = plain.claim("w1")
    assert handle is not None
    with pytest.raises(ProfileUnavailable):
        handle.ack(result={"ok": True})
    assert plain.get_job(job_id) is not None  # nothing was written: still claimed
    assert handle.ack()  # and a plain ack carries on
    assert plain.get_job(job_id) is None
    if engine.capabilities.ops:
        with pytest.raises(ProfileUnavailable):
            plain.jobs(state="completed")


# -- RESULTS-COMPLETED-VISIBLE -------------------------------------------------------------


@pytest.mark.property("RESULTS-COMPLETED-VISIBLE")
def test_an_acked_job_of_a_retaining_queue_reads_back_completed_with_its_result(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("kept"), KEEPS)
    job_id = queue.enqueue({"n": 1}, None)
    handle = queue.claim("w1")
    assert handle is not None
    clock.advance(7)
    assert handle.ack(result={"total": 3, "items": ["a", "é"]})
    job = _completed(queue, job_id)
    assert job.completed_at == handle.job.claimed_at + 7  # type: ignore[operator]
    assert job.result == {"total": 3, "items": ["a", "é"]}
    assert (job.payload, job.attempts, job.worker_id) == ({"n": 1}, 1, "w1")
    assert job.completed_retention_s == KEEP_S
    assert (job.last_error, job.died_at) == (None, None)


@pytest.mark.property("RESULTS-COMPLETED-VISIBLE")
def test_a_completed_job_is_never_claimed_cancelled_or_acked_again(store: Store) -> None:
    queue = store.queue(unique_name("finished"), KEEPS)
    job_id = queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.ack(result=1)
    assert queue.claim("w2") is None
    assert not queue.cancel(job_id)
    assert not handle.ack(result=2)
    assert not handle.retry("late")
    assert _completed(queue, job_id).result == 1


@pytest.mark.property("RESULTS-COMPLETED-VISIBLE")
def test_a_result_of_none_is_kept_as_a_completed_job_without_one(store: Store) -> None:
    queue = store.queue(unique_name("no-result"), KEEPS)
    job = _completed(queue, _acked(queue))
    assert job.result is None
    assert job.completed_at is not None


@pytest.mark.property("RESULTS-COMPLETED-VISIBLE")
@pytest.mark.requires("ops")
def test_completed_jobs_are_counted_and_listed_in_both_directions(store: Store) -> None:
    queue = store.queue(unique_name("listed"), KEEPS)
    done = [_acked(queue, n) for n in range(3)]
    live = int(queue.enqueue("waiting"))
    stats = queue.stats()
    assert (stats.completed, stats.ready) == (3, 1)
    assert [job.id for job in queue.jobs()] == [*done, live]
    assert [job.id for job in queue.jobs(state="completed")] == done
    assert [job.id for job in queue.jobs(state=JobState.COMPLETED, after_id=done[0])] == done[1:]
    newest = queue.jobs(state="completed", before_id=live + 1, limit=2)
    assert [job.id for job in newest] == [done[2], done[1]]
    assert [job.result for job in newest] == [2, 1]
    assert queue.name in {s.queue for s in store.stats() if s.completed == 3}


@pytest.mark.property("RESULTS-COMPLETED-VISIBLE")
def test_ack_batch_keeps_the_jobs_of_a_retaining_queue_completed(store: Store) -> None:
    queue = store.queue(unique_name("batch"), KEEPS)
    ids = [int(i) for i in queue.enqueue_many([1, 2, 3])]
    assert len(queue.claim_batch("w1", 3)) == 3
    assert queue.ack_batch(ids, "w1") == 3
    assert [(_completed(queue, i).result, _completed(queue, i).payload) for i in ids] == [
        (None, 1),
        (None, 2),
        (None, 3),
    ]


@pytest.mark.property("RESULTS-COMPLETED-VISIBLE")
def test_ack_batch_keeps_exactly_the_jobs_stamped_with_a_retention_of_a_mixed_batch(
    store: Store,
) -> None:
    name = unique_name("mixed-batch")
    kept = [int(i) for i in store.queue(name, KEEPS).enqueue_many([1, 2])]
    deleted = [int(i) for i in store.queue(name).enqueue_many([3, 4])]
    queue = store.queue(name)
    assert len(queue.claim_batch("w1", 4)) == 4
    assert queue.ack_batch([kept[0], deleted[0], kept[1], deleted[1]], "w1") == 4
    assert [_completed(queue, i).payload for i in kept] == [1, 2]
    assert [queue.get_job(i) for i in deleted] == [None, None]


@pytest.mark.property("RESULTS-COMPLETED-VISIBLE")
def test_ack_batch_keeps_a_job_of_a_queue_that_deleted_every_job_before_it(
    store: Store,
) -> None:
    name = unique_name("late-keeper")
    deleting = store.queue(name)
    first = int(deleting.enqueue("deleted"))
    assert len(deleting.claim_batch("w1", 1)) == 1
    assert deleting.ack_batch([first], "w1") == 1
    assert deleting.get_job(first) is None
    later = int(store.queue(name, KEEPS).enqueue("kept"))
    assert len(deleting.claim_batch("w1", 1)) == 1
    assert deleting.ack_batch([later], "w1") == 1
    assert _completed(deleting, later).payload == "kept"


# -- RESULTS-DELETE-WITHOUT-RETENTION ---------------------------------------------------


@pytest.mark.property("RESULTS-DELETE-WITHOUT-RETENTION")
def test_without_a_retention_an_ack_with_a_result_deletes_the_job(store: Store) -> None:
    for opts in (None, QueueOpts(completed_retention_s=0)):
        queue = store.queue(unique_name("deleted"), opts)
        job_id = _acked(queue, {"dropped": True})
        assert queue.get_job(job_id) is None


@pytest.mark.property("RESULTS-DELETE-WITHOUT-RETENTION")
def test_the_retention_is_read_from_the_jobs_stamp(store: Store) -> None:
    name = unique_name("stamped")
    kept_id = int(store.queue(name, KEEPS).enqueue("kept"))
    gone_id = int(store.queue(name).enqueue("gone"))
    plain = store.queue(name)  # acked through a handle of the other options
    for _ in range(2):
        handle = plain.claim("w1")
        assert handle is not None
        assert handle.ack(result=handle.id)
    assert _completed(plain, kept_id).result == kept_id
    assert plain.get_job(gone_id) is None


# -- RESULTS-WHOLE --------------------------------------------------------------------------


@pytest.mark.property("RESULTS-WHOLE")
@pytest.mark.parametrize(
    "size", [2, 100, 4096, 65_536, 65_537, 300_000, MAX_RESULT_BYTES - 1, MAX_RESULT_BYTES]
)
def test_a_result_of_every_size_up_to_the_bound_comes_back_whole(store: Store, size: int) -> None:
    queue = store.queue(unique_name("whole"), KEEPS)
    result = _result_of_size(size)
    assert len(f'"{result}"'.encode()) == size
    assert _completed(queue, _acked(queue, result)).result == result


@pytest.mark.property("RESULTS-WHOLE")
def test_a_result_comes_back_as_its_round_trip_through_json(store: Store) -> None:
    queue = store.queue(unique_name("json"), KEEPS)
    result = {"tuple": (1, 2), 3: "int key", "nested": [[{"deep": None}]], "float": 1.5}
    expected = {"tuple": [1, 2], "3": "int key", "nested": [[{"deep": None}]], "float": 1.5}
    assert _completed(queue, _acked(queue, result)).result == expected


# -- RESULTS-BOUND -------------------------------------------------------------------------


@pytest.mark.property("RESULTS-BOUND")
@pytest.mark.parametrize(
    "result",
    [
        _result_of_size(MAX_RESULT_BYTES + 1),
        {"not json": object()},
        float("nan"),
        [
            [
                [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            [
                                                                                                                                                                                                                [
                                                                                                                                                                                                                    [
                                                                                                                                                                                                                        [
                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                                1
                                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                ]
                                                                                                                                                                                                            ]
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ]
            ]
        ],
    ],
    ids=["over-the-bound", "not-json", "nan", "65-deep"],
)
def test_a_result_that_cannot_be_stored_is_refused_with_nothing_written(
    store: Store, result: Any
) -> None:
    queue = store.queue(unique_name("refused"), KEEPS)
    job_id = queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    with pytest.raises(ResultError) as refused:
        handle.ack(result=result)
    assert isinstance(refused.value, PayloadError)
    assert "result" in str(refused.value)
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.PROCESSING  # the claim still holds
    assert handle.ack(result="fine")
    assert _completed(queue, job_id).result == "fine"


@pytest.mark.property("RESULTS-BOUND")
def test_a_refusal_over_the_bound_names_its_size_and_the_bound(store: Store) -> None:
    queue = store.queue(unique_name("named"), KEEPS)
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    with pytest.raises(ResultError) as refused:
        handle.ack(result=_result_of_size(MAX_RESULT_BYTES + 1))
    assert str(MAX_RESULT_BYTES + 1) in str(refused.value)
    assert str(MAX_RESULT_BYTES) in str(refused.value)


# -- RESULTS-RETENTION ---------------------------------------------------------------------


@pytest.mark.property("RESULTS-RETENTION")
def test_sweep_deletes_completed_jobs_once_their_retention_has_passed(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("swept"), KEEPS)
    job_id = _acked(queue, "r")
    clock.advance(KEEP_S)
    assert queue.sweep_expired().purged_completed == 0
    assert _completed(queue, job_id).result == "r"
    clock.advance(1)
    swept = queue.sweep_expired()
    assert (swept.purged_completed, swept.purged) == (1, 0)
    assert queue.get_job(job_id) is None


@pytest.mark.property("RESULTS-RETENTION")
def test_sweep_deletes_only_its_own_queues_completed_jobs_by_their_own_stamps(
    clocked_store: Store, clock: FakeClock
) -> None:
    name = unique_name("mixed")
    short = clocked_store.queue(name, QueueOpts(completed_retention_s=10))
    long = clocked_store.queue(name, KEEPS)
    other = clocked_store.queue(unique_name("other"), QueueOpts(completed_retention_s=10))
    goes, stays, elsewhere = _acked(short), _acked(long), _acked(other)
    clock.advance(11)
    assert long.sweep_expired().purged_completed == 1  # swept through the other handle
    assert long.get_job(goes) is None
    assert _completed(long, stays).completed_retention_s == KEEP_S
    assert _completed(other, elsewhere).completed_retention_s == 10


# -- WORKER-RESULT -------------------------------------------------------------------------


@pytest.mark.property("WORKER-RESULT")
def test_a_handlers_return_value_is_the_jobs_result(store: Store) -> None:
    name = unique_name("returned")
    job_id = store.queue(name, KEEPS).enqueue({"n": 20})
    worker = Worker(store, name="returner")

    @worker.task(name)
    def double(job: Job) -> dict[str, int]:
        return {"doubled": job.payload["n"] * 2}

    with RunningWorker(worker, LIMIT_S):
        job = eventually(lambda: _done(store, name, job_id), "the job completed", LIMIT_S)
    assert job.result == {"doubled": 40}


@pytest.mark.property("WORKER-RESULT")
def test_a_return_value_that_cannot_be_a_result_fails_the_attempt(store: Store) -> None:
    name = unique_name("unstorable")
    job_id = store.queue(name, KEEPS).enqueue(1)
    worker = Worker(store, name="returner")

    @worker.task(name)
    def unstorable(job: Job) -> object:
        return object()

    with RunningWorker(worker, LIMIT_S):
        job = eventually(lambda: _retried(store, name, job_id), "the attempt failed", LIMIT_S)
    assert (job.state, job.attempts) == (JobState.PENDING, 1)  # retried, on the curve
    if job.errors:  # the ops profile keeps the attempt's error
        assert "result" in job.errors[-1].error


def _done(store: Store, name: str, job_id: int) -> Job | None:
    job = store.queue(name).get_job(job_id)
    return job if job is not None and job.state is JobState.COMPLETED else None


def _retried(store: Store, name: str, job_id: int) -> Job | None:
    """The job once its first attempt has ended (pending or finished again)."""
    job = store.queue(name).get_job(job_id)
    if job is None or job.attempts == 0:
        return None
    return job if job.state is not JobState.PROCESSING else None
