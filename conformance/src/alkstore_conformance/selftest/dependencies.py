"""Broken job dependencies (contract 1.2 §18): a dependent released by the first of its
dependencies' acks, one released in a commit of its own after the ack's, the
dependents of a dead or cancelled job left waiting for ever, and those left dead by a
redrive of the job they died for.

Each is a bug a hand-rolled workflow table shows: a flag flipped on "a parent
finished" rather than a count of the parents still running; a "promote the ready
children" step run after the ack rather than in it, so a crash (or a rolled-back
transaction) between the two is a child that never runs, or one that runs though its
parent's ack was undone; a failure path that forgets the children; a fan-in that
treats a failed member as a failed parent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from alkstore.params import Cancel, ClaimRef, Complete, GetJob, InsertAfter, RedriveDependents
from alkstore.values import JobState
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite import statements as sql
from alkstore_sqlite.migrations import (
    BURY_DEPENDENTS_TRIGGER,
    DEPENDENCIES,
    JOBS,
    KEPT_COLUMNS,
    RELEASE_TRIGGER,
    WAITING,
)
from alkstore_sqlite.options import SqliteOptions

T = TypeVar("T")

_DEPENDENTS = f"(SELECT job_id FROM {DEPENDENCIES} WHERE depends_on = :id)"

_RELEASE = (
    f"UPDATE {WAITING} SET waiting_on = waiting_on - 1 WHERE id IN {_DEPENDENTS}",
    f"""INSERT INTO {JOBS} ({KEPT_COLUMNS}, state, has_dependents)
    SELECT {KEPT_COLUMNS}, 'pending', has_dependents FROM {WAITING}
     WHERE waiting_on = 0 AND id IN {_DEPENDENTS}""",
    f"DELETE FROM {WAITING} WHERE waiting_on = 0 AND id IN {_DEPENDENTS}",
    f"DELETE FROM {DEPENDENCIES} WHERE depends_on = :id",
)
"""The release trigger's program, as statements of their own (``:id`` the acked job)."""


class ReleaseOnFirstAckDriver(SqliteDriver):
    """Every ack of a job with dependents releases them all: a flag ("a dependency
    finished") where a count of the dependencies still running belongs."""

    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        c.execute(
            f"UPDATE {WAITING} SET waiting_on = 1 WHERE id IN {_DEPENDENTS}",
            {"id": params.job_id},
        )
        return super().ack(c, params)


class ReleaseInOwnCommitDriver(SqliteDriver):
    """The release is no trigger of the ack: the acks of jobs with dependents are noted,
    and their dependents released by a write of its own before the next unit, after the
    ack committed (or was rolled back with the caller's transaction)."""

    def __init__(self, path: str, options: SqliteOptions, **kwargs: Any) -> None:
        super().__init__(path, options, **kwargs)
        self._noted: list[int] = []
        super().write(lambda c: c.execute(f"DROP TRIGGER IF EXISTS {RELEASE_TRIGGER}"))

    def write(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        while self._noted:
            job_id = self._noted.pop()
            super().write(lambda c, job_id=job_id: _release(c, job_id))  # type: ignore[misc]
        return super().write(work, wait_s=wait_s)

    def _note(self, c: sqlite3.Connection, job_id: int) -> None:
        row = c.execute(f"SELECT has_dependents FROM {JOBS} WHERE id = ?", (job_id,)).fetchone()
        if row is not None and row[0]:
            self._noted.append(job_id)

    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        self._note(c, params.job_id)
        return super().ack(c, params)

    def complete(self, c: sqlite3.Connection, params: Complete) -> bool:
        self._note(c, params.job_id)
        return super().complete(c, params)


def _release(c: sqlite3.Connection, job_id: int) -> None:
    for statement in _RELEASE:
        c.execute(statement, {"id": job_id})


class DeadDependencyLeavesWaitingDriver(SqliteDriver):
    """A dependency's move to dead or its cancel forgets its dependents: they wait for
    a job that will never complete, for ever."""

    def __init__(self, path: str, options: SqliteOptions, **kwargs: Any) -> None:
        super().__init__(path, options, **kwargs)
        super().write(lambda c: c.execute(f"DROP TRIGGER IF EXISTS {BURY_DEPENDENTS_TRIGGER}"))

    def cancel(self, c: sqlite3.Connection, params: Cancel) -> bool:
        named = {"id": params.job_id, "queue": params.queue, "now": params.now}
        c.execute(sql.CANCEL_MARK, named)
        if c.execute(sql.CANCEL, named).rowcount == 1:
            return True
        cancelled = False
        for statement in sql.CANCEL_WAITING:
            cancelled = c.execute(statement, named).rowcount == 1
        return cancelled


class FanInAsDependencyDriver(SqliteDriver):
    """``after_finished`` stored as ``after``: a dead or cancelled member dead-letters
    the fan-in callback instead of counting as finished, and a dead member is refused."""

    def insert_after_jobs(
        self, c: sqlite3.Connection, params: InsertAfter
    ) -> tuple[list[int], dict[int, JobState | None]]:
        return super().insert_after_jobs(c, replace(params, finished=False))


class EdgesOneWayDriver(SqliteDriver):
    """``job_edges`` reads the edges one way only (by the waiting job): what a job waits
    for is right, but no job ever shows the jobs waiting for it."""

    def job_edges(self, c: sqlite3.Connection, params: GetJob) -> tuple[list[int], list[int]]:
        waits_for, _ = super().job_edges(c, params)
        return waits_for, []


class RedriveLeavesDependentsDeadDriver(SqliteDriver):
    """A redrive makes its new jobs and nothing more: the jobs that died waiting for a
    redriven dependency stay dead (their kept edges never read), and a redriven
    dependent runs without the dependencies it still had."""

    def redrive_dependents(self, c: sqlite3.Connection, params: RedriveDependents) -> list[int]:
        return []
