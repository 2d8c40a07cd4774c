"""§11: pausing and resuming a queue, in one process (ops profile)."""

from __future__ import annotations

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import claim_wait_in_thread
from alkstore_conformance.helpers.fixtures import StoreFactory

PROPERTY = "OPS-PAUSE"
GENEROUS_S = 60.0
WHILE_PAUSED_S = 0.3
"""How long a claim_wait on a paused queue with a ready job is given: it must not claim."""


@pytest.mark.property(PROPERTY)
def test_a_paused_queue_hands_out_nothing_until_resumed(store: Store) -> None:
    queue = store.queue("paused")
    job_id = queue.enqueue({"n": 1})
    assert queue.pause() is True
    assert queue.paused() is True
    assert (queue.claim("w"), queue.claim_batch("w", 10)) == (None, [])
    assert queue.resume() is True
    assert queue.paused() is False
    handle = queue.claim("w")
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property(PROPERTY)
def test_pause_and_resume_say_whether_they_changed_anything(store: Store) -> None:
    queue = store.queue("toggled")
    assert queue.resume() is False
    assert queue.pause() is True
    assert queue.pause() is False
    assert queue.resume() is True
    assert queue.resume() is False


@pytest.mark.property(PROPERTY)
def test_a_pause_stops_only_its_own_queue(store: Store) -> None:
    paused, running = store.queue("stopped"), store.queue("running")
    paused.enqueue({"n": 1})
    job_id = running.enqueue({"n": 2})
    paused.pause()
    assert running.paused() is False
    handle = running.claim("w")
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property(PROPERTY)
def test_enqueue_and_claimed_jobs_carry_on_while_paused(store: Store) -> None:
    queue = store.queue("carry-on")
    first, second, third = queue.enqueue_many([{"n": n} for n in range(3)])
    handles = queue.claim_batch("w", 3)
    assert [h.id for h in handles] == [first, second, third]
    queue.pause()
    later = queue.enqueue({"n": "later"})
    assert handles[0].heartbeat(60) is True
    assert handles[0].ack() is True
    assert handles[1].fail("broken") is True
    assert handles[2].retry("again", 0) is True
    assert queue.claim("w") is None
    assert queue.stats().ready == 2
    assert {job.id for job in queue.jobs(JobState.PENDING)} == {third, later}


@pytest.mark.property(PROPERTY)
def test_sweeps_carry_on_while_paused(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("swept", QueueOpts(dead_letter_retention_s=0))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(expires=10))
    queue.pause()
    clock.advance(10)
    assert queue.sweep_expired().expired == 1
    dead = queue.get_job(job_id)
    assert dead is not None
    assert dead.state is JobState.DEAD


@pytest.mark.property(PROPERTY)
def test_claim_wait_on_a_paused_queue_keeps_waiting(store: Store) -> None:
    queue = store.queue("waiting")
    job_id = queue.enqueue({"n": 1})
    queue.pause()
    assert queue.claim_wait("w", timeout=WHILE_PAUSED_S) is None
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING


@pytest.mark.property(PROPERTY)
def test_resume_wakes_a_claim_wait_on_the_paused_queue(store: Store) -> None:
    queue = store.queue("resumed")
    job_id = queue.enqueue({"n": 1})
    queue.pause()
    got = claim_wait_in_thread(queue, timeout=GENEROUS_S)
    assert queue.claim_wait("probe", timeout=WHILE_PAUSED_S) is None  # the waiter waits too
    assert queue.resume() is True
    handle = got()
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property(PROPERTY)
def test_a_pause_survives_reopening_the_store(open_store: StoreFactory) -> None:
    first = open_store()
    first.queue("durable").pause()
    first.close()
    assert open_store().queue("durable").paused() is True
