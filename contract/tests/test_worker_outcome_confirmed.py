"""An outcome written again across an outage and refused: the worker reads the job back
and confirms what only this claim's outcome could have left (contract §12.9)."""

from __future__ import annotations

import logging
import threading
from functools import partial
from typing import Any

import pytest
from fakes import FakeDriver
from running import eventually

from alkstore import QueueOpts
from alkstore.api import JobHandle
from alkstore.core import CoreStore
from alkstore.engine import Capabilities
from alkstore.errors import EngineUnavailable
from alkstore.testing import FakeClock
from alkstore.values import JobState
from alkstore.worker import Worker
from alkstore.worker.outcomes import RELEASED, Ack, Failed, Outcome, RetryLater, Snoozed
from alkstore.worker.settle import CONFIRMED, write

KEPT = QueueOpts(completed_retention_s=3600)


class FakeOutcomesDriver(FakeDriver):
    """The fake with every profile an outcome can touch: results, ops and snooze."""

    capabilities = Capabilities(results=True, ops=True, snooze=True, transactions=True)


@pytest.fixture
def driver() -> FakeDriver:
    return FakeOutcomesDriver()


def _reply_lost_once(driver: FakeDriver, statement: str) -> list[int]:
    """The first unit running ``statement`` commits, then raises ``EngineUnavailable``, as
    a reply lost on its way back would; the transactions it ran in are listed."""
    lost: list[int] = []

    def after(c: Any) -> None:
        if not lost and statement in driver.statement_names_in(c.number):
            lost.append(c.number)
            raise EngineUnavailable("the connection was lost")

    driver.after_transaction = after
    return lost


def _claimed(store: CoreStore, opts: QueueOpts | None = None) -> JobHandle:
    queue = store.queue("q", opts) if opts else store.queue("q")
    queue.enqueue({"n": 1})
    (handle,) = queue.claim_batch("w", 1)
    return handle


def _write_again(store: CoreStore, handle: JobHandle, outcome: Outcome) -> str:
    reread = partial(store.queue("q").get_job, handle.id)
    said, _ = write(handle, outcome, None, threading.Event(), reread)
    return said


@pytest.mark.parametrize(
    ("outcome", "statement", "said", "state"),
    [
        (Ack(None), "complete", "ack", JobState.COMPLETED),
        (RetryLater("later", 60), "reschedule", "retry", JobState.PENDING),
        (Failed("broken\x00beyond repair"), "bury", "fail", JobState.DEAD),
        (Snoozed(60), "snooze", "snooze", JobState.PENDING),
        (RELEASED, "release_claim", "release", JobState.PENDING),
    ],
    ids=["kept-ack", "retry", "fail", "snooze", "release"],
)
def test_an_outcome_whose_reply_was_lost_is_confirmed_by_the_job_read_back(
    store: CoreStore,
    driver: FakeDriver,
    outcome: Outcome,
    statement: str,
    said: str,
    state: JobState,
) -> None:
    handle = _claimed(store, KEPT)
    lost = _reply_lost_once(driver, statement)
    assert _write_again(store, handle, outcome) == said + CONFIRMED
    assert len(lost) == 1
    assert len(driver.calls_named(statement)) == 2  # written, then written again: refused
    job = store.queue("q").get_job(handle.id)
    assert job is not None
    assert job.state is state


def test_a_deleted_ack_whose_reply_was_lost_is_not_confirmed(
    store: CoreStore, driver: FakeDriver
) -> None:
    # Gone reads as a cancel would: the worker cannot tell, so it does not say.
    handle = _claimed(store)
    _reply_lost_once(driver, "ack")
    said = _write_again(store, handle, Ack(None))
    assert said == (
        "not confirmed (EngineUnavailable: the connection was lost; written again: refused)"
    )


def test_a_fail_refused_after_its_claim_lapsed_is_not_confirmed(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    handle = _claimed(store, KEPT)
    bury = driver.bury
    tries: list[int] = []

    def down_then_lapsed(*args: Any) -> Any:
        tries.append(1)
        if len(tries) == 1:
            clock.advance(handle.job.visibility_timeout_s + 1)  # the claim lapses meanwhile
            raise EngineUnavailable("the connection was lost")
        return bury(*args)

    driver.bury = down_then_lapsed  # type: ignore[method-assign]
    said = _write_again(store, handle, Failed("broken"))
    assert said.startswith("not confirmed (EngineUnavailable: the connection was lost;")
    assert len(tries) == 2
    job = store.queue("q").get_job(handle.id)
    assert job is not None
    assert job.state is JobState.PROCESSING


def test_a_retry_whose_job_was_cancelled_meanwhile_is_not_confirmed(
    store: CoreStore, driver: FakeDriver
) -> None:
    handle = _claimed(store, KEPT)
    reschedule = driver.reschedule
    cancelled = threading.Event()

    def cancel() -> None:
        store.queue("q").cancel(handle.id)
        cancelled.set()

    def down_then_gone(*args: Any) -> Any:
        if not cancelled.is_set() and len(driver.calls_named("cancel")) == 0:
            # Another process cancels the job while the store is unreachable to us.
            threading.Thread(target=cancel).start()
            raise EngineUnavailable("the connection was lost")
        cancelled.wait(5)
        return reschedule(*args)

    driver.reschedule = down_then_gone  # type: ignore[method-assign]
    said = _write_again(store, handle, RetryLater("later", 60))
    assert cancelled.is_set()
    assert said.startswith("not confirmed (EngineUnavailable: the connection was lost;")
    assert store.queue("q").get_job(handle.id) is None


def test_a_kept_ack_whose_reply_was_lost_is_logged_as_confirmed_by_the_worker(
    store: CoreStore, driver: FakeDriver, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    lost = _reply_lost_once(driver, "complete")
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: {"ok": True})
    job_id = store.queue("q", KEPT).enqueue({})
    run = running(worker)
    eventually(lambda: any(r.getMessage().startswith("job ack") for r in caplog.records), "logged")
    run.stop()
    assert len(lost) == 1
    (line,) = [r for r in caplog.records if r.getMessage().startswith("job ")]
    assert line.levelno == logging.INFO
    assert line.getMessage().startswith(
        f"job ack (confirmed: an earlier write had committed): queue=q id={job_id} attempt=1"
    )
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert job.state is JobState.COMPLETED
    assert job.result == {"ok": True}
