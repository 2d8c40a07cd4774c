"""The dependencies profile's statements (contract 1.2 §18): the enqueue of jobs that
wait for others, the cancel and expiry of waiting jobs.

The release and the dead-letter cascade are no method's: migration 13's triggers run
them inside the very statement that acks, completes or buries a job with dependents,
on every path, in the engine's transactions and a caller's alike.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from alkstore.options import JobStamps
from alkstore.params import Cancel, GetJob, InsertAfter, RedriveDependents, Sweep
from alkstore.values import JobState

from . import statements as sql
from .handle import begin_transaction


class DependencyStatements:
    """Mixed into ``SqliteDriver``."""

    def insert_jobs(
        self, c: sqlite3.Connection, stamps: JobStamps, payloads: Sequence[str]
    ) -> list[int]:
        raise NotImplementedError  # SqliteDriver's

    def job_edges(self, c: sqlite3.Connection, params: GetJob) -> tuple[list[int], list[int]]:
        named = {"job_id": params.job_id}
        waits_for = [row[0] for row in c.execute(sql.JOB_WAITS_FOR, named)]
        waited_by = [row[0] for row in c.execute(sql.JOB_WAITED_BY, named)]
        return waits_for, waited_by

    def insert_after_jobs(
        self, c: sqlite3.Connection, params: InsertAfter
    ) -> tuple[list[int], dict[int, JobState | None]]:
        begin_transaction(c)  # the look-up and the writes are one transaction
        after = list(params.after)
        found = dict(c.execute(sql.DEPENDENCY_STATES, {"ids": json.dumps(after)}).fetchall())
        finished = ("live", "completed", "dead") if params.finished else ("live", "completed")
        blocked: dict[int, JobState | None] = {
            i: (JobState.DEAD if found.get(i) == "dead" else None)
            for i in after
            if found.get(i) not in finished
        }
        if blocked:
            return [], blocked
        ids = self.insert_jobs(c, params.stamps, params.payloads)
        live = [i for i in after if found[i] == "live"]
        if not live:
            return ids, {}
        named: dict[str, Any] = {
            "ids": json.dumps(ids),
            "after": json.dumps(live),
            "count": len(live),
            "finishes": int(params.finished),
        }
        for statement in sql.MARK_DEPENDED_ON:
            c.execute(statement, {"ids": named["after"]})
        for statement in sql.MAKE_WAITING:
            c.execute(statement, named)
        return ids, {}

    def _cancel(self, c: sqlite3.Connection, params: Cancel) -> bool:
        """``cancel`` of a live or waiting job, its dependents dead-lettered."""
        named = {"id": params.job_id, "queue": params.queue, "now": params.now}
        begin_transaction(c)
        c.execute(sql.CANCEL_MARK, named)
        cancelled = c.execute(sql.CANCEL, named).rowcount == 1
        if not cancelled:
            for statement in sql.CANCEL_WAITING:
                cancelled = c.execute(statement, named).rowcount == 1
        if cancelled:
            for statement in sql.BURY_CANCELLED_DEPENDENTS:
                c.execute(statement, named)
        return cancelled

    def _bury_expired_waiting(self, c: sqlite3.Connection, params: Sweep) -> int:
        named = {"queue": params.queue, "now": params.now}
        begin_transaction(c)
        buried = 0
        for statement in sql.BURY_EXPIRED_WAITING:
            count = c.execute(statement, named).rowcount
            if statement.lstrip().startswith("INSERT"):
                buried = count
        return buried

    def redrive_dependents(self, c: sqlite3.Connection, params: RedriveDependents) -> list[int]:
        made = c.execute(sql.REDRIVEN_FROM, {"ids": json.dumps(list(params.job_ids))}).fetchall()
        c.executemany(sql.MOVE_KEPT_EDGES, [{"new": new, "old": old} for new, old in made])
        # Every new job moves to waiting before any is marked depended on: a marked
        # row leaving the live table would count as a completion.
        depended_on: set[int] = set()
        for new, old in made:
            live = [row[0] for row in c.execute(sql.KEPT_LIVE, {"old": old})]
            c.execute(sql.DROP_KEPT_EDGES, {"old": old})
            if not live:
                continue
            named = {
                "ids": json.dumps([new]),
                "after": json.dumps(live),
                "count": len(live),
                "finishes": 0,
            }
            for statement in sql.MAKE_WAITING:
                c.execute(statement, named)
            depended_on.update(live)
        if depended_on:
            for statement in sql.MARK_DEPENDED_ON:
                c.execute(statement, {"ids": json.dumps(sorted(depended_on))})
        ids = json.dumps([new for new, _ in made])
        revivable = [row[0] for row in c.execute(sql.REVIVABLE, {"ids": ids})]
        if not revivable:
            return []
        chosen = {"ids": json.dumps(revivable), "now": params.now}
        revived = sorted(row[0] for row in c.execute(sql.REDRIVE_REVIVED, chosen).fetchall())
        c.execute(sql.DELETE_DEAD_IDS, chosen)
        return revived
