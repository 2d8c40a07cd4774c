"""§4: the outbox — the queue consumer surface over a reserved backing queue."""

from __future__ import annotations

import pytest

from alkstore import (
    RESERVED_PREFIX,
    EnqueueOpts,
    JobState,
    ReservedName,
    StopToken,
    Store,
    SweepResult,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import Rollback, raise_inside

# -- OUTBOX-TX-ENQUEUE ---------------------------------------------------------------


@pytest.mark.property("OUTBOX-TX-ENQUEUE")
def test_outbox_enqueue_commits_with_the_transaction(store: Store) -> None:
    with store.transaction() as tx:
        job_id = tx.outbox_enqueue("sync", {"order": 7})
    handle = store.outbox("sync").claim("relay")
    assert handle is not None
    assert (handle.id, handle.payload) == (job_id, {"order": 7})


@pytest.mark.property("OUTBOX-TX-ENQUEUE")
def test_outbox_enqueue_rolls_back_with_the_transaction(store: Store) -> None:
    job_ids: list[int] = []
    with pytest.raises(Rollback):
        raise_inside(
            store.transaction(), lambda tx: job_ids.append(tx.outbox_enqueue("sync", {"n": 7}))
        )
    outbox = store.outbox("sync")
    assert [outbox.get_job(job_id) for job_id in job_ids] == [None]
    assert outbox.claim("relay") is None


# -- OUTBOX-CONSUMER-SURFACE ---------------------------------------------------------


@pytest.mark.property("OUTBOX-CONSUMER-SURFACE")
def test_outbox_offers_the_queue_consumer_surface(clocked_store: Store, clock: FakeClock) -> None:
    outbox = clocked_store.outbox("sync")
    first = outbox.enqueue({"n": 1})
    batch = outbox.enqueue_many([{"n": 2}, {"n": 3}])
    expiring = outbox.enqueue({"n": 4}, EnqueueOpts(expires=5, priority=-1))
    got = outbox.get_job(first)
    assert got is not None
    assert (got.payload, got.state) == ({"n": 1}, JobState.PENDING)
    handle = outbox.claim("relay")
    assert handle is not None
    assert handle.id == first
    assert handle.ack() is True
    assert sorted(h.id for h in outbox.claim_batch("relay", 2)) == sorted(batch)
    assert outbox.ack_batch(batch, "relay") == 2
    stop = StopToken()
    stop.stop()
    assert outbox.claim_wait("relay", timeout=5, stop=stop) is None
    clock.advance(5)
    assert outbox.sweep_expired() == SweepResult(expired=1, exhausted=0, purged=0)
    dead = outbox.get_job(expiring)
    assert dead is not None
    assert (dead.state, dead.last_error) == (JobState.DEAD, "expired")
    assert outbox.cancel(outbox.enqueue({"n": 5})) is True
    assert outbox.claim("relay") is None


@pytest.mark.property("OUTBOX-CONSUMER-SURFACE")
def test_claim_wait_on_an_outbox_returns_its_ready_job(store: Store) -> None:
    outbox = store.outbox("sync")
    job_id = outbox.enqueue({"n": 1})
    handle = outbox.claim_wait("relay", timeout=30)
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property("OUTBOX-CONSUMER-SURFACE")
def test_outboxes_and_queues_of_one_name_are_separate(store: Store) -> None:
    store.queue("sync").enqueue({"from": "queue"})
    store.outbox("other").enqueue({"from": "other outbox"})
    assert store.outbox("sync").claim("relay") is None
    outbox_job = store.outbox("sync").enqueue({"from": "outbox"})
    queued = store.queue("sync").claim("worker")
    assert queued is not None
    assert queued.payload == {"from": "queue"}
    assert store.queue("sync").claim("worker") is None
    relayed = store.outbox("sync").claim("relay")
    assert relayed is not None
    assert relayed.id == outbox_job


# -- OUTBOX-BACKING-STAMPS -----------------------------------------------------------


def _assert_outbox_stamps(store: Store, job_id: int) -> None:
    job = store.outbox("sync").get_job(job_id)
    assert job is not None
    stamps = (
        job.visibility_timeout_s,
        job.max_attempts,
        job.backoff_base_s,
        job.dead_letter_retention_s,
    )
    assert stamps == (60, 5, 5, None)


@pytest.mark.property("OUTBOX-BACKING-STAMPS")
def test_outbox_jobs_carry_the_outbox_stamps(store: Store) -> None:
    _assert_outbox_stamps(store, store.outbox("sync").enqueue({"n": 1}))


@pytest.mark.property("OUTBOX-BACKING-STAMPS")
@pytest.mark.requires("transactions")
def test_outbox_jobs_enqueued_in_a_transaction_carry_the_outbox_stamps(store: Store) -> None:
    with store.transaction() as tx:
        job_id = tx.outbox_enqueue("sync", {"n": 2})
    _assert_outbox_stamps(store, job_id)


# -- OUTBOX-BACKING-RESERVED ---------------------------------------------------------


def _backing_queue(store: Store) -> str:
    outbox = store.outbox("sync")
    job = outbox.get_job(outbox.enqueue({"n": 1}))
    assert job is not None
    return job.queue


@pytest.mark.property("OUTBOX-BACKING-RESERVED")
def test_backing_queue_name_is_under_the_reserved_prefix(store: Store) -> None:
    assert _backing_queue(store).startswith(RESERVED_PREFIX)


@pytest.mark.property("OUTBOX-BACKING-RESERVED")
def test_store_queue_refuses_the_backing_queue(store: Store) -> None:
    backing = _backing_queue(store)
    with pytest.raises(ReservedName):
        store.queue(backing)


@pytest.mark.property("OUTBOX-BACKING-RESERVED")
@pytest.mark.requires("transactions")
def test_tx_enqueue_refuses_the_backing_queue(store: Store) -> None:
    backing = _backing_queue(store)
    with store.transaction() as tx, pytest.raises(ReservedName):
        tx.enqueue(backing, {"sneaky": True})
    outbox = store.outbox("sync")
    assert len(outbox.claim_batch("relay", 10)) == 1
