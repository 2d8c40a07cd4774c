"""Engines a careless suite would hang on (contract §10.7): each gives a wait that
never ends, and the kit must report a ``fail`` rather than never report at all.

One is a statement (a listing whose cursor the SQLite driver ignores, so its pages
never end), caught by the suite's bounded pager; the other is the core's waiting
loop handed no deadline, caught only by the kit's per-test time budget.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import Any

from alkstore.api import JobHandle
from alkstore.core import CoreStore
from alkstore.core.claiming import claim_waiting
from alkstore.core.queues import CoreQueue
from alkstore.core.waiting import Deadline
from alkstore.names import validate_identifier
from alkstore.options import QueueOpts, check_type
from alkstore.params import ListJobs
from alkstore.stop import StopToken
from alkstore.timeconv import Duration
from alkstore.values import Job
from alkstore_sqlite import SqliteDriver


class CursorIgnoredDriver(SqliteDriver):
    """``jobs(after_id=...)`` always lists from the queue's first job: every page
    after the first repeats it, so a reader waiting for an empty page waits forever."""

    def list_jobs(self, c: sqlite3.Connection, params: ListJobs) -> list[Job]:
        return super().list_jobs(c, replace(params, after_id=0))


class _DeadlineDroppedQueue(CoreQueue):
    def claim_wait(
        self,
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> JobHandle | None:
        validate_identifier(worker_id, "worker_id")
        if stop is not None:
            check_type(stop, StopToken, "stop")
        # The timeout is accepted and dropped: only work or the stop token end the wait.
        return claim_waiting(self._context, (self,), worker_id, Deadline(None), stop)


class TimeoutIgnoredStore(CoreStore):
    """``queue.claim_wait`` waits for work or its stop token only: on an empty queue
    without a stop token it never returns."""

    def queue(self, name: str, opts: QueueOpts | None = None) -> Any:
        core = super().queue(name, opts)
        return _DeadlineDroppedQueue(core._context, core.name, core.opts)
