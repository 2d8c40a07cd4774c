"""One run of one job: its claim, its context and how it ended.

A run ends exactly once, in one of three ways, decided under its lock:
``finish`` (the handler returned or raised: the outcome is applied),
``lose`` then ``finish`` (a heartbeat was refused: the outcome is discarded),
or ``abandon`` (the worker stopped before the handler did: nothing is applied,
the claim lapses and another worker takes the job).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from typing import Any

from ..aio import AsyncStore
from ..api import JobHandle, Store
from ..stop import StopToken
from ..values import Job
from .tasks import Task


class RunState(enum.Enum):
    RUNNING = "running"
    FINISHED = "finished"
    ABANDONED = "abandoned"


class JobContext:
    """What a handler taking two arguments gets beside the ``Job`` (contract §12).

    Attributes:
        job: the claimed job (payload, attempts, errors, ...).
        store: the worker's store.
        aio: for an async handler, the worker's store as an ``alkstore.aio.AsyncStore``
            (enqueue follow-up work without blocking the loop); ``None`` for a sync one.
        stop: set when the worker stops or this run's claim is lost: a
            long handler checks it (or waits on it) and returns early.
        logger: ``alkstore.worker`` with the queue, job id and attempt attached.
    """

    def __init__(self, run: JobRun, store: Store, aio: AsyncStore | None) -> None:
        self._run = run
        self.job: Job = run.handle.job
        self.store = store
        self.aio = aio
        self.stop = StopToken()
        self.logger = logging.LoggerAdapter(
            logging.getLogger("alkstore.worker"),
            {"queue": self.job.queue, "job_id": self.job.id, "attempt": self.job.attempts},
        )

    @property
    def lost(self) -> bool:
        """Whether a heartbeat was refused: this run's outcome will be discarded."""
        return self._run.lost

    def heartbeat(self) -> bool:
        """Extend the claim now (by its visibility timeout, plus the second that
        whole-second deadlines may lose); ``False`` if it was lost."""
        return self._run.beat()

    def __repr__(self) -> str:
        return f"<JobContext {self.job.queue!r} id={self.job.id} attempt={self.job.attempts}>"


class JobRun:
    """A claimed job on its way through a handler."""

    def __init__(self, task: Task, handle: JobHandle, store: Store, aio: AsyncStore | None) -> None:
        self.task = task
        self.handle = handle
        self.started = time.monotonic()
        self.lost = False
        self.state = RunState.RUNNING
        self.lock = threading.Lock()
        self.context = JobContext(self, store, aio)
        visibility = handle.job.visibility_timeout_s
        # Deadlines are whole seconds (``deadline = floor(now) + extend``), so a
        # claim or a beat lasts between ``extend - 1`` and ``extend`` seconds:
        # each beat extends by one second more than the visibility timeout, so
        # the claim outlives two missed beats a third of that timeout apart.
        self.extend_s = visibility + 1
        self.beat_every_s = visibility / 3
        # The claim itself lasted at least ``visibility - 1`` seconds: beat before
        # then (at once for a 1 s timeout).
        self.next_beat = self.started + min(self.beat_every_s, visibility - 1)
        self.future: Any = None
        """An async run's ``concurrent.futures.Future`` (cancelled on abandon)."""

    def beat(self) -> bool:
        """Heartbeat now; a refusal marks the run lost (its outcome is never applied)."""
        with self.lock:
            if self.state is not RunState.RUNNING or self.lost:
                return False
        ok = self.handle.heartbeat(self.extend_s)
        self.next_beat = time.monotonic() + self.beat_every_s
        if not ok:
            self.lose()
        return ok

    def lose(self) -> None:
        self.lost = True
        self.context.stop.stop()

    def end(self, state: RunState) -> bool:
        """Move from running to ``state``; ``False`` if the run had already ended."""
        with self.lock:
            if self.state is not RunState.RUNNING:
                return False
            self.state = state
        return True

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started
