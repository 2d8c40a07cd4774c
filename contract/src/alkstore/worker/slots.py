"""Which runs hold each task's slots, and the two waits on them.

The dispatcher waits for a free slot (``vacant``, then the interrupt token it
returns); a stopping worker waits for no slot to be busy (``drain``). A run
takes a slot when it is claimed, hands it straight to the next job of its
queue when settling claimed one (``hand_on``: the slot is never free in
between, so no other queue loses a turn to it), and frees it otherwise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from ..stop import StopToken
from .runs import JobRun
from .tasks import Task


class Slots:
    """The runs holding each task's slots, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Held only briefly; a signal never takes it (see ``signals``)."""
        self._running: dict[str, set[JobRun]] = {}
        self._interrupt = StopToken()
        self._changed = threading.Condition(self.lock)

    def open(self, tasks: Sequence[Task]) -> None:
        with self.lock:
            self._running = {task.queue: set() for task in tasks}

    def vacant(self, tasks: Sequence[Task]) -> tuple[dict[str, int], StopToken]:
        """Each task's free slots, and a fresh token that a slot freed from now
        on stops (so the dispatcher never waits on a stale set of queues)."""
        with self.lock:
            self._interrupt = StopToken()
            free = {t.queue: t.concurrency - len(self._running[t.queue]) for t in tasks}
            return free, self._interrupt

    def take(self, run: JobRun) -> None:
        with self.lock:
            self._running[run.task.queue].add(run)

    def hand_on(self, done: JobRun, following: JobRun) -> None:
        with self.lock:
            slots = self._running[done.task.queue]
            slots.discard(done)
            slots.add(following)

    def free(self, run: JobRun) -> None:
        """Free ``run``'s slot: the dispatcher's wait and a draining stop wake."""
        with self.lock:
            self._running[run.task.queue].discard(run)
            interrupt = self._interrupt
            self._changed.notify_all()
        interrupt.stop()

    def wake(self) -> list[JobRun]:
        """Wake both waits (a stop); the runs holding a slot now."""
        with self.lock:
            interrupt = self._interrupt
            running = [run for runs in self._running.values() for run in runs]
            self._changed.notify_all()
        interrupt.stop()
        return running

    def drain(self, grace_s: float, forced: threading.Event) -> list[JobRun]:
        """Wait up to ``grace_s`` (or until ``forced``) for every slot to be
        free; the runs still holding one then."""
        deadline = time.monotonic() + grace_s
        with self._changed:
            while any(self._running.values()) and not forced.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return [run for runs in self._running.values() for run in runs]

    def busy(self) -> int:
        with self.lock:
            return sum(len(runs) for runs in self._running.values())
