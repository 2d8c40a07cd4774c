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
from ..values import WorkerInfo

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
        """Renew the registration; register again if it had lapsed."""
        if not self._store.heartbeat_worker(self._info.id):
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
            self._store.deregister_worker(self._info.id)
        except AlkstoreError as exc:
            log.warning("deregistering worker %s failed: %s; its lease lapses", self._info.id, exc)

    def _beat(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.beat_once()
            except AlkstoreError as exc:
                log.error("worker heartbeat failed: %s; retrying later", exc)
