"""``alkstore-conformance run --via aio``: the suite's properties through ``alkstore.aio``.

The suite is written against the sync ``alkstore.Store``. Under ``--via aio``
the ``store`` / ``clocked_store`` / ``open_store`` fixtures hand tests an
``AioStore`` instead: a sync-looking facade over an ``alkstore.aio.AsyncStore``
whose every call is a coroutine run on an event loop of the test's own
(``LoopThread``) and waited for with ``run_coroutine_threadsafe(...).result()``.
So the very same tests -- same calls, same assertions -- check the async
surface: its off-loop threads, its per-transaction thread, its cancellation
wiring, and (on an ``async_native`` engine) the engine's I/O on the loop.

Nothing here decides a rule: each facade method is one awaited call of the
async surface, so a property that fails via aio but passes via sync is a bug of
``alkstore.aio`` (or of the engine's ``open_on_loop``), never of the facade.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

import pytest

from alkstore import EngineProvider, JobHandle, Store, api
from alkstore._surface import documented_as
from alkstore.aio import (
    AsyncStore,
    AsyncSubscription,
    AsyncTransaction,
    AsyncWakeWatcher,
    TransactionBlock,
)
from alkstore.clock import Clock
from alkstore.engine import AsyncNativeProvider
from alkstore.options import EnqueueOpts
from alkstore.stop import StopToken
from alkstore.timeconv import Duration
from alkstore.values import Enqueued

from .via_aio_generated import (
    AioJobHandle,
    AioQueue,
    AioQueueConsumer,
    AioStoreBase,
    AioSubscriptionBase,
    AioTransactionBase,
    AioWakeWatcherBase,
)
from .via_aio_generated import (
    AioLock as AioLock,
)
from .via_aio_generated import (
    AioOutbox as AioOutbox,
)
from .via_aio_generated import (
    AioStream as AioStream,
)

T = TypeVar("T")

VIA_SYNC = "sync"
VIA_AIO = "aio"
VIAS = (VIA_SYNC, VIA_AIO)
"""How the suite reaches the engine: its sync stores, or ``alkstore.aio`` through ``AioStore``."""

LOOP_JOIN_S = 10.0
"""How long closing a ``LoopThread`` waits for its thread (the loop only stops there)."""

NOT_APPLICABLE_VIA_AIO_PREFIX = "not_applicable: via aio: "


class LoopThread:
    """An event loop running on a daemon thread of its own; ``run(coro)`` from any other.

    One per test: every ``AioStore`` of the test lives on it, so on an
    ``async_native`` engine all their I/O shares one loop, as in an app.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="alkstore-kit-aio-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop; block this thread until it ends."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            # Blocking the loop on itself would hang the test rather than fail it.
            raise RuntimeError("LoopThread.run called on its own loop thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Stop the loop and its thread; idempotent."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(LOOP_JOIN_S)
        if not self._thread.is_alive():
            self.loop.close()


async def open_async(
    provider: EngineProvider, url: str, *, clock: Clock | None = None, **opts: Any
) -> AsyncStore:
    """``provider``'s store at ``url`` as an ``AsyncStore``, opened as ``alkstore.aio.open`` does.

    ``alkstore.aio.open(url)`` finds the engine by the URL's scheme; the kit
    certifies the provider it was given (``--engine module:object`` included,
    e.g. the selftest mutants), which need not be the one registered for that
    scheme. So the provider is asked directly, through the same two doors:
    ``open_on_loop`` on this loop for an ``async_native`` engine, else ``open``
    (off the loop: opening connects and may migrate).
    """
    if provider.capabilities.async_native and isinstance(provider, AsyncNativeProvider):
        store = await asyncio.to_thread(
            provider.open_on_loop, url, asyncio.get_running_loop(), clock=clock, **opts
        )
    else:
        store = await asyncio.to_thread(provider.open, url, clock=clock, **opts)
    return AsyncStore(store)


class AioSubscription(AioSubscriptionBase):
    """``alkstore.Subscription`` over an ``AsyncSubscription``."""

    def __init__(self, loop: LoopThread, subscription: AsyncSubscription) -> None:
        self._loop = loop
        self.aio = subscription

    @documented_as(api.Subscription.get, "Via aio: a ``timedelta`` reaches it as seconds.")
    def get(self, timeout: Duration | None = None) -> Any:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        return self._loop.run(self.aio.get(seconds))

    @documented_as(api.Subscription.__iter__, "Via aio: each message one awaited ``get``.")
    def __iter__(self) -> Iterator[Any]:
        while True:
            message = self.get()
            if message is None and self.aio.closed:
                return
            if message is not None:
                yield message

    def __enter__(self) -> AioSubscription:
        """Use the subscription in a ``with`` block; it closes on exit."""
        return self

    @documented_as(api.Subscription.__exit__, "Via aio: an awaited ``close``.")
    def __exit__(self, *exc: object) -> None:
        self.close()


class AioWakeWatcher(AioWakeWatcherBase):
    """``alkstore.WakeWatcher`` over an ``AsyncWakeWatcher``."""

    def __init__(self, loop: LoopThread, watcher: AsyncWakeWatcher) -> None:
        self._loop = loop
        self.aio = watcher

    def __enter__(self) -> AioWakeWatcher:
        """Use the watcher in a ``with`` block; it closes on exit.

        Raises:
            StoreClosed: the watcher is already closed.
        """
        self._loop.run(self.aio.__aenter__())
        return self

    @documented_as(api.WakeWatcher.__exit__, "Via aio: an awaited ``close``.")
    def __exit__(self, *exc: object) -> None:
        self.close()


class FetchedRows:
    """What ``AioTransaction.execute`` returns: the cursor's rows, fetched already on
    the transaction's thread (``AsyncTransaction.execute``), read like a cursor."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows
        self._next = 0

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rest = self._rows[self._next :]
        self._next = len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class AioTransaction(AioTransactionBase):
    """``alkstore.Transaction`` over an ``AsyncTransaction``."""

    def __init__(self, loop: LoopThread, transaction: AsyncTransaction) -> None:
        self._loop = loop
        self.aio = transaction

    @documented_as(
        api.Transaction.execute,
        "Via aio: the rows, fetched on the transaction's thread, read like a cursor.",
    )
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> FetchedRows:
        return FetchedRows(self._loop.run(self.aio.execute(sql, params)))

    @documented_as(api.Transaction.enqueue, "Via aio: an ``AioQueue`` reaches it as its twin.")
    def enqueue(
        self, queue: str | AioQueue | Any, payload: Any, opts: EnqueueOpts | None = None
    ) -> Enqueued:
        target = queue.aio if isinstance(queue, AioQueue) else queue
        return self._loop.run(self.aio.enqueue(target, payload, opts))

    @documented_as(api.Transaction.ack, "Via aio: an ``AioJobHandle`` reaches it as its twin.")
    def ack(self, handle: AioJobHandle | Any, result: Any = None) -> None:
        target = handle.aio if isinstance(handle, AioJobHandle) else handle
        self._loop.run(self.aio.ack(target, result))

    @documented_as(
        api.Transaction.ack_all,
        "Via aio: an ``AioJobHandle`` reaches it as its twin, and comes back as given.",
    )
    def ack_all(
        self, handles: Sequence[AioJobHandle | Any], results: Sequence[Any] | None = None
    ) -> tuple[JobHandle, ...]:
        return self._many(lambda targets: self.aio.ack_all(targets, results), handles)

    def _many(
        self, call: Callable[[Any], Coroutine[Any, Any, Any]], handles: Any
    ) -> tuple[JobHandle, ...]:
        """``call``'s refused handles, each as given: an ``AioJobHandle`` reaches the
        async call as its twin (not a sequence: as is, for the call to refuse)."""
        if not isinstance(handles, Sequence):
            return tuple(self._loop.run(call(handles)))
        given = list(handles)
        targets = [h.aio if isinstance(h, AioJobHandle) else h for h in given]
        refused: tuple[Any, ...] = self._loop.run(call(targets))
        back = {id(target): handle for target, handle in zip(targets, given, strict=True)}
        return tuple(back.get(id(handle), handle) for handle in refused)

    @documented_as(api.Transaction.retry, "Via aio: an ``AioJobHandle`` reaches it as its twin.")
    def retry(self, handle: AioJobHandle | Any, error: str, delay: Duration | None = None) -> None:
        target = handle.aio if isinstance(handle, AioJobHandle) else handle
        self._loop.run(self.aio.retry(target, error, delay))

    @documented_as(api.Transaction.fail, "Via aio: an ``AioJobHandle`` reaches it as its twin.")
    def fail(self, handle: AioJobHandle | Any, error: str) -> None:
        target = handle.aio if isinstance(handle, AioJobHandle) else handle
        self._loop.run(self.aio.fail(target, error))

    @documented_as(
        api.Transaction.retry_all,
        "Via aio: an ``AioJobHandle`` reaches it as its twin, and comes back as given.",
    )
    def retry_all(
        self,
        handles: Sequence[AioJobHandle | Any],
        errors: str | Sequence[str],
        delays: Duration | Sequence[Duration | None] | None = None,
    ) -> tuple[JobHandle, ...]:
        return self._many(lambda targets: self.aio.retry_all(targets, errors, delays), handles)

    @documented_as(
        api.Transaction.fail_all,
        "Via aio: an ``AioJobHandle`` reaches it as its twin, and comes back as given.",
    )
    def fail_all(
        self, handles: Sequence[AioJobHandle | Any], errors: str | Sequence[str]
    ) -> tuple[JobHandle, ...]:
        return self._many(lambda targets: self.aio.fail_all(targets, errors), handles)


class AioTransactionBlock:
    """``with store.transaction() as tx`` over ``async with aio_store.transaction()``:
    the block's exception (if any) reaches the async block's ``__aexit__`` as is."""

    def __init__(self, loop: LoopThread, block: TransactionBlock) -> None:
        self._loop = loop
        self._block = block

    def __enter__(self) -> AioTransaction:
        return AioTransaction(self._loop, self._loop.run(self._block.__aenter__()))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        return self._loop.run(self._block.__aexit__(exc_type, exc, traceback))


class AioStore(AioStoreBase):
    """``alkstore.Store`` over an ``AsyncStore``: each call one awaited coroutine on ``loop``."""

    def __init__(self, loop: LoopThread, store: AsyncStore) -> None:
        self._loop = loop
        self.aio = store

    @classmethod
    def open(
        cls, loop: LoopThread, provider: EngineProvider, url: str, clock: Clock | None, **opts: Any
    ) -> AioStore:
        """``provider``'s store at ``url``, opened on ``loop`` (``open_async``)."""
        return cls(loop, loop.run(open_async(provider, url, clock=clock, **opts)))

    @documented_as(api.Store.claim_wait_any, "Via aio: the handles reach it as their twins.")
    def claim_wait_any(
        self,
        queues: Sequence[Any],
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> AioJobHandle | None:
        # Only a list or tuple is mapped: anything else reaches the async surface as
        # given, so its refusal (InvalidOptions) is the surface's own.
        given: Any = queues
        if isinstance(queues, (list, tuple)):
            given = type(queues)(q.aio if isinstance(q, AioQueueConsumer) else q for q in queues)
        handle = self._loop.run(self.aio.claim_wait_any(given, worker_id, timeout, stop))
        return None if handle is None else AioJobHandle(self._loop, handle)

    @documented_as(api.Store.transaction, "Via aio: ``async with aio_store.transaction()``.")
    def transaction(self) -> AioTransactionBlock:
        return AioTransactionBlock(self._loop, self.aio.transaction())

    @documented_as(api.Store.attach, "Via aio: ``async with aio_store.attach(connection)``.")
    def attach(self, connection: Any) -> AioTransactionBlock:
        return AioTransactionBlock(self._loop, self.aio.attach(connection))

    @documented_as(api.Store.subscribe, "Via aio: an awaited ``subscribe``.")
    def subscribe(self, channel: str) -> AioSubscription:
        return AioSubscription(self._loop, self._loop.run(self.aio.subscribe(channel)))

    @documented_as(api.Store.wake_watcher, "Via aio: an awaited ``AsyncStore.wake_watcher``.")
    def wake_watcher(self, queues: Sequence[str]) -> AioWakeWatcher:
        return AioWakeWatcher(self._loop, self._loop.run(self.aio.wake_watcher(queues)))

    def __enter__(self) -> AioStore:
        """Use the store in a ``with`` block; it closes on exit."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
        self.close()

    def __repr__(self) -> str:
        return f"<AioStore {self.aio!r}>"


def as_store(store: AioStore) -> Store:
    """``store`` typed as the ``alkstore.Store`` the suite codes against (it is one,
    structurally: mypy checks this assignment against the protocol)."""
    checked: Store = store
    return checked


PROBE_S = 10.0
"""How long the thread probing a caller's connection may take."""

ATTACH_ASYNC_NATIVE = (
    NOT_APPLICABLE_VIA_AIO_PREFIX + "on an async_native engine alkstore.aio's attach joins the "
    "engine's async connection, and the kit's native_connection_factory hook opens sync ones"
)
ATTACH_THREAD_BOUND = (
    NOT_APPLICABLE_VIA_AIO_PREFIX + "the engine's native_connection_factory opened a connection "
    "usable only on the thread that opened it (e.g. sqlite3's check_same_thread), and "
    "alkstore.aio runs an attached transaction on a thread of its own; a hook whose "
    "connections any thread may use certifies attach via aio"
)


def attachable_via_aio(provider: EngineProvider, factory: Callable[[], Any]) -> Callable[[], Any]:
    """``factory`` (the engine's ``native_connection_factory``) for a test run via aio:
    each connection it opens is first checked usable from another thread, since the
    async surface runs ``attach``'s block on the transaction's own thread; if it is
    not -- or the engine is ``async_native`` -- the test is not applicable via aio."""
    if provider.capabilities.async_native:
        pytest.skip(ATTACH_ASYNC_NATIVE)

    def connect() -> Any:
        connection = factory()
        if not usable_from_another_thread(connection):
            connection.close()
            pytest.skip(ATTACH_THREAD_BOUND)
        return connection

    return connect


def usable_from_another_thread(connection: Any) -> bool:
    """Whether a thread other than the caller's may use ``connection`` (a DB-API cursor)."""
    usable: list[bool] = []

    def probe() -> None:
        try:
            connection.cursor().close()
        except Exception:
            usable.append(False)
        else:
            usable.append(True)

    thread = threading.Thread(target=probe, name="alkstore-kit-connection-probe", daemon=True)
    thread.start()
    thread.join(PROBE_S)
    return usable == [True]


STORE_FIXTURES = frozenset({"store", "clocked_store", "open_store"})
"""The fixtures that hand a test its stores: under ``--via aio``, ``AioStore``s."""


def reaches_aio(fixturenames: Sequence[str]) -> bool:
    """Whether a test with these fixtures opens a store through the suite's fixtures.

    One that does not (it asks the provider itself, as the lifecycle and the
    stateful model tests do, or opens ``alkstore.aio`` itself, as ``test_async``
    does) runs the same with or without ``--via aio``, so a via-aio run leaves it
    to the ordinary run."""
    return not STORE_FIXTURES.isdisjoint(fixturenames)


SQL_ON_ASYNC_NATIVE = (
    NOT_APPLICABLE_VIA_AIO_PREFIX + "on an async_native engine tx.connection through "
    "alkstore.aio is the engine's async connection, which the suite's sync SQL helpers "
    "cannot drive (ASYNC-TX-ATOMIC checks business writes through alkstore.aio itself)"
)


def not_applicable_via_aio(profiles: Sequence[str], provider: EngineProvider) -> str | None:
    """Why a test needing ``profiles`` cannot run through ``alkstore.aio`` on ``provider``
    (a ``not_applicable: via aio: ...`` skip reason), or ``None``: it runs.

    Only the ``sql`` profile has such a case: every other call of the suite has an
    awaited twin on the async surface (attach is decided per connection, by the
    ``native_connect`` fixture: ``attachable_via_aio``)."""
    if "sql" in profiles and provider.capabilities.async_native:
        return SQL_ON_ASYNC_NATIVE
    return None
