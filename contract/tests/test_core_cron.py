"""Cron schedules in the core (contract 1.2 §5, the cron profile), over the fake.

The core computes every boundary; the driver only stores what it is handed. An
engine without the ``cron`` profile is handed only what contract 1.1 knew.
"""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
from conftest import START, StoreFactory
from fakes import FakeCronDriver, FakeProfilesDriver

from alkstore.constants import MISFIRE_GRACE_S
from alkstore.core import CoreStore
from alkstore.errors import ProfileUnavailable
from alkstore.options import ScheduleOpts
from alkstore.rows import ScheduleRecord
from alkstore.testing import FakeClock
from alkstore.values import TickResult


def _at(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


@pytest.fixture
def driver() -> FakeCronDriver:
    return FakeCronDriver()


def _upserted(driver: FakeCronDriver) -> ScheduleRecord:
    (call,) = [c for c in driver.calls if c.name == "schedule_upsert"]
    (record,) = (a for a in call.args if isinstance(a, ScheduleRecord))
    return record


def test_a_cron_schedule_hands_the_driver_its_zone_policy_and_no_interval(
    store: CoreStore, driver: FakeCronDriver, clock: FakeClock
) -> None:
    clock.set(_at("2026-01-05T06:00:00Z"))
    opts = ScheduleOpts(timezone="Europe/Berlin", catch_up="latest")
    store.schedule("digest", "0 9 * * MON-FRI", "mail", {}, opts)
    record = _upserted(driver)
    assert (record.timezone, record.catch_up, record.interval_s) == (
        "Europe/Berlin",
        "latest",
        None,
    )
    assert record.next_fire_at == _at("2026-01-05T08:00:00Z")


@pytest.mark.parametrize(
    ("spec", "opts"),
    [
        ("0 9 * * *", ScheduleOpts()),
        ("@daily", ScheduleOpts()),
        ("@every 1h", ScheduleOpts(timezone="Europe/Berlin")),
        ("@every 1h", ScheduleOpts(catch_up="none")),
    ],
    ids=["cron", "nickname", "zone", "policy"],
)
def test_an_engine_without_the_cron_profile_refuses_what_only_it_stores(
    clock: FakeClock, spec: str, opts: ScheduleOpts
) -> None:
    driver = FakeProfilesDriver()
    store = CoreStore(driver, clock=clock, capabilities=driver.capabilities, engine_name="1.1")
    try:
        with pytest.raises(ProfileUnavailable) as raised:
            store.schedule("s", spec, "q", {}, opts)
        assert raised.value.profile == "cron"
        assert [c.name for c in driver.calls if c.name.startswith("schedule")] == []
        assert store.schedule("s", "@every 1h", "q", {}).interval_s == 3600  # 1.1's still work
    finally:
        store.close()


def test_a_wall_clock_schedule_fires_after_the_gap_and_then_on_its_time(
    store: CoreStore, clock: FakeClock
) -> None:
    clock.set(_at("2026-03-28T12:00:00+01:00"))
    first = store.schedule("s", "30 2 * * *", "q", {}, ScheduleOpts(timezone="Europe/Berlin"))
    assert first.next_fire_at == _at("2026-03-29T03:00:00+02:00")
    clock.set(first.next_fire_at)
    assert store.tick_schedules("t") == TickResult(fired=1, skipped=0)
    after = store.get_schedule("s")
    assert after is not None
    assert after.next_fire_at == _at("2026-03-30T02:30:00+02:00")


def test_latest_is_one_transaction_that_skips_and_fires(
    store: CoreStore, driver: FakeCronDriver, clock: FakeClock
) -> None:
    stored = store.schedule("s", "@every 10s", "q", {}, ScheduleOpts(catch_up="latest"))
    clock.set(stored.next_fire_at + 95)
    driver.calls.clear()
    assert store.tick_schedules("t") == TickResult(fired=1, skipped=9)
    (advance,) = [c for c in driver.calls if c.name == "schedule_advance"]
    (insert,) = [c for c in driver.calls if c.name == "insert_jobs"]
    assert advance.txn == insert.txn


def test_none_skips_the_stale_boundaries_and_fires_the_fresh_ones(
    store: CoreStore, clock: FakeClock
) -> None:
    stored = store.schedule("s", "@every 30s", "q", {}, ScheduleOpts(catch_up="none"))
    clock.set(stored.next_fire_at + 3 * 30 + 5)  # due: -95, -65, -35, -5 s ago
    assert MISFIRE_GRACE_S == 60
    assert store.tick_schedules("t") == TickResult(fired=2, skipped=2)


def test_a_schedule_whose_zone_this_process_lacks_is_left_and_the_others_fire(
    make_store: StoreFactory,
    driver: FakeCronDriver,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = make_store()
    store.schedule("known", "@every 10s", "q", {})
    store.schedule("unknown", "*/5 * * * *", "q", {})
    # As if another process, whose time-zone database has a zone this one lacks, stored it.
    driver.rewrite_schedule("unknown", timezone="Atlantis/Capital", next_fire_at=START)
    clock.set(START + 10)
    with caplog.at_level(logging.WARNING, logger="alkstore.scheduler"):
        assert store.tick_schedules("t") == TickResult(fired=1, skipped=0)
    assert "'unknown' left unfired" in caplog.text
    listed = store.get_schedule("unknown")
    assert listed is not None
    assert (listed.timezone, listed.next_fire_at) == ("Atlantis/Capital", START)
