"""Broken unique jobs (contract §15): a check then an insert, a claim that forgets the
key, a period that never ends.

A unique enqueue that reads whether the key is held and then inserts, without the
unique index deciding, lets enqueuers that all read "free" before any of them wrote
each make a job. One whose claim gives the key up lets a duplicate in while the
first job runs (and a retry then collides with it). One that never ends a period
keeps every key of a periodic job held for as long as the job waits.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from alkstore.options import JOB_STAMP_FIELDS, stamp_values
from alkstore.params import Claim, InsertUnique
from alkstore.values import Job
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import JOBS

from .blind_spots import commit_and_let_others_write

READ_TO_WRITE_S = 0.005
"""Between the read and the write: long enough for every racer to read first."""

_STAMPS = ", ".join(JOB_STAMP_FIELDS)

# The bug: the holder is looked up by the key alone, then the row goes in with no
# hold the unique index sees (unique_hold NULL), so nothing stops a second one.
FIND_HOLDER = f"SELECT id FROM {JOBS} WHERE queue = :queue AND unique_key = :key LIMIT 1"
INSERT_UNCHECKED = f"""
INSERT INTO {JOBS} ({_STAMPS}, state, payload, unique_key, hold_until, hold_dead)
VALUES ({", ".join("?" * len(JOB_STAMP_FIELDS))}, 'pending', ?, ?, ?, ?)
"""

# The bug: a claimed row gives its key up, as if only pending jobs held keys.
FORGET_KEYS = f"UPDATE {JOBS} SET unique_hold = NULL WHERE id = ?"


class CheckThenInsertUniqueDriver(SqliteDriver):
    """Reads whether a key is held in one transaction and inserts in the next, past
    the unique index: racing enqueuers of one key each make a job."""

    def insert_unique_jobs(
        self, c: sqlite3.Connection, params: InsertUnique
    ) -> list[tuple[int, bool]]:
        stamps = params.stamps
        outcomes: list[tuple[int, bool]] = []
        for payload, key in zip(params.payloads, params.keys, strict=True):
            row = c.execute(FIND_HOLDER, {"queue": stamps.queue, "key": key}).fetchone()
            if row is not None:
                outcomes.append((row[0], True))
                continue
            # The read's transaction ends here; the insert runs in a fresh one.
            commit_and_let_others_write(self, c, READ_TO_WRITE_S)
            values = (*stamp_values(stamps), payload, key, params.hold_until, params.hold_dead)
            outcomes.append((int(c.execute(INSERT_UNCHECKED, values).lastrowid or 0), False))
        return outcomes


class UniqueForgetsProcessingDriver(SqliteDriver):
    """Claims a job and lets its key go: only pending jobs hold keys."""

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        jobs = super().claim(c, params)
        for job in jobs:
            c.execute(FORGET_KEYS, (job.id,))
        return jobs


class PeriodNeverEndsDriver(SqliteDriver):
    """Takes a unique job's period and drops it: the key stays held while the job waits."""

    def insert_unique_jobs(
        self, c: sqlite3.Connection, params: InsertUnique
    ) -> list[tuple[int, bool]]:
        return super().insert_unique_jobs(c, replace(params, hold_until=None))
