"""The optional driver profiles over psycopg: scheduler, streams and pub/sub.

Each method is one statement on the handle ``c``; ``PostgresDriver`` mixes
them in. Two need more than a statement's own atomicity:

* ``schedule_advance`` opens a real transaction on a ``write`` unit's handle
  (``begin_transaction``), so the boundary's job, inserted next, commits with
  the advance or not at all -- those units otherwise run in autocommit.
* ``stream_append`` allocates offsets by updating the stream's counter row.
  Its row lock holds the stream's next appender until this transaction ends,
  so offsets commit in the order they were handed out: a reader never sees
  offset n + 1 while n may still commit (see ``statements._ALLOCATE_OFFSETS``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alkstore.driver import stream_topic
from alkstore.params import (
    Publish,
    ScheduleAdvance,
    ScheduleLapse,
    ScheduleRenew,
    StreamAppend,
    StreamCommit,
    StreamOffset,
    StreamRead,
    StreamTrim,
    ThroughputAdd,
    ThroughputSince,
    WorkerRef,
    WorkerRegister,
    WorkerRenew,
    WorkersAt,
)
from alkstore.rows import ScheduleRecord, stream_event
from alkstore.values import StreamEvent, WorkerInfo

from .binding import by_name
from .handle import PgHandle, begin_transaction, execute, rowcount
from .listener import notify_payload
from .messages import REFERENCE_PREFIX, inline_message
from .statements import Statements


class ProfileStatements:
    """``SchedulerDriver``, ``StreamDriver`` and ``PubSubDriver`` for ``PostgresDriver``."""

    # Set by PostgresDriver.__init__.
    _sql: Statements
    channel: str
    """The store's wake channel."""
    message_channel: str
    """The store's pub/sub channel."""
    messages_keep: int
    """How many stored (large) messages a stored publish keeps."""

    # -- scheduler ------------------------------------------------------------------
    def schedule_upsert(self, c: PgHandle, record: ScheduleRecord) -> None:
        execute(c, self._sql.schedule_upsert, by_name(record))

    def schedule_delete(self, c: PgHandle, name: str) -> bool:
        return rowcount(c, self._sql.schedule_delete, {"name": name}) == 1

    def schedule_get(self, c: PgHandle, name: str) -> ScheduleRecord | None:
        row = execute(c, self._sql.schedule_get, {"name": name}).fetchone()
        return None if row is None else ScheduleRecord(*row)

    def schedule_list(self, c: PgHandle) -> list[ScheduleRecord]:
        return [ScheduleRecord(*row) for row in execute(c, self._sql.schedule_list)]

    def schedules_due(self, c: PgHandle, now: int) -> list[ScheduleRecord]:
        rows = execute(c, self._sql.schedules_due, {"now": now})
        return [ScheduleRecord(*row) for row in rows]

    def schedule_advance(self, c: PgHandle, params: ScheduleAdvance) -> bool:
        # The fire's insert follows in this unit: both commit together, or neither.
        begin_transaction(c)
        return rowcount(c, self._sql.schedule_advance, by_name(params)) == 1

    def schedule_next_fire_at(self, c: PgHandle) -> int | None:
        row = execute(c, self._sql.schedule_next_fire_at).fetchone()
        return None if row is None else row[0]

    # -- declared schedules (the periodic profile) -------------------------------------
    def schedules_renew(self, c: PgHandle, params: ScheduleRenew) -> list[str]:
        names = sorted(set(params.names))
        if not names:
            return []
        bound = by_name(params, names=names)
        return sorted(row[0] for row in execute(c, self._sql.schedules_renew, bound))

    def schedules_lapse(self, c: PgHandle, params: ScheduleLapse) -> list[str]:
        rows = execute(c, self._sql.schedules_lapse, by_name(params))
        return sorted(row[0] for row in rows)

    # -- the worker registry (the workers profile) -----------------------------------
    def worker_register(self, c: PgHandle, params: WorkerRegister) -> None:
        execute(c, self._sql.worker_register, by_name(params, queues=list(params.queues)))

    def worker_renew(self, c: PgHandle, params: WorkerRenew) -> bool:
        return rowcount(c, self._sql.worker_renew, by_name(params)) == 1

    def worker_deregister(self, c: PgHandle, params: WorkerRef) -> bool:
        return rowcount(c, self._sql.worker_deregister, by_name(params)) == 1

    def workers_list(self, c: PgHandle, params: WorkersAt) -> list[WorkerInfo]:
        rows = execute(c, self._sql.workers_list, by_name(params))
        return [
            WorkerInfo(
                worker_id,
                host,
                pid,
                tuple(queues),
                started_at,
                last_seen=last_seen,
                lease_until=lease_until,
            )
            for worker_id, host, pid, queues, started_at, last_seen, lease_until in rows
        ]

    def throughput_add(self, c: PgHandle, params: ThroughputAdd) -> None:
        bound = by_name(params, queues=list(params.queues), counts=list(params.counts))
        execute(c, self._sql.throughput_add, bound)

    def throughput_read(self, c: PgHandle, params: ThroughputSince) -> list[tuple[str, int, int]]:
        rows = execute(c, self._sql.throughput_read, by_name(params))
        return [(queue, minute, count) for queue, minute, count in rows]

    # -- streams ----------------------------------------------------------------------
    def stream_append(self, c: PgHandle, params: StreamAppend) -> list[int]:
        payloads = params.payloads
        if not payloads:
            return []
        topic = stream_topic(params.stream)
        wake = None if topic in c.announced else notify_payload(topic)
        if len(payloads) == 1:
            bound = by_name(
                params, payload=payloads[0], count=1, wake_channel=self.channel, topic=wake
            )
            rows = execute(c, self._sql.stream_append, bound).fetchall()
        else:
            bound = by_name(
                params,
                payloads=list(payloads),
                count=len(payloads),
                wake_channel=self.channel,
                topic=wake,
            )
            rows = execute(c, self._sql.stream_append_many, bound).fetchall()
        c.announced.add(topic)
        return [row[0] for row in rows]

    def stream_read(self, c: PgHandle, params: StreamRead) -> list[StreamEvent]:
        return [stream_event(*row) for row in execute(c, self._sql.stream_read, by_name(params))]

    def stream_commit(self, c: PgHandle, params: StreamCommit) -> None:
        execute(c, self._sql.stream_commit, by_name(params))

    def stream_offset(self, c: PgHandle, params: StreamOffset) -> int:
        row = execute(c, self._sql.stream_offset, by_name(params)).fetchone()
        return 0 if row is None else int(row[0])

    def stream_trim(self, c: PgHandle, params: StreamTrim) -> int:
        return rowcount(c, self._sql.stream_trim, by_name(params))

    # -- pub/sub ----------------------------------------------------------------------
    def publish(self, c: PgHandle, params: Publish) -> None:
        """NOTIFY the message (delivered on commit only); one too large for NOTIFY is
        stored and referenced, in the same statement."""
        message = inline_message(params.channel, params.payload)
        if message is not None:
            bound = {"message_channel": self.message_channel, "message": message}
            execute(c, self._sql.publish, bound)
            return
        bound = by_name(
            params,
            message_channel=self.message_channel,
            keep=self.messages_keep,
            reference_prefix=REFERENCE_PREFIX,
        )
        execute(c, self._sql.publish_stored, bound)


if TYPE_CHECKING:
    from alkstore.driver import (
        PeriodicDriver,
        PubSubDriver,
        SchedulerDriver,
        StreamDriver,
        WorkersDriver,
    )

    # Static proof that these methods fill every profile the engine declares.
    def _conforms(
        p: ProfileStatements,
    ) -> tuple[
        SchedulerDriver[PgHandle],
        StreamDriver[PgHandle],
        PubSubDriver[PgHandle],
        PeriodicDriver[PgHandle],
        WorkersDriver[PgHandle],
    ]:
        return p, p, p, p, p
