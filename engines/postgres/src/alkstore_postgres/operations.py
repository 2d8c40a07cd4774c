"""The ops profile over psycopg (contract 1.1 §11): queue stats, job pages,
redrive, dead-letter purges and pauses.

Each method but the redrive is ONE statement on the handle ``c``, so each is
atomic even in a ``write`` unit's autocommit, and a resume NOTIFYs the queue in
the statement that deletes its pause. A redrive is a few statements in one
transaction (a crash leaves each dead row or its new life, never both, never
neither): a unique job's new row must be checked against the dead table with a
snapshot newer than its insert's (see ``TAKE_BACK_REDRIVEN``), which one
statement cannot have. ``PostgresDriver`` mixes these methods in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from alkstore.driver import queue_topic
from alkstore.options import Limits
from alkstore.params import ListJobs, PurgeDeadJobs, QueueStatsAt, Redrive, SetLimits, SetPaused
from alkstore.values import Job, JobState, QueueStats

from .binding import by_name
from .columns import job_from_row
from .handle import PgHandle, begin_transaction, execute, rowcount
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

    def queue_stats(self, c: PgHandle, params: QueueStatsAt) -> list[QueueStats]:
        if params.queues is None:
            rows = execute(c, self._sql.queue_stats_all, by_name(params))
        else:
            rows = execute(c, self._sql.queue_stats, by_name(params, queues=list(params.queues)))
        return [_queue_stats(row, params.now) for row in rows]

    def list_jobs(self, c: PgHandle, params: ListJobs) -> list[Job]:
        state = params.state
        sql = self._sql
        newest = params.before_id is not None
        if state is None:
            query = sql.list_jobs_newest if newest else sql.list_jobs
        elif state is JobState.DEAD:
            query = sql.list_dead_jobs_newest if newest else sql.list_dead_jobs
        elif state is JobState.COMPLETED:
            query = sql.list_completed_jobs_newest if newest else sql.list_completed_jobs
        elif state is JobState.PROCESSING:
            query = sql.list_processing_jobs_newest if newest else sql.list_processing_jobs
        elif state is JobState.WAITING:
            query = sql.list_waiting_jobs_newest if newest else sql.list_waiting_jobs
        else:
            query = sql.list_pending_jobs_newest if newest else sql.list_pending_jobs
        bound = by_name(params, state=None if state is None else state.value)
        return [job_from_row(row) for row in execute(c, query, bound)]

    def redrive(self, c: PgHandle, params: Redrive) -> list[int]:
        topic = queue_topic(params.queue)
        wake = None if topic in c.announced else notify_payload(topic)
        sql = self._sql
        if params.ids is None:
            query = sql.redrive_oldest
            bound = by_name(params)
        else:
            query = sql.redrive_named
            bound = by_name(params, ids=list(dict.fromkeys(params.ids)))  # each once
        # New lives first, then their dead rows go, in one transaction (a crash keeps
        # one or the other): between the two, a unique job's new row is checked
        # against the dead rows with a newer snapshot than its insert had.
        begin_transaction(c)
        execute(c, sql.give_up_passed_holds, {"queue": params.queue, "now": params.now})
        made = execute(c, query, bound).fetchall()
        keyed = [new_id for new_id, _, has_key in made if has_key]
        taken_back: set[int] = set()
        if keyed:
            check = {"ids": keyed, "now": params.now}
            taken_back = {row[0] for row in execute(c, sql.take_back_redriven, check)}
        kept = [(new_id, old_id) for new_id, old_id, _ in made if new_id not in taken_back]
        if not kept:
            return []
        removal = {
            "ids": [old_id for _, old_id in kept],
            "wake_channel": self.channel,
            "topic": wake,
        }
        execute(c, sql.remove_redriven, removal)
        c.announced.add(topic)
        return [new_id for new_id, _ in kept]

    def purge_dead_jobs(self, c: PgHandle, params: PurgeDeadJobs) -> int:
        died_before = _ANY_TIME if params.died_before is None else params.died_before
        if params.ids is None:
            bound = by_name(params, died_before=died_before)
            purged = rowcount(c, self._sql.purge_dead_before, bound)
        else:
            bound = by_name(params, ids=sorted(set(params.ids)), died_before=died_before)
            purged = rowcount(c, self._sql.purge_dead_named, bound)
        if purged:
            execute(c, self._sql.prune_kept_edges, {})  # their kept edges too (§18.4)
        return purged

    def set_paused(self, c: PgHandle, params: SetPaused) -> bool:
        if params.paused:
            return rowcount(c, self._sql.pause, by_name(params)) == 1
        topic = queue_topic(params.queue)
        bound = by_name(params, wake_channel=self.channel, topic=notify_payload(topic))
        resumed = execute(c, self._sql.resume, bound).fetchone() is not None
        if resumed:
            c.announced.add(topic)  # the statement announced the queue
        return resumed

    def is_paused(self, c: PgHandle, queue: str) -> bool:
        row = execute(c, self._sql.is_paused, {"queue": queue}).fetchone()
        return bool(row is not None and row[0])

    # -- limits (the limits profile) ---------------------------------------------------
    def set_limits(self, c: PgHandle, params: SetLimits) -> bool:
        topic = queue_topic(params.queue)
        bound = by_name(params, wake_channel=self.channel, topic=notify_payload(topic))
        cleared = (
            params.concurrency is None
            and params.rate is None
            and params.concurrency_per_key is None
            and params.rate_per_key is None
        )
        statement = self._sql.clear_limits if cleared else self._sql.set_limits
        changed = execute(c, statement, bound).fetchone() is not None
        if changed:
            c.announced.add(topic)  # the statement announced the queue
        return changed

    def queue_limits(self, c: PgHandle, queue: str | None) -> dict[str, Limits]:
        if queue is None:
            rows = execute(c, self._sql.all_queue_limits).fetchall()
        else:
            rows = execute(c, self._sql.queue_limits, {"queue": queue}).fetchall()
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


def _queue_stats(row: Sequence[Any], now: int) -> QueueStats:
    (
        queue,
        ready,
        scheduled,
        oldest_ready_at,
        processing,
        lapsed,
        dead,
        paused,
        completed,
        waiting,
    ) = row
    return QueueStats(
        queue=queue,
        ready=ready,
        scheduled=scheduled,
        processing=processing,
        lapsed=lapsed,
        dead=dead,
        oldest_ready_age_s=None if oldest_ready_at is None else now - oldest_ready_at,
        paused=paused,
        completed=completed,
        waiting=waiting,
    )


if TYPE_CHECKING:
    from alkstore.driver import LimitsDriver, OpsDriver

    # Static proof that these methods fill the ops and limits profiles.
    def _conforms(o: OpsStatements) -> tuple[OpsDriver[PgHandle], LimitsDriver[PgHandle]]:
        return o, o
