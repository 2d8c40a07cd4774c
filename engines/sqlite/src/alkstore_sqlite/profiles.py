"""The optional driver profiles over ``sqlite3``: scheduler, streams and pub/sub.

Each method is one statement (or, for a stream append, the offset allocation
and its inserts) on the unit's connection ``c``; the driver mixes them in. A
stream append and the scheduler's advance make the rest of their unit one
transaction (``handle.begin_transaction``). Ordering needs no extra machinery
here: SQLite admits one writer at a time, and a write transaction keeps the
write lock from its first write to its end, so whatever a transaction numbers
(stream offsets from the counter row, notification ids from AUTOINCREMENT)
commits before the next transaction can number anything. A reader's snapshot
is a prefix of the commit order, so it never holds offset n + 1 without n.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from itertools import starmap
from typing import TYPE_CHECKING

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

from . import statements as sql
from .handle import begin_transaction

_RENEW_CHUNK = 10_000
"""Names per renewal statement, well under SQLite's bound on parameters."""


class ProfileStatements:
    """``SchedulerDriver``, ``StreamDriver`` and ``PubSubDriver`` for ``SqliteDriver``."""

    # -- scheduler ------------------------------------------------------------------
    def schedule_upsert(self, c: sqlite3.Connection, record: ScheduleRecord) -> None:
        c.execute(sql.SCHEDULE_UPSERT, asdict(record))

    def schedule_delete(self, c: sqlite3.Connection, name: str) -> bool:
        return c.execute(sql.SCHEDULE_DELETE, {"name": name}).rowcount == 1

    def schedule_get(self, c: sqlite3.Connection, name: str) -> ScheduleRecord | None:
        row = _cursor(c).execute(sql.SCHEDULE_GET, {"name": name}).fetchone()
        return None if row is None else ScheduleRecord(*row)

    def schedule_list(self, c: sqlite3.Connection) -> list[ScheduleRecord]:
        return [ScheduleRecord(*row) for row in _cursor(c).execute(sql.SCHEDULE_LIST)]

    def schedules_due(self, c: sqlite3.Connection, now: int) -> list[ScheduleRecord]:
        rows = _cursor(c).execute(sql.SCHEDULES_DUE, {"now": now})
        return [ScheduleRecord(*row) for row in rows]

    def schedule_advance(self, c: sqlite3.Connection, params: ScheduleAdvance) -> bool:
        # The fire's insert follows in this unit: both commit together, or neither.
        begin_transaction(c)
        return c.execute(sql.SCHEDULE_ADVANCE, sql.SCHEDULE_ADVANCE_PARAMS(params)).rowcount == 1

    def schedule_next_fire_at(self, c: sqlite3.Connection) -> int | None:
        (next_fire_at,) = _cursor(c).execute(sql.SCHEDULE_NEXT_FIRE_AT).fetchone()
        return None if next_fire_at is None else int(next_fire_at)

    # -- declared schedules (the periodic profile) -------------------------------------
    def schedules_renew(self, c: sqlite3.Connection, params: ScheduleRenew) -> list[str]:
        names = sorted(set(params.names))
        renewed: list[str] = []
        if names:
            # One statement for a worker's declarations (under SQLite's 32,766 bound
            # parameters: a worker declaring more gets one statement per chunk).
            for start in range(0, len(names), _RENEW_CHUNK):
                chunk = names[start : start + _RENEW_CHUNK]
                rows = _cursor(c).execute(
                    sql.schedules_renew(len(chunk)), (params.declared_until, *chunk)
                )
                renewed.extend(name for (name,) in rows)
        return sorted(renewed)

    def schedules_lapse(self, c: sqlite3.Connection, params: ScheduleLapse) -> list[str]:
        rows = _cursor(c).execute(sql.SCHEDULES_LAPSE, sql.SCHEDULES_LAPSE_PARAMS(params))
        return sorted(name for (name,) in rows)

    # -- the worker registry (the workers profile) -----------------------------------
    def worker_register(self, c: sqlite3.Connection, params: WorkerRegister) -> None:
        c.execute(sql.WORKERS_LAPSE, {"now": params.now})
        named = asdict(params)
        named["queues"] = json.dumps(list(params.queues))
        c.execute(sql.WORKER_UPSERT, named)

    def worker_renew(self, c: sqlite3.Connection, params: WorkerRenew) -> bool:
        return c.execute(sql.WORKER_RENEW, sql.WORKER_RENEW_PARAMS(params)).rowcount == 1

    def worker_deregister(self, c: sqlite3.Connection, params: WorkerRef) -> bool:
        bound = sql.WORKER_DEREGISTER_PARAMS(params)
        return c.execute(sql.WORKER_DEREGISTER, bound).rowcount == 1

    def workers_list(self, c: sqlite3.Connection, params: WorkersAt) -> list[WorkerInfo]:
        rows = _cursor(c).execute(sql.WORKERS_LIST, sql.WORKERS_LIST_PARAMS(params))
        return [
            WorkerInfo(
                worker_id,
                host,
                pid,
                tuple(json.loads(queues)),
                started_at,
                last_seen=last_seen,
                lease_until=lease_until,
            )
            for worker_id, host, pid, queues, started_at, last_seen, lease_until in rows
        ]

    def throughput_add(self, c: sqlite3.Connection, params: ThroughputAdd) -> None:
        named = {
            "minute": params.minute,
            "queues": json.dumps(list(params.queues)),
            "counts": json.dumps(list(params.counts)),
        }
        c.execute(sql.THROUGHPUT_ADD, named)
        c.execute(sql.THROUGHPUT_PRUNE, {"prune_through": params.prune_through})

    def throughput_read(
        self, c: sqlite3.Connection, params: ThroughputSince
    ) -> list[tuple[str, int, int]]:
        rows = _cursor(c).execute(sql.THROUGHPUT_READ, {"after": params.after})
        return [(queue, minute, count) for queue, minute, count in rows]

    # -- streams ----------------------------------------------------------------------
    def stream_append(self, c: sqlite3.Connection, params: StreamAppend) -> list[int]:
        stream, payloads, now = params.stream, params.payloads, params.now
        count = len(payloads)
        if count == 0:
            return []
        # The offsets and their events commit together: no offset is skipped.
        begin_transaction(c)
        allocate = {"stream": stream, "count": count}
        (last,) = _cursor(c).execute(sql.STREAM_ALLOCATE, allocate).fetchone()
        first = last - count + 1
        if count == 1:
            c.execute(sql.STREAM_INSERT, (stream, first, payloads[0], now))
        else:
            rows = [(stream, first + n, payload, now) for n, payload in enumerate(payloads)]
            c.executemany(sql.STREAM_INSERT, rows)
        return list(range(first, last + 1))

    def stream_read(self, c: sqlite3.Connection, params: StreamRead) -> list[StreamEvent]:
        rows = _cursor(c).execute(sql.STREAM_READ, sql.STREAM_READ_PARAMS(params))
        return list(starmap(stream_event, rows))

    def stream_commit(self, c: sqlite3.Connection, params: StreamCommit) -> None:
        c.execute(sql.STREAM_COMMIT, sql.STREAM_COMMIT_PARAMS(params))

    def stream_offset(self, c: sqlite3.Connection, params: StreamOffset) -> int:
        row = _cursor(c).execute(sql.STREAM_OFFSET, sql.STREAM_OFFSET_PARAMS(params)).fetchone()
        return 0 if row is None else int(row[0])

    def stream_trim(self, c: sqlite3.Connection, params: StreamTrim) -> int:
        return c.execute(sql.STREAM_TRIM, sql.STREAM_TRIM_PARAMS(params)).rowcount

    # -- pub/sub ------------------------------------------------------------------------
    def publish(self, c: sqlite3.Connection, params: Publish) -> None:
        """A row every process's watcher reads once it is committed (see ``watcher``);
        a rolled-back transaction leaves no row, so it delivers nothing."""
        c.execute(sql.PUBLISH, sql.PUBLISH_PARAMS(params))


def _cursor(c: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor that returns plain tuples: an attached caller's connection may have
    its own ``row_factory``."""
    cursor = c.cursor()
    cursor.row_factory = None
    return cursor


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
        SchedulerDriver[sqlite3.Connection],
        StreamDriver[sqlite3.Connection],
        PubSubDriver[sqlite3.Connection],
        PeriodicDriver[sqlite3.Connection],
        WorkersDriver[sqlite3.Connection],
    ]:
        return p, p, p, p, p
