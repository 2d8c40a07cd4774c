"""Declared schedules in the core (contract 1.2 §5.11, the periodic profile), over the fake.

The core sets and renews every lease and lapses them in each tick; the driver only
stores ``declared_until`` and runs its two statements.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import START
from fakes import FakeCronDriver, FakePeriodicDriver

from alkstore.constants import DECLARATION_LEASE_S
from alkstore.core import CoreStore
from alkstore.errors import InvalidName, InvalidOptions, ProfileUnavailable
from alkstore.rows import ScheduleRecord
from alkstore.testing import FakeClock
from alkstore.values import TickResult


@pytest.fixture
def driver() -> FakePeriodicDriver:
    return FakePeriodicDriver()


def _upserted(driver: FakePeriodicDriver) -> list[ScheduleRecord]:
    return [
        arg
        for call in driver.calls_named("schedule_upsert")
        for arg in call.args
        if isinstance(arg, ScheduleRecord)
    ]


def test_a_declaration_hands_the_driver_a_lease_of_declaration_lease_s(
    store: CoreStore, driver: FakePeriodicDriver
) -> None:
    declared = store.declare_schedule("d", "@every 60s", "q", {})
    (record,) = _upserted(driver)
    assert record.declared_until == START + DECLARATION_LEASE_S
    assert declared.declared_until == START + DECLARATION_LEASE_S


def test_a_plain_schedule_hands_the_driver_no_lease(
    store: CoreStore, driver: FakePeriodicDriver
) -> None:
    store.schedule("s", "@every 60s", "q", {})
    (record,) = _upserted(driver)
    assert record.declared_until is None


def test_renew_hands_the_driver_each_name_once_in_order_and_the_new_lease(
    store: CoreStore, driver: FakePeriodicDriver, clock: FakeClock
) -> None:
    store.declare_schedule("b", "@every 60s", "q", {})
    store.declare_schedule("a", "@every 60s", "q", {})
    clock.advance(100)
    assert store.renew_schedules(["b", "a", "b"]) == ["a", "b"]
    (call,) = driver.calls_named("schedules_renew")
    assert call.args == (("a", "b"), START + 100 + DECLARATION_LEASE_S)


def test_renewing_no_names_runs_no_statement(store: CoreStore, driver: FakePeriodicDriver) -> None:
    assert store.renew_schedules([]) == []
    assert driver.calls_named("schedules_renew") == []


def test_a_tick_lapses_declarations_before_it_reads_what_is_due(
    store: CoreStore, driver: FakePeriodicDriver, clock: FakeClock
) -> None:
    store.declare_schedule("d", "@every 60s", "q", {})
    clock.advance(DECLARATION_LEASE_S)
    assert store.tick_schedules("t") == TickResult(fired=0, skipped=0)
    names = driver.statement_names()
    assert names.index("schedules_lapse") < names.index("schedules_due")
    (call,) = driver.calls_named("schedules_lapse")
    assert call.args == (START + DECLARATION_LEASE_S,)
    assert store.get_schedule("d") is None


def test_a_tick_under_another_leader_lapses_nothing(
    store: CoreStore, driver: FakePeriodicDriver, clock: FakeClock
) -> None:
    store.declare_schedule("d", "@every 60s", "q", {})
    clock.advance(DECLARATION_LEASE_S)
    driver.hold_lock("__alkstore_scheduler", "other", int(clock.now()) + 30)
    assert store.tick_schedules("t") == TickResult(fired=0, skipped=0)
    assert driver.calls_named("schedules_lapse") == []
    assert store.get_schedule("d") is not None


def test_renew_refuses_a_str_before_anything_is_written(
    store: CoreStore, driver: FakePeriodicDriver
) -> None:
    with pytest.raises(InvalidOptions, match="list or tuple"):
        store.renew_schedules("d")  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        store.renew_schedules(["ok", ""])
    assert driver.calls_named("schedules_renew") == []


@pytest.fixture
def cron_store(clock: FakeClock) -> Iterator[tuple[CoreStore, FakeCronDriver]]:
    """A store over an engine with cron schedules but no periodic profile."""
    cron = FakeCronDriver()
    store = CoreStore(cron, clock=clock, capabilities=cron.capabilities, engine_name="fake")
    yield store, cron
    store.close()


def test_an_engine_without_the_profile_refuses_declarations_and_renewals(
    cron_store: tuple[CoreStore, FakeCronDriver],
) -> None:
    store, _ = cron_store
    with pytest.raises(ProfileUnavailable, match="periodic"):
        store.declare_schedule("d", "@every 60s", "q", {})
    with pytest.raises(ProfileUnavailable, match="periodic"):
        store.renew_schedules(["d"])
    assert store.schedules() == []


def test_an_engine_without_the_profile_ticks_without_the_lapse_statement(
    cron_store: tuple[CoreStore, FakeCronDriver],
) -> None:
    store, cron = cron_store
    store.schedule("s", "@every 60s", "q", {})
    store.tick_schedules("t")
    assert cron.calls_named("schedules_lapse") == []
    assert cron.calls_named("schedules_due") != []
