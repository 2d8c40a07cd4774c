"""``AsyncStore``: every store method of contract §1-§7 and §11 as a coroutine (§13)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from .. import api
from .._surface import documented_as
from ..api import JobHandle, Store
from ..errors import InvalidOptions
from ..stop import StopToken
from ..timeconv import Duration
from ._generated import AsyncJobHandle, AsyncQueueConsumer, AsyncStoreBase
from .profiles import AsyncStream, AsyncSubscription, AsyncWakeWatcher
from .runner import Runner, one
from .transaction import TransactionBlock

T = TypeVar("T")


class AsyncStore(AsyncStoreBase):
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

    @documented_as(
        api.Store.stream,
        "Async: a plain method, not a coroutine: making a handle touches no storage.",
    )
    def stream(self, name: str) -> AsyncStream:
        return AsyncStream(self._runner, self.sync.stream(name))

    @documented_as(
        api.Store.claim_wait_any,
        "Async: ``queues`` are this store's async queue or outbox handles. Cancelling "
        "the awaiting task ends the wait and gives back a job claimed meanwhile.",
    )
    async def claim_wait_any(
        self,
        queues: Sequence[AsyncQueueConsumer],
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> AsyncJobHandle | None:
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
            handles=one,
            stop=token,
            waiting=True,
        )
        return None if handle is None else AsyncJobHandle(self._runner, handle)

    # -- transactions (§3) --------------------------------------------------------------
    @documented_as(
        api.Store.transaction,
        "Async: ``async with store.transaction() as tx``; it rolls back on an exception, "
        "a cancellation included.",
    )
    def transaction(self) -> TransactionBlock:
        return TransactionBlock(_Deferred(self.sync.transaction))

    @documented_as(
        api.Store.attach,
        "Async: ``async with store.attach(conn) as tx``. On an engine whose I/O runs on "
        "the loop (``Capabilities.async_native``, e.g. Postgres) ``conn`` is the async "
        "connection (psycopg's ``AsyncConnection``; SQLAlchemy's async connection "
        "through ``(await conn.get_raw_connection()).driver_connection``).",
    )
    def attach(self, connection: Any) -> TransactionBlock:
        return TransactionBlock(_Deferred(self.sync.attach, connection))

    # -- pub/sub (§7) ---------------------------------------------------------------------
    @documented_as(
        api.Store.wake_watcher,
        "Async: awaited, run off the loop (the engine's watch may connect first).",
    )
    async def wake_watcher(self, queues: Sequence[str]) -> AsyncWakeWatcher:
        return AsyncWakeWatcher(
            self._runner, await self._runner.call(self.sync.wake_watcher, queues)
        )

    @documented_as(api.Store.subscribe, "Async: awaited, run off the loop.")
    async def subscribe(self, channel: str) -> AsyncSubscription:
        return AsyncSubscription(
            self._runner, await self._runner.call(self.sync.subscribe, channel)
        )

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run any sync function (say, several store calls in a row) on the store's
        threads; what an async handler uses for code that would block the loop."""
        return await self._runner.call(fn, *args)

    # -- lifecycle --------------------------------------------------------------------------
    def detach(self) -> None:
        """Release this async store's threads and leave the sync store open (for
        an ``AsyncStore`` made over a store its caller keeps using)."""
        self._runner.close()

    @documented_as(api.Store.close, "Async: the store's threads are released too.")
    async def close(self) -> None:
        if self._runner.closed:
            return
        await self._runner.call(self.sync.close)
        self._runner.close()

    async def __aenter__(self) -> AsyncStore:
        """Use the store in an ``async with`` block; it closes on exit."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
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
