"""``alkstore.worker``: one outcome path for sync and async handlers.

A handler's return or exception becomes an ``Outcome`` value, and one settle
step writes it whichever executor ran the handler. These tests fail if the
async path grows a settle of its own again: the outcome values, the chaining
through ``ack_and_claim``, the wording of an unconfirmed write and the
give-back of a job claimed as the worker stops are the same for both.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from fakes import FakeDriver

from alkstore import QueueOpts
from alkstore.core import CoreStore
from alkstore.errors import EngineUnavailable
from alkstore.values import Job, JobState
from alkstore.worker import Fail, Retry, Worker
from alkstore.worker.outcomes import Ack, Failed, Outcome, RetryLater, outcome_of
from alkstore.worker.runs import JobRun
from alkstore.worker.settle import Settler

SAFETY_NET_S = 10.0


def eventually(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY_NET_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.005)


class Running:
    """``worker.run()`` on a thread; ``stop`` stops and joins it."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop()
        self.join()

    def join(self) -> None:
        self.thread.join(SAFETY_NET_S)
        assert not self.thread.is_alive(), "run() did not return"


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Outcome]]:
    """Every ``(queue, outcome)`` the settle step was given."""
    seen: list[tuple[str, Outcome]] = []
    original = Settler.settle

    def recording(self: Settler, run: JobRun, outcome: Outcome) -> Any:
        seen.append((run.task.queue, outcome))
        return original(self, run, outcome)

    monkeypatch.setattr(Settler, "settle", recording)
    return seen


@pytest.fixture
def started() -> Iterator[Callable[[Worker], Running]]:
    runs: list[Running] = []

    def start(worker: Worker) -> Running:
        runs.append(Running(worker))
        return runs[-1]

    yield start
    for run in runs:
        run.worker.stop(force=True)
        run.thread.join(SAFETY_NET_S)


def job_state(store: CoreStore, queue: str, job_id: int) -> JobState | None:
    job = store.queue(queue).get_job(job_id)
    return None if job is None else job.state


def behave_ok() -> None:
    return None


def behave_retry() -> None:
    raise Retry(delay=5, error="later")


def behave_fail() -> None:
    raise Fail("no such user")


def behave_raise() -> None:
    raise ValueError("the payload is odd")


BEHAVIOURS = {
    "returns": (behave_ok, Ack()),
    "raises Retry": (behave_retry, RetryLater("later", 5.0)),
    "raises Fail": (behave_fail, Failed("no such user")),
    "raises ValueError": (
        behave_raise,
        RetryLater("ValueError: the payload is odd", raised="ValueError: the payload is odd"),
    ),
}


def comparable(outcome: Outcome) -> Outcome:
    """The outcome with a traceback cut to its last line (the frames differ)."""
    if isinstance(outcome, RetryLater) and outcome.raised is not None:
        return replace(outcome, error=outcome.error.strip().splitlines()[-1])
    return outcome


@pytest.mark.parametrize("behaviour", list(BEHAVIOURS))
def test_sync_and_async_handlers_settle_the_same_outcome_for_the_same_return_or_exception(
    store: CoreStore, started: Any, settled: list[tuple[str, Outcome]], behaviour: str
) -> None:
    behave, expected = BEHAVIOURS[behaviour]
    worker = Worker(store, name="w")
    worker.task("sync")(lambda job: behave())

    @worker.task("async")
    async def handler(job: Job) -> None:
        behave()

    store.queue("sync").enqueue({})
    store.queue("async").enqueue({})
    run = started(worker)
    eventually(lambda: {queue for queue, _ in settled} == {"sync", "async"}, "both settled")
    run.stop()
    outcomes = {queue: comparable(outcome) for queue, outcome in settled[:2]}
    assert outcomes == {"sync": expected, "async": expected}


def test_an_exception_s_outcome_keeps_its_traceback_for_the_job_s_history() -> None:
    try:
        behave_raise()
    except ValueError as exc:
        outcome = outcome_of(exc)
    assert isinstance(outcome, RetryLater)
    assert outcome.error.startswith("Traceback (most recent call last)")
    assert "behave_raise" in outcome.error


def test_a_busy_async_queue_s_ack_and_next_claim_share_one_transaction(
    store: CoreStore, driver: FakeDriver, started: Any
) -> None:
    worker = Worker(store, name="w")

    @worker.task("q")
    async def handler(job: Job) -> None:
        return None

    ids = store.queue("q").enqueue_many([{"n": n} for n in range(20)])
    run = started(worker)
    eventually(lambda: all(job_state(store, "q", i) is None for i in ids), "all acked")
    run.stop()
    acks = driver.calls_named("ack")
    assert len(acks) == 20
    assert all(driver.statement_names_in(ack.txn) == ["ack", "claim"] for ack in acks)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_unconfirmed_ack_logs_not_confirmed_for_either_handler(
    store: CoreStore, driver: FakeDriver, started: Any, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")

    def lost_reply(*args: Any) -> Any:
        raise EngineUnavailable("the reply was lost")

    driver.ack = lost_reply  # type: ignore[method-assign]
    worker = Worker(store, name="w")
    if kind == "sync":
        worker.task("q")(lambda job: None)
    else:

        @worker.task("q")
        async def handler(job: Job) -> None:
            return None

    job_id = store.queue("q").enqueue({})
    run = started(worker)
    eventually(lambda: any("not confirmed" in r.getMessage() for r in caplog.records), "logged")
    run.stop()
    (line,) = [r for r in caplog.records if r.getMessage().startswith("job not")]
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith(
        f"job not confirmed (EngineUnavailable: the reply was lost): queue=q id={job_id} attempt=1"
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_job_claimed_for_a_slot_as_the_worker_stops_is_given_back_unspent(
    store: CoreStore, driver: FakeDriver, started: Any, kind: str
) -> None:
    worker = Worker(store, name="w")
    ran: list[int] = []
    if kind == "sync":
        worker.task("q")(lambda job: ran.append(job.id))
    else:

        @worker.task("q")
        async def handler(job: Job) -> None:
            ran.append(job.id)

    first, second = store.queue("q").enqueue_many([{"n": 1}, {"n": 2}])

    def stop_once_the_next_job_is_claimed(tx: Any) -> None:
        if driver.statement_names_in(tx.number) == ["ack", "claim"]:
            driver.after_transaction = None
            worker.stop()

    driver.after_transaction = stop_once_the_next_job_is_claimed
    started(worker).join()
    assert ran == [first]
    job = store.queue("q").get_job(second)
    assert job is not None
    assert (job.state, job.max_attempts - job.attempts) == (
        JobState.PENDING,
        QueueOpts().max_attempts,
    )


def test_a_worker_s_state_is_all_set_before_it_runs(store: CoreStore, started: Any) -> None:
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    before = set(vars(worker))
    started(worker).stop()
    assert set(vars(worker)) == before
