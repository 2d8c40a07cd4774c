"""``SchedulerDriver``: schedule rows, and the compare-and-set that fires them."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore.params import ScheduleAdvance
from alkstore.rows import ScheduleRecord

from .base import SeamTests
from .support import T0, SeamDriver, claim, insert, schedule_record, stamps


class Boom(Exception):
    pass


def _upsert(driver: SeamDriver, record: ScheduleRecord) -> None:
    driver.write(lambda c: driver.schedule_upsert(c, record))


def _stored(driver: SeamDriver, name: str = "s") -> ScheduleRecord | None:
    return driver.read(lambda c: driver.schedule_get(c, name))


def _advance(driver: SeamDriver, name: str, expected: int, new_fire_at: int) -> bool:
    return driver.write(
        lambda c: driver.schedule_advance(c, ScheduleAdvance(name, expected, new_fire_at))
    )


class SchedulerStatements(SeamTests):
    requires = frozenset({"scheduler"})

    def test_schedule_upsert_stores_a_new_schedule_whole(self, driver: SeamDriver) -> None:
        record = schedule_record(priority=4, max_attempts=2, expires_s=30)
        _upsert(driver, record)
        assert _stored(driver) == record

    def test_schedule_upsert_keeps_the_stored_boundary_when_the_spec_is_unchanged(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10))
        again = schedule_record(next_fire_at=T0 + 99, queue="other", priority=5, max_attempts=7)
        _upsert(driver, again)
        assert _stored(driver) == schedule_record(
            next_fire_at=T0 + 10, queue="other", priority=5, max_attempts=7
        )

    def test_schedule_upsert_takes_the_new_boundary_when_the_spec_changed(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10))
        changed = schedule_record(spec="@every 60s", interval_s=60, next_fire_at=T0 + 60)
        _upsert(driver, changed)
        assert _stored(driver) == changed

    def test_schedule_delete_removes_the_schedule_and_says_whether_it_was_there(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record())
        assert driver.write(lambda c: driver.schedule_delete(c, "s")) is True
        assert _stored(driver) is None
        assert driver.write(lambda c: driver.schedule_delete(c, "s")) is False

    def test_schedule_get_of_an_unknown_name_is_none(self, driver: SeamDriver) -> None:
        _upsert(driver, schedule_record())
        assert _stored(driver, "unknown") is None

    def test_schedule_list_is_ordered_by_name(self, driver: SeamDriver) -> None:
        for name in ("b", "c", "a"):
            _upsert(driver, schedule_record(name=name))
        assert [r.name for r in driver.read(lambda c: driver.schedule_list(c))] == ["a", "b", "c"]

    def test_schedules_due_are_those_at_or_before_now_by_boundary_then_name(
        self, driver: SeamDriver
    ) -> None:
        for name, fire_at in (("late", T0), ("b", T0 - 5), ("a", T0 - 5), ("future", T0 + 1)):
            _upsert(driver, schedule_record(name=name, next_fire_at=fire_at))
        due = driver.read(lambda c: driver.schedules_due(c, T0))
        assert [r.name for r in due] == ["a", "b", "late"]

    def test_schedule_advance_moves_the_boundary_from_the_expected_one(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10))
        assert _advance(driver, "s", T0 + 10, T0 + 20) is True
        stored = _stored(driver)
        assert stored is not None
        assert stored.next_fire_at == T0 + 20

    def test_schedule_advance_from_a_boundary_already_moved_changes_nothing(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10))
        _advance(driver, "s", T0 + 10, T0 + 20)
        assert _advance(driver, "s", T0 + 10, T0 + 30) is False
        stored = _stored(driver)
        assert stored is not None
        assert stored.next_fire_at == T0 + 20

    def test_schedule_advance_of_an_unknown_name_is_false(self, driver: SeamDriver) -> None:
        assert _advance(driver, "unknown", T0, T0 + 10) is False

    def test_schedule_next_fire_at_is_the_earliest_boundary(self, driver: SeamDriver) -> None:
        assert driver.read(lambda c: driver.schedule_next_fire_at(c)) is None
        _upsert(driver, schedule_record(name="a", next_fire_at=T0 + 30))
        _upsert(driver, schedule_record(name="b", next_fire_at=T0 + 20))
        assert driver.read(lambda c: driver.schedule_next_fire_at(c)) == T0 + 20

    def test_a_fire_rolled_back_after_its_advance_leaves_the_boundary_and_no_job(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10))

        def fire_then_fail(c: Any) -> None:
            assert driver.schedule_advance(c, ScheduleAdvance("s", T0 + 10, T0 + 20))
            insert(driver, c, stamps(created_at=T0 + 10, run_at=T0 + 10), ['{"v": 1}'])
            raise Boom

        with pytest.raises(Boom):
            driver.write(fire_then_fail)
        stored = _stored(driver)
        assert stored is not None
        assert stored.next_fire_at == T0 + 10
        assert claim(driver, T0 + 10) == []


class CronScheduleStatements(SeamTests):
    """The schedule row of contract 1.2's ``cron`` profile: a zone, a catch-up policy,
    no interval for a cron spec."""

    requires = frozenset({"scheduler", "cron"})

    def test_schedule_upsert_stores_a_cron_schedule_whole(self, driver: SeamDriver) -> None:
        record = schedule_record(
            spec="0 9 * * MON-FRI", interval_s=None, timezone="Europe/Berlin", catch_up="latest"
        )
        _upsert(driver, record)
        assert _stored(driver) == record
        assert driver.read(lambda c: driver.schedule_list(c)) == [record]
        assert driver.read(lambda c: driver.schedules_due(c, record.next_fire_at)) == [record]

    def test_schedule_upsert_replaces_the_policy_and_keeps_the_boundary(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10, timezone="Asia/Tokyo"))
        _upsert(
            driver, schedule_record(next_fire_at=T0 + 99, timezone="Asia/Tokyo", catch_up="none")
        )
        assert _stored(driver) == schedule_record(
            next_fire_at=T0 + 10, timezone="Asia/Tokyo", catch_up="none"
        )

    def test_schedule_upsert_takes_the_new_boundary_when_the_zone_changed(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10))
        moved = schedule_record(next_fire_at=T0 + 99, timezone="America/New_York")
        _upsert(driver, moved)
        assert _stored(driver) == moved

    def test_schedule_advance_keeps_the_zone_and_the_policy(self, driver: SeamDriver) -> None:
        record = schedule_record(
            spec="*/5 * * * *", interval_s=None, timezone="Pacific/Chatham", catch_up="none"
        )
        _upsert(driver, record)
        assert _advance(driver, "s", record.next_fire_at, record.next_fire_at + 300) is True
        stored = _stored(driver)
        assert stored is not None
        assert (stored.timezone, stored.catch_up, stored.interval_s) == (
            "Pacific/Chatham",
            "none",
            None,
        )
