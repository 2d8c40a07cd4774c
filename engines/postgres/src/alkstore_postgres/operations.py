"""The ops profile over psycopg (contract 1.1 §11): queue stats, job pages,
redrive, dead-letter purges and pauses.

Each method is ONE statement on the handle ``c``, so each is atomic even in a
``write`` unit's autocommit: a redrive deletes its dead rows and inserts their
new lives in the same statement (a crash leaves one or the other, never both,
never neither), and a resume NOTIFYs the queue in the statement that deletes
its pause. ``PostgresDriver`` mixes these methods in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from alkstore.driver import job_from_row, queue_topic
from alkstore.values import Job, JobState, QueueStats

from .handle import PgHandle, execute, rowcount
from .listener import notify_payload
from .statements import Statements

_ANY_TIME: Final = 2**63 - 1
"""A ``died_before`` past every ``died_at`` (a bigint): "no age condition"."""


class OpsStatements:
    """``OpsDriver`` for ``PostgresDriver``."""

    # Set by PostgresDriver.__init__.
    _sql: Statements
    channel: str
    """The store's wake channel."""

    def queue_stats(self, c: PgHandle, queues: Sequence[str] | None, now: int) -> list[QueueStats]:
        if queues is None:
            rows = execute(c, self._sql.queue_stats_all, {"now": now})
        else:
            rows = execute(c, self._sql.queue_stats, {"queues": list(queues), "now": now})
        return [_queue_stats(row, now) for row in rows]

    def list_jobs(
        self, c: PgHandle, queue: str, state: JobState | None, after_id: int, limit: int
    ) -> list[Job]:
        params: dict[str, Any] = {"queue": queue, "after_id": after_id, "limit": limit}
        if state is None:
            query = self._sql.list_jobs
        elif state is JobState.DEAD:
            query = self._sql.list_dead_jobs
        else:
            query = self._sql.list_live_jobs
            params["state"] = state.value
        return [job_from_row(row) for row in execute(c, query, params)]

    def redrive(
        self, c: PgHandle, queue: str, ids: Sequence[int] | None, limit: int, now: int
    ) -> list[int]:
        topic = queue_topic(queue)
        params: dict[str, Any] = {
            "queue": queue,
            "now": now,
            "channel": self.channel,
            "topic": None if topic in c.announced else notify_payload(topic),
        }
        if ids is None:
            params["limit"] = limit
            query = self._sql.redrive_oldest
        else:
            params["ids"] = list(dict.fromkeys(ids))  # a repeated id is redriven once
            query = self._sql.redrive_named
        new_ids = [row[0] for row in execute(c, query, params)]
        if new_ids:
            c.announced.add(topic)
        return new_ids

    def purge_dead_jobs(
        self,
        c: PgHandle,
        queue: str,
        ids: Sequence[int] | None,
        died_before: int | None,
        now: int,
    ) -> int:
        params: dict[str, Any] = {
            "queue": queue,
            "died_before": _ANY_TIME if died_before is None else died_before,
        }
        if ids is None:
            return rowcount(c, self._sql.purge_dead_before, params)
        params["ids"] = sorted(set(ids))
        return rowcount(c, self._sql.purge_dead_named, params)

    def set_paused(self, c: PgHandle, queue: str, paused: bool) -> bool:
        if paused:
            return rowcount(c, self._sql.pause, {"queue": queue}) == 1
        topic = queue_topic(queue)
        params = {"queue": queue, "channel": self.channel, "topic": notify_payload(topic)}
        resumed = execute(c, self._sql.resume, params).fetchone() is not None
        if resumed:
            c.announced.add(topic)  # the statement announced the queue
        return resumed

    def is_paused(self, c: PgHandle, queue: str) -> bool:
        row = execute(c, self._sql.is_paused, {"queue": queue}).fetchone()
        return bool(row is not None and row[0])


def _queue_stats(row: Sequence[Any], now: int) -> QueueStats:
    queue, ready, scheduled, oldest_ready_at, processing, lapsed, dead, paused = row
    return QueueStats(
        queue=queue,
        ready=ready,
        scheduled=scheduled,
        processing=processing,
        lapsed=lapsed,
        dead=dead,
        oldest_ready_age_s=None if oldest_ready_at is None else now - oldest_ready_at,
        paused=paused,
    )


if TYPE_CHECKING:
    from alkstore.driver import OpsDriver

    # Static proof that these methods fill the ops profile.
    def _conforms(o: OpsStatements) -> OpsDriver[PgHandle]:
        return o
