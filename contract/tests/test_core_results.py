"""The core's finished jobs (contract §17): which statement an ack runs, the result's
checks before anything is written, the profile's gate, and the worker's return value."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import FakeDriver, FakeResultsDriver

from alkstore.api import JobHandle
from alkstore.constants import MAX_RESULT_BYTES
from alkstore.core import CoreStore
from alkstore.errors import (
    InvalidOptions,
    PayloadError,
    ProfileUnavailable,
    ResultError,
    StaleHandle,
)
from alkstore.options import QueueOpts
from alkstore.testing import FakeClock
from alkstore.values import JobState
from alkstore.worker.outcomes import ACK, Ack, RetryLater, returned

KEEPS = QueueOpts(completed_retention_s=60)


@pytest.fixture
def results_driver() -> FakeResultsDriver:
    return FakeResultsDriver()


@pytest.fixture
def results_store(results_driver: FakeResultsDriver, clock: FakeClock) -> Iterator[CoreStore]:
    with CoreStore(results_driver, clock=clock, capabilities=results_driver.capabilities) as s:
        yield s


def _claimed(store: CoreStore, opts: QueueOpts | None = None) -> JobHandle:
    queue = store.queue("q", opts)
    queue.enqueue({"n": 1})
    handle = queue.claim("w1")
    assert handle is not None
    return handle


def test_a_plain_ack_runs_the_plain_ack_statement_only(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    handle = _claimed(results_store)
    results_driver.calls.clear()
    assert handle.ack()
    assert results_driver.statement_names() == ["ack"]


def test_an_ack_of_a_retained_job_is_one_complete_statement_with_the_encoded_result(
    results_store: CoreStore, results_driver: FakeResultsDriver, clock: FakeClock
) -> None:
    handle = _claimed(results_store, KEEPS)
    results_driver.calls.clear()
    assert handle.ack(result={"b": [1], "a": "é"})
    (call,) = results_driver.calls_named("complete")
    job_id, attempt, now, text = call.args
    assert (attempt, now, text) == (1, int(clock.now()), '{"b":[1],"a":"é"}')
    assert results_driver.statement_names() == ["complete"]
    job = results_store.queue("q").get_job(job_id)
    assert job is not None
    assert (job.state, job.result) == (JobState.COMPLETED, {"b": [1], "a": "é"})


def test_a_result_for_a_job_without_retention_is_checked_then_dropped_with_the_job(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    handle = _claimed(results_store)
    with pytest.raises(ResultError):
        handle.ack(result=object())
    results_driver.calls.clear()
    assert handle.ack(result=[1])
    assert results_driver.statement_names() == ["ack"]


def test_a_result_over_the_bound_is_refused_before_anything_is_written(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    handle = _claimed(results_store, KEEPS)
    results_driver.calls.clear()
    with pytest.raises(ResultError) as refused:
        handle.ack(result="x" * MAX_RESULT_BYTES)
    assert isinstance(refused.value, PayloadError)
    assert f"{MAX_RESULT_BYTES + 2} bytes" in str(refused.value)
    assert "MAX_RESULT_BYTES" in str(refused.value)
    assert results_driver.statements() == []


def test_ack_and_claim_keeps_the_result_and_claims_in_one_write(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    queue = results_store.queue("q", KEEPS)
    first, second = queue.enqueue_many([1, 2])
    handle = queue.claim("w1")
    assert handle is not None
    results_driver.calls.clear()
    acked, claimed = handle.ack_and_claim("w1", 1, "done")
    assert (acked, [h.id for h in claimed]) == (True, [second])
    assert results_driver.statement_names() == ["complete", "claim"]
    job = queue.get_job(first)
    assert job is not None
    assert job.result == "done"


def test_the_sweep_purges_completed_jobs_as_its_last_step(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    results_driver.calls.clear()
    results_store.queue("q").sweep_expired()
    assert results_driver.statement_names() == [
        "bury_expired",
        "bury_exhausted",
        "purge_dead",
        "purge_completed",
    ]


def test_without_the_profile_a_retention_a_result_and_the_completed_state_are_refused(
    store: CoreStore, driver: FakeDriver
) -> None:
    with pytest.raises(ProfileUnavailable):
        store.queue("q", KEEPS)
    handle = _claimed(store)
    driver.calls.clear()
    with pytest.raises(ProfileUnavailable):
        handle.ack(result=1)
    assert driver.statements() == []
    assert store.queue("q").sweep_expired().purged_completed == 0
    assert "purge_completed" not in driver.statement_names()


def test_a_handlers_return_value_is_the_result_only_of_a_retained_job(
    results_store: CoreStore,
) -> None:
    kept = _claimed(results_store, KEEPS).job
    plain = _claimed(results_store).job
    assert returned(kept, {"n": 2}) == Ack({"n": 2})
    assert returned(kept, None) is ACK
    assert returned(plain, object()) is ACK  # ignored, as it always was


def test_a_return_value_that_cannot_be_a_result_fails_the_attempt_naming_it(
    results_store: CoreStore,
) -> None:
    kept = _claimed(results_store, KEEPS).job
    outcome = returned(kept, {"x": float("nan")})
    assert isinstance(outcome, RetryLater)
    assert "cannot be the job's result" in outcome.error
    assert outcome.raised is not None
    assert outcome.raised.startswith("ResultError")


# -- tx.ack (contract §3.8) ----------------------------------------------------------


def test_tx_ack_runs_the_ack_statement_in_the_transactions_own_unit(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    handle = _claimed(results_store)
    results_driver.calls.clear()
    with results_store.transaction() as tx:
        tx.ack(handle)
    (begin,) = results_driver.calls_named("begin")
    assert begin.args == ("transaction",)
    assert results_driver.statement_names_in(begin.txn) == ["ack"]
    assert results_store.queue("q").get_job(handle.id) is None


def test_tx_ack_of_a_retained_job_completes_it_with_its_result_in_the_transaction(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    handle = _claimed(results_store, KEEPS)
    results_driver.calls.clear()
    with results_store.transaction() as tx:
        tx.ack(handle, result=[1])
    (begin,) = results_driver.calls_named("begin")
    assert results_driver.statement_names_in(begin.txn) == ["complete"]
    job = results_store.queue("q").get_job(handle.id)
    assert job is not None
    assert job.result == [1]


def test_tx_ack_of_a_stale_claim_raises_inside_and_the_block_rolls_back(
    results_store: CoreStore, results_driver: FakeResultsDriver
) -> None:
    handle = _claimed(results_store)
    assert handle.ack()
    results_driver.calls.clear()
    stale = pytest.raises(StaleHandle, match=f"job {handle.id}'s claim")
    with stale, results_store.transaction() as tx:
        tx.ack(handle)
    assert results_driver.calls_named("commit") == []
    assert [c.name for c in results_driver.calls if c.name in ("rollback",)] == ["rollback"]


def test_tx_ack_refuses_a_handle_of_another_store_and_what_is_no_handle(
    results_store: CoreStore, clock: FakeClock
) -> None:
    other_driver = FakeResultsDriver()
    with CoreStore(other_driver, clock=clock, capabilities=other_driver.capabilities) as other:
        foreign = _claimed(other)
        with results_store.transaction() as tx:
            with pytest.raises(InvalidOptions, match="another store"):
                tx.ack(foreign)
            with pytest.raises(InvalidOptions, match="JobHandle"):
                tx.ack(foreign.id)  # type: ignore[arg-type]
        assert foreign.ack()  # untouched by the refusals
