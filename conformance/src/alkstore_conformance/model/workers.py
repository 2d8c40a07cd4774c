"""The worker registry in the model (contract 1.2 §19): leased registrations and the
per-minute counts heartbeats add to."""

from __future__ import annotations

from collections.abc import Mapping

from alkstore import WORKER_LEASE_S, QueueThroughput, WorkerInfo
from alkstore.constants import THROUGHPUT_BUCKET_S, THROUGHPUT_WINDOW_S

from .state import ModelState

BUCKETS = THROUGHPUT_WINDOW_S // THROUGHPUT_BUCKET_S


class WorkersModel(ModelState):
    """Register, heartbeat, deregister and list workers; count their finished jobs."""

    def _registry(self) -> dict[str, WorkerInfo]:
        if not hasattr(self, "_workers"):
            self._workers: dict[str, WorkerInfo] = {}
            self._finished: dict[tuple[str, int], int] = {}
        return self._workers

    def register_worker(self, info: WorkerInfo) -> WorkerInfo:
        now = self.now
        workers = self._registry()
        for lapsed in [w for w, row in workers.items() if (row.lease_until or 0) <= now]:
            del workers[lapsed]
        stored = WorkerInfo(
            info.id,
            info.host,
            info.pid,
            tuple(info.queues),
            info.started_at,
            last_seen=now,
            lease_until=now + WORKER_LEASE_S,
        )
        workers[info.id] = stored
        return stored

    def heartbeat_worker(self, worker_id: str, finished: Mapping[str, int] | None) -> bool:
        now = self.now
        workers = self._registry()
        minute = now - now % THROUGHPUT_BUCKET_S
        for queue, count in (finished or {}).items():
            if count:
                key = (queue, minute)
                self._finished[key] = self._finished.get(key, 0) + count
        stored = workers.get(worker_id)
        if stored is None or (stored.lease_until or 0) <= now:
            return False
        workers[worker_id] = WorkerInfo(
            stored.id,
            stored.host,
            stored.pid,
            stored.queues,
            stored.started_at,
            last_seen=now,
            lease_until=now + WORKER_LEASE_S,
        )
        return True

    def deregister_worker(self, worker_id: str) -> bool:
        return self._registry().pop(worker_id, None) is not None

    def workers(self) -> list[WorkerInfo]:
        now = self.now
        live = [w for w in self._registry().values() if (w.lease_until or 0) > now]
        return sorted(live, key=lambda w: w.id.encode("utf-8"))

    def throughput(self) -> list[QueueThroughput]:
        self._registry()
        now = self.now
        first = now - now % THROUGHPUT_BUCKET_S - (BUCKETS - 1) * THROUGHPUT_BUCKET_S
        slots: dict[str, list[int]] = {}
        for (queue, minute), count in self._finished.items():
            index = (minute - first) // THROUGHPUT_BUCKET_S
            if 0 <= index < BUCKETS:
                slots.setdefault(queue, [0] * BUCKETS)[index] += count
        return [
            QueueThroughput(queue, sum(counts), tuple(counts))
            for queue, counts in sorted(slots.items(), key=lambda kv: kv[0].encode("utf-8"))
        ]
