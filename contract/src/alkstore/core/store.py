"""``CoreStore``: the contract's reference front end over any engine's ``Driver``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .. import api
from .._surface import implements
from ..api import JobHandle, Outbox, Queue, Store
from ..clock import Clock, SystemClock, check_clock
from ..constants import MAX_PAYLOAD_BYTES, MAX_WAIT_QUEUES
from ..driver import Driver, check_methods, check_seam
from ..engine import Capabilities
from ..errors import EngineMisconfigured, InvalidOptions
from ..names import outbox_queue_name, validate_identifier, validate_name
from ..options import DEFAULT_QUEUE_OPTS, OUTBOX_QUEUE_OPTS, QueueOpts, ScheduleOpts, check_type
from ..params import Publish, QueueStatsAt
from ..payload import check_max_payload_bytes
from ..stop import StopToken
from ..timeconv import Duration
from ..values import QueueStats, QueueThroughput, Schedule, TickResult, WorkerInfo
from .claiming import claim_waiting
from .context import StoreContext
from .limits import with_limits
from .locks import CoreLock
from .pubsub import CoreSubscription
from .queues import CoreOutbox, CoreQueue
from .scheduler import CoreScheduler
from .streams import CoreStream
from .transaction import CoreTransaction
from .waiting import Deadline
from .watching import CoreWakeWatcher, watched_queues
from .workers import CoreWorkers

DEFAULT_REPOLL_S = 1.0
"""Safety-net re-poll of waiting calls when no wake arrives (engine option ``repoll_s``)."""


@implements(api.Store)
class CoreStore:
    """Thread-safe and shareable; every rule lives here, every statement in the driver.

    What ``alkstore.open(url)`` returns for every reference engine; the full
    contract of each method is on ``alkstore.api.Store`` (contract §1-§7).

    Args:
        driver: the engine's ``alkstore.driver.Driver``.
        clock: where time comes from; default ``SystemClock()``.
        repoll_s: the safety-net re-poll of waiting calls, in (0, 3600] seconds.
        capabilities: the optional profiles the engine implements (its provider's
            ``Capabilities``); a profile it lacks raises ``ProfileUnavailable``.
            Default ``Capabilities()``: the queue core only.
        engine_name: the engine's name, for messages.
        max_payload_bytes: the store's payload size bound, in bytes of JSON text in
            UTF-8: the engine option of that name, in [1, ``MAX_PAYLOAD_BYTES``]
            (default ``MAX_PAYLOAD_BYTES``; engines check it while parsing their
            options with ``alkstore.payload.check_max_payload_bytes``).

    Raises:
        InvalidOptions: ``repoll_s`` or ``max_payload_bytes`` is out of range, or
            ``clock`` is not a ``Clock``.
        EngineMisconfigured: the driver speaks the positional seam of alkstore 0.1
            (``alkstore.driver.check_seam``) or lacks a method the core calls
            (``alkstore.driver.check_methods``); the driver is closed.
    """

    def __init__(
        self,
        driver: Driver[Any],
        *,
        clock: Clock | None = None,
        repoll_s: float = DEFAULT_REPOLL_S,
        capabilities: Capabilities | None = None,
        engine_name: str = "",
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        if (
            isinstance(repoll_s, bool)
            or not isinstance(repoll_s, (int, float))
            or not (0 < repoll_s <= 3600)
        ):
            raise InvalidOptions(
                f"repoll_s must be a number of seconds in (0, 3600], got {repoll_s!r}"
            )
        check_max_payload_bytes(max_payload_bytes)
        check_clock(clock)
        if capabilities is not None:
            check_type(capabilities, Capabilities, "capabilities")
        declared = capabilities if capabilities is not None else Capabilities()
        try:
            check_seam(driver)
            check_methods(driver, declared.profiles())
        except EngineMisconfigured:
            driver.close()
            raise
        self._context = StoreContext(
            driver,
            clock if clock is not None else SystemClock(),
            repoll_s=float(repoll_s),
            capabilities=declared,
            engine_name=engine_name,
            max_payload_bytes=max_payload_bytes,
        )
        self._scheduler_front = CoreScheduler(self._context)
        self._workers_front = CoreWorkers(self._context)
        self.engine_name = engine_name

    @property
    def clock(self) -> Clock:
        return self._context.clock

    @property
    def driver(self) -> Driver[Any]:
        """The engine's driver (for engines and the conformance kit, not applications)."""
        return self._context.driver

    @property
    def capabilities(self) -> Capabilities:
        """The optional profiles this store offers (its engine's ``Capabilities``)."""
        return self._context.capabilities

    # -- public surface ---------------------------------------------------
    def queue(self, name: str, opts: QueueOpts | None = None) -> CoreQueue:
        validate_name(name, "queue name")
        if opts is not None:
            check_type(opts, QueueOpts, "opts")
            if opts.completed_retention_s is not None:
                self._context.require("results")  # before any job is stamped with it
        self._context.check_open()
        return CoreQueue(self._context, name, opts if opts is not None else DEFAULT_QUEUE_OPTS)

    def outbox(self, name: str) -> CoreOutbox:
        backing = outbox_queue_name(name)
        self._context.check_open()
        return CoreOutbox(self._context, name, backing, OUTBOX_QUEUE_OPTS)

    def lock(self, name: str) -> CoreLock:
        validate_name(name, "lock name")
        self._context.require("locks")
        return CoreLock(self._context, name)

    def claim_wait_any(
        self,
        queues: Sequence[Queue | Outbox],
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> JobHandle | None:
        chosen = self._own_queues(queues)
        validate_identifier(worker_id, "worker_id")
        if stop is not None:
            check_type(stop, StopToken, "stop")
        return claim_waiting(self._context, chosen, worker_id, Deadline(timeout), stop)

    def _own_queues(self, queues: object) -> list[CoreQueue]:
        if not isinstance(queues, (list, tuple)):
            raise InvalidOptions(
                f"queues must be a list or tuple of queue handles, got {type(queues).__name__}"
            )
        if not 1 <= len(queues) <= MAX_WAIT_QUEUES:
            raise InvalidOptions(f"queues must name 1..{MAX_WAIT_QUEUES} queues, got {len(queues)}")
        chosen: list[CoreQueue] = []
        names: set[str] = set()
        for queue in queues:
            if not isinstance(queue, CoreQueue) or not queue.opened_by(self._context):
                raise InvalidOptions(
                    f"queues must be queue or outbox handles of this store, got {queue!r}"
                )
            if queue.name in names:
                raise InvalidOptions(f"queue {queue.name!r} is named twice in queues")
            names.add(queue.name)
            chosen.append(queue)
        return chosen

    # -- operations (contract §11, ops profile) -----------------------------------
    def stats(self) -> list[QueueStats]:
        ctx = self._context
        driver = ctx.ops()
        now = ctx.now()
        return ctx.read(
            lambda c: with_limits(
                ctx, c, driver.queue_stats(c, QueueStatsAt(None, now)), every=True
            )
        )

    # -- scheduler (contract §5) ---------------------------------------
    def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        return self._scheduler_front.schedule(name, spec, queue, payload, opts)

    def declare_schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        return self._scheduler_front.declare(name, spec, queue, payload, opts)

    def renew_schedules(self, names: Sequence[str]) -> list[str]:
        return self._scheduler_front.renew(names)

    def unschedule(self, name: str) -> bool:
        return self._scheduler_front.unschedule(name)

    def get_schedule(self, name: str) -> Schedule | None:
        return self._scheduler_front.get_schedule(name)

    def schedules(self) -> list[Schedule]:
        return self._scheduler_front.schedules()

    def tick_schedules(self, worker_id: str) -> TickResult:
        return self._scheduler_front.tick(worker_id)

    def run_schedules(self, stop: StopToken, worker_id: str | None = None) -> None:
        self._scheduler_front.run(stop, worker_id)

    # -- the worker registry (contract 1.2 §19, workers profile) -------------------
    def register_worker(self, info: WorkerInfo) -> WorkerInfo:
        return self._workers_front.register(info)

    def heartbeat_worker(self, worker_id: str, finished: Mapping[str, int] | None = None) -> bool:
        return self._workers_front.heartbeat(worker_id, finished)

    def throughput(self) -> list[QueueThroughput]:
        return self._workers_front.throughput()

    def deregister_worker(self, worker_id: str) -> bool:
        return self._workers_front.deregister(worker_id)

    def workers(self) -> list[WorkerInfo]:
        return self._workers_front.listing()

    # -- streams and pub/sub (contract §7) --------------------------------
    def stream(self, name: str) -> CoreStream:
        validate_name(name, "stream name")
        self._context.streams()
        return CoreStream(self._context, name)

    def notify(self, channel: str, payload: Any) -> None:
        validate_name(channel, "channel")
        text = self._context.encode(payload)
        ctx = self._context
        driver = ctx.pubsub()
        now = ctx.now()
        ctx.write(lambda c: driver.publish(c, Publish(channel, text, now)))

    def subscribe(self, channel: str) -> CoreSubscription:
        validate_name(channel, "channel")
        self._context.pubsub()
        return CoreSubscription(self._context, channel)

    def wake_watcher(self, queues: Sequence[str]) -> CoreWakeWatcher:
        names = watched_queues(queues)
        self._context.check_open()
        return CoreWakeWatcher(self._context, names)

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        self._context.require("transactions")
        with self._context.driver.transaction() as handle:
            tx = CoreTransaction(self._context, handle)
            try:
                yield tx
            finally:
                topics = tx._finish()
        # Only reached after a commit: a rolled-back transaction wakes nobody.
        for topic in topics:
            self._context.hub.notify(topic)

    @contextmanager
    def attach(self, connection: Any) -> Iterator[CoreTransaction]:
        self._context.check_open()
        with self._context.driver.attach(connection) as handle:
            tx = CoreTransaction(self._context, handle)
            try:
                yield tx
            finally:
                tx._finish()

    def close(self) -> None:
        if not self._context.mark_closed():
            return
        self._context.hub.close()
        self._context.driver.close()

    @property
    def closed(self) -> bool:
        return self._context.closed

    def __enter__(self) -> CoreStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._context.closed else "open"
        return f"<alkstore Store engine={self.engine_name!r} {state}>"


if TYPE_CHECKING:
    # Static proof that the reference core presents the whole public surface.
    def _conforms(store: CoreStore) -> Store:
        return store
