"""§3.10: ``tx.ack_all(handles, results)`` -- many claims acked in one statement.

Each claim keeps its own guard ``(id, attempts)``: one that is no longer valid is
returned among the refused, changing nothing, and the others are acked; the
transaction stays usable and commits or rolls back as a whole. That the acks are
one statement is not observable here: the properties check what it leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from alkstore import (
    InvalidOptions,
    JobHandle,
    JobState,
    Limits,
    QueueOpts,
    ResultError,
    Store,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import (
    Rollback,
    business_ids,
    business_table,
    claimed_in_order,
    native_sql,
    raise_inside,
    unique_name,
)

VISIBILITY_S = 30


def _claimed(store: Store, name: str, count: int, opts: QueueOpts | None = None) -> list[JobHandle]:
    return claimed_in_order(
        store, name, count, opts or QueueOpts(visibility_timeout_s=VISIBILITY_S)
    )


def _states(store: Store, handles: list[JobHandle]) -> list[JobState | None]:
    states: list[JobState | None] = []
    for handle in handles:
        job = store.queue(handle.job.queue).get_job(handle.id)
        states.append(None if job is None else job.state)
    return states


# -- TX-ACK-ALL-COMMIT -----------------------------------------------------------------


@pytest.mark.property("TX-ACK-ALL-COMMIT")
def test_ack_all_acks_every_valid_claim_when_the_transaction_commits(store: Store) -> None:
    handles = _claimed(store, unique_name("all"), 3)
    with store.transaction() as tx:
        assert tx.ack_all(handles) == ()
    assert _states(store, handles) == [None, None, None]
    assert not any(handle.ack() for handle in handles)  # every claim is finished


@pytest.mark.property("TX-ACK-ALL-COMMIT")
def test_ack_all_acks_claims_of_several_queues(store: Store) -> None:
    first = _claimed(store, unique_name("all-a"), 2)
    second = _claimed(store, unique_name("all-b"), 2)
    with store.transaction() as tx:
        assert tx.ack_all([first[0], second[0], first[1], second[1]]) == ()
    assert _states(store, first + second) == [None] * 4


@pytest.mark.property("TX-ACK-ALL-COMMIT")
def test_ack_all_of_no_handles_refuses_nothing(store: Store) -> None:
    with store.transaction() as tx:
        assert tx.ack_all([]) == ()


@pytest.mark.requires("sql")
@pytest.mark.property("TX-ACK-ALL-COMMIT")
def test_ack_all_commits_with_the_business_write(store: Store) -> None:
    handles = _claimed(store, unique_name("all-effect"), 2)
    with business_table(store) as table:
        with store.transaction() as tx:
            tx.execute(native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)"), (7,))
            assert tx.ack_all(handles) == ()
        assert business_ids(store, table) == [7]
    assert _states(store, handles) == [None, None]


@pytest.mark.requires("results")
@pytest.mark.property("TX-ACK-ALL-COMMIT")
def test_ack_all_keeps_a_retaining_queues_jobs_completed_each_with_its_result(
    store: Store,
) -> None:
    opts = QueueOpts(visibility_timeout_s=VISIBILITY_S, completed_retention_s=60)
    handles = _claimed(store, unique_name("all-kept"), 3, opts)
    with store.transaction() as tx:
        assert tx.ack_all(handles, [{"charged": 1}, None, [2]]) == ()
    queue = store.queue(handles[0].job.queue)
    jobs = [queue.get_job(handle.id) for handle in handles]
    assert [(j.state, j.result) for j in jobs if j is not None] == [
        (JobState.COMPLETED, {"charged": 1}),
        (JobState.COMPLETED, None),
        (JobState.COMPLETED, [2]),
    ]


@pytest.mark.requires("attach")
@pytest.mark.property("TX-ACK-ALL-COMMIT")
def test_an_attached_ack_all_commits_and_rolls_back_with_the_callers_transaction(
    store: Store, native_connect: Callable[[], Any]
) -> None:
    name = unique_name("all-attached")
    kept, undone = _claimed(store, name, 2), _claimed(store, name, 2)
    for handles, commit in ((undone, False), (kept, True)):
        connection = native_connect()
        try:
            with store.attach(connection) as tx:
                assert tx.ack_all(handles) == ()
            connection.commit() if commit else connection.rollback()
        finally:
            connection.close()
    assert _states(store, kept) == [None, None]
    assert _states(store, undone) == [JobState.PROCESSING] * 2


@pytest.mark.requires("limits")
@pytest.mark.property("TX-ACK-ALL-COMMIT")
def test_ack_all_frees_a_limited_queues_slots(store: Store) -> None:
    name = unique_name("all-limited")
    queue = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S))
    queue.set_limits(Limits(concurrency=2))
    queue.enqueue_many([{"n": n} for n in range(4)])
    handles = queue.claim_batch("w1", 4)
    assert len(handles) == 2  # the limit holds the other two back
    assert queue.claim("w1") is None
    with store.transaction() as tx:
        assert tx.ack_all(handles) == ()
    assert len(queue.claim_batch("w1", 4)) == 2  # both slots free again


# -- TX-ACK-ALL-ROLLBACK ---------------------------------------------------------------


@pytest.mark.property("TX-ACK-ALL-ROLLBACK")
def test_a_rolled_back_ack_all_leaves_every_claim_as_it_was(store: Store) -> None:
    handles = _claimed(store, unique_name("all-undone"), 3)
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.ack_all(handles))
    assert _states(store, handles) == [JobState.PROCESSING] * 3
    assert all(handle.heartbeat(VISIBILITY_S) for handle in handles)  # still held
    assert all(handle.ack() for handle in handles)


@pytest.mark.requires("results")
@pytest.mark.property("TX-ACK-ALL-ROLLBACK")
def test_a_rolled_back_ack_all_keeps_no_completed_job(store: Store) -> None:
    opts = QueueOpts(visibility_timeout_s=VISIBILITY_S, completed_retention_s=60)
    handles = _claimed(store, unique_name("all-undone-kept"), 2, opts)
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.ack_all(handles, [1, None]))
    assert _states(store, handles) == [JobState.PROCESSING] * 2


# -- TX-ACK-ALL-STALE ------------------------------------------------------------------


@pytest.mark.property("TX-ACK-ALL-STALE")
def test_ack_all_refuses_a_lapsed_claim_in_the_middle_and_acks_the_others(
    clocked_store: Store, clock: FakeClock
) -> None:
    lapsed = _claimed(clocked_store, unique_name("all-lapsed"), 2)
    clock.advance(VISIBILITY_S)
    live = _claimed(clocked_store, unique_name("all-live"), 2)
    with clocked_store.transaction() as tx:
        refused = tx.ack_all([live[0], lapsed[0], lapsed[1], live[1]])
    assert refused == (lapsed[0], lapsed[1])
    assert _states(clocked_store, live) == [None, None]
    assert _states(clocked_store, lapsed) == [JobState.PROCESSING] * 2  # lapsed, not acked


@pytest.mark.property("TX-ACK-ALL-STALE")
def test_ack_all_refuses_a_superseded_claim_and_leaves_the_new_claim_alone(
    clocked_store: Store, clock: FakeClock
) -> None:
    name = unique_name("all-superseded")
    old = _claimed(clocked_store, name, 2)
    clock.advance(VISIBILITY_S)
    newer = clocked_store.queue(name).claim_batch("w2", 2)
    assert sorted(h.id for h in newer) == [h.id for h in old]
    live = _claimed(clocked_store, unique_name("all-live"), 1)
    with clocked_store.transaction() as tx:
        assert tx.ack_all([live[0], old[0], old[1]]) == (old[0], old[1])
    assert _states(clocked_store, live) == [None]
    assert _states(clocked_store, old) == [JobState.PROCESSING] * 2
    assert all(handle.ack() for handle in newer)  # the newer claims still hold


@pytest.mark.property("TX-ACK-ALL-STALE")
def test_ack_all_refuses_a_finished_claim_and_a_claim_named_twice(store: Store) -> None:
    handles = _claimed(store, unique_name("all-finished"), 3)
    assert handles[1].ack()
    with store.transaction() as tx:
        refused = tx.ack_all([handles[0], handles[1], handles[2], handles[0]])
    assert refused == (handles[1], handles[0])
    assert _states(store, handles) == [None, None, None]


@pytest.mark.property("TX-ACK-ALL-STALE")
def test_a_transaction_carried_on_past_ack_all_refusals_commits_its_other_writes(
    clocked_store: Store, clock: FakeClock
) -> None:
    lapsed = _claimed(clocked_store, unique_name("all-lapsed"), 1)
    clock.advance(VISIBILITY_S)
    live = _claimed(clocked_store, unique_name("all-live"), 2)
    name = unique_name("all-after")
    with clocked_store.transaction() as tx:
        assert tx.ack_all([lapsed[0], live[0]]) == (lapsed[0],)
        tx.ack(live[1])
        job_id = tx.enqueue(name, {"after": True})
    assert _states(clocked_store, live) == [None, None]
    job = clocked_store.queue(name).get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING


# -- TX-ACK-ALL-ARGUMENTS --------------------------------------------------------------


@pytest.mark.property("TX-ACK-ALL-ARGUMENTS")
def test_ack_all_refuses_results_of_another_length_before_writing(store: Store) -> None:
    handles = _claimed(store, unique_name("all-args"), 2)
    # Caught inside the transaction, which commits: nothing of the call was written.
    with store.transaction() as tx, pytest.raises(InvalidOptions):
        tx.ack_all(handles, [None])
    assert _states(store, handles) == [JobState.PROCESSING] * 2


@pytest.mark.property("TX-ACK-ALL-ARGUMENTS")
def test_ack_all_refuses_a_handle_that_is_not_a_job_handle(store: Store) -> None:
    handles = _claimed(store, unique_name("all-args"), 1)
    # Caught inside the transaction, which commits: nothing of the call was written.
    with store.transaction() as tx, pytest.raises(InvalidOptions):
        tx.ack_all([handles[0], "not a handle"])  # type: ignore[list-item]
    assert _states(store, handles) == [JobState.PROCESSING]


@pytest.mark.requires("results")
@pytest.mark.property("TX-ACK-ALL-ARGUMENTS")
def test_ack_all_refuses_a_result_that_cannot_be_stored_before_writing(store: Store) -> None:
    opts = QueueOpts(visibility_timeout_s=VISIBILITY_S, completed_retention_s=60)
    handles = _claimed(store, unique_name("all-args"), 2, opts)
    # Caught inside the transaction, which commits: nothing of the call was written.
    with store.transaction() as tx, pytest.raises(ResultError):
        tx.ack_all(handles, [None, {1, 2}])
    assert _states(store, handles) == [JobState.PROCESSING] * 2
