"""Grouped acks (contract §12.10): ``Worker(ack_window_s=...)`` writes the acks of runs
that finished within the window in one transaction, each under its own claim."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from fakes import FakeDriver
from running import eventually

from alkstore import QueueOpts
from alkstore.core import CoreStore
from alkstore.engine import Capabilities
from alkstore.errors import EngineUnavailable, InvalidOptions, ProfileUnavailable
from alkstore.testing import FakeClock
from alkstore.values import Job, JobState
from alkstore.worker import (
    DEFAULT_ACK_GROUP_MIN_SLOTS,
    DEFAULT_ACK_WINDOW_S,
    Fail,
    Retry,
    Snooze,
    Worker,
)
from alkstore.worker.grouping import MAX_ACK_GROUP, OutcomeGroups
from alkstore.worker.outcomes import Ack

WINDOW_S = 0.5
"""Long beside a handler that returns at once, short beside the tests' safety net."""


class FakeGroupsDriver(FakeDriver):
    """The fake with transactions (grouped outcomes need them), results (kept acks)
    and snooze (an outcome written beside a group)."""

    capabilities = Capabilities(transactions=True, results=True, ops=True, snooze=True)


@pytest.fixture
def driver() -> FakeDriver:
    return FakeGroupsDriver()


def _txns_of(driver: FakeDriver, statement: str) -> list[int]:
    return [call.txn for call in driver.calls_named(statement)]


def test_acks_of_runs_finishing_within_the_window_commit_in_one_transaction(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    count = 8
    together = threading.Barrier(count)
    worker = Worker(store, name="w", ack_window_s=WINDOW_S)
    worker.task("q", concurrency=count)(lambda job: together.wait(10))
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()
    acks = driver.ack_txns()
    assert len(acks) == count
    assert len(set(acks)) == 1  # one transaction, one commit
    assert len(driver.calls_named("ack_claims")) == 1  # and one statement
    assert driver.calls_named("ack") == []
    assert driver.calls_named("ack_and_claim") == []


def test_without_a_window_each_ack_commits_with_the_next_claim(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w", ack_window_s=0)
    worker.task("q", concurrency=4)(lambda job: None)
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(8)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()
    acks = driver.ack_txns()
    assert len(acks) == len(set(acks)) == 8


def test_a_claim_that_lapsed_while_its_ack_waited_is_refused_alone(
    store: CoreStore,
    driver: FakeDriver,
    clock: FakeClock,
    running: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    returned: list[int] = []
    worker = Worker(store, name="w", ack_window_s=1.0)
    # A third run holds its slot meanwhile, so the group waits (it is written at
    # once when every run holding a slot is waiting in it).
    holding, release = threading.Event(), threading.Event()

    def handler(job: Job) -> None:
        assert holding.wait(10)
        returned.append(job.id)

    def hold(job: Job) -> None:
        holding.set()
        release.wait(10)

    worker.task("short")(handler)
    worker.task("long")(handler)
    worker.task("hold")(hold)
    store.queue("hold", QueueOpts(visibility_timeout_s=600)).enqueue({})
    short = store.queue("short", QueueOpts(visibility_timeout_s=5)).enqueue({})
    long = store.queue("long", QueueOpts(visibility_timeout_s=600)).enqueue({})
    run = running(worker)
    eventually(lambda: len(returned) == 2, "both handlers returned")
    clock.advance(10)  # before the group is written: the short claim lapses
    release.set()
    eventually(lambda: store.queue("long").get_job(long) is None, "the long claim's ack")
    eventually(lambda: returned.count(short) == 2, "the lapsed job claimed and run again")
    eventually(lambda: store.queue("short").get_job(short) is None, "its second run's ack")
    run.stop()
    first_group = driver.ack_txns()[:2]
    assert first_group[0] == first_group[1]  # both tried in the one group
    messages = [r.getMessage() for r in caplog.records]
    refused = f"job ack refused (claim lost): queue=short id={short} attempt=1 "
    assert any(m.startswith(refused) for m in messages)
    assert any(m.startswith(f"job ack: queue=long id={long} attempt=1 ") for m in messages)
    assert any(m.startswith(f"job ack: queue=short id={short} attempt=2 ") for m in messages)


def test_a_group_with_a_lapsed_claim_in_the_middle_acks_the_others_in_one_statement(
    store: CoreStore,
    driver: FakeDriver,
    clock: FakeClock,
    running: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    order = ["first", "middle", "last"]
    returned: list[str] = []
    turn = threading.Condition()
    holding, release = threading.Event(), threading.Event()

    def handler(job: Job) -> None:
        assert holding.wait(10)
        with turn:  # the first runs return in order, so the group holds them in order
            first_runs = lambda: len(returned) >= 3 or order[len(returned)] == job.queue  # noqa: E731
            assert turn.wait_for(first_runs, 10)
            returned.append(job.queue)
            turn.notify_all()

    def hold(job: Job) -> None:
        holding.set()
        release.wait(10)

    worker = Worker(store, name="w", ack_window_s=1.0)
    for name in order:
        worker.task(name)(handler)
    worker.task("hold")(hold)
    store.queue("hold", QueueOpts(visibility_timeout_s=600)).enqueue({})
    ids = {
        name: store.queue(
            name, QueueOpts(visibility_timeout_s=5 if name == "middle" else 600)
        ).enqueue({})
        for name in order
    }
    run = running(worker)
    eventually(lambda: len(returned) == 3, "the three handlers returned")
    clock.advance(10)  # before the group is written: the middle claim lapses
    release.set()
    eventually(lambda: store.queue("last").get_job(ids["last"]) is None, "the group written")
    eventually(lambda: returned.count("middle") == 2, "the lapsed job claimed and run again")
    run.stop()
    first = driver.calls_named("ack_claims")[0]
    assert first.args[0][:3] == (ids["first"], ids["middle"], ids["last"])  # one statement
    assert store.queue("first").get_job(ids["first"]) is None
    messages = [r.getMessage() for r in caplog.records]
    refused = f"job ack refused (claim lost): queue=middle id={ids['middle']} attempt=1 "
    assert any(m.startswith(refused) for m in messages)
    for name in ("first", "last"):
        assert any(
            m.startswith(f"job ack: queue={name} id={ids[name]} attempt=1 ") for m in messages
        )


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "forced"])
def test_a_stop_writes_the_acks_waiting_in_a_group_before_run_returns(
    store: CoreStore, running: Any, force: bool
) -> None:
    # Graceful: the drain waits for the group's slot. Forced: the close writes it.
    returned = threading.Event()
    worker = Worker(store, name="w", ack_window_s=1.0)
    worker.task("q")(lambda job: returned.set())
    job_id = store.queue("q").enqueue({})
    run = running(worker)
    assert returned.wait(10)
    run.stop(force=force)  # well inside the window
    assert store.queue("q").get_job(job_id) is None


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "forced"])
def test_a_stop_writes_the_retries_and_fails_waiting_in_a_group_before_run_returns(
    store: CoreStore, running: Any, force: bool
) -> None:
    returned: list[int] = []
    worker = Worker(store, name="w", ack_window_s=1.0)

    def handler(job: Job) -> None:
        returned.append(job.id)
        raise Retry(delay=600, error="later") if job.payload["n"] == 0 else Fail("no")

    def hold(job: Job) -> None:
        # Holds its slot until the stop, so the group cannot be written early.
        while not worker.stopping:
            time.sleep(0.01)

    worker.task("q", concurrency=2)(handler)
    worker.task("hold")(hold)
    store.queue("hold").enqueue({})
    retried, failed = store.queue("q").enqueue_many([{"n": 0}, {"n": 1}])
    run = running(worker)
    eventually(lambda: len(returned) == 2, "both handlers returned")
    run.stop(force=force)  # well inside the window
    states = [getattr(store.queue("q").get_job(i), "state", None) for i in (retried, failed)]
    assert states == [JobState.PENDING, JobState.DEAD]


def test_a_group_whose_commit_was_lost_is_written_again_ack_by_ack_and_confirmed(
    store: CoreStore, driver: FakeDriver, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    lost: list[int] = []

    def reply_lost(c: Any) -> None:
        if not lost and "complete" in driver.statement_names_in(c.number):
            lost.append(c.number)
            raise EngineUnavailable("the connection was lost")

    driver.after_transaction = reply_lost
    count = 3
    together = threading.Barrier(count)
    worker = Worker(store, name="w", ack_window_s=WINDOW_S)
    worker.task("q", concurrency=count)(lambda job: together.wait(10) and {"ok": True})
    kept = QueueOpts(completed_retention_s=3600)
    ids = store.queue("q", kept).enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(
        lambda: sum(r.getMessage().startswith("job ack") for r in caplog.records) == count,
        "every ack logged",
    )
    run.stop()
    assert len(lost) == 1
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job ack")]
    assert all(
        line.startswith("job ack (confirmed: an earlier write had committed)") for line in lines
    )
    states = [getattr(store.queue("q").get_job(i), "state", None) for i in ids]
    assert states == [JobState.COMPLETED] * count


def _mixed(count: int) -> Any:
    """A handler for ``count`` runs that finish together: job ``n`` acks when
    ``n % 3 == 0``, retries in a minute when ``n % 3 == 1``, fails otherwise."""
    together = threading.Barrier(count)

    def handler(job: Job) -> None:
        together.wait(10)
        if job.payload["n"] % 3 == 1:
            raise Retry(delay=60, error="later")
        if job.payload["n"] % 3 == 2:
            raise Fail("no such card")

    return handler


def _settled(store: CoreStore, ids: list[int]) -> bool:
    """Whether every job of ``ids`` ran once and is acked (gone), pending again or dead."""
    jobs = [store.queue("q").get_job(i) for i in ids]
    return all(
        job is None or (job.attempts == 1 and job.state is not JobState.PROCESSING) for job in jobs
    )


def test_retries_and_fails_finishing_within_the_window_commit_with_the_acks_in_one_transaction(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    count = 9
    worker = Worker(store, name="w", ack_window_s=WINDOW_S)
    worker.task("q", concurrency=count)(_mixed(count))
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: _settled(store, ids), "every outcome written")
    run.stop()
    # One statement per kind of outcome (§3.10, §3.11), every one in one transaction.
    kinds = ("ack_claims", "reschedule_claims", "bury_claims")
    txns = {name: _txns_of(driver, name) for name in kinds}
    assert {name: len(t) for name, t in txns.items()} == dict.fromkeys(kinds, 1)
    assert [len(driver.calls_named(name)[0].args[0]) for name in kinds] == [3, 3, 3]
    assert len({txn for t in txns.values() for txn in t}) == 1  # one transaction, one commit
    assert driver.calls_named("reschedule") == driver.calls_named("bury") == []
    states = [getattr(store.queue("q").get_job(i), "state", None) for i in ids]
    assert states == [None, JobState.PENDING, JobState.DEAD] * 3


def test_a_grouped_retry_at_the_attempt_budget_is_logged_dead(
    store: CoreStore, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    worker = Worker(store, name="w", ack_window_s=WINDOW_S)
    worker.task("q")(lambda job: (_ for _ in ()).throw(Retry(error="later")))
    job_id = store.queue("q", QueueOpts(max_attempts=1)).enqueue({})
    run = running(worker)
    eventually(
        lambda: getattr(store.queue("q").get_job(job_id), "state", None) is JobState.DEAD,
        "buried at its budget",
    )
    run.stop()
    messages = [r.getMessage() for r in caplog.records]
    dead = f"job dead (max attempts exceeded): queue=q id={job_id} attempt=1 "
    assert any(m.startswith(dead) for m in messages), messages


@pytest.mark.parametrize("verb", ["retry", "fail"])
def test_a_grouped_retry_or_fail_whose_claim_lapsed_while_it_waited_is_refused_alone(
    store: CoreStore,
    clock: FakeClock,
    running: Any,
    caplog: pytest.LogCaptureFixture,
    verb: str,
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    returned: list[int] = []
    worker = Worker(store, name="w", ack_window_s=1.0)
    # A third run holds its slot meanwhile, so the group waits.
    holding, release = threading.Event(), threading.Event()

    def short(job: Job) -> None:
        assert holding.wait(10)
        returned.append(job.id)
        if job.attempts == 1:
            raise Retry(delay=0, error="later") if verb == "retry" else Fail("no such card")

    def long(job: Job) -> None:
        assert holding.wait(10)
        returned.append(job.id)
        raise Fail("no such card")

    def hold(job: Job) -> None:
        holding.set()
        release.wait(10)

    worker.task("short")(short)
    worker.task("long")(long)
    worker.task("hold")(hold)
    store.queue("hold", QueueOpts(visibility_timeout_s=600)).enqueue({})
    lapsing = store.queue("short", QueueOpts(visibility_timeout_s=5)).enqueue({})
    kept = store.queue("long", QueueOpts(visibility_timeout_s=600)).enqueue({})
    run = running(worker)
    eventually(lambda: len(returned) == 2, "both handlers returned")
    clock.advance(10)  # before the group is written: the short claim lapses
    release.set()
    eventually(
        lambda: getattr(store.queue("long").get_job(kept), "state", None) is JobState.DEAD,
        "the long claim's fail",
    )
    eventually(lambda: store.queue("short").get_job(lapsing) is None, "the lapsed job's rerun")
    run.stop()
    messages = [r.getMessage() for r in caplog.records]
    refused = f"job {verb} refused (claim lost): queue=short id={lapsing} attempt=1 "
    assert any(m.startswith(refused) for m in messages), messages
    assert any(m.startswith(f"job fail: queue=long id={kept} attempt=1 ") for m in messages)
    assert any(m.startswith(f"job ack: queue=short id={lapsing} attempt=2 ") for m in messages)


def test_a_group_of_retries_and_fails_whose_commit_was_lost_is_written_again_and_confirmed(
    store: CoreStore, driver: FakeDriver, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    lost: list[int] = []

    def reply_lost(c: Any) -> None:
        if not lost and "reschedule_claims" in driver.statement_names_in(c.number):
            lost.append(c.number)
            raise EngineUnavailable("the connection was lost")

    driver.after_transaction = reply_lost
    count = 6
    worker = Worker(store, name="w", ack_window_s=WINDOW_S)
    worker.task("q", concurrency=count)(_mixed(count))
    kept = QueueOpts(completed_retention_s=3600)
    ids = store.queue("q", kept).enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(
        lambda: sum(r.getMessage().startswith("job ") for r in caplog.records) >= count,
        "every outcome logged",
    )
    run.stop()
    assert len(lost) == 1
    messages = [r.getMessage() for r in caplog.records]
    lines = sorted(m.split(": queue=")[0] for m in messages if m.startswith("job "))
    confirmed = " (confirmed: an earlier write had committed)"
    assert lines == sorted(f"job {verb}{confirmed}" for verb in ["ack", "retry", "fail"] * 2)
    states = [getattr(store.queue("q").get_job(i), "state", None) for i in ids]
    assert states == [JobState.COMPLETED, JobState.PENDING, JobState.DEAD] * 2


def test_a_snooze_is_written_on_its_own_beside_a_group(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    count = 3
    together = threading.Barrier(count)

    def handler(job: Job) -> None:
        together.wait(10)
        if job.payload["n"] == 0:
            raise Snooze(60)

    worker = Worker(store, name="w", ack_window_s=WINDOW_S)
    worker.task("q", concurrency=count)(handler)
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: _settled(store, ids), "every outcome written")
    run.stop()
    (snoozed,) = _txns_of(driver, "snooze")
    acks = driver.ack_txns()
    assert len(acks) == count - 1
    assert snoozed not in acks


def test_a_group_is_written_without_waiting_once_it_is_full(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    count = MAX_ACK_GROUP + 1
    together = threading.Barrier(count)
    worker = Worker(store, name="w", ack_window_s=1.0)
    worker.task("q", concurrency=count)(lambda job: together.wait(10))
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()
    sizes = sorted(driver.ack_txns().count(t) for t in set(driver.ack_txns()))
    assert max(sizes) == MAX_ACK_GROUP
    assert sum(sizes) == count


class FakeNoTransactionsDriver(FakeDriver):
    capabilities = Capabilities(transactions=False)


def test_an_ack_window_needs_the_transactions_profile(clock: FakeClock, running: Any) -> None:
    plain = FakeNoTransactionsDriver()
    store = CoreStore(plain, clock=clock, capabilities=plain.capabilities, engine_name="fake")
    try:
        worker = Worker(store, name="w", ack_window_s=0.01)
        worker.task("q")(lambda job: None)
        run = running(worker)
        run.thread.join(10)
        assert isinstance(run.error, ProfileUnavailable)
        assert "transactions" in str(run.error)
        run.error = None  # seen: the fixture's stop need not raise it again
    finally:
        store.close()


@pytest.mark.parametrize(
    "window", [-0.1, 1.5, "0.01", True], ids=["negative", "long", "text", "bool"]
)
def test_a_malformed_ack_window_is_refused(window: object) -> None:
    with pytest.raises(
        InvalidOptions, match=r"ack_window_s must be a number of seconds in \[0, 1\]"
    ):
        Worker(None, name="w", ack_window_s=window)  # type: ignore[arg-type]


def test_a_worker_of_enough_slots_groups_acks_by_default_where_the_engine_has_transactions(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    count = DEFAULT_ACK_GROUP_MIN_SLOTS
    together = threading.Barrier(count)
    worker = Worker(store, name="w")  # no ack_window_s: DEFAULT_ACK_WINDOW_S
    worker.task("q", concurrency=count)(lambda job: together.wait(10))
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()
    assert DEFAULT_ACK_WINDOW_S > 0
    assert len(set(driver.ack_txns())) == 1  # every ack in one commit


def test_a_worker_of_fewer_slots_commits_each_ack_on_its_own_by_default(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    count = DEFAULT_ACK_GROUP_MIN_SLOTS - 1
    together = threading.Barrier(count)
    worker = Worker(store, name="w")
    worker.task("q", concurrency=count)(lambda job: together.wait(10))
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()
    acks = driver.ack_txns()
    assert len(acks) == len(set(acks)) == count


def test_an_explicit_window_groups_a_worker_of_few_slots(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    count = 2
    together = threading.Barrier(count)
    worker = Worker(store, name="w", ack_window_s=DEFAULT_ACK_WINDOW_S)
    worker.task("q", concurrency=count)(lambda job: together.wait(10))
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()
    assert len(set(driver.ack_txns())) == 1


def test_the_default_window_is_no_grouping_without_the_transactions_profile(
    clock: FakeClock, running: Any
) -> None:
    plain = FakeNoTransactionsDriver()
    store = CoreStore(plain, clock=clock, capabilities=plain.capabilities, engine_name="fake")
    try:
        worker = Worker(store, name="w")  # the default: no ProfileUnavailable here
        worker.task("q", concurrency=DEFAULT_ACK_GROUP_MIN_SLOTS)(lambda job: None)
        ids = store.queue("q").enqueue_many([{"n": n} for n in range(4)])
        run = running(worker)
        eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
        run.stop()
        assert run.error is None
        assert plain.calls_named("ack_and_claim") or plain.calls_named("ack")
    finally:
        store.close()


class _Recording:
    """A store stand-in for ``OutcomeGroups`` alone: its transactions' acks, by group."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []

    def transaction(self) -> Any:
        recording = self

        class Tx:
            def __enter__(self) -> Tx:
                recording.groups.append([])
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def ack_all(self, handles: list[Any], results: list[Any]) -> tuple[Any, ...]:
                recording.groups[-1].extend(handles)
                return ()

        return Tx()


def test_a_group_is_written_at_once_when_every_run_holding_a_slot_waits_in_it() -> None:
    recording = _Recording()
    written: list[Any] = []
    # A window far beyond the test's safety net: only the rule can write the group.
    groups = OutcomeGroups(
        recording,  # type: ignore[arg-type]
        3600.0,
        lambda run, ack, said: written.append(run),
        lambda run, ack, unavailable: "ack",
        lambda: 2,
    )
    groups.start()
    try:
        first, second = _FakeRun(1), _FakeRun(2)
        groups.add(first, Ack())  # type: ignore[arg-type]
        groups.add(second, Ack())  # type: ignore[arg-type]
        eventually(lambda: len(written) == 2, "the group written before its window ended")
        assert recording.groups == [[1, 2]]
    finally:
        groups.close()


class _FakeRun:
    def __init__(self, handle: int) -> None:
        self.handle = handle
