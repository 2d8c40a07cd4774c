"""The dependencies profile's statements (contract 1.2 §18): the enqueue of jobs that
wait for others, and the cancel and expiry of waiting jobs.

The release and the dead-letter cascade belong to no method: migration 13's triggers
run them inside the very statement that acks, completes, buries or cancels a job with
dependents (``alkstore_release_dependents``, ``alkstore_dead_bury_dependents``), on
every path, in the store's transactions and an attached caller's alike. Two
completions committed at once serialise on the waiting row's lock, and the second
counts from the first's result, so neither leaves it waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from alkstore.driver import queue_topic
from alkstore.options import JobStamps
from alkstore.params import Cancel, GetJob, InsertAfter, RedriveDependents, Sweep
from alkstore.values import JobState

from .binding import by_name
from .columns import MOVED, STAMP_COLUMNS, STAMP_PARAMETERS
from .handle import PgHandle, begin_transaction, execute
from .statements import REDRIVEN_STAMPS, render

WAITS_FOR: Final = """
SELECT depends_on FROM {schema}.alkstore_job_dependencies
WHERE job_id = %(job_id)s ORDER BY depends_on
"""
"""The jobs ``job_id`` still waits for (``alkstore_job_dependencies_dependent``)."""

WAITED_BY: Final = """
SELECT job_id FROM {schema}.alkstore_job_dependencies
WHERE depends_on = %(job_id)s ORDER BY job_id
"""
"""The waiting jobs that still wait for ``job_id`` (the edges' primary key)."""

LOOK_UP: Final = """
SELECT id, 'live' FROM (
    SELECT id FROM {schema}.alkstore_jobs WHERE id = ANY(%(ids)s::bigint[])
    ORDER BY id FOR NO KEY UPDATE) AS live
UNION ALL
SELECT id, 'live' FROM (
    SELECT id FROM {schema}.alkstore_waiting_jobs WHERE id = ANY(%(ids)s::bigint[])
    ORDER BY id FOR NO KEY UPDATE) AS waiting
UNION ALL
SELECT id, 'dead' FROM {schema}.alkstore_dead_jobs WHERE id = ANY(%(ids)s::bigint[])
UNION ALL
SELECT id, 'completed' FROM {schema}.alkstore_completed_jobs WHERE id = ANY(%(ids)s::bigint[])
"""
"""Where each id is; the live and waiting ones locked (in id order, live table first,
as every enqueue locks them) until the enqueue commits, so none finishes unseen."""

MARK: Final = """
WITH live AS (
    UPDATE {schema}.alkstore_jobs SET has_dependents = true
    WHERE id = ANY(%(ids)s::bigint[]) AND NOT has_dependents
)
UPDATE {schema}.alkstore_waiting_jobs SET has_dependents = true
WHERE id = ANY(%(ids)s::bigint[]) AND NOT has_dependents
"""

INSERT_WAITING: Final = f"""
WITH inserted AS (
    INSERT INTO {{schema}}.alkstore_waiting_jobs (
        id, payload, {STAMP_COLUMNS}, finishes, waiting_on)
    SELECT nextval(pg_get_serial_sequence('{{schema}}.alkstore_jobs', 'id')),
           job.payload, {STAMP_PARAMETERS}, %(finishes)s, cardinality(%(after)s::bigint[])
    FROM unnest(%(payloads)s::text[]) WITH ORDINALITY AS job (payload, position)
    ORDER BY job.position
    RETURNING id
), edges AS (
    INSERT INTO {{schema}}.alkstore_job_dependencies (depends_on, job_id)
    SELECT dependency, inserted.id
    FROM inserted, unnest(%(after)s::bigint[]) AS dependency
)
SELECT id FROM inserted ORDER BY id
"""
"""The waiting rows, ids from the live table's identity in payload order, and their
edges to the live jobs ``after``."""

CANCEL_WAITING: Final = """
WITH gone AS (
    DELETE FROM {schema}.alkstore_waiting_jobs WHERE id = %(job_id)s AND queue = %(queue)s
    RETURNING id, has_dependents
), edges AS (
    DELETE FROM {schema}.alkstore_job_dependencies WHERE job_id IN (SELECT id FROM gone)
)
SELECT has_dependents FROM gone
"""

BURY_CANCELLED_DEPENDENTS: Final = """
SELECT {schema}.alkstore_bury_dependents(
    %(job_id)s, 'dependency ' || %(job_id)s || ' was cancelled', %(now)s)
"""

BURY_EXPIRED_WAITING: Final = f"""
WITH gone AS (
    DELETE FROM {{schema}}.alkstore_waiting_jobs
    WHERE queue = %(queue)s AND expires_at <= %(now)s
    RETURNING *
), edges AS (
    DELETE FROM {{schema}}.alkstore_job_dependencies WHERE job_id IN (SELECT id FROM gone)
)
INSERT INTO {{schema}}.alkstore_dead_jobs ({MOVED}, errors, has_dependents, last_error, died_at)
SELECT {MOVED}, errors, has_dependents, 'expired', %(now)s FROM gone ORDER BY id
"""
"""Waiting jobs past their expiry, to dead (the dead table's trigger buries theirs)."""


# -- a redrive's dependents (contract 1.2 §18.4, migration 18's kept edges) -----------

REDRIVEN_FROM: Final = """
SELECT id, redriven_from FROM {schema}.alkstore_jobs
WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id
"""
"""The jobs ``ids`` just made by a redrive, each with the dead job it replaces."""

MOVE_KEPT_EDGES: Final = """
WITH moved AS (
    UPDATE {schema}.alkstore_dead_dependencies AS kept SET depends_on = made.new
    FROM unnest(%(new)s::bigint[], %(old)s::bigint[]) AS made (new, old)
    WHERE kept.depends_on = made.old
    RETURNING kept.job_id
)
SELECT dead.id FROM {schema}.alkstore_dead_jobs AS dead
WHERE dead.id IN (SELECT job_id FROM moved)
ORDER BY dead.id
FOR UPDATE OF dead
"""
"""The kept edges to each dead job ``old`` now point to its new job ``new``, and the
dead rows they belong to are locked until the commit, in id order.

The lock is what makes two redrives at once act as one after the other (§18.4):
each reads its dependents' kept edges (``REVIVABLE``, a later statement, so a later
snapshot) only once no other redrive that moved one of them is still open. Without
it, two redrives of a dependent's two dead dependencies each see the other's
dependency still dead, and the dependent stays dead with both edges moved."""

TAKE_KEPT_EDGES: Final = """
DELETE FROM {schema}.alkstore_dead_dependencies WHERE job_id = %(old)s
RETURNING depends_on
"""
"""The dead job ``old``'s own kept edges, gone with its dead row."""

MAKE_WAITING: Final = f"""
WITH moved AS (
    DELETE FROM {{schema}}.alkstore_jobs WHERE id = %(id)s RETURNING *
), waiting AS (
    INSERT INTO {{schema}}.alkstore_waiting_jobs (
        {MOVED}, errors, has_dependents, finishes, waiting_on)
    SELECT {MOVED}, errors, has_dependents, false, cardinality(%(after)s::bigint[])
    FROM moved
)
INSERT INTO {{schema}}.alkstore_job_dependencies (depends_on, job_id)
SELECT dependency, %(id)s FROM unnest(%(after)s::bigint[]) AS dependency
"""
"""The new pending row ``id`` (not yet depended on) moved to the waiting table, with
its edges to the live jobs ``after``."""

_LIVE = """(EXISTS (SELECT FROM {schema}.alkstore_jobs WHERE id = kept.depends_on)
        OR EXISTS (SELECT FROM {schema}.alkstore_waiting_jobs WHERE id = kept.depends_on))"""

REVIVABLE: Final = f"""
SELECT DISTINCT edge.job_id FROM {{schema}}.alkstore_dead_dependencies AS edge
JOIN {{schema}}.alkstore_dead_jobs AS dead ON dead.id = edge.job_id
WHERE edge.depends_on = ANY(%(ids)s::bigint[]) AND NOT EXISTS (
    SELECT FROM {{schema}}.alkstore_dead_dependencies AS kept
    WHERE kept.job_id = edge.job_id AND NOT {_LIVE})
ORDER BY edge.job_id
"""
"""The dead jobs with a kept edge to one of ``ids`` whose every kept edge names a live
or waiting job."""

REDRIVE_REVIVED: Final = f"""
WITH gone AS (
    DELETE FROM {{schema}}.alkstore_dead_jobs WHERE id = ANY(%(ids)s::bigint[])
    RETURNING *
), inserted AS (
    INSERT INTO {{schema}}.alkstore_jobs (payload, {STAMP_COLUMNS}, redriven_from)
    SELECT dead.payload, {REDRIVEN_STAMPS}, dead.id FROM gone AS dead ORDER BY dead.id
    RETURNING id
)
SELECT id FROM inserted ORDER BY id
"""
"""The dead rows ``ids`` (of any queue; a second redrive of one waits on its lock and
then finds it gone) made new pending rows, as a redrive makes them."""


@dataclass(frozen=True, slots=True)
class DependencySql:
    waits_for: bytes
    waited_by: bytes
    look_up: bytes
    mark: bytes
    insert_waiting: bytes
    cancel_waiting: bytes
    bury_cancelled_dependents: bytes
    bury_expired_waiting: bytes
    redriven_from: bytes
    move_kept_edges: bytes
    take_kept_edges: bytes
    make_waiting: bytes
    revivable: bytes
    redrive_revived: bytes

    @classmethod
    def for_schema(cls, schema: str) -> DependencySql:
        return cls(
            waits_for=render(WAITS_FOR, schema),
            waited_by=render(WAITED_BY, schema),
            look_up=render(LOOK_UP, schema),
            mark=render(MARK, schema),
            insert_waiting=render(INSERT_WAITING, schema),
            cancel_waiting=render(CANCEL_WAITING, schema),
            bury_cancelled_dependents=render(BURY_CANCELLED_DEPENDENTS, schema),
            bury_expired_waiting=render(BURY_EXPIRED_WAITING, schema),
            redriven_from=render(REDRIVEN_FROM, schema),
            move_kept_edges=render(MOVE_KEPT_EDGES, schema),
            take_kept_edges=render(TAKE_KEPT_EDGES, schema),
            make_waiting=render(MAKE_WAITING, schema),
            revivable=render(REVIVABLE, schema),
            redrive_revived=render(REDRIVE_REVIVED, schema),
        )


class DependencyStatements:
    """Mixed into ``PostgresDriver``."""

    schema: str
    _deps_sql: DependencySql | None = None

    def insert_jobs(self, c: PgHandle, stamps: JobStamps, payloads: Sequence[str]) -> list[int]:
        raise NotImplementedError  # PostgresDriver's

    @property
    def _deps(self) -> DependencySql:
        if self._deps_sql is None:
            self._deps_sql = DependencySql.for_schema(self.schema)
        return self._deps_sql

    def job_edges(self, c: PgHandle, params: GetJob) -> tuple[list[int], list[int]]:
        bound = {"job_id": params.job_id}
        waits_for = [row[0] for row in execute(c, self._deps.waits_for, bound).fetchall()]
        waited_by = [row[0] for row in execute(c, self._deps.waited_by, bound).fetchall()]
        return waits_for, waited_by

    def insert_after_jobs(
        self, c: PgHandle, params: InsertAfter
    ) -> tuple[list[int], dict[int, JobState | None]]:
        begin_transaction(c)  # the locks taken by the look-up last until the commit
        after = sorted(params.after)
        found: dict[int, str] = {}
        for _ in range(2):
            # A job that moved between tables while the look-up waited for its lock
            # (acked, released) is read again, in a later snapshot.
            found = dict(execute(c, self._deps.look_up, {"ids": after}).fetchall())
            if len(found) == len(after):
                break
        finished = ("live", "completed", "dead") if params.finished else ("live", "completed")
        blocked: dict[int, JobState | None] = {
            i: (JobState.DEAD if found.get(i) == "dead" else None)
            for i in after
            if found.get(i) not in finished
        }
        if blocked:
            return [], blocked
        live = [i for i in after if found[i] == "live"]
        if not live:
            return self.insert_jobs(c, params.stamps, params.payloads), {}
        execute(c, self._deps.mark, {"ids": live})
        bound = by_name(
            params.stamps, payloads=list(params.payloads), after=live, finishes=params.finished
        )
        rows = execute(c, self._deps.insert_waiting, bound).fetchall()
        c.announced.add(queue_topic(params.stamps.queue))
        return [row[0] for row in rows], {}

    def _look_up_locked(self, c: PgHandle, ids: list[int]) -> dict[int, str]:
        """Where each of ``ids`` is, the live and waiting ones locked until the commit."""
        found: dict[int, str] = {}
        for _ in range(2):
            # A job that moved between tables while the look-up waited for its lock
            # (acked, released) is read again, in a later snapshot.
            found = dict(execute(c, self._deps.look_up, {"ids": ids}).fetchall())
            if len(found) == len(ids):
                break
        return found

    def redrive_dependents(self, c: PgHandle, params: RedriveDependents) -> list[int]:
        deps = self._deps
        made = execute(c, deps.redriven_from, {"ids": list(params.job_ids)}).fetchall()
        moves = {"new": [new for new, _ in made], "old": [old for _, old in made]}
        execute(c, deps.move_kept_edges, moves)
        # Every new job moves to waiting before any is marked depended on: a marked
        # row leaving the live table would count as a completion.
        depended_on: set[int] = set()
        for new, old in made:
            kept = sorted(row[0] for row in execute(c, deps.take_kept_edges, {"old": old}))
            if not kept:
                continue
            found = self._look_up_locked(c, kept)  # none finishes unseen until the commit
            live = [i for i in kept if found.get(i) == "live"]
            if live:
                execute(c, deps.make_waiting, {"id": new, "after": live})
                depended_on.update(live)
        if depended_on:
            execute(c, deps.mark, {"ids": sorted(depended_on)})
        revivable = [row[0] for row in execute(c, deps.revivable, {"ids": moves["new"]})]
        if not revivable:
            return []
        bound = {"ids": revivable, "now": params.now}
        return [row[0] for row in execute(c, deps.redrive_revived, bound).fetchall()]

    def _cancel_waiting(self, c: PgHandle, params: Cancel) -> bool:
        begin_transaction(c)
        bound: dict[str, Any] = {"job_id": params.job_id, "queue": params.queue}
        rows = execute(c, self._deps.cancel_waiting, bound).fetchall()
        if not rows:
            return False
        if rows[0][0]:
            execute(c, self._deps.bury_cancelled_dependents, {**bound, "now": params.now})
        return True

    def _bury_expired_waiting(self, c: PgHandle, params: Sweep) -> int:
        bound = {"queue": params.queue, "now": params.now}
        return execute(c, self._deps.bury_expired_waiting, bound).rowcount
