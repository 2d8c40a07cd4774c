"""Running a claimed job's handler: a sync one on a thread of its own, an async
one on the worker's event loop.

Either way the handler's return or exception becomes an ``Outcome``
(``outcome_of``) and goes to the one settle step; a job settling claimed for
the run's slot runs next on the same thread (or in the same task), so a busy
queue's slot goes straight to its next job.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..aio import AsyncStore
from ..api import JobHandle, Store
from .executors import DaemonThreads, LoopThread
from .heartbeats import Heartbeats
from .observe import Observers
from .outcomes import ABANDONED, Outcome, outcome_of, returned
from .runs import JobRun
from .settle import Settler
from .slots import Slots
from .tasks import Task


class Execution:
    """The handler threads and the event loop of one ``Worker.run``."""

    def __init__(
        self,
        store: Store,
        tasks: Sequence[Task],
        settler: Settler,
        slots: Slots,
        heartbeats: Heartbeats,
        stopping: threading.Event,
        observers: Observers,
    ) -> None:
        threads_needed = sum(task.concurrency for task in tasks if not task.is_async)
        self._threads = DaemonThreads(max(threads_needed, 1), "alkstore-handler")
        has_async = any(task.is_async for task in tasks)
        self._loop = LoopThread("alkstore-loop") if has_async else None
        # Async handlers reach the store through alkstore.aio, never from the loop.
        self._aio = AsyncStore(store) if has_async else None
        self._store = store
        self._settler = settler
        self._slots = slots
        self._heartbeats = heartbeats
        self._stopping = stopping
        self._observers = observers

    def start(self) -> None:
        self._threads.start()
        if self._loop is not None:
            self._loop.start()

    def close(self) -> None:
        """Let idle threads exit and stop the loop; the store stays open."""
        self._threads.close()
        if self._loop is not None:
            self._loop.close()
        if self._aio is not None:
            self._aio.detach()

    def begin(self, task: Task, handle: JobHandle) -> None:
        """Run the handler of a job the dispatcher claimed (its slot taken now)."""
        run = self._new_run(task, handle)
        self._slots.take(run)
        self._heartbeats.add(run)
        if task.is_async:
            if self._loop is None:  # pragma: no cover - made whenever a task is async
                raise RuntimeError("an async task without the worker's loop")
            run.cancel = self._loop.submit(self._run_async(run)).cancel
        else:
            self._threads.submit(lambda: self._run_sync(run))

    def _run_sync(self, first: JobRun) -> None:
        run: JobRun | None = first
        while run is not None:
            try:
                value = run.task.handler(*_arguments(run))
            except BaseException as exc:  # every outcome is settled; none escapes the thread
                if self._observers:
                    self._observers.run_raised(run.handle.job, exc)
                outcome: Outcome = outcome_of(exc)
            else:
                outcome = returned(run.handle.job, value)
            run = self._follow(run, self._settler.settle(run, outcome), None)

    async def _run_async(self, first: JobRun) -> None:
        aio = self._aio
        if aio is None:  # pragma: no cover - made whenever a task is async
            raise RuntimeError("an async task without the worker's async store")
        run: JobRun | None = first
        cancel = _cancelling_this_task()
        while run is not None:
            try:
                value = await run.task.handler(*_arguments(run))
            except asyncio.CancelledError:
                self._settler.settle(run, ABANDONED)  # writes nothing: fine on the loop
                raise
            except BaseException as exc:
                if self._observers:
                    self._observers.run_raised(run.handle.job, exc)
                outcome: Outcome = outcome_of(exc)
            else:
                outcome = returned(run.handle.job, value)
            # Settling writes to the store: on the async store's threads. A stop
            # never cancels a settling run (it abandons only running handlers).
            claimed = await aio.call(self._settler.settle, run, outcome)
            run = self._follow(run, claimed, cancel)

    def _follow(
        self, done: JobRun, claimed: JobHandle | None, cancel: Callable[[], object] | None
    ) -> JobRun | None:
        """The run of the job settling claimed for ``done``'s slot, holding it now."""
        if claimed is None:
            return None
        following = self._new_run(done.task, claimed)
        following.cancel = cancel  # before a stop can see it
        self._slots.hand_on(done, following)
        self._heartbeats.add(following)
        return following

    def _new_run(self, task: Task, handle: JobHandle) -> JobRun:
        aio = self._aio if task.is_async else None
        run = JobRun(task, handle, self._store, aio, self._stopping, self._observers)
        if self._observers:
            self._observers.run_started(handle.job)
        return run


def _arguments(run: JobRun) -> tuple[Any, ...]:
    job = run.handle.job
    return (job, run.context) if run.task.takes_context else (job,)


def _cancelling_this_task() -> Callable[[], object]:
    """A thread-safe cancel of the running task (a stop calls it from its thread)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - called from a coroutine run as a task
        raise RuntimeError("not in a task")
    return lambda: loop.call_soon_threadsafe(task.cancel)
