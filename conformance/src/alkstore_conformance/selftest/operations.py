"""Mutants of the ops profile (contract §11): each gets one sentence of §11 wrong.

Like the other mutants they subclass the SQLite reference driver and replace one
operation; everything else is the real engine. Their SQL names the reference
engine's fixed tables from ``alkstore_sqlite.migrations``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from alkstore.driver import JobStamps
from alkstore.params import Bury, Claim, ListJobs, PurgeDeadJobs, QueueStatsAt, Redrive, SetPaused
from alkstore.values import Job, JobState, QueueStats
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import DEAD, JOBS

from .blind_spots import commit_and_continue, commit_and_let_others_write

# -- stats that count lapsed claims as processing ----------------------------------------


class LapsedAsProcessingDriver(SqliteDriver):
    """Counts claimed rows by state alone: a claim past its deadline (which the next
    claim takes back) still shows as processing, and nothing ever shows as lapsed."""

    def queue_stats(self, c: sqlite3.Connection, params: QueueStatsAt) -> list[QueueStats]:
        return [
            replace(stats, processing=stats.processing + stats.lapsed, lapsed=0)
            for stats in super().queue_stats(c, params)
        ]


# -- redrives built from a read of the dead rows ---------------------------------------------

_DEAD_ROW = (
    "id, payload, priority, created_at, expires_at, max_attempts, visibility_timeout_s, "
    "backoff_base_s, dead_letter_retention_s"
)
DEAD_OLDEST = f"""
SELECT {_DEAD_ROW} FROM {DEAD} WHERE queue = :queue ORDER BY died_at, id LIMIT :limit
"""
DEAD_BY_ID = f"SELECT {_DEAD_ROW} FROM {DEAD} WHERE queue = :queue AND id = :id"
MARK_REDRIVEN = f"UPDATE {JOBS} SET redriven_from = :dead WHERE id = :id"
DELETE_DEAD = f"DELETE FROM {DEAD} WHERE id = :id"


class DeadRow(NamedTuple):
    id: int
    payload: str
    priority: int
    created_at: int
    expires_at: int | None
    max_attempts: int
    visibility_timeout_s: int
    backoff_base_s: int
    dead_letter_retention_s: int | None


def _dead_rows(
    c: sqlite3.Connection, queue: str, ids: Sequence[int] | None, limit: int
) -> list[DeadRow]:
    if ids is None:
        return [DeadRow(*row) for row in c.execute(DEAD_OLDEST, {"queue": queue, "limit": limit})]
    rows = (c.execute(DEAD_BY_ID, {"queue": queue, "id": i}).fetchone() for i in dict.fromkeys(ids))
    return [DeadRow(*row) for row in rows if row is not None]


def _new_life(
    driver: SqliteDriver, c: sqlite3.Connection, queue: str, row: DeadRow, now: int
) -> int:
    """Insert the pending job a redrive makes of ``row``; its id."""
    expires_at = None if row.expires_at is None else now + (row.expires_at - row.created_at)
    stamps = JobStamps(
        queue=queue,
        priority=row.priority,
        created_at=now,
        run_at=now,
        expires_at=expires_at,
        max_attempts=row.max_attempts,
        visibility_timeout_s=row.visibility_timeout_s,
        backoff_base_s=row.backoff_base_s,
        dead_letter_retention_s=row.dead_letter_retention_s,
    )
    (new_id,) = driver.insert_jobs(c, stamps, [row.payload])
    c.execute(MARK_REDRIVEN, {"id": new_id, "dead": row.id})
    return new_id


class RedriveKeepsDeadRowDriver(SqliteDriver):
    """Redrives by copying: the new job is made, the dead row is never deleted (a
    second redrive makes yet another job of it)."""

    def redrive(self, c: sqlite3.Connection, params: Redrive) -> list[int]:
        queue, ids, limit, now = params.queue, params.ids, params.limit, params.now
        return [_new_life(self, c, queue, row, now) for row in _dead_rows(c, queue, ids, limit)]


class TwoStepRedriveDriver(SqliteDriver):
    """Commits the new jobs first and deletes the dead rows in a second transaction:
    a crash in between leaves both."""

    def redrive(self, c: sqlite3.Connection, params: Redrive) -> list[int]:
        queue, ids, limit, now = params.queue, params.ids, params.limit, params.now
        rows = _dead_rows(c, queue, ids, limit)
        new_ids = [_new_life(self, c, queue, row, now) for row in rows]
        commit_and_continue(c)
        for row in rows:
            c.execute(DELETE_DEAD, {"id": row.id})
        return new_ids


REDRIVE_READ_TO_WRITE_S = 0.05
"""The gap between choosing the dead rows and redriving them (an operator's console
listing them, then acting on the list)."""


class ReadThenWriteRedriveDriver(SqliteDriver):
    """Chooses the dead rows in one transaction and redrives them in the next, never
    checking they are still there: two operators both redrive each row."""

    def redrive(self, c: sqlite3.Connection, params: Redrive) -> list[int]:
        queue, ids, limit, now = params.queue, params.ids, params.limit, params.now
        rows = _dead_rows(c, queue, ids, limit)
        # The read's transaction ends here; the redrive runs in a fresh one.
        commit_and_let_others_write(self, c, REDRIVE_READ_TO_WRITE_S)
        new_ids = []
        for row in rows:
            new_ids.append(_new_life(self, c, queue, row, now))
            c.execute(DELETE_DEAD, {"id": row.id})
        return new_ids


# -- a pause only this process sees -------------------------------------------------------


class PauseInProcessDriver(SqliteDriver):
    """Keeps pauses in the opened store's memory: claims through it stop, but another
    process (or another store on the same database) never hears of the pause, and it
    is gone after a reopen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._paused: set[str] = set()
        self._paused_lock = threading.Lock()

    def set_paused(self, c: sqlite3.Connection, params: SetPaused) -> bool:
        queue, paused = params.queue, params.paused
        with self._paused_lock:
            changed = (queue in self._paused) != paused
            if paused:
                self._paused.add(queue)
            else:
                self._paused.discard(queue)
        return changed

    def is_paused(self, c: sqlite3.Connection, queue: str) -> bool:
        with self._paused_lock:
            return queue in self._paused

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        queue = params.queue
        if self.is_paused(c, queue):
            return []
        return super().claim(c, params)


class BatchClaimIgnoresPauseDriver(SqliteDriver):
    """Honours a pause in the one-job claim only: ``claim_batch``'s statement was
    written without the pause check, so a paused queue still hands out batches."""

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        queue, limit = params.queue, params.limit
        if limit == 1 or not self.is_paused(c, queue):
            return super().claim(c, params)
        # The batch statement "without the check": lift the pause around it.
        self.set_paused(c, SetPaused(queue, False))
        try:
            return super().claim(c, params)
        finally:
            self.set_paused(c, SetPaused(queue, True))


# -- a purge that forgets the queue -------------------------------------------------------

PURGE_DEAD_IDS_ANY_QUEUE = f"""
DELETE FROM {DEAD} WHERE id IN (SELECT value FROM json_each(:ids))
   AND (:died_before IS NULL OR died_at < :died_before)
"""


class PurgeIgnoresQueueDriver(SqliteDriver):
    """Purges named dead jobs by id alone: ids are global, so a dead job of another
    queue named by mistake is deleted too."""

    def purge_dead_jobs(self, c: sqlite3.Connection, params: PurgeDeadJobs) -> int:
        ids, died_before = params.ids, params.died_before
        if ids is None:
            return super().purge_dead_jobs(c, params)
        named = {"ids": json.dumps(list(ids)), "died_before": died_before}
        return c.execute(PURGE_DEAD_IDS_ANY_QUEUE, named).rowcount


# -- pages by offset -------------------------------------------------------------------------

EVERY_ROW = 2**62


class OffsetPagesDriver(SqliteDriver):
    """Pages with OFFSET: the cursor a page ends at stands for how many jobs were
    before it then. Alone that is the keyset page; once jobs behind the reader are
    finished between two pages, the next page starts too far in and skips jobs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._offsets: dict[tuple[str, JobState | None, int], int] = {}
        self._offsets_lock = threading.Lock()

    def list_jobs(self, c: sqlite3.Connection, params: ListJobs) -> list[Job]:
        queue, state, after_id, limit = params.queue, params.state, params.after_id, params.limit
        every = super().list_jobs(c, ListJobs(queue, state, 0, EVERY_ROW))
        with self._offsets_lock:
            offset = self._offsets.get((queue, state, after_id))
            if offset is None:  # a cursor this engine did not hand out
                offset = sum(1 for job in every if job.id <= after_id)
            page = every[offset : offset + limit]
            if page:
                self._offsets[(queue, state, page[-1].id)] = offset + len(page)
        return page


# -- newest first, oldest first ----------------------------------------------------------------


class NewestPagesAscendingDriver(SqliteDriver):
    """Reads ``before_id`` as a bound only: a newest-first page is the *oldest* jobs
    below the cursor, in id order, as if the listing had no direction."""

    def list_jobs(self, c: sqlite3.Connection, params: ListJobs) -> list[Job]:
        if params.before_id is None:
            return super().list_jobs(c, params)
        every = super().list_jobs(
            c, ListJobs(params.queue, params.state, params.after_id, EVERY_ROW)
        )
        return [job for job in every if job.id < params.before_id][: params.limit]


# -- a history that forgets the final failure --------------------------------------------------


class BuryForgetsErrorDriver(SqliteDriver):
    """Appends to the error history on retry only: the failure that killed a job (its
    ``fail`` error, or the retry that found the budget spent) is never recorded."""

    def bury(self, c: sqlite3.Connection, params: Bury) -> bool:
        job_id = params.job_id
        attempt = params.attempt
        now = params.now
        last_error = params.last_error
        return super().bury(c, Bury(job_id, attempt, now, last_error, None))
