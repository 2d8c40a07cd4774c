"""``Worker``: run handlers for the jobs of several queues (contract §12).

The facade: it holds the configuration and the lifecycle (registering,
``run``, stopping, draining). The parts it starts are apart: the dispatcher
(``dispatch``) claims for free slots (``slots``), the executors
(``execution``) run handlers on threads or the event loop, and every run ends
in the one settle step (``settle``) that writes its ``Outcome``.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ..api import JobHandle, Store
from ..engine import Capabilities
from ..errors import AlkstoreError, InvalidOptions, ProfileUnavailable
from ..names import validate_identifier, validate_name
from ..options import ScheduleOpts
from .dispatch import Dispatcher
from .execution import Execution
from .grouping import OutcomeGroups
from .heartbeats import Heartbeats
from .maintenance import DEFAULT_MAINTENANCE_EVERY, MAINTENANCE_QUEUE, Maintenance, check_every
from .observe import ABANDONED, SNOOZED, Observers, WorkerObserver
from .outcome_log import OutcomeLog
from .periodic import Declaration, Periodic, check_new, make_declaration, require_periodic
from .registry import Registration, has_registry
from .runs import RunState
from .settle import Settler
from .signals import stopping_on_signals
from .slots import Slots
from .tasks import Task, make_task

log = logging.getLogger("alkstore.worker")

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_SHUTDOWN_GRACE_S = 30.0
MAX_SHUTDOWN_GRACE_S = 86_400.0
MAX_ACK_WINDOW_S = 1.0
"""The longest ``ack_window_s``: a longer window would only hold slots (§12.10)."""
DEFAULT_ACK_WINDOW_S = 0.005
"""The window a worker groups acks in when ``ack_window_s`` is not given, its
engine has the transactions profile and it has ``DEFAULT_ACK_GROUP_MIN_SLOTS``
slots or more (§12.10; measured in docs/benchmarks.md)."""
DEFAULT_ACK_GROUP_MIN_SLOTS = 16
"""The fewest slots (its tasks' concurrency, summed) a worker groups acks at by
default: below it, each ack committing with the next claim is as fast or faster."""


def default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Worker:
    r"""Runs the handlers registered with ``task`` until stopped (contract §12).

    Args:
        store: any opened store (every certified engine works); may be left
            ``None`` and set later (``worker.store = ...``), as ``alkstore worker
            --url`` does for a worker defined in an app module.
        name: the worker id its claims carry; default ``"<host>-<pid>"``.
        shutdown_grace_s: how long a graceful stop waits for running handlers.
        maintenance: also lead the scheduler and sweep every queue, on
            ``maintenance_every`` (the built-in maintenance recipe).
        maintenance_every: a schedule spec (contract §5.2), default ``"@every 60s"``; a
            cron spec needs an engine with the cron profile.
        snooze_on_stop: when a graceful stop's grace ends, snooze (to now) the jobs
            whose handlers are still running instead of leaving their claims to
            lapse: another worker takes them at once and no attempt is spent
            (contract §12.5). Needs an engine with the snooze profile.
        observers: ``WorkerObserver`` objects told about every run (contract §12.8), e.g.
            ``alkstore.prometheus.WorkerMetrics()``; more with ``observe``.
        ack_window_s: group the acks, retries and fails of runs finishing within
            this many seconds (at most ``MAX_ACK_WINDOW_S``) into one transaction, one
            commit per group of up to ``MAX_ACK_GROUP`` (contract §12.10); a run's slot
            is freed once its group is written. ``0``: each outcome commits on its
            own (an ack with the next claim). ``None`` (the default):
            ``DEFAULT_ACK_WINDOW_S`` on an engine with the transactions profile for a
            worker of at least ``DEFAULT_ACK_GROUP_MIN_SLOTS`` slots, else ``0``; a
            window ``> 0`` needs the profile.
        durable_acks: ``False`` lets the worker's acks (alone, with the next claim,
            or grouped) commit without waiting for the disk on an engine with the
            ``async_acks`` profile (contract §12.11): an engine crash may then lose
            the last acks, and those jobs run again; no other write is affected.
            An engine without the profile acks durably, as with ``True`` (the
            default).

    Raises:
        InvalidName: ``name`` is malformed.
        InvalidOptions: ``shutdown_grace_s`` is not a non-negative number,
            ``ack_window_s`` is not a number in ``[0, MAX_ACK_WINDOW_S]``,
            ``durable_acks`` is not a bool, or an observer is not a ``WorkerObserver``.
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
        snooze_on_stop: bool = False,
        observers: Iterable[WorkerObserver] = (),
        ack_window_s: float | None = None,
        durable_acks: bool = True,
    ) -> None:
        self.store = store
        self.name = validate_identifier(
            name if name is not None else default_worker_name(), "worker name"
        )
        self.shutdown_grace_s = _grace(shutdown_grace_s)
        self.maintenance = bool(maintenance)
        self.maintenance_every = check_every(maintenance_every)
        self.snooze_on_stop = bool(snooze_on_stop)
        self.ack_window_s: float | None = (
            None if ack_window_s is None else _window(ack_window_s)
        )  # None: the default, resolved against the engine in run()
        self.durable_acks = _durable(durable_acks)
        self._tasks: dict[str, Task] = {}
        self._declarations: dict[str, Declaration] = {}
        self._lock = threading.Lock()
        """Guards registering and configuring against ``run``."""
        self._started = False
        self._stopping = threading.Event()
        self._forced = threading.Event()
        # Set once the stop's grace is over (or at a forced stop): an outcome the
        # store could not take is no longer written again (§12.9).
        self._give_up = threading.Event()
        self._slots = Slots()
        self._heartbeats = Heartbeats()
        self._outcomes = OutcomeLog(log)
        self._observers = Observers(_observers(observers))

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

    def periodic(
        self,
        name: str,
        spec: str,
        *,
        queue: str | None = None,
        payload: Any = None,
        opts: ScheduleOpts | None = None,
        concurrency: int = 1,
    ) -> Callable[[F], F]:
        """Declare the schedule ``name`` with this worker (contract 1.2 §5.11); as a
        decorator, also register the function as the handler of its queue.

        ``worker.periodic("digest", "0 9 * * *", opts=ScheduleOpts(timezone="Europe/Berlin"))``
        over ``def digest(job): ...`` fires ``payload`` into the queue ``"digest"``
        every day at 09:00 in Berlin and runs ``digest`` for each fire. Called
        without decorating, it only declares (the queue's handler lives elsewhere).

        When ``run`` starts, before it claims anything, the worker declares every
        schedule (``store.declare_schedule``: an unchanged declaration keeps its
        boundary, so a fleet starting at once fires each boundary once), leads the
        scheduler so they fire, and renews their lease every third of
        ``DECLARATION_LEASE_S``. A schedule the app stops declaring lapses once no
        running worker renews it, and the next tick removes it.

        Args:
            name: the schedule's name.
            spec: a schedule spec (contract §5.2).
            queue: the queue its fires go to; default ``name``.
            payload: what each fire enqueues; default ``None``.
            opts: ``ScheduleOpts`` (zone, catch-up policy, the fired jobs' stamps).
            concurrency: the decorated handler's, as for ``task``.

        Raises:
            InvalidName: ``name`` or ``queue`` is malformed.
            ReservedName: ``name`` or ``queue`` starts with the reserved prefix.
            InvalidSpec: ``spec`` is not in the grammar, or the zone is unknown.
            InvalidOptions: ``opts`` is not a ``ScheduleOpts``, ``name`` is already
                declared, ``run`` has started, or (decorating) as for ``task``.
            PayloadError: ``payload`` is not JSON-serializable or is too large.
        """
        declaration = make_declaration(name, spec, queue, payload, opts)
        with self._lock:
            if self._started:
                raise InvalidOptions("schedules must be declared before run()")
            check_new(self._declarations, declaration)
            self._declarations[declaration.name] = declaration

        def register(handler: F) -> F:
            self._add(make_task(declaration.queue, handler, concurrency))
            return handler

        return register

    @property
    def declarations(self) -> list[Declaration]:
        """The declared schedules (``periodic``), in declaration order."""
        return list(self._declarations.values())

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
        snooze_on_stop: bool | None = None,
        ack_window_s: float | None = None,
        durable_acks: bool | None = None,
    ) -> None:
        """Adjust a defined worker before ``run`` (what ``alkstore worker``'s flags do).

        Args:
            queues: serve only these of the registered tasks' queues (every
                declared schedule is still declared: declarations are the
                application's, §5.11).
            concurrency: run up to this many jobs of each task at once.
            maintenance: turn the built-in maintenance on or off.
            name: the worker id its claims carry.
            shutdown_grace_s: how long a graceful stop waits for running handlers.
            snooze_on_stop: snooze, rather than abandon, the jobs still running
                when the grace ends.
            ack_window_s: group acks within this window (§12.10; ``0``: off;
                not given: as the worker says).
            durable_acks: ``False``: acks may commit without waiting for the disk (§12.11).

        Raises:
            InvalidOptions: a queue has no registered task, ``concurrency`` is
                not an int within 1..1000, ``shutdown_grace_s`` or ``ack_window_s``
                is out of range, ``durable_acks`` is not a bool, or ``run`` has started.
            InvalidName: ``name`` is malformed.
        """
        if name is not None:
            self.name = validate_identifier(name, "worker name")
        if shutdown_grace_s is not None:
            self.shutdown_grace_s = _grace(shutdown_grace_s)
        if ack_window_s is not None:
            self.ack_window_s = _window(ack_window_s)
        if durable_acks is not None:
            self.durable_acks = _durable(durable_acks)
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
            if snooze_on_stop is not None:
                self.snooze_on_stop = bool(snooze_on_stop)

    def observe(self, observer: WorkerObserver) -> None:
        """Tell ``observer`` about every run from now on (contract §12.8); before ``run``.

        Raises:
            InvalidOptions: ``observer`` is not a ``WorkerObserver``, or ``run`` has
                started.
        """
        (checked,) = _observers((observer,))
        with self._lock:
            if self._started:
                raise InvalidOptions("observe() must come before run()")
            self._observers.add(checked)

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
            self._give_up.set()
        self._stopping.set()
        for run in self._slots.wake():
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

    # -- running ----------------------------------------------------------------------
    def run(self) -> None:
        """Claim and run jobs until stopped (SIGTERM/SIGINT, or ``stop``); then
        wait for running handlers up to ``shutdown_grace_s`` and return.

        Jobs whose handler has not finished by then are never acked: their
        claims lapse and another worker takes them (or, with ``snooze_on_stop``,
        they are snoozed to now).

        Raises:
            InvalidOptions: no store, or no task, declaration or maintenance, or
                ``run`` was called before.
            ProfileUnavailable: ``maintenance=True`` on an engine without a
                scheduler, ``snooze_on_stop`` on one without snooze, or a
                declared schedule (``periodic``) on one without the periodic profile.
        """
        with self._lock:
            if self._started:
                raise InvalidOptions("a Worker runs once; make a new one")
            store = self.store
            if store is None:
                raise InvalidOptions("the worker has no store: Worker(store) or worker.store = ...")
            if not self._tasks and not self.maintenance and not self._declarations:
                # Declarations alone make a scheduler process, like Celery's beat.
                raise InvalidOptions("no task is registered: decorate a handler with task()")
            if self.snooze_on_stop:
                _require(store, "snooze")
            slots = sum(task.concurrency for task in self._tasks.values())
            window = _resolved_window(store, self.ack_window_s, slots)
            if window:
                _require(store, "transactions")
            if self._declarations:
                require_periodic(store)
            self._started = True
        maintenance = None
        if self.maintenance:
            maintenance = Maintenance(store, self.name, self.maintenance_every, list(self._tasks))
            if MAINTENANCE_QUEUE not in self._tasks:
                self._tasks[MAINTENANCE_QUEUE] = make_task(MAINTENANCE_QUEUE, maintenance.sweep, 1)
        periodic = None
        if self._declarations:
            periodic = Periodic(
                store, self.name, list(self._declarations.values()), lead=maintenance is None
            )
        tasks = list(self._tasks.values())
        registration = None
        if has_registry(store):
            registration = Registration(store, self.name, [task.queue for task in tasks])
            self._observers.add(registration.finished)
        self._slots.open(tasks)
        queues = {task.queue: store.queue(task.queue) for task in tasks}
        settler = Settler(
            self.name,
            queues,
            self._slots,
            self._heartbeats,
            self._outcomes,
            self._stopping,
            self._observers,
            self._give_up,
        )
        if not self.durable_acks:
            settler.acks_without_waiting()
        groups = None
        if window:
            groups = OutcomeGroups(
                store,
                window,
                settler.group_written,
                settler.write_alone,
                self._slots.busy,
            )
            settler.group_outcomes(groups)
        execution = Execution(
            store, tasks, settler, self._slots, self._heartbeats, self._stopping, self._observers
        )
        dispatcher = Dispatcher(
            self.name, store, tasks, queues, self._slots, self._stopping, execution.begin
        )
        with stopping_on_signals(self._on_signal):
            if maintenance is not None:
                maintenance.start()  # first: an engine without a scheduler fails here
            if periodic is not None:
                try:
                    periodic.start()  # declared before the first claim
                except BaseException:
                    if maintenance is not None:
                        maintenance.close()
                    raise
            if registration is not None:
                try:
                    registration.start()  # registered before the first claim
                except BaseException:
                    if maintenance is not None:
                        maintenance.close()
                    if periodic is not None:
                        periodic.close()
                    raise
            try:
                self._outcomes.start()
                if groups is not None:
                    groups.start()
                execution.start()
                self._heartbeats.start()
                log.info(
                    "worker %s started: %s",
                    self.name,
                    ", ".join(f"{t.queue} x{t.concurrency}" for t in tasks),
                )
                dispatcher.run()
            finally:
                self._drain()  # a grouped ack holds its slot: the drain waits for it
                self._give_up.set()
                if groups is not None:
                    groups.close()  # what a forced stop left: written now, once
                if maintenance is not None:
                    maintenance.close()
                if periodic is not None:
                    periodic.close()
                if registration is not None:
                    registration.close()  # after the drain: its jobs are settled
                self._heartbeats.close()
                execution.close()
                self._outcomes.close()
        log.info("worker %s stopped", self.name)

    def _drain(self) -> None:
        """Wait for running handlers (heartbeats continue), then abandon the rest
        (or snooze them, with ``snooze_on_stop``)."""
        count = self._slots.busy()
        if count:
            log.info("waiting up to %.0f s for %d running job(s)", self.shutdown_grace_s, count)
        for run in self._slots.drain(self.shutdown_grace_s, self._forced):
            if not run.end(RunState.ABANDONED):
                continue  # settling: its outcome is being written
            run.tell_to_stop()
            if run.cancel is not None:
                run.cancel()
            self._heartbeats.discard(run)
            job = run.handle.job
            if self.snooze_on_stop and self._snoozed(run.handle):
                self._observers.run_finished(job, SNOOZED, run.elapsed_s())
                continue
            self._observers.run_finished(job, ABANDONED, run.elapsed_s())
            log.warning(
                "job abandoned: queue=%s id=%d attempt=%d after %.3fs; "
                "not acked, its claim lapses and it runs again",
                job.queue,
                job.id,
                job.attempts,
                run.elapsed_s(),
            )

    def _snoozed(self, handle: JobHandle) -> bool:
        """Snooze a job cut off by the stop; False leaves its claim to lapse."""
        job = handle.job
        try:
            written = handle.snooze(0)
        except AlkstoreError as exc:
            log.warning("snooze of job %d on stop failed: %s", job.id, exc)
            return False
        if written:
            log.info(
                "job snoozed on stop: queue=%s id=%d attempt=%d; another worker takes it",
                job.queue,
                job.id,
                job.attempts,
            )
        return written


def _require(store: Store, profile: str) -> None:
    capabilities = getattr(store, "capabilities", None)
    if isinstance(capabilities, Capabilities) and not getattr(capabilities, profile):
        raise ProfileUnavailable(getattr(store, "engine_name", ""), profile)


def _observers(observers: Iterable[object]) -> list[WorkerObserver]:
    checked: list[WorkerObserver] = []
    for observer in observers:
        if not isinstance(observer, WorkerObserver):
            raise InvalidOptions(
                f"a worker observer needs run_started, run_finished and heartbeat_lost; "
                f"got {observer!r}"
            )
        checked.append(observer)
    return checked


def _resolved_window(store: Store, window: float | None, slots: int) -> float:
    """``window``, or for ``None`` the default: ``DEFAULT_ACK_WINDOW_S`` where the
    engine has the transactions profile and the worker ``slots`` are at least
    ``DEFAULT_ACK_GROUP_MIN_SLOTS``, else ``0`` (no grouping)."""
    if window is not None:
        return window
    capabilities = getattr(store, "capabilities", None)
    grouped = isinstance(capabilities, Capabilities) and capabilities.transactions
    return DEFAULT_ACK_WINDOW_S if grouped and slots >= DEFAULT_ACK_GROUP_MIN_SLOTS else 0.0


def _window(seconds: object) -> float:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not 0 <= seconds <= MAX_ACK_WINDOW_S
    ):
        raise InvalidOptions(
            f"ack_window_s must be a number of seconds in [0, {MAX_ACK_WINDOW_S:g}], "
            f"got {seconds!r}"
        )
    return float(seconds)


def _durable(durable: object) -> bool:
    if not isinstance(durable, bool):
        raise InvalidOptions(f"durable_acks must be a bool, got {durable!r}")
    return durable


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
