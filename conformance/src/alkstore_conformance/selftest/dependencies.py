"""Broken job dependencies (contract 1.2 §18): a dependent released by the first of its
dependencies' acks, one released in a commit of its own after the ack's, the
dependents of a dead or cancelled job left waiting for ever, those left dead by a
redrive of the job they died for, those two redrives at once leave dead, each
deciding from a read that misses the other's, and a fan-in callback a claim's own
move of its last member made pending, left by that claim.

Each is a bug a hand-rolled workflow table shows: a flag flipped on "a parent
finished" rather than a count of the parents still running; a "promote the ready
children" step run after the ack rather than in it, so a crash (or a rolled-back
transaction) between the two is a child that never runs, or one that runs though its
parent's ack was undone; a failure path that forgets the children; a fan-in that
treats a failed member as a failed parent; a revival read from a snapshot without a
lock on the rows it decides on.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar, cast

from alkstore.params import (
    Cancel,
    Claim,
    ClaimRef,
    Complete,
    GetJob,
    InsertAfter,
    Redrive,
    RedriveDependents,
)
from alkstore.values import Job, JobState
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite import statements as sql
from alkstore_sqlite.migrations import (
    BURY_DEPENDENTS_TRIGGER,
    DEPENDENCIES,
    JOBS,
    KEPT_COLUMNS,
    KEPT_EDGES,
    RELEASE_TRIGGER,
    WAITING,
)
from alkstore_sqlite.options import SqliteOptions

from .blind_spots import commit_and_let_others_write

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


class ClaimBeforeBuryDriver(SqliteDriver):
    """A claim chooses its rows before it moves its queue's exhausted claims to dead (as
    one statement whose single snapshot predates its own move would): a fan-in callback
    that move made pending is left for the next claim, behind a job of lower priority."""

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        deferred = _BuryDeferred(c)
        jobs = super().claim(cast(sqlite3.Connection, deferred), params)  # duck-typed
        for parameters in deferred.buries:
            c.execute(sql.BURY_EXHAUSTED, parameters)
        return jobs


class _BuryDeferred:
    """``c``, but ``BURY_EXHAUSTED`` is put off (its parameters kept in ``buries``)."""

    def __init__(self, c: sqlite3.Connection) -> None:
        self._c = c
        self.buries: list[Any] = []

    def execute(self, statement: str, parameters: Any = ()) -> sqlite3.Cursor:
        if statement is sql.BURY_EXHAUSTED:
            self.buries.append(parameters)
            return self._c.execute("SELECT 0")
        return self._c.execute(statement, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)


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


# -- a revival decided from a read older than the other redrives' commits ----------------

REVIVAL_READ_TO_WRITE_S = 0.2
"""How long the stale-revival mutant waits between its read of the kept edges and its
redrive: long enough for a redrive started at the same moment to read them too."""
READ_KEPT_EDGES = f"SELECT job_id, depends_on FROM {KEPT_EDGES}"
READ_LIVE = f"""
SELECT id FROM {JOBS} WHERE id IN (SELECT value FROM json_each(:ids))
UNION SELECT id FROM {WAITING} WHERE id IN (SELECT value FROM json_each(:ids))
"""


class StaleRevivalDriver(SqliteDriver):
    """Reads the kept edges when a redrive starts, in a transaction of its own, and
    decides from that read which dead dependents come back. What a snapshot read
    without the dependent's lock does: two redrives at once of a dependent's two dead
    dependencies each still see the other's edge to a dead job, so the dependent stays
    dead with both its edges moved to live jobs. One redrive at a time is right."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._redrive_state = threading.local()

    def redrive(self, c: sqlite3.Connection, params: Redrive) -> list[int]:
        kept: dict[int, set[int]] = {}
        for job_id, depends_on in c.execute(READ_KEPT_EDGES):
            kept.setdefault(job_id, set()).add(depends_on)
        self._redrive_state.kept, self._redrive_state.redriven = kept, set()
        # The read's transaction ends here; the redrive runs in a fresh one.
        commit_and_let_others_write(self, c, REVIVAL_READ_TO_WRITE_S)
        return super().redrive(c, params)

    def redrive_dependents(self, c: sqlite3.Connection, params: RedriveDependents) -> list[int]:
        state = self._redrive_state
        made = {"ids": json.dumps(list(params.job_ids))}
        state.redriven.update(old for _, old in c.execute(sql.REDRIVEN_FROM, made))
        stale = _StaleRevivable(c, state.kept, state.redriven)
        return super().redrive_dependents(cast(sqlite3.Connection, stale), params)  # duck-typed


class _StaleRevivable:
    """``c``, but ``REVIVABLE`` keeps only the dependents whose kept edges *as read when
    the redrive started* all name a job redriven by it or one live now."""

    def __init__(self, c: sqlite3.Connection, kept: dict[int, set[int]], redriven: set[int]):
        self._c, self._kept, self._redriven = c, kept, redriven

    def execute(self, statement: str, parameters: Any = ()) -> Iterable[Any]:
        if statement is not sql.REVIVABLE:
            return self._c.execute(statement, parameters)
        rows = self._c.execute(statement, parameters).fetchall()
        return [row for row in rows if self._revivable_then(row[0])]

    def _revivable_then(self, dependent: int) -> bool:
        others = sorted(self._kept.get(dependent, set()) - self._redriven)
        live = {row[0] for row in self._c.execute(READ_LIVE, {"ids": json.dumps(others)})}
        return live == set(others)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)
