"""Broken cron schedules (contract 1.2 §5, the cron profile).

Two engines that lose a column of the schedule row -- the bug of an engine whose
upsert statement was not updated when the column was added -- and one store whose
core computes boundaries wrongly. Engines store boundaries and never compute one,
so a DST bug can only live in the core: that mutant is the store an engine would
ship if it bundled its own broken cadence, opened exactly as the real one.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from alkstore.cadence import Cadence, Due
from alkstore.core import CoreStore
from alkstore.core.scheduler import CoreScheduler
from alkstore.rows import ScheduleRecord
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import SCHEDULES

from ..model import cron as oracle

_OLD_COLUMNS = "name, spec, queue, payload, priority, max_attempts, expires_s, interval_s"


def _upsert_without(column: str) -> str:
    """The upsert as it stood before ``column`` existed, plus the other new column."""
    other = "catch_up" if column == "timezone" else "timezone"
    kept_boundary = (
        f"{SCHEDULES}.spec = excluded.spec AND {SCHEDULES}.timezone = excluded.timezone"
        if column == "catch_up"
        else f"{SCHEDULES}.spec = excluded.spec"
    )
    return f"""
INSERT INTO {SCHEDULES} ({_OLD_COLUMNS}, next_fire_at, {other})
VALUES (:name, :spec, :queue, :payload, :priority, :max_attempts, :expires_s, :interval_s,
        :next_fire_at, :{other})
ON CONFLICT (name) DO UPDATE
   SET spec = excluded.spec, queue = excluded.queue, payload = excluded.payload,
       priority = excluded.priority, max_attempts = excluded.max_attempts,
       expires_s = excluded.expires_s, interval_s = excluded.interval_s,
       {other} = excluded.{other},
       next_fire_at = CASE WHEN {kept_boundary}
                           THEN {SCHEDULES}.next_fire_at ELSE excluded.next_fire_at END
"""


_WITHOUT_ZONE = _upsert_without("timezone")
_WITHOUT_POLICY = _upsert_without("catch_up")


class ZoneDroppingDriver(SqliteDriver):
    """Never stores a schedule's zone: the column keeps its default, 'UTC', so every
    boundary after the first (which the core computed from the given opts) is UTC's."""

    def schedule_upsert(self, c: sqlite3.Connection, record: ScheduleRecord) -> None:
        c.execute(_WITHOUT_ZONE, asdict(record))


class PolicyDroppingDriver(SqliteDriver):
    """Never stores a schedule's catch-up policy: every schedule replays all it missed."""

    def schedule_upsert(self, c: sqlite3.Connection, record: ScheduleRecord) -> None:
        c.execute(_WITHOUT_POLICY, asdict(record))


@dataclass(frozen=True)
class _GapSkippingCadence:
    """The real cadence, but a boundary whose local time is not one the spec names
    is dropped -- what a "compute the local time, check it, convert it" loop does
    when it meets a local time that does not exist: 02:30 on spring-forward day
    never fires (the contract fires it at 03:00, the first instant after the gap)."""

    inner: Cadence

    @property
    def spec(self) -> str:
        return self.inner.spec

    @property
    def timezone(self) -> str:
        return self.inner.timezone

    @property
    def interval_s(self) -> int | None:
        return self.inner.interval_s

    def first_after(self, now: int) -> int:
        return self._named(self.inner.first_after(now))

    def next_after(self, boundary: int) -> int:
        return self._named(self.inner.next_after(boundary))

    def due(self, at: int, now: int) -> Due:
        return self.inner.due(at, now)

    def _named(self, boundary: int) -> int:
        if self.interval_s is not None:
            return boundary
        read = oracle.read_spec(self.spec)
        zone = oracle.zone_of(self.timezone)
        while not read.names(datetime.fromtimestamp(boundary, zone)):
            boundary = self.inner.next_after(boundary)
        return boundary


class _GapSkippingScheduler(CoreScheduler):
    def cadence(self, spec: object, timezone: object) -> Cadence:
        return _GapSkippingCadence(super().cadence(spec, timezone))


class GapSkippingStore(CoreStore):
    """A store whose scheduler never fires a local time that does not exist."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._scheduler_front = _GapSkippingScheduler(self._context)
