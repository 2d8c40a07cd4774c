"""Broken worker registries (contract 1.2 §19, the workers profile).

Two engines whose registry statements are the ones an engine gets wrong first: a
listing that forgets the lease (every worker that ever registered stays listed,
the dead ones too), and a deregistration that removes nothing (a stopped worker
stays listed until its lease lapses); and throughput counts that replace each other
instead of adding up.
"""

from __future__ import annotations

import json
import sqlite3

from alkstore.params import ThroughputAdd, WorkerRef, WorkersAt
from alkstore.values import WorkerInfo
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import THROUGHPUT, WORKERS

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


_LAST_WRITE_WINS = f"""
INSERT INTO {THROUGHPUT} (queue, minute, count)
SELECT q.value, :minute, n.value
  FROM json_each(:queues) AS q JOIN json_each(:counts) AS n ON n.key = q.key
 WHERE true
ON CONFLICT (queue, minute) DO UPDATE SET count = excluded.count
"""


class ThroughputLastWriteWinsDriver(SqliteDriver):
    """A heartbeat's count replaces its minute's instead of adding to it: two workers
    reporting the same minute count as the last one alone."""

    def throughput_add(self, c: sqlite3.Connection, params: ThroughputAdd) -> None:
        named = {
            "minute": params.minute,
            "queues": json.dumps(list(params.queues)),
            "counts": json.dumps(list(params.counts)),
        }
        c.execute(_LAST_WRITE_WINS, named)
