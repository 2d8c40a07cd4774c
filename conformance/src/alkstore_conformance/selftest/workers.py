"""Broken worker registries (contract 1.2 §19, the workers profile).

Two engines whose registry statements are the ones an engine gets wrong first: a
listing that forgets the lease (every worker that ever registered stays listed,
the dead ones too), and a deregistration that removes nothing (a stopped worker
stays listed until its lease lapses).
"""

from __future__ import annotations

import json
import sqlite3

from alkstore.params import WorkerRef, WorkersAt
from alkstore.values import WorkerInfo
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import WORKERS

_EVERY_WORKER = f"""
SELECT id, host, pid, queues, started_at, last_seen, lease_until FROM {WORKERS} ORDER BY id
"""


class LapsedWorkerListedDriver(SqliteDriver):
    """``workers_list`` ignores the lease: a worker that died stays listed for ever
    (until another registration happens to clean it up)."""

    def workers_list(self, c: sqlite3.Connection, params: WorkersAt) -> list[WorkerInfo]:
        return [
            WorkerInfo(
                w, host, pid, tuple(json.loads(queues)), started, last_seen=seen, lease_until=until
            )
            for w, host, pid, queues, started, seen, until in c.execute(_EVERY_WORKER)
        ]


class DeregisterKeepsWorkerDriver(SqliteDriver):
    """``worker_deregister`` answers as if it removed the row, and keeps it."""

    def worker_deregister(self, c: sqlite3.Connection, params: WorkerRef) -> bool:
        query = f"SELECT count(*) FROM {WORKERS} WHERE id = ?"
        (count,) = c.execute(query, (params.worker_id,)).fetchone()
        return bool(count)
