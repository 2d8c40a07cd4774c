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

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from alkstore.driver import ScheduleRecord, stream_event, stream_topic
from alkstore.values import StreamEvent

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
        execute(c, self._sql.schedule_upsert, asdict(record))

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

    def schedule_advance(self, c: PgHandle, name: str, expected: int, new_fire_at: int) -> bool:
        # The fire's insert follows in this unit: both commit together, or neither.
        begin_transaction(c)
        params = {"name": name, "expected": expected, "new_fire_at": new_fire_at}
        return rowcount(c, self._sql.schedule_advance, params) == 1

    def schedule_next_fire_at(self, c: PgHandle) -> int | None:
        row = execute(c, self._sql.schedule_next_fire_at).fetchone()
        return None if row is None else row[0]

    # -- streams ----------------------------------------------------------------------
    def stream_append(
        self, c: PgHandle, stream: str, payloads: Sequence[str], now: int
    ) -> list[int]:
        if not payloads:
            return []
        topic = stream_topic(stream)
        params: dict[str, Any] = {
            "stream": stream,
            "count": len(payloads),
            "now": now,
            "channel": self.channel,
            "topic": None if topic in c.announced else notify_payload(topic),
        }
        if len(payloads) == 1:
            params["payload"] = payloads[0]
            rows = execute(c, self._sql.stream_append, params).fetchall()
        else:
            params["payloads"] = list(payloads)
            rows = execute(c, self._sql.stream_append_many, params).fetchall()
        c.announced.add(topic)
        return [row[0] for row in rows]

    def stream_read(self, c: PgHandle, stream: str, after: int, limit: int) -> list[StreamEvent]:
        params = {"stream": stream, "after": after, "limit": limit}
        return [stream_event(*row) for row in execute(c, self._sql.stream_read, params)]

    def stream_commit(self, c: PgHandle, stream: str, consumer: str, offset: int) -> None:
        params = {"stream": stream, "consumer": consumer, "offset": offset}
        execute(c, self._sql.stream_commit, params)

    def stream_offset(self, c: PgHandle, stream: str, consumer: str) -> int:
        params = {"stream": stream, "consumer": consumer}
        row = execute(c, self._sql.stream_offset, params).fetchone()
        return 0 if row is None else int(row[0])

    def stream_trim(self, c: PgHandle, stream: str, before: int) -> int:
        params = {"stream": stream, "before": before}
        return rowcount(c, self._sql.stream_trim, params)

    # -- pub/sub ----------------------------------------------------------------------
    def publish(self, c: PgHandle, channel: str, payload: str, now: int) -> None:
        """NOTIFY the message (delivered on commit only); one too large for NOTIFY is
        stored and referenced, in the same statement."""
        message = inline_message(channel, payload)
        if message is not None:
            execute(c, self._sql.publish, {"channel": self.message_channel, "message": message})
            return
        params = {
            "channel": self.message_channel,
            "pubsub_channel": channel,
            "payload": payload,
            "now": now,
            "keep": self.messages_keep,
            "reference_prefix": REFERENCE_PREFIX,
        }
        execute(c, self._sql.publish_stored, params)


if TYPE_CHECKING:
    from alkstore.driver import PubSubDriver, SchedulerDriver, StreamDriver

    # Static proof that these methods fill every profile the engine declares.
    def _conforms(
        p: ProfileStatements,
    ) -> tuple[SchedulerDriver[PgHandle], StreamDriver[PgHandle], PubSubDriver[PgHandle]]:
        return p, p, p
