"""``AsyncStore``: every store method of contract §1-§7 and §11 as a coroutine (§13)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from ..api import JobHandle, Store
from ..clock import Clock
from ..errors import InvalidOptions
from ..options import QueueOpts, ScheduleOpts
from ..stop import StopToken
from ..timeconv import Duration
from ..values import QueueStats, Schedule, TickResult
from .profiles import AsyncLock, AsyncStream, AsyncSubscription
from .queues import AsyncJobHandle, AsyncOutbox, AsyncQueue, AsyncQueueConsumer
from .runner import Runner
from .transaction import TransactionBlock

T = TypeVar("T")


class AsyncStore:
    """An opened store for asyncio code; never blocks the event loop.

    Get one with ``alkstore.aio.open(url)`` (``async with``), or wrap a sync
    store you already have with ``AsyncStore(store)``. Handles (``queue``,
    ``outbox``, ``lock``, ``stream``) are plain methods: making one touches no
    storage. Everything that does is a coroutine, run on the store's own
    threads (contract §13).
    """

    def __init__(self, store: Store, *, threads: int | None = None) -> None:
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 64
        ):
            raise InvalidOptions(f"threads must be an int within 1..64, got {threads!r}")
        self.sync = store
        """The sync store every call goes to."""
        self._runner = Runner() if threads is None else Runner(threads)

    @property
    def clock(self) -> Clock:
        """As ``Store.clock``."""
        return self.sync.clock

    # -- handles ------------------------------------------------------------------------
    def queue(self, name: str, opts: QueueOpts | None = None) -> AsyncQueue:
        """``Store.queue``, awaited (run off the loop)."""
        return AsyncQueue(self._runner, self.sync.queue(name, opts))

    def outbox(self, name: str) -> AsyncOutbox:
        """``Store.outbox``, awaited (run off the loop)."""
        return AsyncOutbox(self._runner, self.sync.outbox(name))

    def lock(self, name: str) -> AsyncLock:
        """``Store.lock``, awaited (run off the loop)."""
        return AsyncLock(self._runner, self.sync.lock(name))

    def stream(self, name: str) -> AsyncStream:
        """``Store.stream``, awaited (run off the loop)."""
        return AsyncStream(self._runner, self.sync.stream(name))

    # -- waiting on several queues (§12) ------------------------------------------------
    async def claim_wait_any(
        self,
        queues: Sequence[AsyncQueueConsumer],
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> AsyncJobHandle | None:
        """Cancelling the awaiting task ends the wait and gives back a job claimed meanwhile."""
        if not isinstance(queues, (list, tuple)) or not all(
            isinstance(queue, AsyncQueueConsumer) for queue in queues
        ):
            raise InvalidOptions("queues must be a list or tuple of this store's async queues")
        token = stop if stop is not None else StopToken()
        handle: JobHandle | None = await self._runner.claim(
            self.sync.claim_wait_any,
            [queue.sync for queue in queues],
            worker_id,
            timeout,
            token,
            handles=lambda h: [] if h is None else [h],
            stop=token,
            waiting=True,
        )
        return None if handle is None else AsyncJobHandle(self._runner, handle)

    # -- transactions (§3) --------------------------------------------------------------
    def transaction(self) -> TransactionBlock:
        """``async with store.transaction() as tx``: commits at the end of the block,
        rolls back on an exception (including a cancellation)."""
        return TransactionBlock(_Deferred(self.sync.transaction))

    def attach(self, connection: Any) -> TransactionBlock:
        """``async with store.attach(conn) as tx``: join ``conn``'s open transaction.

        On an engine whose I/O runs on the loop (``Capabilities.async_native``,
        e.g. Postgres) ``conn`` is the async connection (psycopg's
        ``AsyncConnection``; SQLAlchemy's async connection through
        ``(await conn.get_raw_connection()).driver_connection``)."""
        return TransactionBlock(_Deferred(self.sync.attach, connection))

    # -- scheduler (§5) -----------------------------------------------------------------
    async def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        """``Store.schedule``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.schedule, name, spec, queue, payload, opts)

    async def unschedule(self, name: str) -> bool:
        """``Store.unschedule``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.unschedule, name)

    async def get_schedule(self, name: str) -> Schedule | None:
        """``Store.get_schedule``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.get_schedule, name)

    async def schedules(self) -> list[Schedule]:
        """``Store.schedules``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.schedules)

    async def tick_schedules(self, worker_id: str) -> TickResult:
        """``Store.tick_schedules``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.tick_schedules, worker_id)

    async def run_schedules(self, stop: StopToken, worker_id: str | None = None) -> None:
        """Lead the scheduler until ``stop`` is set or the task is cancelled."""
        await self._runner.wait(self.sync.run_schedules, stop, worker_id, stop=stop)

    # -- pub/sub (§7) ---------------------------------------------------------------------
    async def notify(self, channel: str, payload: Any) -> None:
        """``Store.notify``, awaited (run off the loop)."""
        await self._runner.call(self.sync.notify, channel, payload)

    async def subscribe(self, channel: str) -> AsyncSubscription:
        """``Store.subscribe``, awaited (run off the loop)."""
        return AsyncSubscription(
            self._runner, await self._runner.call(self.sync.subscribe, channel)
        )

    # -- operations (§11) -----------------------------------------------------------------
    async def stats(self) -> list[QueueStats]:
        """``Store.stats``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.stats)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run any sync function (say, several store calls in a row) on the store's
        threads; what an async handler uses for code that would block the loop."""
        return await self._runner.call(fn, *args)

    # -- lifecycle --------------------------------------------------------------------------
    def detach(self) -> None:
        """Release this async store's threads and leave the sync store open (for
        an ``AsyncStore`` made over a store its caller keeps using)."""
        self._runner.close()

    async def close(self) -> None:
        """Close the store (waking every waiting call) and its threads. Idempotent;
        later calls raise ``StoreClosed``."""
        if self._runner.closed:
            return
        await self._runner.call(self.sync.close)
        self._runner.close()

    @property
    def closed(self) -> bool:
        """As ``Store.closed``."""
        return self.sync.closed

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncStore {self.sync!r}>"


class _Deferred:
    """A context manager made on the transaction's own thread, when entered."""

    def __init__(self, make: Any, *args: Any) -> None:
        self._make = make
        self._args = args
        self._opened: Any = None

    def __enter__(self) -> Any:
        self._opened = self._make(*self._args)
        return self._opened.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._opened.__exit__(*exc)
