"""§3: the transactional seam — jobs commit and roll back with business writes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import JobState, Store, Transaction, WriteWouldDeadlock
from alkstore_conformance.helpers.common import (
    Rollback,
    business_ids,
    business_table,
    claim_wait_in_thread,
    insert_business_row,
    native_sql,
    raise_inside,
    unique_name,
)
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.via_aio import NOT_APPLICABLE_VIA_AIO_PREFIX, AioStore

WAIT_S = 1.5
"""How long a waiter watches for a ghost wake after a rollback (functional, not a latency bound)."""


# -- TX-COMMIT -----------------------------------------------------------------------


@pytest.mark.property("TX-COMMIT")
def test_committed_transaction_makes_its_jobs_claimable(store: Store) -> None:
    with store.transaction() as tx:
        first = tx.enqueue("orders", {"order": 7})
        second = tx.enqueue("orders", {"order": 8})
    queue = store.queue("orders")
    claimed = sorted(handle.id for handle in queue.claim_batch("worker", 10))
    assert claimed == sorted([first, second])


@pytest.mark.requires("sql")
@pytest.mark.property("TX-COMMIT")
def test_business_write_commits_with_the_job(store: Store) -> None:
    with business_table(store) as table:
        with store.transaction() as tx:
            tx.execute(native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)"), (7,))
            job_id = tx.enqueue("orders", {"order": 7})
        assert business_ids(store, table) == [7]
        job = store.queue("orders").get_job(job_id)
        assert job is not None
        assert job.state is JobState.PENDING


@pytest.mark.property("TX-COMMIT")
def test_committed_transaction_wakes_a_waiting_claimer(
    store: Store, open_store: StoreFactory
) -> None:
    waiter = open_store().queue("orders")
    got = claim_wait_in_thread(waiter, timeout=60)
    time.sleep(0.2)  # let the waiter start waiting (sequencing only)
    with store.transaction() as tx:
        job_id = tx.enqueue("orders", {"order": 7})
    handle = got()
    assert handle is not None
    assert handle.id == job_id


# -- TX-ROLLBACK ---------------------------------------------------------------------


@pytest.mark.requires("sql")
@pytest.mark.property("TX-ROLLBACK")
def test_rolled_back_transaction_leaves_no_job_and_no_business_row(store: Store) -> None:
    with business_table(store) as table:
        job_ids: list[int] = []

        def work(tx: Transaction) -> None:
            tx.execute(native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)"), (7,))
            job_ids.append(tx.enqueue("orders", {"order": 7}))
            job_ids.append(tx.outbox_enqueue("sync", {"order": 7}))

        with pytest.raises(Rollback):
            raise_inside(store.transaction(), work)
        assert business_ids(store, table) == []
    queue = store.queue("orders")
    assert [queue.get_job(job_id) for job_id in job_ids] == [None, None]
    assert queue.claim("worker") is None
    assert store.outbox("sync").claim("worker") is None


@pytest.mark.property("TX-ROLLBACK")
def test_rolled_back_transaction_wakes_no_claimer(store: Store, open_store: StoreFactory) -> None:
    waiter = open_store().queue("orders")
    got = claim_wait_in_thread(waiter, timeout=WAIT_S)
    time.sleep(0.2)  # let the waiter start waiting (sequencing only)
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.enqueue("orders", {"order": 7}))
    assert got() is None
    assert store.queue("orders").claim("worker") is None


@pytest.mark.property("TX-ROLLBACK")
def test_store_stays_usable_after_a_rollback(store: Store) -> None:
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.enqueue("orders", {"order": 1}))
    with store.transaction() as tx:
        job_id = tx.enqueue("orders", {"order": 2})
    handle = store.queue("orders").claim("worker")
    assert handle is not None
    assert (handle.id, handle.payload) == (job_id, {"order": 2})


# -- TX-GET-JOB-QUEUE-FILTERED -------------------------------------------------------


@pytest.mark.property("TX-GET-JOB-QUEUE-FILTERED")
def test_get_job_tx_finds_only_jobs_of_the_named_queue(store: Store) -> None:
    emails = store.queue("emails")
    live = emails.enqueue({"n": 1})
    dead = emails.enqueue({"n": 2})
    handle = emails.claim("worker")
    assert handle is not None
    assert handle.id == live
    second = emails.claim("worker")
    assert second is not None
    assert second.fail("bounced") is True
    expected = {job_id: emails.get_job(job_id) for job_id in (live, dead)}
    with store.transaction() as tx:
        found = {job_id: tx.get_job_tx("emails", job_id) for job_id in (live, dead)}
        elsewhere = [tx.get_job_tx("sms", job_id) for job_id in (live, dead)]
    assert found == expected
    assert elsewhere == [None, None]


@pytest.mark.property("TX-GET-JOB-QUEUE-FILTERED")
def test_get_job_tx_sees_the_transactions_own_enqueue(store: Store) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue("emails", {"n": 1})
        job = tx.get_job_tx("emails", job_id)
        assert job is not None
        assert (job.state, job.payload, job.queue) == (JobState.PENDING, {"n": 1}, "emails")


# -- TX-ATTACH -----------------------------------------------------------------------


@pytest.mark.property("TX-ATTACH")
def test_attached_enqueue_commits_with_the_callers_transaction(
    store: Store, native_connect: Callable[[], Any]
) -> None:
    with business_table(store) as table:
        connection = native_connect()
        try:
            insert_business_row(connection, table, 7)
            with store.attach(connection) as tx:
                job_id = tx.enqueue("orders", {"order": 7})
                outbox_id = tx.outbox_enqueue("sync", {"order": 7})
            connection.commit()
        finally:
            connection.close()
        assert business_ids(store, table) == [7]
    handle = store.queue("orders").claim("worker")
    assert handle is not None
    assert handle.id == job_id
    synced = store.outbox("sync").claim("worker")
    assert synced is not None
    assert synced.id == outbox_id


@pytest.mark.property("TX-ATTACH")
def test_attached_enqueue_rolls_back_with_the_callers_transaction(
    store: Store, native_connect: Callable[[], Any]
) -> None:
    with business_table(store) as table:
        connection = native_connect()
        try:
            insert_business_row(connection, table, 7)
            with store.attach(connection) as tx:
                job_id = tx.enqueue("orders", {"order": 7})
            # attach never commits: the caller's rollback takes the job with it.
            connection.rollback()
        finally:
            connection.close()
        assert business_ids(store, table) == []
    assert store.queue("orders").get_job(job_id) is None
    assert store.queue("orders").claim("worker") is None


@pytest.mark.property("TX-ATTACH")
def test_attach_leaves_the_callers_transaction_open_after_an_error(
    store: Store, native_connect: Callable[[], Any]
) -> None:
    with business_table(store) as table:
        connection = native_connect()
        try:
            insert_business_row(connection, table, 7)
            with pytest.raises(Rollback):
                raise_inside(store.attach(connection), lambda tx: tx.enqueue("orders", {"n": 7}))
            # attach did not roll back either: the caller still decides, and commits.
            insert_business_row(connection, table, 8)
            connection.commit()
        finally:
            connection.close()
        assert business_ids(store, table) == [7, 8]


# -- TX-WRITE-BESIDE ---------------------------------------------------------------------


def _enqueue_beside_a_rolled_back_transaction(
    store: Store, inside: str, beside: str
) -> int | Exception | None:
    """Enqueue to ``beside`` outside an open transaction that enqueues to ``inside``
    and rolls back: the id made, ``None`` if refused with WriteWouldDeadlock, or the
    other exception raised."""
    made: int | Exception | None = None
    with contextlib.suppress(Rollback), store.transaction() as tx:
        tx.enqueue(inside, {"n": 1})
        try:
            made = store.queue(beside).enqueue({"n": 2})
        except WriteWouldDeadlock:
            made = None
        except Exception as exc:  # any other error is the finding
            made = exc
        raise Rollback
    return made


@pytest.mark.property("TX-WRITE-BESIDE")
def test_a_write_beside_an_open_transaction_is_its_own_or_refused_writing_nothing(
    store: Store,
) -> None:
    if isinstance(store, AioStore):
        pytest.skip(
            NOT_APPLICABLE_VIA_AIO_PREFIX + "the rule is per thread, and through alkstore.aio "
            "the transaction and the write beside it run on different runner threads, so the "
            "write is another thread's and waits its time limit (contract §3.7)"
        )
    inside, beside = unique_name("inside"), unique_name("beside")
    made = _enqueue_beside_a_rolled_back_transaction(store, inside, beside)
    assert not isinstance(made, Exception), f"raised {made!r}, not WriteWouldDeadlock"
    assert store.queue(inside).claim("w") is None, "the rolled-back enqueue was kept"
    got = store.queue(beside).claim("w")
    if made is None:
        assert got is None, "a refused write left a job"
    else:
        assert got is not None, "the write beside was rolled back with the transaction"
        assert got.id == made
        assert got.ack() is True
