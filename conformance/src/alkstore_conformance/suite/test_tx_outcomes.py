"""§3.9: ``tx.retry(handle, ...)`` and ``tx.fail(handle, ...)`` -- a claim's retry or
fail in the caller's transaction, and a worker's group of mixed outcomes (§12.10).

Each is the handle's own outcome (``handle.retry``, ``handle.fail``) run on the
transaction's connection, under the claim ``(id, attempts)`` as ``tx.ack`` is: it
commits or rolls back with the transaction, and a claim that is no longer valid is
refused alone with ``StaleHandle``, the transaction still usable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import (
    EnqueueOpts,
    Job,
    JobHandle,
    JobState,
    Limits,
    QueueOpts,
    StaleHandle,
    Store,
    Transaction,
)
from alkstore.testing import FakeClock
from alkstore.worker import Fail, Retry, Worker
from alkstore_conformance.helpers.common import (
    Rollback,
    business_ids,
    business_table,
    native_sql,
    raise_inside,
    unique_name,
)
from alkstore_conformance.helpers.workers import RunningWorker, eventually

VISIBILITY_S = 30
EXHAUSTED = "max attempts exceeded"


def _claimed(store: Store, name: str, opts: QueueOpts | None = None) -> JobHandle:
    queue = store.queue(name, opts or QueueOpts(visibility_timeout_s=VISIBILITY_S))
    job_id = queue.enqueue({"order": 7})
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == job_id
    return handle


def _job(store: Store, handle: JobHandle) -> tuple[JobState, int, str | None] | None:
    """The job's state, attempts and last error, or ``None`` once it is gone."""
    job = store.queue(handle.job.queue).get_job(handle.id)
    return None if job is None else (job.state, job.attempts, job.last_error)


def _write(tx: Transaction, table: str, row_id: int) -> None:
    tx.execute(native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)"), (row_id,))


def _lapsed_and_live(store: Store, clock: FakeClock) -> tuple[JobHandle, JobHandle]:
    """A claim whose deadline passed and, in another queue, one still held."""
    lapsed = _claimed(store, unique_name("lapsed"))
    clock.advance(VISIBILITY_S)
    live = _claimed(store, unique_name("live"))
    return lapsed, live


# -- TX-RETRY-COMMIT -------------------------------------------------------------------


@pytest.mark.property("TX-RETRY-COMMIT")
def test_a_tx_retry_puts_the_job_back_to_pending_when_the_transaction_commits(
    clocked_store: Store, clock: FakeClock
) -> None:
    handle = _claimed(clocked_store, unique_name("retried"))
    with clocked_store.transaction() as tx:
        tx.retry(handle, "card declined", delay=10)
    job = clocked_store.queue(handle.job.queue).get_job(handle.id)
    assert job is not None
    assert (job.state, job.attempts, job.worker_id) == (JobState.PENDING, 1, None)
    assert job.run_at == int(clock.now()) + 10
    assert not handle.ack()  # the claim is over


@pytest.mark.requires("ops")
@pytest.mark.property("TX-RETRY-COMMIT")
def test_a_tx_retry_keeps_its_error_in_the_jobs_history(store: Store) -> None:
    handle = _claimed(store, unique_name("history"))
    with store.transaction() as tx:
        tx.retry(handle, "card declined", delay=0)
    job = store.queue(handle.job.queue).get_job(handle.id)
    assert job is not None
    assert [(e.attempt, e.error) for e in job.errors] == [(1, "card declined")]


@pytest.mark.property("TX-RETRY-COMMIT")
def test_a_tx_retry_at_the_attempt_budget_dead_letters_the_job(store: Store) -> None:
    handle = _claimed(
        store, unique_name("budget"), QueueOpts(visibility_timeout_s=VISIBILITY_S, max_attempts=1)
    )
    with store.transaction() as tx:
        tx.retry(handle, "card declined")
    assert _job(store, handle) == (JobState.DEAD, 1, EXHAUSTED)


@pytest.mark.requires("sql")
@pytest.mark.property("TX-RETRY-COMMIT")
def test_a_tx_retry_commits_with_the_business_write(store: Store) -> None:
    handle = _claimed(store, unique_name("effect"))
    with business_table(store) as table:
        with store.transaction() as tx:
            _write(tx, table, 7)
            tx.retry(handle, "later", delay=0)
        assert business_ids(store, table) == [7]
    again = store.queue(handle.job.queue).claim("w2")
    assert again is not None
    assert (again.id, again.attempts) == (handle.id, 2)


# -- TX-RETRY-ROLLBACK -----------------------------------------------------------------


@pytest.mark.property("TX-RETRY-ROLLBACK")
def test_a_rolled_back_tx_retry_leaves_the_claim_as_it_was(store: Store) -> None:
    handle = _claimed(store, unique_name("undone"))
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.retry(handle, "later", delay=0))
    assert _job(store, handle) == (JobState.PROCESSING, 1, None)
    assert store.queue(handle.job.queue).claim("w2") is None  # nothing to claim
    assert handle.heartbeat(VISIBILITY_S)  # the claim still holds
    assert handle.ack()


# -- TX-RETRY-STALE --------------------------------------------------------------------


@pytest.mark.property("TX-RETRY-STALE")
def test_a_tx_retry_of_a_lapsed_claim_is_refused_and_the_transaction_carries_on(
    clocked_store: Store, clock: FakeClock
) -> None:
    lapsed, live = _lapsed_and_live(clocked_store, clock)
    refused: list[int] = []
    with clocked_store.transaction() as tx:
        try:
            tx.retry(lapsed, "later", delay=0)
        except StaleHandle:
            refused.append(lapsed.id)
        tx.retry(live, "later", delay=100)
    assert refused == [lapsed.id]
    assert _job(clocked_store, lapsed) == (JobState.PROCESSING, 1, None)  # lapsed, not retried
    assert _job(clocked_store, live) == (JobState.PENDING, 1, None)


@pytest.mark.property("TX-RETRY-STALE")
def test_a_tx_retry_of_a_superseded_claim_leaves_the_new_claim_untouched(
    clocked_store: Store, clock: FakeClock
) -> None:
    name = unique_name("superseded")
    handle = _claimed(clocked_store, name)
    clock.advance(VISIBILITY_S)
    newer = clocked_store.queue(name).claim("w2")
    assert newer is not None
    assert newer.id == handle.id
    refused: list[int] = []
    with clocked_store.transaction() as tx:
        try:
            tx.retry(handle, "later", delay=0)
        except StaleHandle:
            refused.append(handle.id)
    assert _job(clocked_store, newer) == (JobState.PROCESSING, 2, None)
    assert refused == [handle.id]
    assert newer.ack()


@pytest.mark.property("TX-RETRY-STALE")
def test_a_tx_retry_of_a_finished_claim_is_refused(store: Store) -> None:
    handle = _claimed(store, unique_name("finished"))
    assert handle.fail("gone")
    with pytest.raises(StaleHandle), store.transaction() as tx:
        tx.retry(handle, "later", delay=0)
    assert _job(store, handle) == (JobState.DEAD, 1, "gone")


# -- TX-FAIL-COMMIT --------------------------------------------------------------------


@pytest.mark.property("TX-FAIL-COMMIT")
def test_a_tx_fail_dead_letters_the_job_when_the_transaction_commits(store: Store) -> None:
    handle = _claimed(store, unique_name("failed"))
    with store.transaction() as tx:
        tx.fail(handle, "no such card")
    assert _job(store, handle) == (JobState.DEAD, 1, "no such card")
    assert not handle.retry("again")  # the claim is over


@pytest.mark.requires("dependencies")
@pytest.mark.property("TX-FAIL-COMMIT")
def test_a_tx_fail_dead_letters_the_jobs_waiting_for_it(store: Store) -> None:
    queue = store.queue(unique_name("chain"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    first = queue.enqueue({"step": 1})
    second = queue.enqueue({"step": 2}, EnqueueOpts(after=[first]))
    third = queue.enqueue({"step": 3}, EnqueueOpts(after=[second]))
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == first
    with store.transaction() as tx:
        tx.fail(handle, "no such card")
    states = [getattr(queue.get_job(job_id), "state", None) for job_id in (first, second, third)]
    assert states == [JobState.DEAD, JobState.DEAD, JobState.DEAD]


@pytest.mark.requires("unique")
@pytest.mark.property("TX-FAIL-COMMIT")
def test_a_tx_fail_frees_the_unique_key_of_its_job(store: Store) -> None:
    queue = store.queue(unique_name("keyed"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == first
    with store.transaction() as tx:
        tx.fail(handle, "no such card")
    after = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (after.duplicate, after != first) == (False, True)


@pytest.mark.requires("limits")
@pytest.mark.property("TX-FAIL-COMMIT")
@pytest.mark.parametrize("verb", ["retry", "fail"])
def test_a_tx_retry_or_fail_frees_its_limited_queues_slot(store: Store, verb: str) -> None:
    queue = store.queue(unique_name("limited"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    assert queue.set_limits(Limits(concurrency=1)) is True
    queue.enqueue_many([{"n": 1}, {"n": 2}])
    handle = queue.claim("w1")
    assert handle is not None
    assert queue.claim("w2") is None  # the one slot is taken
    with store.transaction() as tx:
        if verb == "retry":
            tx.retry(handle, "later", delay=3600)
        else:
            tx.fail(handle, "no such card")
    freed = queue.claim("w2")
    assert freed is not None
    assert freed.id != handle.id


@pytest.mark.requires("attach")
@pytest.mark.property("TX-FAIL-COMMIT")
@pytest.mark.parametrize("verb", ["retry", "fail"])
def test_an_attached_retry_or_fail_commits_and_rolls_back_with_the_callers_transaction(
    store: Store, native_connect: Callable[[], Any], verb: str
) -> None:
    name = unique_name("attached")
    kept, undone = _claimed(store, name), _claimed(store, name)
    for handle, commit in ((undone, False), (kept, True)):
        connection = native_connect()
        try:
            with store.attach(connection) as tx:
                if verb == "retry":
                    tx.retry(handle, "later", delay=3600)
                else:
                    tx.fail(handle, "no such card")
            connection.commit() if commit else connection.rollback()
        finally:
            connection.close()
    written = (JobState.PENDING, 1, None) if verb == "retry" else (JobState.DEAD, 1, "no such card")
    assert _job(store, kept) == written
    assert _job(store, undone) == (JobState.PROCESSING, 1, None)


# -- TX-FAIL-ROLLBACK ------------------------------------------------------------------


@pytest.mark.property("TX-FAIL-ROLLBACK")
def test_a_rolled_back_tx_fail_leaves_the_claim_as_it_was(store: Store) -> None:
    handle = _claimed(store, unique_name("undone"))
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.fail(handle, "no such card"))
    assert _job(store, handle) == (JobState.PROCESSING, 1, None)
    assert handle.heartbeat(VISIBILITY_S)  # the claim still holds
    assert handle.ack()


# -- TX-FAIL-STALE ---------------------------------------------------------------------


@pytest.mark.property("TX-FAIL-STALE")
def test_a_tx_fail_of_a_lapsed_claim_is_refused_and_the_transaction_carries_on(
    clocked_store: Store, clock: FakeClock
) -> None:
    lapsed, live = _lapsed_and_live(clocked_store, clock)
    refused: list[int] = []
    with clocked_store.transaction() as tx:
        try:
            tx.fail(lapsed, "no such card")
        except StaleHandle:
            refused.append(lapsed.id)
        tx.fail(live, "no such card")
    assert refused == [lapsed.id]
    assert _job(clocked_store, lapsed) == (JobState.PROCESSING, 1, None)  # lapsed, not dead
    assert _job(clocked_store, live) == (JobState.DEAD, 1, "no such card")


@pytest.mark.property("TX-FAIL-STALE")
def test_a_tx_fail_of_a_superseded_claim_leaves_the_new_claim_untouched(
    clocked_store: Store, clock: FakeClock
) -> None:
    name = unique_name("superseded")
    handle = _claimed(clocked_store, name)
    clock.advance(VISIBILITY_S)
    newer = clocked_store.queue(name).claim("w2")
    assert newer is not None
    assert newer.id == handle.id
    refused: list[int] = []
    with clocked_store.transaction() as tx:
        try:
            tx.fail(handle, "no such card")
        except StaleHandle:
            refused.append(handle.id)
    assert _job(clocked_store, newer) == (JobState.PROCESSING, 2, None)
    assert refused == [handle.id]
    assert newer.ack()


# -- TX-OUTCOME-GROUP ------------------------------------------------------------------


@pytest.mark.property("TX-OUTCOME-GROUP")
def test_a_transaction_of_mixed_outcomes_commits_each_but_the_refused_one(
    clocked_store: Store, clock: FakeClock
) -> None:
    # What a worker's grouped outcomes rely on (§12.10): one transaction acks,
    # retries and fails many claims, each under its own guard; a refusal of any kind
    # changes nothing and leaves the transaction usable, and the rest commit.
    lapsed = _claimed(clocked_store, unique_name("group-lapsed"))
    clock.advance(VISIBILITY_S)
    queue = clocked_store.queue(unique_name("group"), QueueOpts(visibility_timeout_s=VISIBILITY_S))
    queue.enqueue_many([{"n": n} for n in range(3)])
    acked, retried, failed = queue.claim_batch("w2", 3)
    refused: list[str] = []
    with clocked_store.transaction() as tx:
        tx.ack(acked)
        for verb in ("ack", "retry", "fail"):
            try:
                if verb == "ack":
                    tx.ack(lapsed)
                elif verb == "retry":
                    tx.retry(lapsed, "later", delay=0)
                else:
                    tx.fail(lapsed, "no such card")
            except StaleHandle:
                refused.append(verb)
        tx.retry(retried, "later", delay=100)
        tx.fail(failed, "no such card")
    assert refused == ["ack", "retry", "fail"]
    assert _job(clocked_store, acked) is None
    assert _job(clocked_store, retried) == (JobState.PENDING, 1, None)
    assert _job(clocked_store, failed) == (JobState.DEAD, 1, "no such card")
    assert _job(clocked_store, lapsed) == (JobState.PROCESSING, 1, None)  # lapsed, untouched


# -- WORKER-GROUPED-OUTCOMES -----------------------------------------------------------

GROUP_WINDOW_S = 0.002
LIMIT_S = 20.0


@pytest.mark.requires("transactions")
@pytest.mark.property("WORKER-GROUPED-OUTCOMES")
def test_a_worker_grouping_its_outcomes_writes_each_jobs_ack_retry_or_fail_once(
    store: Store,
) -> None:
    # Job n acks when n % 3 == 0, retries at once on its first run when n % 3 == 1
    # (and acks its second), fails when n % 3 == 2; the worker groups them all.
    name = unique_name("grouped-worker")
    queue = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S))
    ids = [int(queue.enqueue({"n": n})) for n in range(30)]
    runs: Counter[int] = Counter()
    worker = Worker(store, "grouped-w", ack_window_s=GROUP_WINDOW_S)

    @worker.task(name, concurrency=4)
    def handle(job: Job) -> None:
        runs[job.id] += 1
        n = job.payload["n"]
        if n % 3 == 1 and job.attempts == 1:
            raise Retry(delay=0, error="later")
        if n % 3 == 2:
            raise Fail("no such card")

    def settled() -> bool:
        jobs = [queue.get_job(i) for i in ids]
        return all(job is None or job.state is JobState.DEAD for job in jobs)

    with RunningWorker(worker, LIMIT_S) as running:
        eventually(settled, "every job acked or dead", LIMIT_S)
        running.stop()
    expected_runs = {job_id: 2 if n % 3 == 1 else 1 for n, job_id in enumerate(ids)}
    assert dict(runs) == expected_runs
    dead = {i: getattr(queue.get_job(i), "last_error", None) for i in ids[2::3]}
    assert dead == dict.fromkeys(ids[2::3], "no such card")
    assert [queue.get_job(i) for n, i in enumerate(ids) if n % 3 != 2] == [None] * 20
