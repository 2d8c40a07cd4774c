"""§11: redriving dead jobs and purging them (ops profile)."""

from __future__ import annotations

import pytest

from alkstore import EnqueueOpts, JobState, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import claim_wait_in_thread
from alkstore_conformance.helpers.ops import (
    dead_ids,
    make_dead,
    one_life_each,
    origins,
)

GENEROUS_S = 60.0
STAMPS = QueueOpts(
    visibility_timeout_s=7, max_attempts=2, backoff_base_s=3, dead_letter_retention_s=500
)


# -- OPS-REDRIVE ----------------------------------------------------------------------------


@pytest.mark.property("OPS-REDRIVE")
def test_a_redriven_job_is_a_new_pending_job_with_the_dead_ones_payload_and_stamps(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("again", STAMPS)
    old_id = queue.enqueue({"order": 7}, EnqueueOpts(priority=4, expires=100, max_attempts=3))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("broken") is True
    old = queue.get_job(old_id)
    assert old is not None
    clock.advance(20)
    now = int(clock.now())
    (new_id,) = queue.redrive()
    assert new_id != old_id
    assert queue.get_job(old_id) is None
    new = queue.get_job(new_id)
    assert new is not None
    assert (new.state, new.queue, new.payload, new.priority) == (
        JobState.PENDING,
        "again",
        {"order": 7},
        4,
    )
    assert (new.attempts, new.created_at, new.run_at, new.expires_at) == (0, now, now, now + 100)
    stamped = ("max_attempts", "visibility_timeout_s", "backoff_base_s", "dead_letter_retention_s")
    assert [getattr(new, f) for f in stamped] == [getattr(old, f) for f in stamped]
    assert (new.claimed_at, new.worker_id, new.last_error, new.died_at) == (None,) * 4
    assert (new.redriven_from, new.errors) == (old_id, ())
    claimed = queue.claim("w")
    assert claimed is not None
    assert claimed.id == new_id


@pytest.mark.property("OPS-REDRIVE")
def test_a_dead_job_without_an_expiry_is_redriven_without_one(store: Store) -> None:
    queue = store.queue("no-expiry")
    make_dead(queue)
    (new_id,) = queue.redrive()
    new = queue.get_job(new_id)
    assert new is not None
    assert new.expires_at is None


@pytest.mark.property("OPS-REDRIVE")
def test_named_ids_are_redriven_in_the_order_given_and_others_skipped(store: Store) -> None:
    queue, other = store.queue("named"), store.queue("other")
    first, second, third = make_dead(queue, 3)
    foreign = make_dead(other)[0]
    live = queue.enqueue({"live": True})
    new_ids = queue.redrive([third, live, foreign, first, 2**62])
    assert len(new_ids) == 2
    assert origins(queue, new_ids) == [third, first]
    assert dead_ids(queue) == [second]
    assert dead_ids(other) == [foreign]
    live_job = queue.get_job(live)
    assert live_job is not None
    assert live_job.state is JobState.PENDING
    assert queue.redrive([third]) == []  # gone: its dead row was deleted


@pytest.mark.property("OPS-REDRIVE")
def test_redrive_all_takes_the_longest_dead_first_up_to_the_limit(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("oldest")
    ids = queue.enqueue_many([{"n": n} for n in range(3)])
    handles = queue.claim_batch("w", 3)
    assert [h.id for h in handles] == ids
    for handle in reversed(handles):  # the newest id dies first
        assert handle.fail("broken") is True
        clock.advance(1)
    new_ids = queue.redrive(limit=2)
    assert origins(queue, new_ids) == [ids[2], ids[1]]
    assert dead_ids(queue) == [ids[0]]


@pytest.mark.property("OPS-REDRIVE")
def test_every_dead_row_is_redriven_exactly_once(store: Store) -> None:
    queue = store.queue("once")
    dead = make_dead(queue, 5)
    new_ids = queue.redrive()
    assert len(new_ids) == len(set(new_ids)) == 5
    assert one_life_each(queue, dead) == dict.fromkeys(dead, "redriven")
    assert queue.stats().dead == 0
    assert queue.redrive() == []


@pytest.mark.property("OPS-REDRIVE")
def test_a_redrive_wakes_a_claimer_waiting_on_the_queue(store: Store) -> None:
    queue = store.queue("wake")
    make_dead(queue)
    got = claim_wait_in_thread(queue, timeout=GENEROUS_S)
    (new_id,) = queue.redrive()
    handle = got()
    assert handle is not None
    assert handle.id == new_id


# -- OPS-PURGE-DEAD -------------------------------------------------------------------------


@pytest.mark.property("OPS-PURGE-DEAD")
def test_purge_dead_deletes_every_dead_job_of_the_queue_only(store: Store) -> None:
    queue, other = store.queue("purged"), store.queue("kept")
    make_dead(queue, 3)
    foreign = make_dead(other, 1)
    live = queue.enqueue({"live": True})
    assert queue.purge_dead() == 3
    assert dead_ids(queue) == []
    assert dead_ids(other) == foreign
    assert queue.get_job(live) is not None
    assert queue.purge_dead() == 0


@pytest.mark.property("OPS-PURGE-DEAD")
def test_purge_dead_of_named_ids_deletes_only_those_dead_rows(store: Store) -> None:
    queue, other = store.queue("named-purge"), store.queue("other-purge")
    first, second = make_dead(queue, 2)
    foreign = make_dead(other)[0]
    live = queue.enqueue({"live": True})
    assert queue.purge_dead([first, live, foreign, 2**62]) == 1
    assert dead_ids(queue) == [second]
    assert dead_ids(other) == [foreign]
    assert queue.get_job(live) is not None


@pytest.mark.property("OPS-PURGE-DEAD")
def test_purge_dead_older_than_keeps_the_recently_dead(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("aged")
    (old,) = make_dead(queue)
    clock.advance(100)
    (recent,) = make_dead(queue)
    clock.advance(50)  # old died 150 s ago, recent 50 s ago
    assert queue.purge_dead(older_than_s=150) == 0  # dead exactly that long: kept
    assert queue.purge_dead(older_than_s=60) == 1
    assert dead_ids(queue) == [recent]
    assert queue.purge_dead([recent], older_than_s=60) == 0
    assert queue.purge_dead([recent], older_than_s=10) == 1
    assert queue.get_job(old) is None
