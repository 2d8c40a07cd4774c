"""``PeriodicDriver``: the lease of a declared schedule (contract 1.2 §5.11)."""

from __future__ import annotations

from alkstore.params import ScheduleLapse, ScheduleRenew
from alkstore.rows import ScheduleRecord

from .base import SeamTests
from .support import T0, SeamDriver, schedule_record

LEASE = T0 + 300


def _upsert(driver: SeamDriver, record: ScheduleRecord) -> None:
    driver.write(lambda c: driver.schedule_upsert(c, record))


def _stored(driver: SeamDriver, name: str) -> ScheduleRecord | None:
    return driver.read(lambda c: driver.schedule_get(c, name))


def _renew(driver: SeamDriver, names: list[str], until: int) -> list[str]:
    return driver.write(lambda c: driver.schedules_renew(c, ScheduleRenew(names, until)))


def _lapse(driver: SeamDriver, now: int) -> list[str]:
    return driver.write(lambda c: driver.schedules_lapse(c, ScheduleLapse(now)))


class PeriodicStatements(SeamTests):
    requires = frozenset({"scheduler", "cron", "periodic"})

    def test_schedule_upsert_stores_the_lease_and_reads_it_back_everywhere(
        self, driver: SeamDriver
    ) -> None:
        record = schedule_record(declared_until=LEASE)
        _upsert(driver, record)
        assert _stored(driver, "s") == record
        assert driver.read(lambda c: driver.schedule_list(c)) == [record]
        assert driver.read(lambda c: driver.schedules_due(c, record.next_fire_at)) == [record]

    def test_schedule_upsert_of_no_lease_makes_a_declared_schedule_undeclared(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(next_fire_at=T0 + 10, declared_until=LEASE))
        _upsert(driver, schedule_record(next_fire_at=T0 + 99))
        assert _stored(driver, "s") == schedule_record(next_fire_at=T0 + 10)

    def test_schedules_renew_sets_the_lease_of_the_declared_names_only(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(name="a", declared_until=LEASE))
        _upsert(driver, schedule_record(name="b", declared_until=LEASE))
        _upsert(driver, schedule_record(name="plain"))
        _upsert(driver, schedule_record(name="other", declared_until=LEASE))
        assert _renew(driver, ["plain", "b", "missing", "a"], LEASE + 100) == ["a", "b"]
        assert _stored(driver, "a") == schedule_record(name="a", declared_until=LEASE + 100)
        assert _stored(driver, "b") == schedule_record(name="b", declared_until=LEASE + 100)
        assert _stored(driver, "plain") == schedule_record(name="plain")
        assert _stored(driver, "other") == schedule_record(name="other", declared_until=LEASE)

    def test_schedules_renew_of_no_names_renews_nothing(self, driver: SeamDriver) -> None:
        _upsert(driver, schedule_record(declared_until=LEASE))
        assert _renew(driver, [], LEASE + 100) == []
        assert _stored(driver, "s") == schedule_record(declared_until=LEASE)

    def test_schedules_lapse_deletes_the_leases_at_or_before_now_only(
        self, driver: SeamDriver
    ) -> None:
        _upsert(driver, schedule_record(name="before", declared_until=LEASE - 1))
        _upsert(driver, schedule_record(name="at", declared_until=LEASE))
        _upsert(driver, schedule_record(name="after", declared_until=LEASE + 1))
        _upsert(driver, schedule_record(name="plain", next_fire_at=T0))
        assert _lapse(driver, LEASE) == ["at", "before"]
        names = [r.name for r in driver.read(lambda c: driver.schedule_list(c))]
        assert names == ["after", "plain"]
        assert _lapse(driver, LEASE) == []
