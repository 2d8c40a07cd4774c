"""§3.11: ``tx.retry_all(handles, errors, delays)`` and ``tx.fail_all(handles, errors)``
-- many claims retried or failed in one statement each.

Each is ``tx.retry`` or ``tx.fail`` per claim (§3.9) under the claim's own guard
``(id, attempts)``: a claim that is no longer valid is returned among the refused,
changing nothing, and the others are written; the transaction stays usable and
commits or rolls back as a whole. That each kind is one statement is not observable
here: the properties check what it leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from alkstore import (
    EnqueueOpts,
    InvalidOptions,
    JobHandle,
    JobState,
    Limits,
    QueueOpts,
    Store,
    Transaction,
)
from alkstore.backoff import retry_delay_range
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
EXHAUSTED = "max attempts exceeded"
VERBS = ["retry", "fail"]


def _claimed(store: Store, name: str, count: int, opts: QueueOpts | None = None) -> list[JobHandle]:
    return claimed_in_order(
        store, name, count, opts or QueueOpts(visibility_timeout_s=VISIBILITY_S)
    )


def _jobs(store: Store, handles: Sequence[JobHandle]) -> list[tuple[JobState, int, str | None]]:
    """Each job's state, attempts and last error (every one still exists here)."""
    found = []
    for handle in handles:
        job = store.queue(handle.job.queue).get_job(handle.id)
        assert job is not None, f"job {handle.id} is gone"
        found.append((job.state, job.attempts, job.last_error))
    return found


def _written(tx: Transaction, verb: str, handles: Sequence[JobHandle]) -> tuple[JobHandle, ...]:
    """``verb``'s many-claims call: retries at once, or fails, each with one error."""
    if verb == "retry":
        return tx.retry_all(handles, "later", delays=0)
    return tx.fail_all(handles, "no such card")


def _as_written(verb: str) -> tuple[JobState, int, str | None]:
    """A job's state, attempts and last error once ``_written`` wrote its claim."""
    return (JobState.PENDING, 1, None) if verb == "retry" else (JobState.DEAD, 1, "no such card")


HELD = (JobState.PROCESSING, 1, None)
"""A claim as it was: still processing, on its first attempt."""


# -- TX-RETRY-ALL-COMMIT -----------------------------------------------------------------


@pytest.mark.property("TX-RETRY-ALL-COMMIT")
def test_retry_all_puts_every_claim_back_to_pending_at_its_own_time(
    clocked_store: Store, clock: FakeClock
) -> None:
    handles = _claimed(clocked_store, unique_name("retry-all"), 3)
    with clocked_store.transaction() as tx:
        assert tx.retry_all(handles, ["a", "b", "c"], [10, 0, 30]) == ()
    now = int(clock.now())
    queue = clocked_store.queue(handles[0].job.queue)
    jobs = [queue.get_job(handle.id) for handle in handles]
    assert [(j.state, j.attempts, j.worker_id, j.run_at) for j in jobs if j is not None] == [
        (JobState.PENDING, 1, None, now + 10),
        (JobState.PENDING, 1, None, now),
        (JobState.PENDING, 1, None, now + 30),
    ]
    assert not any(handle.ack() for handle in handles)  # every claim is over


@pytest.mark.property("TX-RETRY-ALL-COMMIT")
def test_retry_all_without_delays_waits_each_jobs_backoff_curve(
    clocked_store: Store, clock: FakeClock
) -> None:
    opts = QueueOpts(visibility_timeout_s=VISIBILITY_S, backoff_base_s=20)
    handles = _claimed(clocked_store, unique_name("retry-all-backoff"), 4, opts)
    with clocked_store.transaction() as tx:
        assert tx.retry_all(handles, "later") == ()
    low, high = retry_delay_range(20, 1)
    now = int(clock.now())
    for handle in handles:
        job = clocked_store.queue(handle.job.queue).get_job(handle.id)
        assert job is not None
        assert job.state is JobState.PENDING
        assert now + low <= job.run_at <= now + high, (job.run_at - now, low, high)


@pytest.mark.property("TX-RETRY-ALL-COMMIT")
def test_retry_all_of_claims_of_several_queues_makes_each_claimable_again(store: Store) -> None:
    first = _claimed(store, unique_name("retry-all-a"), 2)
    second = _claimed(store, unique_name("retry-all-b"), 2)
    with store.transaction() as tx:
        assert tx.retry_all([first[0], second[0], first[1], second[1]], "later", 0) == ()
    for handles in (first, second):
        again = store.queue(handles[0].job.queue).claim_batch("w2", 5)
        assert sorted((h.id, h.attempts) for h in again) == [(h.id, 2) for h in handles]


@pytest.mark.property("TX-RETRY-ALL-COMMIT")
def test_retry_all_at_the_attempt_budget_dead_letters_that_job_and_retries_the_others(
    store: Store,
) -> None:
    spent = _claimed(
        store,
        unique_name("retry-all-budget"),
        1,
        QueueOpts(visibility_timeout_s=VISIBILITY_S, max_attempts=1),
    )
    left = _claimed(store, unique_name("retry-all-left"), 1)
    with store.transaction() as tx:
        assert tx.retry_all([left[0], spent[0]], ["once more", "card declined"], 0) == ()
    assert _jobs(store, [left[0], spent[0]]) == [
        (JobState.PENDING, 1, None),
        (JobState.DEAD, 1, EXHAUSTED),
    ]


@pytest.mark.requires("ops")
@pytest.mark.property("TX-RETRY-ALL-COMMIT")
def test_retry_all_keeps_each_error_in_its_jobs_history(store: Store) -> None:
    spent = _claimed(
        store,
        unique_name("retry-all-history-spent"),
        1,
        QueueOpts(visibility_timeout_s=VISIBILITY_S, max_attempts=1),
    )
    handles = _claimed(store, unique_name("retry-all-history"), 2) + spent
    with store.transaction() as tx:
        assert tx.retry_all(handles, ["declined", "timeout", "spent"], 0) == ()
    histories = []
    for handle in handles:
        job = store.queue(handle.job.queue).get_job(handle.id)
        assert job is not None
        histories.append([(e.attempt, e.error) for e in job.errors])
    assert histories == [[(1, "declined")], [(1, "timeout")], [(1, "spent")]]


@pytest.mark.property("TX-RETRY-ALL-COMMIT")
def test_retry_all_and_fail_all_of_no_handles_refuse_nothing(store: Store) -> None:
    with store.transaction() as tx:
        assert tx.retry_all([], "later") == ()
        assert tx.fail_all([], []) == ()


@pytest.mark.requires("sql")
@pytest.mark.property("TX-RETRY-ALL-COMMIT")
def test_retry_all_commits_with_the_business_write(store: Store) -> None:
    handles = _claimed(store, unique_name("retry-all-effect"), 2)
    with business_table(store) as table:
        with store.transaction() as tx:
            tx.execute(native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)"), (7,))
            assert tx.retry_all(handles, "later", 0) == ()
        assert business_ids(store, table) == [7]
    assert _jobs(store, handles) == [_as_written("retry")] * 2


# -- TX-FAIL-ALL-COMMIT ------------------------------------------------------------------


@pytest.mark.property("TX-FAIL-ALL-COMMIT")
def test_fail_all_dead_letters_every_claims_job_with_its_own_error(store: Store) -> None:
    first = _claimed(store, unique_name("fail-all-a"), 2)
    second = _claimed(store, unique_name("fail-all-b"), 1)
    handles = [first[0], second[0], first[1]]
    with store.transaction() as tx:
        assert tx.fail_all(handles, ["no card", "no such user", "gone"]) == ()
    assert _jobs(store, handles) == [
        (JobState.DEAD, 1, "no card"),
        (JobState.DEAD, 1, "no such user"),
        (JobState.DEAD, 1, "gone"),
    ]
    assert not any(handle.retry("again") for handle in handles)  # every claim is over


@pytest.mark.requires("dependencies")
@pytest.mark.property("TX-FAIL-ALL-COMMIT")
def test_fail_all_dead_letters_the_jobs_waiting_for_each(store: Store) -> None:
    queue = store.queue(unique_name("fail-all-chain"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    roots = queue.enqueue_many([{"step": 1}, {"step": 1}])
    waiting = [queue.enqueue({"step": 2}, EnqueueOpts(after=[root])) for root in roots]
    handles = queue.claim_batch("w1", 5)
    assert sorted(h.id for h in handles) == sorted(roots)
    with store.transaction() as tx:
        assert tx.fail_all(handles, "no such card") == ()
    states = [getattr(queue.get_job(job_id), "state", None) for job_id in [*roots, *waiting]]
    assert states == [JobState.DEAD] * 4


@pytest.mark.requires("unique")
@pytest.mark.property("TX-FAIL-ALL-COMMIT")
@pytest.mark.parametrize("verb", VERBS)
def test_fail_all_frees_its_jobs_unique_keys_and_retry_all_keeps_them(
    store: Store, verb: str
) -> None:
    queue = store.queue(unique_name("all-keyed"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    keyed = [queue.enqueue({"n": n}, EnqueueOpts(unique=f"k{n}")) for n in range(2)]
    handles = queue.claim_batch("w1", 2)
    assert sorted(h.id for h in handles) == sorted(keyed)
    with store.transaction() as tx:
        if verb == "retry":
            assert tx.retry_all(handles, "later", 3600) == ()
        else:
            assert tx.fail_all(handles, "no such card") == ()
    again = [queue.enqueue({"n": n}, EnqueueOpts(unique=f"k{n}")) for n in range(2)]
    # §15.4: a retry (back to pending) keeps its job's hold; a move to dead frees it.
    assert [e.duplicate for e in again] == [verb == "retry"] * 2


@pytest.mark.requires("limits")
@pytest.mark.property("TX-FAIL-ALL-COMMIT")
@pytest.mark.parametrize("verb", VERBS)
def test_retry_all_and_fail_all_free_a_limited_queues_slots(store: Store, verb: str) -> None:
    queue = store.queue(unique_name("all-limited"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    assert queue.set_limits(Limits(concurrency=2)) is True
    queue.enqueue_many([{"n": n} for n in range(4)])
    handles = queue.claim_batch("w1", 4)
    assert len(handles) == 2  # the limit holds the other two back
    assert queue.claim("w2") is None
    with store.transaction() as tx:
        if verb == "retry":
            assert tx.retry_all(handles, "later", 3600) == ()
        else:
            assert tx.fail_all(handles, "no such card") == ()
    freed = queue.claim_batch("w2", 4)
    assert len(freed) == 2  # both slots free again
    assert {h.id for h in freed}.isdisjoint(h.id for h in handles)


@pytest.mark.requires("attach")
@pytest.mark.property("TX-FAIL-ALL-COMMIT")
@pytest.mark.parametrize("verb", VERBS)
def test_an_attached_retry_all_or_fail_all_commits_and_rolls_back_with_the_callers_transaction(
    store: Store, native_connect: Callable[[], Any], verb: str
) -> None:
    name = unique_name("all-attached")
    kept, undone = _claimed(store, name, 2), _claimed(store, name, 2)
    for handles, commit in ((undone, False), (kept, True)):
        connection = native_connect()
        try:
            with store.attach(connection) as tx:
                assert _written(tx, verb, handles) == ()
            connection.commit() if commit else connection.rollback()
        finally:
            connection.close()
    assert _jobs(store, kept) == [_as_written(verb)] * 2
    assert _jobs(store, undone) == [HELD] * 2


# -- TX-RETRY-ALL-ROLLBACK ---------------------------------------------------------------


@pytest.mark.property("TX-RETRY-ALL-ROLLBACK")
@pytest.mark.parametrize("verb", VERBS)
def test_a_rolled_back_retry_all_or_fail_all_leaves_every_claim_as_it_was(
    store: Store, verb: str
) -> None:
    handles = _claimed(store, unique_name("all-undone"), 3)
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: _written(tx, verb, handles))
    assert _jobs(store, handles) == [HELD] * 3
    assert store.queue(handles[0].job.queue).claim("w2") is None  # nothing to claim
    assert all(handle.heartbeat(VISIBILITY_S) for handle in handles)  # still held
    assert all(handle.ack() for handle in handles)


# -- TX-RETRY-ALL-STALE ------------------------------------------------------------------


@pytest.mark.property("TX-RETRY-ALL-STALE")
@pytest.mark.parametrize("verb", VERBS)
def test_a_lapsed_claim_in_the_middle_is_refused_and_the_others_are_written(
    clocked_store: Store, clock: FakeClock, verb: str
) -> None:
    lapsed = _claimed(clocked_store, unique_name("all-lapsed"), 2)
    clock.advance(VISIBILITY_S)
    live = _claimed(clocked_store, unique_name("all-live"), 2)
    with clocked_store.transaction() as tx:
        refused = _written(tx, verb, [live[0], lapsed[0], lapsed[1], live[1]])
    assert refused == (lapsed[0], lapsed[1])
    assert _jobs(clocked_store, live) == [_as_written(verb)] * 2
    assert _jobs(clocked_store, lapsed) == [HELD] * 2  # lapsed, not written


@pytest.mark.property("TX-RETRY-ALL-STALE")
@pytest.mark.parametrize("verb", VERBS)
def test_a_superseded_claim_is_refused_and_the_newer_claim_left_alone(
    clocked_store: Store, clock: FakeClock, verb: str
) -> None:
    name = unique_name("all-superseded")
    old = _claimed(clocked_store, name, 2)
    clock.advance(VISIBILITY_S)
    newer = clocked_store.queue(name).claim_batch("w2", 2)
    assert sorted(h.id for h in newer) == [h.id for h in old]
    live = _claimed(clocked_store, unique_name("all-live"), 1)
    with clocked_store.transaction() as tx:
        assert _written(tx, verb, [old[0], live[0], old[1]]) == (old[0], old[1])
    assert _jobs(clocked_store, live) == [_as_written(verb)]
    assert _jobs(clocked_store, old) == [(JobState.PROCESSING, 2, None)] * 2
    assert all(handle.ack() for handle in newer)  # the newer claims still hold


@pytest.mark.property("TX-RETRY-ALL-STALE")
@pytest.mark.parametrize("verb", VERBS)
def test_a_finished_claim_and_a_claim_named_twice_are_refused(store: Store, verb: str) -> None:
    handles = _claimed(store, unique_name("all-finished"), 3)
    assert handles[1].fail("gone")
    with store.transaction() as tx:
        refused = _written(tx, verb, [handles[0], handles[1], handles[2], handles[0]])
    assert refused == (handles[1], handles[0])
    assert _jobs(store, [handles[0], handles[2]]) == [_as_written(verb)] * 2
    assert _jobs(store, [handles[1]]) == [(JobState.DEAD, 1, "gone")]


@pytest.mark.property("TX-RETRY-ALL-STALE")
@pytest.mark.parametrize("verb", ["ack", *VERBS])
@pytest.mark.parametrize("newer_first", [False, True], ids=["older-first", "newer-first"])
def test_a_claim_named_beside_its_jobs_newer_claim_is_refused_alone(
    clocked_store: Store, clock: FakeClock, verb: str, newer_first: bool
) -> None:
    # At most one of two claims of a job is valid: the newer is written, the older
    # refused, whichever the caller names first (tx.ack_all as the other two).
    name = unique_name("all-both-claims")
    (old,) = _claimed(clocked_store, name, 1)
    clock.advance(VISIBILITY_S)
    newer = clocked_store.queue(name).claim("w2")
    assert newer is not None
    assert (newer.id, newer.attempts) == (old.id, 2)
    named = [newer, old] if newer_first else [old, newer]
    with clocked_store.transaction() as tx:
        refused = tx.ack_all(named) if verb == "ack" else _written(tx, verb, named)
    assert refused == (old,)
    job = clocked_store.queue(name).get_job(old.id)
    if verb == "ack":
        assert job is None
    else:
        assert job is not None
        assert (job.state, job.attempts) == (_as_written(verb)[0], 2)


@pytest.mark.property("TX-RETRY-ALL-STALE")
def test_a_transaction_carried_on_past_refusals_commits_its_other_writes(
    clocked_store: Store, clock: FakeClock
) -> None:
    lapsed = _claimed(clocked_store, unique_name("all-lapsed"), 2)
    clock.advance(VISIBILITY_S)
    live = _claimed(clocked_store, unique_name("all-live"), 3)
    name = unique_name("all-after")
    with clocked_store.transaction() as tx:
        assert tx.retry_all([lapsed[0], live[0]], "later", 0) == (lapsed[0],)
        assert tx.fail_all([live[1], lapsed[1]], "no such card") == (lapsed[1],)
        assert tx.ack_all([live[2]]) == ()
        job_id = tx.enqueue(name, {"after": True})
    assert _jobs(clocked_store, live[:2]) == [_as_written("retry"), _as_written("fail")]
    assert clocked_store.queue(live[2].job.queue).get_job(live[2].id) is None
    assert _jobs(clocked_store, lapsed) == [HELD] * 2
    job = clocked_store.queue(name).get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING


# -- TX-RETRY-ALL-ARGUMENTS --------------------------------------------------------------

BAD_CALLS: dict[str, Callable[[Transaction, list[JobHandle]], object]] = {
    "retry-errors-of-another-length": lambda tx, h: tx.retry_all(h, ["one"]),
    "fail-errors-of-another-length": lambda tx, h: tx.fail_all(h, ["one", "two", "three"]),
    "delays-of-another-length": lambda tx, h: tx.retry_all(h, "later", [1]),
    "retry-error-not-a-str": lambda tx, h: tx.retry_all(h, ["later", 7]),  # type: ignore[list-item]
    "fail-error-not-a-str": lambda tx, h: tx.fail_all(h, None),  # type: ignore[arg-type]
    "negative-delay": lambda tx, h: tx.retry_all(h, "later", [0, -1]),
    "delay-not-a-duration": lambda tx, h: tx.retry_all(h, "later", "soon"),  # type: ignore[arg-type]
    "retry-not-a-handle": lambda tx, h: tx.retry_all([h[0], "x"], "later"),  # type: ignore[list-item]
    "fail-not-a-handle": lambda tx, h: tx.fail_all([h[0], 7], "gone"),  # type: ignore[list-item]
    "handles-not-a-sequence": lambda tx, h: tx.fail_all(h[0], "gone"),  # type: ignore[arg-type]
}


@pytest.mark.property("TX-RETRY-ALL-ARGUMENTS")
@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_arguments_are_refused_before_anything_is_written(
    store: Store, call: Callable[[Transaction, list[JobHandle]], object]
) -> None:
    # The refusal is caught inside the transaction, which then commits: a call that
    # wrote its first (valid) claim before refusing the next would show here.
    handles = _claimed(store, unique_name("all-args"), 2)
    with store.transaction() as tx, pytest.raises(InvalidOptions):
        call(tx, handles)
    assert _jobs(store, handles) == [HELD] * 2


@pytest.mark.property("TX-RETRY-ALL-ARGUMENTS")
def test_a_malformed_delay_is_refused_for_a_claim_at_its_budget_too(store: Store) -> None:
    spent = _claimed(
        store,
        unique_name("all-args-spent"),
        2,
        QueueOpts(visibility_timeout_s=VISIBILITY_S, max_attempts=1),
    )
    with store.transaction() as tx, pytest.raises(InvalidOptions):
        tx.retry_all(spent, "later", [0, -5])
    assert _jobs(store, spent) == [HELD] * 2
