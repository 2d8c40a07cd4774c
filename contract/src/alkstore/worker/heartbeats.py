"""One thread keeps every running job's claim alive (contract §12).

Each run heartbeats a third of its visibility timeout after it started (and
after each beat) for as long as its handler runs, including while the worker
drains on a graceful stop: a handler that outlives its visibility timeout is
never claimed twice.
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import AlkstoreError
from .runs import JobRun

log = logging.getLogger("alkstore.worker")

IDLE_WAIT_S = 60.0
"""How long the thread sleeps with nothing to beat (a new run wakes it)."""


class Heartbeats:
    def __init__(self) -> None:
        self._runs: set[JobRun] = set()
        self._changed = threading.Condition()
        self._closed = False
        self._sleeping_until = 0.0
        """When the thread wakes by itself; an ``add`` due later needs no wake."""
        self._thread = threading.Thread(target=self._loop, name="alkstore-heartbeats", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, run: JobRun) -> None:
        with self._changed:
            self._runs.add(run)
            # Most runs end long before their first beat: wake the thread only
            # when this one is due before it would wake anyway.
            if run.next_beat < self._sleeping_until:
                self._changed.notify()

    def discard(self, run: JobRun) -> None:
        with self._changed:
            self._runs.discard(run)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while True:
            with self._changed:
                if self._closed:
                    return
                now = time.monotonic()
                due = [run for run in self._runs if run.next_beat <= now]
                if not due:
                    soonest = min((run.next_beat for run in self._runs), default=now + IDLE_WAIT_S)
                    self._sleeping_until = soonest
                    self._changed.wait(max(0.0, soonest - now))
                    self._sleeping_until = 0.0
                    continue
            for run in due:
                self._beat(run)

    def _beat(self, run: JobRun) -> None:
        job = run.handle.job
        try:
            alive = run.beat()
        except AlkstoreError as exc:
            # An outage: try again a beat later. If the claim lapses meanwhile,
            # that later beat is refused and the run is marked lost then.
            run.next_beat = time.monotonic() + run.beat_every_s
            log.warning(
                "heartbeat failed: queue=%s id=%d attempt=%d error=%s",
                job.queue,
                job.id,
                job.attempts,
                exc,
            )
            return
        if alive:
            return
        self.discard(run)  # ended meanwhile, or lost
        if run.lost:
            log.warning(
                "claim lost: queue=%s id=%d attempt=%d; this run's outcome will be discarded",
                job.queue,
                job.id,
                job.attempts,
            )
