"""The core's ``tx.retry_all`` and ``tx.fail_all`` (contract 1.2 §3.11): one statement
per kind where the driver has it, a statement per claim where it has not, the
queues of the rescheduled jobs woken in this process once the transaction commits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fakes import FakeResultsDriver

from alkstore.api import JobHandle
from alkstore.core import CoreStore
from alkstore.options import QueueOpts
from alkstore.testing import FakeClock
from alkstore.values import JobState

OPTIONAL_STATEMENTS = frozenset({"ack_claims", "reschedule_claims", "bury_claims"})


class WithoutManyClaimStatements(FakeResultsDriver):
    """A driver that leaves the optional many-claims statements out."""

    def __getattr__(self, name: str) -> Any:
        if name in OPTIONAL_STATEMENTS:
            raise AttributeError(name)
        return super().__getattr__(name)


@pytest.fixture(params=[FakeResultsDriver, WithoutManyClaimStatements], ids=["with", "without"])
def tx_driver(request: pytest.FixtureRequest) -> FakeResultsDriver:
    driver: FakeResultsDriver = request.param()
    return driver


@pytest.fixture
def tx_store(tx_driver: FakeResultsDriver, clock: FakeClock) -> Iterator[CoreStore]:
    with CoreStore(tx_driver, clock=clock, capabilities=tx_driver.capabilities) as s:
        yield s


def _claimed(store: CoreStore, queue: str, count: int, **opts: Any) -> list[JobHandle]:
    q = store.queue(queue, QueueOpts(**opts))
    q.enqueue_many([{"n": n} for n in range(count)])
    handles = q.claim_batch("w1", count)
    assert len(handles) == count
    return handles


def _statements_of_the_transaction(driver: FakeResultsDriver) -> list[str]:
    (begin,) = driver.calls_named("begin")
    assert begin.args == ("transaction",)
    return driver.statement_names_in(begin.txn)


def test_a_mixed_retry_all_and_a_fail_all_are_a_statement_per_kind_or_per_claim(
    tx_store: CoreStore, tx_driver: FakeResultsDriver
) -> None:
    left = _claimed(tx_store, "q", 2)
    spent = _claimed(tx_store, "spent", 1, max_attempts=1)
    failed = _claimed(tx_store, "q", 2)
    tx_driver.calls.clear()
    with tx_store.transaction() as tx:
        assert tx.retry_all([left[0], spent[0], left[1]], "later", 30) == ()
        assert tx.fail_all(failed, ["no card", "gone"]) == ()
    if isinstance(tx_driver, WithoutManyClaimStatements):
        expected = ["reschedule", "reschedule", "bury", "bury", "bury"]
    else:  # the reschedules, the one burial at its budget, then the fails
        expected = ["reschedule_claims", "bury_claims", "bury_claims"]
    assert _statements_of_the_transaction(tx_driver) == expected
    states = [
        (job.state, job.last_error)
        for handle in [*left, *spent, *failed]
        if (job := tx_store.queue(handle.job.queue).get_job(handle.id)) is not None
    ]
    assert states == [
        (JobState.PENDING, None),
        (JobState.PENDING, None),
        (JobState.DEAD, "max attempts exceeded"),
        (JobState.DEAD, "no card"),
        (JobState.DEAD, "gone"),
    ]


def test_a_claim_named_beside_its_jobs_newer_claim_is_written_on_its_own(
    tx_store: CoreStore, tx_driver: FakeResultsDriver, clock: FakeClock
) -> None:
    (old,) = _claimed(tx_store, "q", 1, visibility_timeout_s=30)
    clock.advance(30)
    newer = tx_store.queue("q").claim("w2")
    assert newer is not None
    tx_driver.calls.clear()
    with tx_store.transaction() as tx:
        assert tx.retry_all([newer, old], "later", 0) == (old,)
    statements = _statements_of_the_transaction(tx_driver)
    if isinstance(tx_driver, WithoutManyClaimStatements):
        assert statements == ["reschedule", "reschedule"]
    else:  # the statement names each job once: the second claim goes alone
        assert statements == ["reschedule_claims", "reschedule"]


def test_the_rescheduled_queues_are_woken_here_once_the_transaction_commits(
    tx_store: CoreStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    retried = _claimed(tx_store, "mail", 1) + _claimed(tx_store, "sms", 1)
    failed = _claimed(tx_store, "push", 1)
    spent = _claimed(tx_store, "spent", 1, max_attempts=1)
    woken: list[str] = []
    monkeypatch.setattr(tx_store._context.hub, "notify", lambda topic: woken.append(topic))
    with tx_store.transaction() as tx:
        assert tx.retry_all([*retried, *spent], "later", 0) == ()
        assert tx.fail_all(failed, "gone") == ()
        assert woken == []  # nothing before the commit
    # The queues a reschedule made work in; not a fail's, nor a burial's at its budget.
    assert sorted(woken) == ["queue:mail", "queue:sms"]


def test_a_rolled_back_retry_all_wakes_nobody(
    tx_store: CoreStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    handles = _claimed(tx_store, "mail", 2)
    woken: list[str] = []
    monkeypatch.setattr(tx_store._context.hub, "notify", lambda topic: woken.append(topic))
    with pytest.raises(RuntimeError):
        _retried_then_rolled_back(tx_store, handles)
    assert woken == []


def _retried_then_rolled_back(store: CoreStore, handles: list[JobHandle]) -> None:
    with store.transaction() as tx:
        assert tx.retry_all(handles, "later", 0) == ()
        raise RuntimeError("roll back")
