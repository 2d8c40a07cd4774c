"""Broken many-claims retries (contract §3.11): a ``tx.retry_all`` whose statement
checks each claim's attempt but not its deadline, and one that commits each retry
on its own.

The reference SQLite driver has no ``reschedule_claims`` (the core writes each
retry with ``reschedule``); these add the one an engine might write, with its bug.
"""

from __future__ import annotations

import sqlite3

from alkstore.params import Reschedule, RescheduleClaims
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import JOBS

from .blind_spots import commit_and_continue


def _claims(params: RescheduleClaims) -> list[tuple[int, int, int, str]]:
    return list(zip(params.job_ids, params.attempts, params.run_ats, params.errors, strict=True))


class RetryAllIgnoresDeadlineDriver(SqliteDriver):
    """``tx.retry_all``'s statement guards each claim by its id and attempt only: a claim
    whose deadline passed while its retry waited in a worker's group is put back
    anyway, though another worker may be about to claim the job again."""

    def reschedule_claims(self, c: sqlite3.Connection, params: RescheduleClaims) -> list[int]:
        rescheduled: list[int] = []
        for job_id, attempt, run_at, error in _claims(params):
            row = c.execute(
                f"SELECT deadline FROM {JOBS} WHERE id = ? AND attempts = ? "
                "AND state = 'processing'",
                (job_id, attempt),
            ).fetchone()
            if row is None:
                continue
            # The bug: "now" is taken as just inside the claim's deadline.
            now = min(params.now, row[0] - 1)
            if self.reschedule(c, Reschedule(job_id, attempt, now, run_at, error)):
                rescheduled.append(job_id)
        return rescheduled


class RetryAllCommitsEachDriver(SqliteDriver):
    """``tx.retry_all``'s retries written one claim at a time, each committed as soon as
    it is written: a crash part way through the caller's transaction keeps the retries
    written so far (and its business writes before them) and loses the rest of it."""

    def reschedule_claims(self, c: sqlite3.Connection, params: RescheduleClaims) -> list[int]:
        rescheduled: list[int] = []
        for job_id, attempt, run_at, error in _claims(params):
            if self.reschedule(c, Reschedule(job_id, attempt, params.now, run_at, error)):
                rescheduled.append(job_id)
            if c.in_transaction:
                commit_and_continue(c)
        return rescheduled
