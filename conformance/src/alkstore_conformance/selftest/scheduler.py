"""Broken schedulers: the SQLite engine's scheduler statements, each with one bug."""

from __future__ import annotations

import sqlite3

from alkstore.params import ScheduleAdvance
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import SCHEDULES

# The bug: no "AND next_fire_at = :expected". A ticker that read a boundary another
# ticker has already fired moves the schedule anyway and fires the boundary again.
ADVANCE_WITHOUT_COMPARE = f"UPDATE {SCHEDULES} SET next_fire_at = :new_fire_at WHERE name = :name"


class AdvanceWithoutCompareDriver(SqliteDriver):
    def schedule_advance(self, c: sqlite3.Connection, params: ScheduleAdvance) -> bool:
        name, new_fire_at = params.name, params.new_fire_at
        named = {"name": name, "new_fire_at": new_fire_at}
        return c.execute(ADVANCE_WITHOUT_COMPARE, named).rowcount == 1


class NeverSkipsDriver(SqliteDriver):
    """Refuses the core's skip past the catch-up cap (a move of more than one
    interval): a schedule that missed N boundaries fires all N, 64 per tick."""

    def schedule_advance(self, c: sqlite3.Connection, params: ScheduleAdvance) -> bool:
        name, expected, new_fire_at = params.name, params.expected, params.new_fire_at
        record = self.schedule_get(c, name)
        interval = None if record is None else record.interval_s
        if interval is not None and new_fire_at - expected > interval:
            return False
        return super().schedule_advance(c, params)
