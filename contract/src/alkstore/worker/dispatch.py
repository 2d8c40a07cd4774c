"""The dispatcher: claims only as many jobs as there are free slots.

First in batches, then by waiting on every queue with a free slot at once
(``Store.claim_wait_any``). A finishing job frees a slot and interrupts that
wait, so the set of queues waited on is always current. The dispatcher runs
on the thread that called ``Worker.run``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from ..api import JobHandle, Queue, Store
from ..errors import EngineUnavailable, StoreClosed
from .slots import Slots
from .tasks import Task

log = logging.getLogger("alkstore.worker")

OUTAGE_PAUSE_S = 1.0
"""How long the dispatcher waits after a failed claim before it tries again."""


class Dispatcher:
    """Claims jobs for the free slots of ``tasks`` and hands each to ``begin``."""

    def __init__(
        self,
        worker_id: str,
        store: Store,
        tasks: Sequence[Task],
        queues: Mapping[str, Queue],
        slots: Slots,
        stopping: threading.Event,
        begin: Callable[[Task, JobHandle], None],
    ) -> None:
        self._worker_id = worker_id
        self._store = store
        self._tasks = list(tasks)
        self._by_queue = {task.queue: task for task in tasks}
        self._queues = queues
        self._slots = slots
        self._stopping = stopping
        self._begin = begin

    def run(self) -> None:
        """Claim until the worker stops (or its store is closed)."""
        tasks = self._tasks
        if not tasks:  # a scheduler process: its declarations run on their own threads
            self._stopping.wait()
            return
        turn = 0
        while not self._stopping.is_set():
            # The token is made before the free slots are read: a slot freed from
            # here on interrupts the wait below, so it never waits on a stale set.
            free, interrupt = self._slots.vacant(tasks)
            if self._stopping.is_set():
                return
            # Rotate the order so one busy queue cannot starve the others.
            turn = (turn + 1) % len(tasks)
            eligible = [t for t in tasks[turn:] + tasks[:turn] if free[t.queue] > 0]
            if not eligible:
                interrupt.wait()
                continue
            try:
                claimed = False
                for task in eligible:
                    if self._stopping.is_set():
                        break  # a stop arrived between two queues' claims: claim no more
                    queue = self._queues[task.queue]
                    for batch_handle in queue.claim_batch(self._worker_id, free[task.queue]):
                        self._begin(task, batch_handle)
                        claimed = True
                if claimed:
                    continue
                handle = self._store.claim_wait_any(
                    [self._queues[t.queue] for t in eligible], self._worker_id, stop=interrupt
                )
            except StoreClosed:
                log.error("the store was closed; the worker stops")
                self._stopping.set()
                return
            except EngineUnavailable as exc:
                log.warning("claiming failed: %s; trying again in %.0f s", exc, OUTAGE_PAUSE_S)
                interrupt.wait(OUTAGE_PAUSE_S)
                continue
            if handle is not None:
                self._begin(self._by_queue[handle.job.queue], handle)
