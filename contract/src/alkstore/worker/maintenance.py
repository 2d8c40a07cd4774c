"""``maintenance=True``: the pinned scheduler-and-sweep recipe, built in (contract §12).

The scheduler fires one maintenance job per interval into ``MAINTENANCE_QUEUE``
(``run_schedules`` is leader-elected: one worker of the fleet fires it), and
whichever worker claims that job sweeps every queue the store knows. So the
fleet sweeps once per interval, however many workers run with maintenance on.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..api import Store
from ..errors import AlkstoreError, LeadershipLost, ProfileUnavailable, ReservedName
from ..names import outbox_of_queue
from ..spec import parse_spec
from ..stop import StopToken
from ..values import Job

log = logging.getLogger("alkstore.worker")

MAINTENANCE_QUEUE = "alkstore.maintenance"
"""The queue the maintenance job is fired into and claimed from."""
MAINTENANCE_SCHEDULE = "alkstore.maintenance"
"""The schedule that fires it."""
DEFAULT_MAINTENANCE_EVERY = "@every 60s"
RESTART_PAUSE_S = 1.0
"""How long the scheduler thread waits before leading again after an error."""


def check_every(spec: str) -> str:
    parse_spec(spec)  # InvalidSpec now, at Worker(...), not when run() starts
    return spec


class Maintenance:
    """The scheduler thread and the sweep handler of one worker."""

    def __init__(self, store: Store, worker_id: str, every: str, queues: list[str]) -> None:
        self._store = store
        self._worker_id = worker_id
        self._every = every
        self._own_queues = queues
        self._stop = StopToken()
        self._thread = threading.Thread(target=self._lead, name="alkstore-scheduler", daemon=True)

    def start(self) -> None:
        """Register the schedule (idempotent: an unchanged spec keeps its boundary)
        and start leading the scheduler."""
        self._store.schedule(MAINTENANCE_SCHEDULE, self._every, MAINTENANCE_QUEUE, {"sweep": "all"})
        self._thread.start()

    def close(self) -> None:
        self._stop.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)

    def sweep(self, job: Job) -> None:
        """The maintenance task's handler: sweep every queue the store knows."""
        for name in self._queue_names():
            try:
                result = self._consumer(name).sweep_expired()
            except ReservedName:
                continue  # a reserved queue that is not an outbox: not ours to sweep
            if result.expired or result.exhausted or result.purged:
                log.info(
                    "swept queue=%s expired=%d exhausted=%d purged=%d",
                    name,
                    result.expired,
                    result.exhausted,
                    result.purged,
                )

    def _queue_names(self) -> list[str]:
        try:
            return sorted({stats.queue for stats in self._store.stats()})
        except ProfileUnavailable:
            # No ops profile, so no list of every queue: sweep the ones this worker serves.
            return sorted(self._own_queues)

    def _consumer(self, name: str) -> Any:
        outbox = outbox_of_queue(name)
        return self._store.queue(name) if outbox is None else self._store.outbox(outbox)

    def _lead(self) -> None:
        lead_schedules(self._store, self._worker_id, self._stop)


def lead_schedules(store: Store, worker_id: str, stop: StopToken) -> None:
    """Lead the scheduler until ``stop``: ``run_schedules``, again after a lost lead
    or an error (the maintenance thread, and a worker's declared schedules)."""
    while not stop.is_set():
        try:
            store.run_schedules(stop, worker_id)
        except LeadershipLost:
            log.warning("scheduler leadership lost; waiting to lead again")
        except AlkstoreError as exc:
            if stop.is_set():
                return
            log.error("scheduler stopped: %s; restarting in %.0f s", exc, RESTART_PAUSE_S)
            stop.wait(RESTART_PAUSE_S)
