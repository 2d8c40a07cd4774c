"""Broken acks that need not wait for the disk (contract 1.2 §12.11).

The reference SQLite engine, declaring the ``async_acks`` profile, whose ack asked
not to wait leaves out its claim's guard (as an engine that wrote a second, faster
ack statement and dropped the ``attempts``/``deadline`` terms would): a lapsed or
superseded claim's ack deletes a job another worker now holds.
"""

from __future__ import annotations

import sqlite3
import threading

from alkstore.params import ClaimRef
from alkstore_sqlite import SqliteDriver, SqliteOptions


class AsyncAckIgnoresClaimDriver(SqliteDriver):
    """Acks as the reference does, but an ack asked not to wait deletes its job by id."""

    def __init__(
        self, path: str, options: SqliteOptions, *, serialize_writers: bool = True
    ) -> None:
        super().__init__(path, options, serialize_writers=serialize_writers)
        self._unguarded = threading.local()

    def commit_acks_without_waiting(self, c: sqlite3.Connection) -> None:
        self._unguarded.next = True

    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        if not getattr(self._unguarded, "next", False):
            return super().ack(c, params)
        self._unguarded.next = False
        from alkstore_sqlite.migrations import JOBS

        return c.execute(f"DELETE FROM {JOBS} WHERE id = ?", (params.job_id,)).rowcount == 1
