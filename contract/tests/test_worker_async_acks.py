"""Acks that need not wait for the disk (contract §12.11): ``Worker(durable_acks=False)``
asks the engine, through the driver's ``commit_acks_without_waiting``, just before
each of its acks (in the ack's own unit, or first in a group's transaction), and
only on an engine that declares the ``async_acks`` profile."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fakes import FakeDriver, FakeTx
from running import eventually

from alkstore.core import CoreStore
from alkstore.engine import Capabilities
from alkstore.errors import InvalidOptions
from alkstore.otel import instrument
from alkstore.values import JobState
from alkstore.worker import Fail, Worker

HINT = "commit_acks_without_waiting"


class FakeAsyncAcksDriver(FakeDriver):
    """The fake with the async_acks profile (and transactions, for groups)."""

    capabilities = Capabilities(transactions=True, async_acks=True)

    def commit_acks_without_waiting(self, c: FakeTx) -> None:
        self._log(HINT, c.number, ())


class FakeUndeclaredDriver(FakeAsyncAcksDriver):
    """A driver with the hint on an engine that does not declare the profile."""

    capabilities = Capabilities(transactions=True)


@pytest.fixture
def driver() -> FakeDriver:
    return FakeAsyncAcksDriver()


def _run(store: CoreStore, running: Any, count: int, **settings: Any) -> None:
    worker = Worker(store, name="w", **settings)
    worker.task("q", concurrency=2)(lambda job: None)
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()


def _txns(driver: FakeDriver, name: str) -> list[int]:
    return [call.txn for call in driver.calls_named(name)]


def test_a_worker_without_durable_acks_asks_in_each_acks_own_unit(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    _run(store, running, 6, durable_acks=False)
    acks = _txns(driver, "ack")
    assert len(acks) == 6
    assert sorted(_txns(driver, HINT)) == sorted(acks)


def test_the_hint_comes_before_the_ack_and_claim_of_its_unit(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    _run(store, running, 6, durable_acks=False)
    for txn in _txns(driver, "ack"):
        names = [call.name for call in driver.calls if call.txn == txn]
        assert names.index(HINT) < names.index("ack")
        assert "claim" not in names[: names.index(HINT)]


def test_a_worker_with_durable_acks_never_asks(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    _run(store, running, 6)
    assert len(_txns(driver, "ack")) == 6
    assert _txns(driver, HINT) == []


def test_a_group_of_acks_asks_once_first_in_its_transaction(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    _run(store, running, 2, durable_acks=False, ack_window_s=0.5)
    acks = set(_txns(driver, "ack_claims"))  # a group's acks: one ack_all statement
    hints = _txns(driver, HINT)
    assert set(hints) == acks
    assert len(hints) == len(acks)  # once per group, not per ack
    for txn in hints:
        names = [call.name for call in driver.calls if call.txn == txn]
        assert names.index(HINT) < names.index("ack_claims")


def test_a_group_of_acks_through_a_traced_store_asks_as_well(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    # alkstore.otel's instrument(store) hands the worker its own transactions, each
    # wrapping the store's: the group's request must reach the engine through them.
    traced = instrument(store)
    worker = Worker(traced, name="w", ack_window_s=0.5, durable_acks=False)
    worker.task("q", concurrency=2)(lambda job: None)
    ids = traced.queue("q").enqueue_many([{"n": n} for n in range(2)])
    run = running(worker)
    eventually(lambda: all(store.queue("q").get_job(i) is None for i in ids), "all acked")
    run.stop()
    acks = _txns(driver, "ack_claims")
    assert acks, "the acks should have been written as a group"
    assert sorted(_txns(driver, HINT)) == sorted(acks)


def test_an_engine_without_the_profile_is_never_asked(clock: Any, running: Any) -> None:
    undeclared = FakeUndeclaredDriver()
    store = CoreStore(
        undeclared, clock=clock, capabilities=undeclared.capabilities, engine_name="fake"
    )
    try:
        _run(store, running, 4, durable_acks=False)
    finally:
        store.close()
    assert len(_txns(undeclared, "ack")) == 4
    assert _txns(undeclared, HINT) == []


@pytest.mark.parametrize("durable", ["no", 0, None], ids=["text", "int", "none"])
def test_a_malformed_durable_acks_is_refused(durable: object) -> None:
    with pytest.raises(InvalidOptions, match="durable_acks must be a bool"):
        Worker(None, name="w", durable_acks=durable)  # type: ignore[arg-type]


def test_configure_sets_durable_acks() -> None:
    worker = Worker(None, name="w")
    worker.configure(durable_acks=False)
    assert worker.durable_acks is False


def test_a_group_with_a_retry_or_a_fail_in_it_commits_durably(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    # Only a transaction of acks only may skip the flush (§12.11): a group that also
    # carries a retry or a fail (§12.10) is written as durably as they are.
    count = 4
    together = threading.Barrier(count)

    def handler(job: Any) -> None:
        together.wait(10)
        if job.payload["n"] == 0:
            raise Fail("no such card")

    worker = Worker(store, name="w", ack_window_s=1.0, durable_acks=False)
    worker.task("q", concurrency=count)(handler)
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(count)])
    run = running(worker)
    eventually(
        lambda: all(
            getattr(store.queue("q").get_job(i), "state", None) in (None, JobState.DEAD)
            for i in ids
        ),
        "all settled",
    )
    run.stop()
    (group,) = set(driver.ack_txns()) | set(_txns(driver, "bury"))
    assert len(driver.ack_txns()) == count - 1
    assert group not in _txns(driver, HINT)
