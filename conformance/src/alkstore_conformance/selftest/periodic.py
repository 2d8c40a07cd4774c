"""Broken declared schedules (contract 1.2 §5.11, the periodic profile).

Two engines whose lease statements are the ones an engine gets wrong first: an
upsert that forgets to keep the boundary once the declaration column is written,
and a tick's removal of lapsed declarations that removes nothing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict

from alkstore.params import ScheduleLapse
from alkstore.rows import ScheduleRecord
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite import statements as sql
from alkstore_sqlite.migrations import SCHEDULES

_RESETTING_UPSERT = f"""
INSERT INTO {SCHEDULES} ({sql.SCHEDULE_COLUMNS})
VALUES (:name, :spec, :queue, :payload, :priority, :max_attempts, :expires_s, :interval_s,
        :next_fire_at, :timezone, :catch_up, :declared_until)
ON CONFLICT (name) DO UPDATE
   SET spec = excluded.spec, queue = excluded.queue, payload = excluded.payload,
       priority = excluded.priority, max_attempts = excluded.max_attempts,
       expires_s = excluded.expires_s, interval_s = excluded.interval_s,
       timezone = excluded.timezone, catch_up = excluded.catch_up,
       declared_until = excluded.declared_until,
       next_fire_at = excluded.next_fire_at
"""


class ResettingDeclarationDriver(SqliteDriver):
    """Every declaration restarts the schedule's boundary: each worker of a fleet that
    starts (or restarts) pushes the next fire one interval further away."""

    def schedule_upsert(self, c: sqlite3.Connection, record: ScheduleRecord) -> None:
        if record.declared_until is None:
            super().schedule_upsert(c, record)
        else:
            c.execute(_RESETTING_UPSERT, asdict(record))


class LapseIgnoringDriver(SqliteDriver):
    """A tick never removes a lapsed declaration: a schedule the app stopped declaring
    fires forever."""

    def schedules_lapse(self, c: sqlite3.Connection, params: ScheduleLapse) -> list[str]:
        return []
