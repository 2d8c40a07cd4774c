"""The core's ``tx.retry`` and ``tx.fail`` (contract 1.2 §3.9): the handle's own
statements in the transaction's unit, arguments refused before anything is written,
and the claim's guard raising ``StaleHandle``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import FakeResultsDriver

from alkstore.api import JobHandle
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions, StaleHandle
from alkstore.options import QueueOpts
from alkstore.testing import FakeClock
from alkstore.values import JobState


@pytest.fixture
def tx_driver() -> FakeResultsDriver:
    return FakeResultsDriver()


@pytest.fixture
def tx_store(tx_driver: FakeResultsDriver, clock: FakeClock) -> Iterator[CoreStore]:
    with CoreStore(tx_driver, clock=clock, capabilities=tx_driver.capabilities) as s:
        yield s


def _claimed(store: CoreStore, opts: QueueOpts | None = None) -> JobHandle:
    queue = store.queue("q", opts)
    queue.enqueue({"n": 1})
    handle = queue.claim("w1")
    assert handle is not None
    return handle


def _statements_of_the_transaction(driver: FakeResultsDriver) -> list[str]:
    (begin,) = driver.calls_named("begin")
    assert begin.args == ("transaction",)
    return driver.statement_names_in(begin.txn)


def test_tx_retry_runs_the_reschedule_statement_in_the_transactions_own_unit(
    tx_store: CoreStore, tx_driver: FakeResultsDriver, clock: FakeClock
) -> None:
    handle = _claimed(tx_store)
    tx_driver.calls.clear()
    with tx_store.transaction() as tx:
        tx.retry(handle, "later", delay=10)
    assert _statements_of_the_transaction(tx_driver) == ["reschedule"]
    job = tx_store.queue("q").get_job(handle.id)
    assert job is not None
    assert (job.state, job.run_at) == (JobState.PENDING, int(clock.now()) + 10)


def test_tx_retry_at_the_attempt_budget_runs_the_bury_statement(
    tx_store: CoreStore, tx_driver: FakeResultsDriver
) -> None:
    handle = _claimed(tx_store, QueueOpts(max_attempts=1))
    tx_driver.calls.clear()
    with tx_store.transaction() as tx:
        tx.retry(handle, "later")
    assert _statements_of_the_transaction(tx_driver) == ["bury"]
    job = tx_store.queue("q").get_job(handle.id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, "max attempts exceeded")


def test_tx_fail_runs_the_bury_statement_in_the_transactions_own_unit(
    tx_store: CoreStore, tx_driver: FakeResultsDriver
) -> None:
    handle = _claimed(tx_store)
    tx_driver.calls.clear()
    with tx_store.transaction() as tx:
        tx.fail(handle, "no such card")
    assert _statements_of_the_transaction(tx_driver) == ["bury"]
    job = tx_store.queue("q").get_job(handle.id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, "no such card")


@pytest.mark.parametrize("verb", ["retry", "fail"])
def test_a_stale_claims_tx_retry_or_fail_raises_the_same_error_as_tx_ack(
    tx_store: CoreStore, verb: str
) -> None:
    handle = _claimed(tx_store)
    assert handle.ack()
    with tx_store.transaction() as tx:
        with pytest.raises(StaleHandle) as acked:
            tx.ack(handle)
        with pytest.raises(StaleHandle) as other:
            tx.retry(handle, "later") if verb == "retry" else tx.fail(handle, "no")
    assert str(other.value) == str(acked.value)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda tx, h: tx.retry(h, 7), "error"),
        (lambda tx, h: tx.retry(h, "later", delay=-1), "delay"),
        (lambda tx, h: tx.fail(h, None), "error"),
        (lambda tx, h: tx.retry(h.id, "later"), "JobHandle"),
        (lambda tx, h: tx.fail(h.id, "no"), "JobHandle"),
    ],
    ids=["retry-error", "retry-delay", "fail-error", "retry-no-handle", "fail-no-handle"],
)
def test_bad_arguments_are_refused_before_anything_is_written(
    tx_store: CoreStore, tx_driver: FakeResultsDriver, call: object, match: str
) -> None:
    handle = _claimed(tx_store, QueueOpts(max_attempts=1))  # checked even at the budget
    tx_driver.calls.clear()
    with tx_store.transaction() as tx, pytest.raises(InvalidOptions, match=match):
        call(tx, handle)  # type: ignore[operator]
    assert _statements_of_the_transaction(tx_driver) == []
    assert handle.ack()  # untouched by the refusal


@pytest.mark.parametrize("verb", ["retry", "fail"])
def test_tx_retry_and_fail_refuse_a_handle_of_another_store(
    tx_store: CoreStore, clock: FakeClock, verb: str
) -> None:
    other_driver = FakeResultsDriver()
    with CoreStore(other_driver, clock=clock, capabilities=other_driver.capabilities) as other:
        foreign = _claimed(other)
        refused = pytest.raises(InvalidOptions, match=f"{verb} it in a transaction")
        with tx_store.transaction() as tx, refused:
            tx.retry(foreign, "later") if verb == "retry" else tx.fail(foreign, "no")
        assert foreign.ack()  # untouched by the refusal
