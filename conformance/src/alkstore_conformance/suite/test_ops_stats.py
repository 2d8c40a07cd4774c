"""§11: queue and store stats (ops profile)."""

from __future__ import annotations

import pytest

from alkstore import EnqueueOpts, QueueOpts, QueueStats, Store, outbox_queue_name
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.ops import make_dead

PROPERTY = "OPS-STATS-COUNTS"
VISIBILITY_S = 10


@pytest.mark.property(PROPERTY)
def test_stats_count_each_kind_of_job_and_the_oldest_ready_age(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("stats", QueueOpts(visibility_timeout_s=VISIBILITY_S))
    make_dead(queue, 1)
    queue.enqueue({"lapses": True}, EnqueueOpts(priority=2))
    assert queue.claim("w") is not None  # deadline start + 10
    clock.advance(5)
    queue.enqueue({"held": True}, EnqueueOpts(priority=1))
    assert queue.claim("w") is not None  # deadline start + 15
    clock.advance(5)  # the first claim's deadline is now: lapsed, reclaimable
    queue.enqueue({"ready": "oldest"})
    clock.advance(3)
    queue.enqueue({"ready": "newest"})
    queue.enqueue({"later": True}, EnqueueOpts(delay=60))
    assert queue.stats() == QueueStats(
        queue="stats",
        ready=2,
        scheduled=1,
        processing=1,
        lapsed=1,
        dead=1,
        oldest_ready_age_s=3,
        paused=False,
    )


@pytest.mark.property(PROPERTY)
def test_a_job_counts_as_ready_from_its_run_at_on(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("due")
    queue.enqueue({"n": 1}, EnqueueOpts(delay=30))
    before = queue.stats()
    assert (before.ready, before.scheduled, before.oldest_ready_age_s) == (0, 1, None)
    clock.advance(30)
    due = queue.stats()
    assert (due.ready, due.scheduled, due.oldest_ready_age_s) == (1, 0, 0)


@pytest.mark.property(PROPERTY)
def test_a_queue_with_nothing_in_it_has_all_zeros(store: Store) -> None:
    assert store.queue("empty").stats() == QueueStats("empty", 0, 0, 0, 0, 0, None, False)


@pytest.mark.property(PROPERTY)
def test_stats_follow_a_job_through_claim_ack_and_retry(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("moves", QueueOpts(visibility_timeout_s=VISIBILITY_S))
    queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    assert (queue.stats().ready, queue.stats().processing) == (0, 1)
    assert handle.retry("again", 20) is True
    assert (queue.stats().processing, queue.stats().scheduled) == (0, 1)
    clock.advance(20)
    again = queue.claim("w")
    assert again is not None
    assert again.ack() is True
    assert queue.stats() == QueueStats("moves", 0, 0, 0, 0, 0, None, False)


@pytest.mark.property(PROPERTY)
def test_store_stats_list_every_queue_with_a_row_or_a_pause_by_name(
    clocked_store: Store,
) -> None:
    # A frozen clock: the two reads must agree on the oldest ready job's age, which
    # a real clock can tick between them.
    store = clocked_store
    store.queue("b-live").enqueue({"n": 1})
    make_dead(store.queue("c-dead"), 2)
    store.queue("a-paused").pause()
    store.outbox("sync").enqueue({"n": 2})
    store.queue("never-used")
    listed = store.stats()
    names = [stats.queue for stats in listed]
    assert names == sorted(["a-paused", "b-live", "c-dead", outbox_queue_name("sync")])
    by_name = {stats.queue: stats for stats in listed}
    assert by_name["a-paused"] == QueueStats("a-paused", 0, 0, 0, 0, 0, None, True)
    assert (by_name["b-live"].ready, by_name["c-dead"].dead) == (1, 2)
    assert by_name[outbox_queue_name("sync")].ready == 1
    for stats in listed:
        if stats.queue != outbox_queue_name("sync"):  # a reserved name takes no handle
            assert store.queue(stats.queue).stats() == stats


@pytest.mark.property(PROPERTY)
def test_a_queue_whose_last_job_is_gone_drops_out_of_store_stats(store: Store) -> None:
    queue = store.queue("transient")
    queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    assert handle.ack() is True
    assert "transient" not in [stats.queue for stats in store.stats()]
