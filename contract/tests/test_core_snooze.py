"""The core's snooze (contract §14): one guarded statement, the bound in the core."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import FakeSnoozeDriver

from alkstore.constants import MAX_SNOOZES
from alkstore.core import CoreStore
from alkstore.driver import ERROR_SNOOZES
from alkstore.errors import InvalidOptions, ProfileUnavailable
from alkstore.options import QueueOpts
from alkstore.testing import FakeClock
from alkstore.values import JobState
from alkstore.worker import Worker
from alkstore.worker.outcomes import Snooze, Snoozed, outcome_of


@pytest.fixture
def snooze_driver() -> FakeSnoozeDriver:
    return FakeSnoozeDriver()


@pytest.fixture
def snooze_store(snooze_driver: FakeSnoozeDriver, clock: FakeClock) -> Iterator[CoreStore]:
    with CoreStore(snooze_driver, clock=clock, capabilities=snooze_driver.capabilities) as store:
        yield store


def test_snooze_is_one_statement_to_now_plus_delay(
    snooze_store: CoreStore, snooze_driver: FakeSnoozeDriver, clock: FakeClock
) -> None:
    queue = snooze_store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.snooze(30) is True
    (call,) = snooze_driver.calls_named("snooze")
    assert call.args[-1] == int(clock.now()) + 30  # run_at
    job = queue.get_job(handle.id)
    assert job is not None
    assert (job.state, job.snoozes) == (JobState.PENDING, 1)


def test_the_snooze_at_the_bound_buries_without_a_history_entry(
    snooze_store: CoreStore, snooze_driver: FakeSnoozeDriver
) -> None:
    queue = snooze_store.queue("q", QueueOpts(max_attempts=1))
    queue.enqueue(1)
    for _ in range(MAX_SNOOZES):
        handle = queue.claim("w1")
        assert handle is not None
        assert handle.snooze(0) is True
    last = queue.claim("w1")
    assert last is not None
    assert last.snooze(0) is True
    (bury,) = snooze_driver.calls_named("bury")
    assert bury.args[-2:] == (ERROR_SNOOZES, None)  # last_error, no history entry
    assert len(snooze_driver.calls_named("snooze")) == MAX_SNOOZES


def test_a_bad_delay_writes_nothing(
    snooze_store: CoreStore, snooze_driver: FakeSnoozeDriver
) -> None:
    queue = snooze_store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    with pytest.raises(InvalidOptions):
        handle.snooze(-1)
    assert snooze_driver.calls_named("snooze") == []


def test_an_engine_without_the_profile_raises_profile_unavailable(store: CoreStore) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    with pytest.raises(ProfileUnavailable):
        handle.snooze(5)


def test_a_raised_snooze_is_the_snoozed_outcome_of_its_whole_seconds() -> None:
    assert outcome_of(Snooze(1.5)) == Snoozed(2)


def test_snooze_refuses_a_bad_delay_where_the_handler_raises_it() -> None:
    with pytest.raises(InvalidOptions):
        Snooze(-1)


def test_a_worker_snoozing_on_stop_refuses_an_engine_without_the_profile(
    store: CoreStore,
) -> None:
    worker = Worker(store, name="w1", snooze_on_stop=True)

    @worker.task("q")
    def handle(job: object) -> None:
        raise AssertionError("never runs: run() refuses first")

    with pytest.raises(ProfileUnavailable, match="snooze"):
        worker.run()
    assert store.queue("q").claim("w2") is None
