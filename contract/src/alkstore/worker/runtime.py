"""``Worker``: run handlers for the jobs of several queues (contract §12).

One dispatcher (the thread that calls ``run``) claims only as many jobs as
there are free slots, first in batches, then by waiting on every queue with a
free slot at once (``Store.claim_wait_any``). A finishing job frees a slot and
interrupts that wait, so the set of queues waited on is always current.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from ..aio import AsyncStore
from ..api import JobHandle, Queue, Store
from ..errors import AlkstoreError, EngineUnavailable, InvalidOptions, StoreClosed
from ..names import validate_identifier, validate_name
from ..stop import StopToken
from .executors import DaemonThreads, LoopThread
from .heartbeats import Heartbeats
from .maintenance import DEFAULT_MAINTENANCE_EVERY, MAINTENANCE_QUEUE, Maintenance, check_every
from .outcome_log import OutcomeLog
from .outcomes import Fail, Retry
from .runs import JobRun, RunState
from .tasks import Task, make_task

log = logging.getLogger("alkstore.worker")

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_SHUTDOWN_GRACE_S = 30.0
MAX_SHUTDOWN_GRACE_S = 86_400.0
OUTAGE_PAUSE_S = 1.0
"""How long the dispatcher waits after a failed claim before it tries again."""
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Worker:
    """Runs the handlers registered with ``task`` until stopped (contract §12).

    Args:
        store: any opened store (every certified engine works); may be left
            ``None`` and set later (``worker.store = ...``), as ``alkstore worker
            --url`` does for a worker defined in an app module.
        name: the worker id its claims carry; default ``"<host>-<pid>"``.
        shutdown_grace_s: how long a graceful stop waits for running handlers.
        maintenance: also lead the scheduler and sweep every queue, on
            ``maintenance_every`` (the built-in maintenance recipe).
        maintenance_every: a schedule spec, default ``"@every 60s"``.

    Raises:
        InvalidName: ``name`` is malformed.
        InvalidOptions: ``shutdown_grace_s`` is not a non-negative number.
        InvalidSpec: ``maintenance_every`` is not a schedule spec.
    """

    def __init__(
        self,
        store: Store | None = None,
        name: str | None = None,
        *,
        shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S,
        maintenance: bool = False,
        maintenance_every: str = DEFAULT_MAINTENANCE_EVERY,
    ) -> None:
        self.store = store
        self.name = validate_identifier(
            name if name is not None else default_worker_name(), "worker name"
        )
        self.shutdown_grace_s = _grace(shutdown_grace_s)
        self.maintenance = bool(maintenance)
        self.maintenance_every = check_every(maintenance_every)
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()
        self._running: dict[str, set[JobRun]] = {}
        self._stopping = threading.Event()
        self._forced = threading.Event()
        self._interrupt = StopToken()
        self._all_done = threading.Condition(self._lock)
        self._started = False
        self._outcomes = OutcomeLog(log)

    # -- registering -----------------------------------------------------------------
    def task(self, queue: str, *, concurrency: int = 1) -> Callable[[F], F]:
        """Register the decorated function as the handler of ``queue``'s jobs.

        The handler takes the ``Job`` (or the ``Job`` and a ``JobContext``);
        returning acks the job, ``raise Retry(...)`` retries it, ``raise
        Fail(...)`` dead-letters it, any other exception retries it with the
        traceback as its error. A coroutine function runs on the worker's
        event loop, any other function on a thread of its own. The function is
        returned unchanged.

        Raises:
            InvalidName: ``queue`` is malformed.
            ReservedName: ``queue`` starts with the reserved prefix.
            InvalidOptions: ``queue`` already has a handler, ``concurrency`` is
                not an int within 1..1000, or the handler takes no argument.
        """
        validate_name(queue, "queue name")

        def register(handler: F) -> F:
            self._add(make_task(queue, handler, concurrency))
            return handler

        return register

    def _add(self, task: Task) -> None:
        with self._lock:
            if self._started:
                raise InvalidOptions("tasks must be registered before run()")
            if task.queue in self._tasks:
                raise InvalidOptions(f"queue {task.queue!r} already has a handler")
            self._tasks[task.queue] = task

    def configure(
        self,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        maintenance: bool | None = None,
        name: str | None = None,
        shutdown_grace_s: float | None = None,
    ) -> None:
        """Adjust a defined worker before ``run`` (what ``alkstore worker``'s flags do).

        Args:
            queues: serve only these of the registered tasks' queues.
            concurrency: run up to this many jobs of each task at once.
            maintenance: turn the built-in maintenance on or off.
            name: the worker id its claims carry.
            shutdown_grace_s: how long a graceful stop waits for running handlers.

        Raises:
            InvalidOptions: a queue has no registered task, ``concurrency`` is
                not an int within 1..1000, ``shutdown_grace_s`` is out of range,
                or ``run`` has started.
            InvalidName: ``name`` is malformed.
        """
        if name is not None:
            self.name = validate_identifier(name, "worker name")
        if shutdown_grace_s is not None:
            self.shutdown_grace_s = _grace(shutdown_grace_s)
        with self._lock:
            if self._started:
                raise InvalidOptions("configure() must come before run()")
            tasks = dict(self._tasks)
            if queues is not None:
                unknown = sorted(set(queues) - set(tasks))
                if unknown:
                    raise InvalidOptions(
                        f"no task is registered for queue(s) {', '.join(map(repr, unknown))}; "
                        f"registered: {', '.join(map(repr, tasks)) or 'none'}"
                    )
                tasks = {name: task for name, task in tasks.items() if name in set(queues)}
            if concurrency is not None:
                tasks = {
                    name: make_task(name, task.handler, concurrency) for name, task in tasks.items()
                }
            self._tasks = tasks
            if maintenance is not None:
                self.maintenance = bool(maintenance)

    @property
    def tasks(self) -> list[Task]:
        """The registered tasks, in registration order."""
        return list(self._tasks.values())

    # -- stopping ---------------------------------------------------------------------
    def stop(self, *, force: bool = False) -> None:
        """Stop claiming; ``run`` returns once running handlers finish (at most
        ``shutdown_grace_s``), or at once with ``force=True`` (or a second call).
        Thread-safe; what a SIGTERM or SIGINT does while ``run`` is running."""
        if force or self._stopping.is_set():
            self._forced.set()
        self._stopping.set()
        self._interrupt.stop()
        with self._all_done:
            running = [run for runs in self._running.values() for run in runs]
            self._all_done.notify_all()
        for run in running:
            run.tell_to_stop()  # handlers that watch their context may wrap up

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested (a signal, or ``stop``)."""
        return self._stopping.is_set()

    def _on_signal(self, signum: int) -> None:
        first = not self._stopping.is_set()
        self.stop()  # first: a log line may block (a full stderr pipe)
        log.warning(
            "%s: %s",
            signal.Signals(signum).name,
            "stopping (again to stop at once)" if first else "stopping at once",
        )

    @contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGTERM and SIGINT stop the worker while ``run`` runs on the main thread.

        The handler itself only writes the signal's number to a pipe: Python runs
        it on the main thread between two bytecodes, wherever that thread is, and
        it may hold any lock at that instant (the dispatcher's, a stop token's, a
        logging handler's); taking one of those again would hang the process
        until it is killed. A thread of ours reads the pipe and does the stopping.
        """
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach only the main thread; the caller stops us
            return
        readable, writable = os.pipe()
        relay = threading.Thread(
            target=self._relay_signals, args=(readable,), name="alkstore-signals", daemon=True
        )
        relay.start()

        def on_signal(signum: int, frame: object) -> None:
            os.write(writable, bytes([signum]))

        previous = {sig: signal.signal(sig, on_signal) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(writable)  # the relay reads to the end of the pipe, then returns
            relay.join()
            os.close(readable)

    def _relay_signals(self, readable: int) -> None:
        while signals := os.read(readable, 64):
            for signum in signals:
                try:
                    self._on_signal(signum)
                except Exception:  # a stop callback of a handler's; the next signal still counts
                    log.exception("stopping on a signal raised")

    # -- running ----------------------------------------------------------------------
    def run(self) -> None:
        """Claim and run jobs until stopped (SIGTERM/SIGINT, or ``stop``); then
        wait for running handlers up to ``shutdown_grace_s`` and return.

        Jobs whose handler has not finished by then are never acked: their
        claims lapse and another worker takes them.

        Raises:
            InvalidOptions: no store or no task, or ``run`` was called before.
            ProfileUnavailable: ``maintenance=True`` on an engine without a scheduler.
        """
        with self._lock:
            if self._started:
                raise InvalidOptions("a Worker runs once; make a new one")
            store = self.store
            if store is None:
                raise InvalidOptions("the worker has no store: Worker(store) or worker.store = ...")
            if not self._tasks and not self.maintenance:
                raise InvalidOptions("no task is registered: decorate a handler with task()")
            self._started = True
        maintenance = None
        if self.maintenance:
            maintenance = Maintenance(store, self.name, self.maintenance_every, list(self._tasks))
            if MAINTENANCE_QUEUE not in self._tasks:
                self._tasks[MAINTENANCE_QUEUE] = make_task(MAINTENANCE_QUEUE, maintenance.sweep, 1)
        tasks = list(self._tasks.values())
        self._running = {task.queue: set() for task in tasks}
        queues = {task.queue: store.queue(task.queue) for task in tasks}
        self._queues = queues
        threads_needed = sum(task.concurrency for task in tasks if not task.is_async)
        self._threads = DaemonThreads(max(threads_needed, 1), "alkstore-handler")
        self._loop = LoopThread("alkstore-loop") if any(t.is_async for t in tasks) else None
        # Async handlers reach the store through alkstore.aio, never from the loop.
        self._aio = AsyncStore(store) if self._loop is not None else None
        self._store = store
        self._heartbeats = Heartbeats()
        with self._signals():
            if maintenance is not None:
                maintenance.start()  # first: an engine without a scheduler fails here
            try:
                self._outcomes.start()
                self._threads.start()
                if self._loop is not None:
                    self._loop.start()
                self._heartbeats.start()
                log.info(
                    "worker %s started: %s",
                    self.name,
                    ", ".join(f"{t.queue} x{t.concurrency}" for t in tasks),
                )
                self._dispatch(store, tasks, queues)
            finally:
                self._drain()
                if maintenance is not None:
                    maintenance.close()
                self._heartbeats.close()
                self._threads.close()
                if self._loop is not None:
                    self._loop.close()
                if self._aio is not None:
                    self._aio.detach()
                self._outcomes.close()
        log.info("worker %s stopped", self.name)

    def _dispatch(self, store: Store, tasks: list[Task], queues: dict[str, Queue]) -> None:
        turn = 0
        while not self._stopping.is_set():
            # A fresh token before reading the free slots: a slot freed from here
            # on interrupts the wait below, so it never waits on a stale set.
            with self._lock:
                self._interrupt = StopToken()
                interrupt = self._interrupt
                free = {t.queue: t.concurrency - len(self._running[t.queue]) for t in tasks}
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
                    for batch_handle in queues[task.queue].claim_batch(self.name, free[task.queue]):
                        self._start(task, batch_handle)
                        claimed = True
                if claimed:
                    continue
                handle = store.claim_wait_any(
                    [queues[t.queue] for t in eligible], self.name, stop=interrupt
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
                self._start(self._tasks[handle.job.queue], handle)

    def _start(self, task: Task, handle: JobHandle) -> None:
        run = JobRun(
            task, handle, self._store, self._aio if task.is_async else None, self._stopping
        )
        with self._lock:
            self._running[task.queue].add(run)
        self._heartbeats.add(run)
        if task.is_async:
            loop = self._loop
            if loop is None:  # pragma: no cover - run() makes it whenever a task is async
                raise RuntimeError("an async task without the worker's loop")
            run.future = loop.submit(self._run_async(run))
        else:
            self._threads.submit(lambda: self._run_sync(run))

    def _run_sync(self, first: JobRun) -> None:
        run: JobRun | None = first
        while run is not None:
            task = run.task
            args = (run.handle.job, run.context) if task.takes_context else (run.handle.job,)
            try:
                task.handler(*args)
            except BaseException as exc:  # every outcome is reported; none escapes the thread
                self._settle(run, exc, traceback.format_exc())
                following = self._chain(run)
            else:
                following = self._succeed(run)
            if following is None:
                self._free(run)
            run = following

    def _succeed(self, run: JobRun) -> JobRun | None:
        """Ack a returned handler's job and, unless the worker is stopping, claim its
        task's next job in the same write (``ack_and_claim``: one write per job
        on a busy queue). Returns the run of the job claimed, if any."""
        if self._stopping.is_set() or run.lost:
            self._settle(run, None, "")
            return None
        if not self._finished(run):
            return None
        try:
            acked, claimed = run.handle.ack_and_claim(self.name, 1)
        except AlkstoreError as error:
            # The ack may not have committed (nor, then, the claim): if so, the
            # claim lapses and the job runs again elsewhere.
            self._log_outcome(run, f"not confirmed ({type(error).__name__}: {error})", None)
            return None
        self._log_outcome(run, "ack" if acked else "ack refused (claim lost)", None)
        return self._follow(run, claimed[0]) if claimed else None

    def _chain(self, done: JobRun) -> JobRun | None:
        """The next job of ``done``'s task, claimed on this thread: a busy queue's
        slot goes straight to its next job, without waking the dispatcher (its
        slot is never free, so no other queue loses a turn to it)."""
        if self._stopping.is_set():
            return None
        try:
            handles = self._queues[done.task.queue].claim_batch(self.name, 1)
        except AlkstoreError:
            return None  # an outage: the dispatcher waits it out
        return self._follow(done, handles[0]) if handles else None

    def _follow(self, done: JobRun, handle: JobHandle) -> JobRun | None:
        """Hand ``done``'s slot to the job just claimed for it."""
        if self._stopping.is_set():
            # Claimed as the stop arrived: given back unused (no attempt spent),
            # rather than started now.
            with suppress(AlkstoreError):
                handle.release()
            return None
        following = JobRun(done.task, handle, self._store, None, self._stopping)
        with self._lock:
            slots = self._running[done.task.queue]
            slots.discard(done)
            slots.add(following)
        self._heartbeats.add(following)
        return following

    async def _run_async(self, run: JobRun) -> None:
        task = run.task
        aio = self._aio
        if aio is None:  # pragma: no cover - run() makes it whenever a task is async
            raise RuntimeError("an async task without the worker's async store")
        args = (run.handle.job, run.context) if task.takes_context else (run.handle.job,)
        try:
            await task.handler(*args)
        except asyncio.CancelledError:
            self._finish(run, None, "", cancelled=True)
            raise
        except BaseException as exc:
            trace = traceback.format_exc()
            # The outcome is a store call: on the async store's threads, never the loop.
            await aio.call(self._finish, run, exc, trace)
        else:
            await aio.call(self._finish, run, None, "")

    def _finish(
        self, run: JobRun, exc: BaseException | None, trace: str, *, cancelled: bool = False
    ) -> None:
        try:
            self._settle(run, exc, trace, cancelled=cancelled)
        finally:
            self._free(run)

    def _settle(
        self, run: JobRun, exc: BaseException | None, trace: str, *, cancelled: bool = False
    ) -> None:
        """Apply (or, for a lost or abandoned run, discard) the outcome, and log it."""
        if not self._finished(run):
            return
        if cancelled:
            outcome = "abandoned"
        elif run.lost:
            outcome = "lost"
        else:
            outcome = self._apply(run.handle, exc, trace)
        self._log_outcome(run, outcome, exc)

    def _finished(self, run: JobRun) -> bool:
        """End ``run`` (its heartbeats stop); ``False`` if a stop that could wait no
        longer abandoned it first: then its outcome is not applied."""
        if not run.end(RunState.FINISHED):
            return False
        self._heartbeats.discard(run)
        return True

    def _log_outcome(self, run: JobRun, outcome: str, exc: BaseException | None) -> None:
        level = logging.INFO if outcome in ("ack", "retry") else logging.WARNING
        if outcome == "retry" and exc is not None and not isinstance(exc, Retry):
            level = logging.WARNING
        job = run.handle.job
        self._outcomes.note(
            level, outcome, job.queue, job.id, job.attempts, run.elapsed_s(), _why(exc)
        )

    def _apply(self, handle: JobHandle, exc: BaseException | None, trace: str) -> str:
        """Apply the handler's outcome; return its name for the log."""
        try:
            if exc is None:
                applied, outcome = handle.ack(), "ack"
            elif isinstance(exc, Retry):
                applied, outcome = handle.retry(exc.error, exc.delay_s), "retry"
            elif isinstance(exc, Fail):
                applied, outcome = handle.fail(exc.error), "fail"
            else:
                applied, outcome = handle.retry(trace or repr(exc)), "retry"
        except AlkstoreError as error:
            # Not applied: the claim lapses and the job runs again elsewhere.
            return f"not recorded ({type(error).__name__}: {error})"
        if not applied:
            return f"{outcome} refused (claim lost)"
        if outcome == "retry" and handle.job.attempts >= handle.job.max_attempts:
            return "dead (max attempts exceeded)"
        return outcome

    def _free(self, run: JobRun) -> None:
        with self._lock:
            self._running[run.task.queue].discard(run)
            interrupt = self._interrupt
            self._all_done.notify_all()
        interrupt.stop()

    def _drain(self) -> None:
        """Wait for running handlers (heartbeats continue), then abandon the rest."""
        deadline = time.monotonic() + self.shutdown_grace_s
        with self._all_done:
            count = sum(len(runs) for runs in self._running.values())
            if count:
                log.info("waiting up to %.0f s for %d running job(s)", self.shutdown_grace_s, count)
            while any(self._running.values()) and not self._forced.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._all_done.wait(left)
            leftover = [run for runs in self._running.values() for run in runs]
        for run in leftover:
            if not run.end(RunState.ABANDONED):
                continue
            run.tell_to_stop()
            if run.future is not None:
                run.future.cancel()
            self._heartbeats.discard(run)
            job = run.handle.job
            log.warning(
                "job abandoned: queue=%s id=%d attempt=%d after %.3fs; "
                "not acked, its claim lapses and it runs again",
                job.queue,
                job.id,
                job.attempts,
                run.elapsed_s(),
            )


def _grace(seconds: object) -> float:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not 0 <= seconds <= MAX_SHUTDOWN_GRACE_S
    ):
        raise InvalidOptions(
            f"shutdown_grace_s must be a number of seconds in [0, {MAX_SHUTDOWN_GRACE_S:.0f}], "
            f"got {seconds!r}"
        )
    return float(seconds)


def _why(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    if isinstance(exc, (Retry, Fail)):
        return f" error={exc.error!r}"
    return f" error={type(exc).__name__}: {exc}"
