"""§3.8: ``tx.ack(handle)`` -- a job's completion in the caller's transaction.

The ack commits or rolls back with the business writes of ``store.transaction()``
or ``store.attach(conn)``: exactly-once effects for work whose effect is a write in
the same database. A claim that is no longer valid is refused inside the
transaction, before it commits, with ``StaleHandle``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from alkstore import JobHandle, JobState, QueueOpts, StaleHandle, Store, Transaction
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import (
    Rollback,
    business_ids,
    business_table,
    insert_business_row,
    native_sql,
    raise_inside,
    unique_name,
)

VISIBILITY_S = 30


def _claimed(store: Store, name: str, opts: QueueOpts | None = None) -> JobHandle:
    queue = store.queue(name, opts or QueueOpts(visibility_timeout_s=VISIBILITY_S))
    job_id = queue.enqueue({"order": 7})
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == job_id
    return handle


def _state(store: Store, handle: JobHandle) -> JobState | None:
    job = store.queue(handle.job.queue).get_job(handle.id)
    return None if job is None else job.state


def _run_in(
    transaction: AbstractContextManager[Transaction], work: Callable[[Transaction], None]
) -> None:
    with transaction as tx:
        work(tx)


def _write(tx: Transaction, table: str, row_id: int) -> None:
    tx.execute(native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)"), (row_id,))


# -- TX-ACK-COMMIT ---------------------------------------------------------------------


@pytest.mark.property("TX-ACK-COMMIT")
def test_a_tx_ack_takes_effect_when_the_transaction_commits(store: Store) -> None:
    handle = _claimed(store, unique_name("acked"))
    with store.transaction() as tx:
        tx.ack(handle)
    assert _state(store, handle) is None
    assert not handle.ack()  # the claim is finished


@pytest.mark.requires("sql")
@pytest.mark.property("TX-ACK-COMMIT")
def test_a_tx_ack_commits_with_the_business_write(store: Store) -> None:
    handle = _claimed(store, unique_name("effect"))
    with business_table(store) as table:
        with store.transaction() as tx:
            _write(tx, table, 7)
            tx.ack(handle)
        assert business_ids(store, table) == [7]
    assert _state(store, handle) is None


@pytest.mark.requires("results")
@pytest.mark.property("TX-ACK-COMMIT")
def test_a_tx_ack_with_a_result_keeps_the_job_completed_on_commit(store: Store) -> None:
    handle = _claimed(store, unique_name("kept"), QueueOpts(completed_retention_s=60))
    with store.transaction() as tx:
        tx.ack(handle, result={"charged": 7})
    job = store.queue(handle.job.queue).get_job(handle.id)
    assert job is not None
    assert (job.state, job.result) == (JobState.COMPLETED, {"charged": 7})


# -- TX-ACK-ROLLBACK -------------------------------------------------------------------


@pytest.mark.property("TX-ACK-ROLLBACK")
def test_a_rolled_back_tx_ack_leaves_the_claim_as_it_was(store: Store) -> None:
    handle = _claimed(store, unique_name("undone"))
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.ack(handle))
    assert _state(store, handle) is JobState.PROCESSING
    assert handle.heartbeat(VISIBILITY_S)  # the claim still holds
    assert handle.ack()


@pytest.mark.requires("sql")
@pytest.mark.property("TX-ACK-ROLLBACK")
def test_a_rollback_undoes_the_business_write_and_the_ack_together(store: Store) -> None:
    handle = _claimed(store, unique_name("undone"))
    with business_table(store) as table:

        def work(tx: Transaction) -> None:
            _write(tx, table, 7)
            tx.ack(handle)

        with pytest.raises(Rollback):
            raise_inside(store.transaction(), work)
        assert business_ids(store, table) == []
    assert _state(store, handle) is JobState.PROCESSING


@pytest.mark.requires("results")
@pytest.mark.property("TX-ACK-ROLLBACK")
def test_a_rolled_back_tx_ack_keeps_no_completed_job(store: Store) -> None:
    handle = _claimed(store, unique_name("undone"), QueueOpts(completed_retention_s=60))
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.ack(handle, result=1))
    assert _state(store, handle) is JobState.PROCESSING


# -- TX-ACK-STALE ----------------------------------------------------------------------


def _refused_inside(store: Store, handle: JobHandle, table: str | None) -> None:
    """``tx.ack(handle)`` raises ``StaleHandle`` inside the transaction; leaving the
    block with it rolls back the business write made before."""
    reached: list[str] = []

    def work(tx: Transaction) -> None:
        if table is not None:
            _write(tx, table, 7)
        tx.ack(handle)
        reached.append("the end of the block")

    with pytest.raises(StaleHandle):
        _run_in(store.transaction(), work)
    assert reached == []


@pytest.mark.property("TX-ACK-STALE")
def test_a_lapsed_claim_is_refused_inside_the_transaction(
    clocked_store: Store, clock: FakeClock
) -> None:
    handle = _claimed(clocked_store, unique_name("lapsed"))
    clock.advance(VISIBILITY_S)
    _refused_inside(clocked_store, handle, None)
    assert _state(clocked_store, handle) is JobState.PROCESSING  # lapsed, not acked
    again = clocked_store.queue(handle.job.queue).claim("w2")
    assert again is not None
    assert again.id == handle.id


@pytest.mark.property("TX-ACK-STALE")
def test_a_superseded_claim_is_refused_and_the_new_claim_is_untouched(
    clocked_store: Store, clock: FakeClock
) -> None:
    name = unique_name("superseded")
    handle = _claimed(clocked_store, name)
    clock.advance(VISIBILITY_S)
    newer = clocked_store.queue(name).claim("w2")
    assert newer is not None
    assert newer.id == handle.id
    _refused_inside(clocked_store, handle, None)
    assert _state(clocked_store, newer) is JobState.PROCESSING
    assert newer.ack()


@pytest.mark.property("TX-ACK-STALE")
def test_a_finished_claim_is_refused_inside_the_transaction(store: Store) -> None:
    handle = _claimed(store, unique_name("finished"))
    assert handle.ack()
    _refused_inside(store, handle, None)
    assert _state(store, handle) is None


@pytest.mark.requires("sql")
@pytest.mark.property("TX-ACK-STALE")
def test_a_refused_ack_leaves_the_business_write_to_the_callers_rollback(
    clocked_store: Store, clock: FakeClock
) -> None:
    handle = _claimed(clocked_store, unique_name("refused"))
    clock.advance(VISIBILITY_S)
    with business_table(clocked_store) as table:
        _refused_inside(clocked_store, handle, table)
        assert business_ids(clocked_store, table) == []


# -- TX-ACK-GROUP ----------------------------------------------------------------------


@pytest.mark.property("TX-ACK-GROUP")
def test_a_transaction_carried_on_past_a_refused_ack_commits_the_other_acks(
    clocked_store: Store, clock: FakeClock
) -> None:
    # What a worker's grouped acks rely on (§12.10): one transaction acks many claims,
    # each under its own guard; a refusal changes nothing, and the rest commit.
    lapsed = _claimed(clocked_store, unique_name("group-lapsed"))
    clock.advance(VISIBILITY_S)
    queue = clocked_store.queue(unique_name("group"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    queue.enqueue_many([{"order": 8}, {"order": 9}])
    live = queue.claim_batch("w2", 2)
    assert len(live) == 2
    refused: list[int] = []
    with clocked_store.transaction() as tx:
        tx.ack(live[0])
        try:
            tx.ack(lapsed)
        except StaleHandle:
            refused.append(lapsed.id)
        tx.ack(live[1], None)
    assert refused == [lapsed.id]
    assert [_state(clocked_store, h) for h in live] == [None, None]
    assert _state(clocked_store, lapsed) is JobState.PROCESSING  # lapsed, not acked


# -- TX-ACK-ATTACH ---------------------------------------------------------------------


@pytest.mark.property("TX-ACK-ATTACH")
def test_an_attached_ack_commits_and_rolls_back_with_the_callers_transaction(
    store: Store, native_connect: Callable[[], Any]
) -> None:
    name = unique_name("attached")
    kept, undone = _claimed(store, name), _claimed(store, name)
    with business_table(store) as table:
        for handle, row_id, commit in ((undone, 8, False), (kept, 7, True)):
            connection = native_connect()
            try:
                insert_business_row(connection, table, row_id)
                with store.attach(connection) as tx:
                    tx.ack(handle)
                connection.commit() if commit else connection.rollback()
            finally:
                connection.close()
        assert business_ids(store, table) == [7]
    assert _state(store, kept) is None
    assert _state(store, undone) is JobState.PROCESSING


@pytest.mark.property("TX-ACK-ATTACH")
def test_an_attached_ack_of_a_lapsed_claim_is_refused_before_the_callers_commit(
    clocked_store: Store, clock: FakeClock, native_connect: Callable[[], Any]
) -> None:
    handle = _claimed(clocked_store, unique_name("attached-lapsed"))
    clock.advance(VISIBILITY_S)
    connection = native_connect()
    try:
        with pytest.raises(StaleHandle), clocked_store.attach(connection) as tx:
            tx.ack(handle)
        connection.rollback()  # the caller's to roll back: attach did not
    finally:
        connection.close()
    assert _state(clocked_store, handle) is JobState.PROCESSING
