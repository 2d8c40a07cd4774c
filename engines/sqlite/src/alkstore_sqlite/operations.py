"""Contract 1.1's operations profile over ``sqlite3``: stats, job pages, redrive,
purging dead jobs, pausing.

Lists of ids and queue names are bound as one JSON array each (read back with
``json_each``), so a statement's text and its number of parameters do not
depend on how many there are. Nothing here needs a wake of its own: every
process's watcher sees any commit (a redrive's, a resume's) and wakes its waiters.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from alkstore.options import Limits
from alkstore.params import ListJobs, PurgeDeadJobs, QueueStatsAt, Redrive, SetLimits, SetPaused
from alkstore.rows import job_from_row
from alkstore.values import Job, JobState, QueueStats

from . import statements as sql
from .handle import begin_transaction


class OperationStatements:
    """``OpsDriver`` for ``SqliteDriver``."""

    def queue_stats(self, c: sqlite3.Connection, params: QueueStatsAt) -> list[QueueStats]:
        queues, now = params.queues, params.now
        if queues is None:
            rows = _cursor(c).execute(sql.QUEUE_STATS_ALL, {"now": now})
        else:
            named = {"queues": json.dumps(list(queues)), "now": now}
            rows = _cursor(c).execute(sql.QUEUE_STATS, named)
        return [_queue_stats(*row) for row in rows]

    def list_jobs(self, c: sqlite3.Connection, params: ListJobs) -> list[Job]:
        state = params.state
        named: dict[str, object] = {
            "queue": params.queue,
            "after": params.after_id,
            "limit": params.limit,
        }
        newest = params.before_id is not None
        if newest:
            named["before"] = params.before_id
        if state is None:
            statement = sql.LIST_JOBS_NEWEST if newest else sql.LIST_JOBS
        elif state is JobState.DEAD:
            statement = sql.LIST_DEAD_JOBS_NEWEST if newest else sql.LIST_DEAD_JOBS
        elif state is JobState.COMPLETED:
            statement = sql.LIST_COMPLETED_JOBS_NEWEST if newest else sql.LIST_COMPLETED_JOBS
        elif state is JobState.PROCESSING:
            statement = sql.LIST_PROCESSING_JOBS_NEWEST if newest else sql.LIST_PROCESSING_JOBS
        elif state is JobState.WAITING:
            statement = sql.LIST_WAITING_JOBS_NEWEST if newest else sql.LIST_WAITING_JOBS
        else:
            statement = sql.LIST_PENDING_JOBS_NEWEST if newest else sql.LIST_PENDING_JOBS
        return [job_from_row(row) for row in _cursor(c).execute(statement, named)]

    def redrive(self, c: sqlite3.Connection, params: Redrive) -> list[int]:
        named: dict[str, object] = {"queue": params.queue, "now": params.now}
        if params.ids is None:
            named["limit"] = params.limit
            statement = sql.REDRIVE_OLDEST
        else:
            ids = list(dict.fromkeys(params.ids))  # a repeated id is redriven once
            named["ids"] = json.dumps(ids)
            statement = sql.REDRIVE_IDS
        # The copies and the removal of their dead rows commit together.
        begin_transaction(c)
        # A live hold that passed no longer keeps a dead job's key from its new life.
        c.execute(sql.GIVE_UP_PASSED_HOLDS, {"queue": params.queue, "now": params.now})
        # RETURNING's row order is SQLite's to choose: order by the dead rows instead.
        replaced = dict(_cursor(c).execute(statement, named).fetchall())
        if not replaced:
            return []
        new_ids = sorted(replaced)  # numbered in insert order, i.e. the dead rows' order
        c.execute(sql.DELETE_DEAD_IDS, {"ids": json.dumps([replaced[n] for n in new_ids])})
        return new_ids

    def purge_dead_jobs(self, c: sqlite3.Connection, params: PurgeDeadJobs) -> int:
        queue, ids, died_before = params.queue, params.ids, params.died_before
        if ids is not None:
            named = {"queue": queue, "ids": json.dumps(list(ids)), "died_before": died_before}
            purged = c.execute(sql.PURGE_DEAD_IDS, named).rowcount
        elif died_before is not None:
            params_before = {"queue": queue, "died_before": died_before}
            purged = c.execute(sql.PURGE_DEAD_BEFORE, params_before).rowcount
        else:
            purged = c.execute(sql.PURGE_DEAD_ALL, {"queue": queue}).rowcount
        if purged:
            c.execute(sql.PRUNE_KEPT_EDGES)  # their kept edges go with them (§18.4)
        return purged

    def set_paused(self, c: sqlite3.Connection, params: SetPaused) -> bool:
        # A resume's commit is its announcement: every process's watcher sees it.
        statement = sql.PAUSE if params.paused else sql.RESUME
        return c.execute(statement, {"queue": params.queue}).rowcount == 1

    def is_paused(self, c: sqlite3.Connection, queue: str) -> bool:
        (paused,) = _cursor(c).execute(sql.IS_PAUSED, {"queue": queue}).fetchone()
        return bool(paused)

    # -- limits (the limits profile) ---------------------------------------------------
    def set_limits(self, c: sqlite3.Connection, params: SetLimits) -> bool:
        # The commit is its announcement: every process's watcher sees it.
        named = {
            "queue": params.queue,
            "concurrency": params.concurrency,
            "rate": params.rate,
            "per_s": params.per_s,
            "concurrency_per_key": params.concurrency_per_key,
            "rate_per_key": params.rate_per_key,
        }
        cleared = (
            params.concurrency is None
            and params.rate is None
            and params.concurrency_per_key is None
            and params.rate_per_key is None
        )
        statement = sql.CLEAR_LIMITS if cleared else sql.SET_LIMITS
        return c.execute(statement, named).rowcount == 1

    def queue_limits(self, c: sqlite3.Connection, queue: str | None) -> dict[str, Limits]:
        if queue is None:
            rows = _cursor(c).execute(sql.ALL_QUEUE_LIMITS).fetchall()
        else:
            rows = _cursor(c).execute(sql.QUEUE_LIMITS, {"queue": queue}).fetchall()
        return {
            name: Limits(
                concurrency,
                rate=rate,
                per=per_s,
                concurrency_per_key=per_key,
                rate_per_key=rate_per_key,
            )
            for name, concurrency, rate, per_s, per_key, rate_per_key in rows
        }


def _queue_stats(
    queue: str,
    ready: int,
    scheduled: int,
    processing: int,
    lapsed: int,
    dead: int,
    oldest_ready_age_s: int | None,
    paused: int,
    completed: int,
    waiting: int,
) -> QueueStats:
    return QueueStats(
        queue=queue,
        ready=ready,
        scheduled=scheduled,
        processing=processing,
        lapsed=lapsed,
        dead=dead,
        oldest_ready_age_s=oldest_ready_age_s,
        paused=bool(paused),
        completed=completed,
        waiting=waiting,
    )


def _cursor(c: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor that returns plain tuples: an attached caller's connection may have
    its own ``row_factory``."""
    cursor = c.cursor()
    cursor.row_factory = None
    return cursor


if TYPE_CHECKING:
    from alkstore.driver import LimitsDriver, OpsDriver

    # Static proof that these methods fill the profiles the engine declares.
    def _conforms(
        o: OperationStatements,
    ) -> tuple[OpsDriver[sqlite3.Connection], LimitsDriver[sqlite3.Connection]]:
        return o, o
