"""``CoreStore``: the contract's reference front end over any engine's ``Driver``."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ..api import Store
from ..clock import Clock, SystemClock, check_clock
from ..driver import Driver, PubSubDriver, SchedulerDriver, StreamDriver
from ..errors import InvalidOptions, StoreClosed
from ..names import outbox_queue_name, validate_name
from ..options import DEFAULT_QUEUE_OPTS, OUTBOX_QUEUE_OPTS, QueueOpts, ScheduleOpts, check_type
from ..payload import encode_payload
from ..stop import StopToken
from ..timeconv import whole_now
from ..values import Schedule, TickResult
from .locks import CoreLock
from .pubsub import CoreSubscription
from .queues import CoreOutbox, CoreQueue
from .scheduler import CoreScheduler
from .streams import CoreStream
from .transaction import CoreTransaction
from .wake import WakeHub

T = TypeVar("T")

DEFAULT_REPOLL_S = 1.0
"""Safety-net re-poll of waiting calls when no wake arrives (engine option ``repoll_s``)."""


class CoreStore:
    """Thread-safe and shareable; every rule lives here, every statement in the driver."""

    def __init__(
        self,
        driver: Driver[Any],
        *,
        clock: Clock | None = None,
        repoll_s: float = DEFAULT_REPOLL_S,
        engine_name: str = "",
    ) -> None:
        if (
            isinstance(repoll_s, bool)
            or not isinstance(repoll_s, (int, float))
            or not (0 < repoll_s <= 3600)
        ):
            raise InvalidOptions(
                f"repoll_s must be a number of seconds in (0, 3600], got {repoll_s!r}"
            )
        check_clock(clock)
        self._driver = driver
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._repoll_s = float(repoll_s)
        self._hub = WakeHub()
        self._rng = random.Random()
        self._closed = False
        self._close_lock = threading.Lock()
        self._scheduler_front = CoreScheduler(self)
        self.engine_name = engine_name

    # -- plumbing shared by the front ends --------------------------------
    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def driver(self) -> Driver[Any]:
        return self._driver

    def _now(self) -> int:
        self._check_open()
        return whole_now(self._clock.now())

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def _write(self, work: Callable[[Any], T], wait_s: float | None = None) -> T:
        self._check_open()
        if wait_s is None:
            return self._driver.write(work)
        return self._driver.write(work, wait_s=wait_s)

    def _read(self, work: Callable[[Any], T], wait_s: float | None = None) -> T:
        self._check_open()
        if wait_s is None:
            return self._driver.read(work)
        return self._driver.read(work, wait_s=wait_s)

    def _profile(self, method: str, profile: str) -> Any:
        self._check_open()
        if not hasattr(self._driver, method):
            raise NotImplementedError(
                f"the {self.engine_name or 'this'} engine does not implement the {profile} profile"
            )
        return self._driver

    def _scheduler(self) -> SchedulerDriver[Any]:
        driver: SchedulerDriver[Any] = self._profile("schedule_upsert", "scheduler")
        return driver

    def _streams(self) -> StreamDriver[Any]:
        driver: StreamDriver[Any] = self._profile("stream_append", "streams")
        return driver

    def _pubsub(self) -> PubSubDriver[Any]:
        driver: PubSubDriver[Any] = self._profile("publish", "pubsub")
        return driver

    def _queue_opts_for(self, queue: str) -> QueueOpts:
        # Transactions name queues without a handle: they stamp the engine defaults.
        return DEFAULT_QUEUE_OPTS

    # -- public surface ---------------------------------------------------
    def queue(self, name: str, opts: QueueOpts | None = None) -> CoreQueue:
        validate_name(name, "queue name")
        if opts is not None:
            check_type(opts, QueueOpts, "opts")
        self._check_open()
        return CoreQueue(self, name, opts if opts is not None else DEFAULT_QUEUE_OPTS)

    def outbox(self, name: str) -> CoreOutbox:
        backing = outbox_queue_name(name)
        self._check_open()
        return CoreOutbox(self, name, backing, OUTBOX_QUEUE_OPTS)

    def lock(self, name: str) -> CoreLock:
        validate_name(name, "lock name")
        self._check_open()
        return CoreLock(self, name)

    def _internal_lock(self, name: str) -> CoreLock:
        return CoreLock(self, name)

    # -- scheduler (CONTRACT.md §5) ---------------------------------------
    def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        return self._scheduler_front.schedule(name, spec, queue, payload, opts)

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

    # -- streams and pub/sub (CONTRACT.md §7) --------------------------------
    def stream(self, name: str) -> CoreStream:
        validate_name(name, "stream name")
        self._streams()
        return CoreStream(self, name)

    def notify(self, channel: str, payload: Any) -> None:
        validate_name(channel, "channel")
        text = encode_payload(payload)
        driver = self._pubsub()
        now = self._now()
        self._write(lambda c: driver.publish(c, channel, text, now))

    def subscribe(self, channel: str) -> CoreSubscription:
        validate_name(channel, "channel")
        self._pubsub()
        return CoreSubscription(self, channel)

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        self._check_open()
        with self._driver.transaction() as handle:
            tx = CoreTransaction(self, handle)
            try:
                yield tx
            finally:
                topics = tx._finish()
        # Only reached after a commit: a rolled-back transaction wakes nobody.
        for topic in topics:
            self._hub.notify(topic)

    @contextmanager
    def attach(self, connection: Any) -> Iterator[CoreTransaction]:
        """Join the caller's open transaction; other waiters learn of it on the
        caller's commit through the engine's cross-process wake."""
        self._check_open()
        with self._driver.attach(connection) as handle:
            tx = CoreTransaction(self, handle)
            try:
                yield tx
            finally:
                tx._finish()

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._hub.close()
        self._driver.close()

    @property
    def closed(self) -> bool:
        return self._closed

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
        state = "closed" if self._closed else "open"
        return f"<alkstore Store engine={self.engine_name!r} {state}>"


if TYPE_CHECKING:
    # Static proof that the reference core presents the whole public surface.
    def _conforms(store: CoreStore) -> Store:
        return store
