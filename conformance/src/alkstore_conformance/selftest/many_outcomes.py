"""Broken many-claims retries and fails (contract §3.11): a ``tx.retry_all`` or
``tx.fail_all`` whose statement checks each claim's attempt but not its deadline,
and a ``tx.retry_all`` that commits each retry on its own.

The reference SQLite driver has no ``reschedule_claims`` nor ``bury_claims`` (the
core writes each with ``reschedule`` or ``bury``); these add the one an engine might
write, with its bug.
"""

from __future__ import annotations

import sqlite3

from alkstore.params import Bury, BuryClaims, Reschedule, RescheduleClaims
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import JOBS

from .blind_spots import commit_and_continue


def _claims(params: RescheduleClaims) -> list[tuple[int, int, int, str]]:
    return list(zip(params.job_ids, params.attempts, params.run_ats, params.errors, strict=True))


def _inside_the_deadline(c: sqlite3.Connection, job_id: int, attempt: int, now: int) -> int | None:
    """The bug both deadline mutants share: ``now``, or just inside the claim's
    deadline if that has passed, for a claim still processing on ``attempt``
    (``None`` for any other): the guard then holds for a lapsed claim."""
    row = c.execute(
        f"SELECT deadline FROM {JOBS} WHERE id = ? AND attempts = ? AND state = 'processing'",
        (job_id, attempt),
    ).fetchone()
    return None if row is None else min(now, row[0] - 1)


class RetryAllIgnoresDeadlineDriver(SqliteDriver):
    """``tx.retry_all``'s statement guards each claim by its id and attempt only: a claim
    whose deadline passed while its retry waited in a worker's group is put back
    anyway, though another worker may be about to claim the job again."""

    def reschedule_claims(self, c: sqlite3.Connection, params: RescheduleClaims) -> list[int]:
        rescheduled: list[int] = []
        for job_id, attempt, run_at, error in _claims(params):
            now = _inside_the_deadline(c, job_id, attempt, params.now)
            if now is None:
                continue
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


class FailAllIgnoresDeadlineDriver(SqliteDriver):
    """``tx.fail_all``'s statement guards each claim by its id and attempt only: a claim
    whose deadline passed while its fail waited in a worker's group is dead-lettered
    anyway."""

    def bury_claims(self, c: sqlite3.Connection, params: BuryClaims) -> list[int]:
        buried: list[int] = []
        claims = zip(
            params.job_ids, params.attempts, params.last_errors, params.errors, strict=True
        )
        for job_id, attempt, last_error, error in claims:
            now = _inside_the_deadline(c, job_id, attempt, params.now)
            if now is None:
                continue
            if self.bury(c, Bury(job_id, attempt, now, last_error, error)):
                buried.append(job_id)
        return buried
