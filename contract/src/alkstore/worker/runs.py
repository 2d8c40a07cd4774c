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
from collections.abc import Callable

from ..aio import AsyncStore
from ..api import JobHandle, Store
from ..stop import StopToken
from ..values import Job
from .observe import Observers
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
        stop: set when the worker begins to stop, or this run's claim is lost:
            a long handler checks it (or waits on it) and wraps up early -- by
            raising ``Retry`` if its work is not done (returning acks the job).
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

    def __init__(
        self,
        task: Task,
        handle: JobHandle,
        store: Store,
        aio: AsyncStore | None,
        worker_stopping: threading.Event,
        observers: Observers,
    ) -> None:
        self.task = task
        self.handle = handle
        self.started = time.monotonic()
        self.lost = False
        self.state = RunState.RUNNING
        self.lock = threading.Lock()
        self._store = store
        self._aio = aio
        self._worker_stopping = worker_stopping
        self._observers = observers
        self._context: JobContext | None = None
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
        self.cancel: Callable[[], object] | None = None
        """How a stop that can wait no longer cancels an async run's handler (set
        before the run is handed its slot, or by the thread that drains)."""

    @property
    def context(self) -> JobContext:
        """The handler's ``JobContext``, made when first asked for (most handlers
        take the job alone, and a context costs a token, a lock and a logger)."""
        with self.lock:
            if self._context is None:
                self._context = JobContext(self, self._store, self._aio)
                if self.lost or self.state is RunState.ABANDONED or self._worker_stopping.is_set():
                    self._context.stop.stop()
            return self._context

    def beat(self) -> bool:
        """Heartbeat now; a refusal marks the run lost (its outcome is never applied)."""
        with self.lock:
            if self.state is not RunState.RUNNING or self.lost:
                return False
        ok = self.handle.heartbeat(self.extend_s)
        self.next_beat = time.monotonic() + self.beat_every_s
        if not ok:
            self.lose()
            self._observers.heartbeat_lost(self.handle.job)
        return ok

    def lose(self) -> None:
        with self.lock:
            self.lost = True
            context = self._context
        if context is not None:
            context.stop.stop()

    def tell_to_stop(self) -> None:
        """Set the handler's stop token (if it has a context; one made later starts set)."""
        with self.lock:
            context = self._context
        if context is not None:
            context.stop.stop()

    def end(self, state: RunState) -> bool:
        """Move from running to ``state``; ``False`` if the run had already ended."""
        with self.lock:
            if self.state is not RunState.RUNNING:
                return False
            self.state = state
        return True

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started
