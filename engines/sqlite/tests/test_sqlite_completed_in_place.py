"""Completed jobs kept in the live table (version 18): out of every read that must not see them.

A queue with ``completed_retention_s`` keeps each acked job as its live row, state
``'completed'``, with a deadline above every claim's. These tests check, through the
store, that such a row behaves as the completed table's rows did: it holds no slot,
no key and no wake, nothing claims, expires or cancels it, and it releases its
dependents when it completes.
"""

from __future__ import annotations

import alkstore
from alkstore import EnqueueOpts, JobState, Limits, QueueOpts, Store, Unique
from alkstore.testing import FakeClock

KEEP = QueueOpts(completed_retention_s=3600)


def _completed(store: Store, opts: EnqueueOpts | None = None) -> tuple[alkstore.Queue, int]:
    queue = store.queue("kept", KEEP)
    job_id = queue.enqueue({"n": 1}, opts)
    handle = queue.claim("w")
    assert handle is not None
    assert handle.id == job_id
    assert handle.ack({"ok": True})
    return queue, job_id


def test_a_completed_job_holds_no_slot_of_a_concurrency_limit(store: Store) -> None:
    queue, _ = _completed(store)
    assert queue.set_limits(Limits(concurrency=1))
    second = queue.enqueue({"n": 2})
    handle = queue.claim("w")
    assert handle is not None
    assert handle.id == second


def test_a_completed_job_frees_its_unique_key(store: Store) -> None:
    queue, first = _completed(store, EnqueueOpts(unique=Unique("k")))
    again = queue.enqueue({"n": 2}, EnqueueOpts(unique=Unique("k")))
    assert (again.duplicate, again == first) == (False, False)


def test_a_completed_job_is_never_claimed_again(store: Store) -> None:
    queue, _ = _completed(store)
    assert queue.claim("w") is None


def test_a_completed_job_sets_no_wake(store: Store) -> None:
    queue, _ = _completed(store)
    assert queue.next_wake_at(None) is None


def test_a_completed_job_with_an_expiry_is_not_swept_to_dead(
    store: Store, clock: FakeClock
) -> None:
    queue, job_id = _completed(store, EnqueueOpts(expires=60))
    clock.advance(120)
    assert queue.sweep_expired().expired == 0
    done = queue.get_job(job_id)
    assert done is not None
    assert done.state is JobState.COMPLETED


def test_a_completed_job_is_not_cancelled(store: Store) -> None:
    queue, job_id = _completed(store)
    assert not queue.cancel(job_id)
    done = queue.get_job(job_id)
    assert done is not None
    assert done.result == {"ok": True}


def test_a_completed_job_is_counted_completed_not_processing(store: Store) -> None:
    queue, _ = _completed(store)
    stats = queue.stats()
    assert (stats.completed, stats.processing, stats.lapsed) == (1, 0, 0)


def test_a_completed_job_is_listed_only_among_the_completed(store: Store) -> None:
    queue, job_id = _completed(store)
    assert [job.id for job in queue.jobs(state=JobState.COMPLETED)] == [job_id]
    assert queue.jobs(state=JobState.PROCESSING) == []
    assert queue.jobs(state=JobState.PENDING) == []
    assert [job.state for job in queue.jobs()] == [JobState.COMPLETED]


def test_a_kept_ack_releases_the_job_waiting_for_it(store: Store) -> None:
    queue = store.queue("kept", KEEP)
    first = queue.enqueue({"n": 1})
    waiting = queue.enqueue({"n": 2}, EnqueueOpts(after=[first]))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.ack({"ok": True})
    released = queue.claim("w")
    assert released is not None
    assert released.id == waiting


def test_a_kept_ack_batch_releases_the_job_waiting_for_it(store: Store) -> None:
    queue = store.queue("kept", KEEP)
    first = queue.enqueue({"n": 1})
    waiting = queue.enqueue({"n": 2}, EnqueueOpts(after=[first]))
    (handle,) = queue.claim_batch("w", 10)
    assert queue.ack_batch([handle.id], "w") == 1
    released = queue.claim("w")
    assert released is not None
    assert released.id == waiting


def test_a_dependency_completed_in_place_is_not_waited_for_by_a_revived_dependent(
    store: Store,
) -> None:
    # The dependent died keeping edges to both of its dependencies (§18.4); the one that
    # then completed in place satisfied its edge, so the redrive of the dead one brings
    # the dependent back waiting for the redriven job alone.
    queue = store.queue("kept", QueueOpts(completed_retention_s=3600, max_attempts=1))
    kept, doomed = queue.enqueue({"n": 1}), queue.enqueue({"n": 2})
    dependent = queue.enqueue({"n": 3}, EnqueueOpts(after=[kept, doomed]))
    handles = {handle.id: handle for handle in queue.claim_batch("w", 2)}
    assert handles[doomed].fail("broken")  # first: the dependent dies keeping both edges
    assert handles[kept].ack({"ok": True})
    assert queue.get_job(dependent).state is JobState.DEAD  # type: ignore[union-attr]
    (redriven,) = queue.redrive([doomed])
    (revived,) = queue.dependencies(redriven).waited_by
    assert queue.dependencies(revived).waits_for == (redriven,)
    handle = queue.claim("w")
    assert handle is not None
    assert handle.id == redriven
    assert handle.ack({"ok": True})
    released = queue.claim("w")
    assert released is not None
    assert released.id == revived
