"""A running worker in the store's registry (contract 1.2 §19, the workers profile).

``Worker.run`` registers the process before its first claim (its id, host, pid,
queues and start), heartbeats every third of ``WORKER_LEASE_S`` while it runs,
registers again if its lease had lapsed meanwhile (a pause, an outage), and
deregisters when it stops. On an engine without the profile it does none of
this: the registry is what a dashboard shows, never what a worker needs to run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from ..api import Store
from ..constants import MAX_HOST_CHARS, WORKER_LEASE_S
from ..engine import Capabilities
from ..errors import AlkstoreError, ProfileUnavailable
from ..stop import StopToken
from ..timeconv import whole_now
from ..values import Job, WorkerInfo
from .observe import ACKED

log = logging.getLogger("alkstore.worker")

HEARTBEAT_EVERY_S = WORKER_LEASE_S / 3
"""How often a running worker renews its registration."""


def has_registry(store: Store) -> bool:
    """Whether ``store``'s engine may have the workers profile: it declares it, or the
    store does not say (a wrapper; then ``Registration.start`` finds out)."""
    capabilities = getattr(store, "capabilities", None)
    return not isinstance(capabilities, Capabilities) or capabilities.workers


def this_process(worker_id: str, queues: list[str], started_at: int) -> WorkerInfo:
    """The ``WorkerInfo`` of the calling process."""
    host = socket.gethostname()[:MAX_HOST_CHARS] or "localhost"
    return WorkerInfo(worker_id, host, os.getpid(), tuple(queues), started_at)


class FinishedCounts:
    """A ``WorkerObserver`` that counts the worker's acked jobs per queue, for its next
    heartbeat (contract 1.2 §19.6: throughput without touching the ack path)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def run_started(self, job: Job) -> None:
        return None

    def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
        if outcome == ACKED:
            with self._lock:
                self._counts[job.queue] = self._counts.get(job.queue, 0) + 1

    def heartbeat_lost(self, job: Job) -> None:
        return None

    def take(self) -> dict[str, int]:
        """The counts since the last ``take``, reset to none."""
        with self._lock:
            taken, self._counts = self._counts, {}
        return taken

    def give_back(self, counts: dict[str, int]) -> None:
        """Counts a heartbeat failed to report: added to the next one."""
        with self._lock:
            for queue, count in counts.items():
                self._counts[queue] = self._counts.get(queue, 0) + count


class Registration:
    """One worker's entry in the registry, from ``start`` to ``close``."""

    def __init__(
        self,
        store: Store,
        worker_id: str,
        queues: list[str],
        *,
        every_s: float = HEARTBEAT_EVERY_S,
    ) -> None:
        self._store = store
        self._info = this_process(worker_id, queues, whole_now(store.clock.now()))
        self._every_s = every_s
        self._stop = StopToken()
        self._registered = False
        self.finished = FinishedCounts()
        """What the worker's observers feed: its acked jobs per queue."""
        self._thread = threading.Thread(target=self._beat, name="alkstore-registry", daemon=True)

    def start(self) -> None:
        """Register (before the first claim), then heartbeat on a thread of its own;
        on an engine without the profile, nothing."""
        try:
            self._store.register_worker(self._info)
        except ProfileUnavailable:
            self._registered = False
            return
        self._registered = True
        self._thread.start()

    def beat_once(self) -> None:
        """Renew the registration with the jobs finished since the last beat; register
        again if it had lapsed."""
        finished = self.finished.take()
        try:
            renewed = self._store.heartbeat_worker(self._info.id, finished or None)
        except BaseException:
            self.finished.give_back(finished)
            raise
        if not renewed:
            log.warning(
                "worker %s had dropped out of the registry; registering again", self._info.id
            )
            self._store.register_worker(self._info)

    def close(self) -> None:
        """Stop heartbeating and deregister (a failure is logged: the lease lapses)."""
        self._stop.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)
        if not self._registered:
            return
        try:
            self.beat_once()  # the last jobs' counts, then out
            self._store.deregister_worker(self._info.id)
        except AlkstoreError as exc:
            log.warning("deregistering worker %s failed: %s; its lease lapses", self._info.id, exc)

    def _beat(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.beat_once()
            except AlkstoreError as exc:
                log.error("worker heartbeat failed: %s; retrying later", exc)
