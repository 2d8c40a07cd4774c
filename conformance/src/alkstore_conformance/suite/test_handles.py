"""§2: a handle's ops succeed only under its very claim, before its deadline.

A refused op returns ``False`` and changes nothing: every refusal test
compares the job row before and after.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from alkstore import JobHandle, JobState, Queue, QueueOpts, Store
from alkstore.testing import FakeClock

HANDLE_OPS: dict[str, Callable[[JobHandle], bool]] = {
    "ack": lambda h: h.ack(),
    "heartbeat": lambda h: h.heartbeat(600),
    "retry": lambda h: h.retry("stale"),
    "retry-with-delay": lambda h: h.retry("stale", delay=0),
    "fail": lambda h: h.fail("stale"),
    "release": lambda h: h.release(),
}
op_names = pytest.mark.parametrize("op", list(HANDLE_OPS))

VISIBILITY_S = 30


def _claimed(store: Store, worker: str = "worker-1") -> tuple[Queue, JobHandle]:
    queue = store.queue("handles", QueueOpts(visibility_timeout_s=VISIBILITY_S, max_attempts=5))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim(worker)
    assert handle is not None
    assert handle.id == job_id
    return queue, handle


# -- QUEUE-HANDLE-STALE-AFTER-RECLAIM ----------------------------------------------


@pytest.mark.property("QUEUE-HANDLE-STALE-AFTER-RECLAIM")
@op_names
def test_stale_handle_is_refused_after_a_reclaim(
    clocked_store: Store, clock: FakeClock, op: str
) -> None:
    queue, stale = _claimed(clocked_store)
    clock.advance(VISIBILITY_S)
    current = queue.claim("worker-2")
    assert current is not None
    assert (current.id, current.attempts) == (stale.id, 2)
    before = queue.get_job(stale.id)
    assert HANDLE_OPS[op](stale) is False
    assert queue.get_job(stale.id) == before
    assert current.ack() is True


@pytest.mark.property("QUEUE-HANDLE-STALE-AFTER-RECLAIM")
@op_names
def test_handle_is_refused_after_its_job_was_retried_and_claimed_again(
    clocked_store: Store, op: str
) -> None:
    # Same worker id both times: only the attempt tells the two claims apart.
    queue, first = _claimed(clocked_store, worker="worker")
    assert first.retry("again", delay=0) is True
    second = queue.claim("worker")
    assert second is not None
    assert (second.id, second.attempts) == (first.id, 2)
    before = queue.get_job(first.id)
    assert HANDLE_OPS[op](first) is False
    assert queue.get_job(first.id) == before
    assert second.ack() is True


# -- QUEUE-HANDLE-LAPSED-REFUSED ---------------------------------------------------


@pytest.mark.property("QUEUE-HANDLE-LAPSED-REFUSED")
@op_names
def test_lapsed_claim_refuses_every_op(clocked_store: Store, clock: FakeClock, op: str) -> None:
    queue, handle = _claimed(clocked_store)
    clock.advance(VISIBILITY_S)  # now == deadline: lapsed
    before = queue.get_job(handle.id)
    assert HANDLE_OPS[op](handle) is False
    assert queue.get_job(handle.id) == before


@pytest.mark.property("QUEUE-HANDLE-LAPSED-REFUSED")
@op_names
def test_live_claim_accepts_ops_until_its_deadline(
    clocked_store: Store, clock: FakeClock, op: str
) -> None:
    _, handle = _claimed(clocked_store)
    clock.advance(VISIBILITY_S - 1)
    assert HANDLE_OPS[op](handle) is True


@pytest.mark.property("QUEUE-HANDLE-LAPSED-REFUSED")
def test_late_heartbeat_never_steals_the_job_back(clocked_store: Store, clock: FakeClock) -> None:
    queue, late = _claimed(clocked_store)
    clock.advance(VISIBILITY_S + 5)
    assert late.heartbeat(600) is False
    reclaimed = queue.claim("worker-2")
    assert reclaimed is not None
    assert (reclaimed.id, reclaimed.attempts) == (late.id, 2)
    assert late.heartbeat(600) is False
    job = queue.get_job(late.id)
    assert job is not None
    assert job.worker_id == "worker-2"
    assert reclaimed.ack() is True


# -- QUEUE-HANDLE-AFTER-FINISH -----------------------------------------------------


def _finish(queue: Queue, handle: JobHandle, how: str) -> None:
    if how == "ack":
        assert handle.ack() is True
    elif how == "retry":
        assert handle.retry("later", delay=60) is True
    elif how == "fail":
        assert handle.fail("broken") is True
    else:
        assert queue.cancel(handle.id) is True


@pytest.mark.property("QUEUE-HANDLE-AFTER-FINISH")
@pytest.mark.parametrize("how", ["ack", "retry", "fail", "cancel"])
@op_names
def test_ops_after_the_claim_finished_return_false(clocked_store: Store, how: str, op: str) -> None:
    queue, handle = _claimed(clocked_store)
    _finish(queue, handle, how)
    before = queue.get_job(handle.id)
    assert HANDLE_OPS[op](handle) is False
    assert queue.get_job(handle.id) == before


# -- QUEUE-HEARTBEAT-ABSOLUTE ------------------------------------------------------


@pytest.mark.property("QUEUE-HEARTBEAT-ABSOLUTE")
def test_heartbeat_sets_the_deadline_from_now_not_additively(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("beats", QueueOpts(visibility_timeout_s=300))
    queue.enqueue({"n": 1})
    handle = queue.claim("worker-1")
    assert handle is not None
    clock.advance(100)
    assert handle.heartbeat(60) is True  # deadline: claim + 160, not claim + 360
    clock.advance(59)
    assert queue.claim("worker-2") is None
    clock.advance(1)
    reclaimed = queue.claim("worker-2")
    assert reclaimed is not None
    assert (reclaimed.id, reclaimed.attempts) == (handle.id, 2)


@pytest.mark.property("QUEUE-HEARTBEAT-ABSOLUTE")
def test_heartbeat_extends_past_the_visibility_timeout(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("beats", QueueOpts(visibility_timeout_s=30))
    queue.enqueue({"n": 1})
    handle = queue.claim("worker-1")
    assert handle is not None
    clock.advance(20)
    assert handle.heartbeat(100) is True  # deadline: claim + 120
    clock.advance(99)
    assert queue.claim("worker-2") is None
    assert handle.heartbeat(100) is True  # deadline: claim + 219
    clock.advance(99)
    assert queue.claim("worker-2") is None
    job = queue.get_job(handle.id)
    assert job is not None
    assert (job.state, job.attempts, job.worker_id) == (JobState.PROCESSING, 1, "worker-1")
    assert handle.ack() is True
