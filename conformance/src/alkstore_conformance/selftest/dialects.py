"""A dialect's defaults the contract does not share (contract §0.1, §8.3).

Engines are SQL over some database, and a database's defaults leak into answers
unless the engine overrides them: a collation that compares text case- and
pad-insensitively (MySQL's ``utf8mb4_0900_ai_ci``, a ``PAD SPACE`` collation),
and an UPDATE's row count that counts changed rather than matched rows (MySQL's
affected rows without ``CLIENT_FOUND_ROWS``). Each mutant is the SQLite reference
driver answering as such a dialect would.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

from alkstore.params import (
    Heartbeat,
    LockHolder,
    LockLease,
    LockRelease,
    StreamCommit,
    StreamOffset,
)
from alkstore.values import LockInfo
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import JOBS, LOCKS


def collated(name: str) -> str:
    """What a case-insensitive ``PAD SPACE`` collation compares: case folded, trailing
    spaces dropped (every name that differs only so lands on the same key)."""
    return name.rstrip(" ").casefold()


class CollatedNamesDriver(SqliteDriver):
    """Lock names and stream consumer names compared as a case-insensitive, pad-space
    collation would: ``Leader`` and ``leader `` are one lock, ``Reader`` and ``reader``
    share one offset. Nothing else shows it: a lock's name and a consumer's are never
    read back."""

    def lock_acquire(self, c: sqlite3.Connection, params: LockLease) -> bool:
        return super().lock_acquire(c, replace(params, name=collated(params.name)))

    def lock_renew(self, c: sqlite3.Connection, params: LockLease) -> bool:
        return super().lock_renew(c, replace(params, name=collated(params.name)))

    def lock_release(self, c: sqlite3.Connection, params: LockRelease) -> bool:
        return super().lock_release(c, replace(params, name=collated(params.name)))

    def lock_holder(self, c: sqlite3.Connection, params: LockHolder) -> LockInfo | None:
        return super().lock_holder(c, replace(params, name=collated(params.name)))

    def stream_commit(self, c: sqlite3.Connection, params: StreamCommit) -> None:
        super().stream_commit(c, replace(params, consumer=collated(params.consumer)))

    def stream_offset(self, c: sqlite3.Connection, params: StreamOffset) -> int:
        return super().stream_offset(c, replace(params, consumer=collated(params.consumer)))


DEADLINE_OF = f"SELECT deadline FROM {JOBS} WHERE id = :id"
LEASE_OF = f"SELECT owner, expires_at FROM {LOCKS} WHERE name = :name"


class ChangedRowsDriver(SqliteDriver):
    """Heartbeats, lock renews and re-acquires answer with the rows they *changed*:
    writing the deadline or expiry already stored (twice in one second) answers
    ``False``, though the claim or the lease is live and the caller's."""

    def heartbeat(self, c: sqlite3.Connection, params: Heartbeat) -> bool:
        row = c.execute(DEADLINE_OF, {"id": params.job_id}).fetchone()
        matched = super().heartbeat(c, params)
        return matched and (row is None or row[0] != params.deadline)

    def lock_acquire(self, c: sqlite3.Connection, params: LockLease) -> bool:
        before = self._lease(c, params.name)
        matched = super().lock_acquire(c, params)
        return matched and before != (params.owner, params.expires_at)

    def lock_renew(self, c: sqlite3.Connection, params: LockLease) -> bool:
        before = self._lease(c, params.name)
        matched = super().lock_renew(c, params)
        return matched and before != (params.owner, params.expires_at)

    @staticmethod
    def _lease(c: sqlite3.Connection, name: str) -> tuple[str, int] | None:
        row = c.execute(LEASE_OF, {"name": name}).fetchone()
        return None if row is None else (row[0], row[1])
