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

from alkstore import AckAndClaim, Clock, EngineProvider, JobHandle, Store
from alkstore.aio import (
    AsyncJobHandle,
    AsyncLock,
    AsyncOutbox,
    AsyncQueue,
    AsyncQueueConsumer,
    AsyncStore,
    AsyncStream,
    AsyncSubscription,
    AsyncTransaction,
    TransactionBlock,
)
from alkstore.engine import AsyncNativeProvider
from alkstore.options import EnqueueOpts, QueueOpts, ScheduleOpts
from alkstore.stop import StopToken
from alkstore.timeconv import Duration
from alkstore.values import (
    Job,
    JobState,
    LockInfo,
    QueueStats,
    Schedule,
    StreamEvent,
    SweepResult,
    TickResult,
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


class AioJobHandle:
    """``alkstore.JobHandle`` over an ``AsyncJobHandle``."""

    def __init__(self, loop: LoopThread, handle: AsyncJobHandle) -> None:
        self._loop = loop
        self.aio = handle

    @property
    def job(self) -> Job:
        return self.aio.job

    @property
    def id(self) -> int:
        return self.aio.id

    @property
    def payload(self) -> Any:
        return self.aio.payload

    @property
    def attempts(self) -> int:
        return self.aio.attempts

    def ack(self) -> bool:
        return self._loop.run(self.aio.ack())

    def ack_and_claim(self, worker_id: str, limit: int = 1) -> AckAndClaim:
        done = self._loop.run(self.aio.ack_and_claim(worker_id, limit))
        claimed: list[JobHandle] = [AioJobHandle(self._loop, h) for h in done.claimed]
        return AckAndClaim(done.acked, claimed)

    def heartbeat(self, extend: Duration) -> bool:
        return self._loop.run(self.aio.heartbeat(extend))

    def release(self) -> bool:
        return self._loop.run(self.aio.release())

    def retry(self, error: str, delay: Duration | None = None) -> bool:
        return self._loop.run(self.aio.retry(error, delay))

    def fail(self, error: str) -> bool:
        return self._loop.run(self.aio.fail(error))

    def __repr__(self) -> str:
        return f"<AioJobHandle {self.aio!r}>"


class AioQueueConsumer:
    """``alkstore.QueueConsumer`` over an ``AsyncQueueConsumer``."""

    def __init__(self, loop: LoopThread, queue: AsyncQueueConsumer) -> None:
        self._loop = loop
        self.aio = queue

    @property
    def name(self) -> str:
        return self.aio.name

    def _handle(self, handle: AsyncJobHandle | None) -> AioJobHandle | None:
        return None if handle is None else AioJobHandle(self._loop, handle)

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> int:
        return self._loop.run(self.aio.enqueue(payload, opts))

    def enqueue_many(self, payloads: Sequence[Any], opts: EnqueueOpts | None = None) -> list[int]:
        return self._loop.run(self.aio.enqueue_many(payloads, opts))

    def claim(self, worker_id: str) -> AioJobHandle | None:
        return self._handle(self._loop.run(self.aio.claim(worker_id)))

    def claim_batch(self, worker_id: str, limit: int) -> list[JobHandle]:
        handles = self._loop.run(self.aio.claim_batch(worker_id, limit))
        return [AioJobHandle(self._loop, handle) for handle in handles]

    def claim_wait(
        self, worker_id: str, timeout: Duration | None = None, stop: StopToken | None = None
    ) -> AioJobHandle | None:
        return self._handle(self._loop.run(self.aio.claim_wait(worker_id, timeout, stop)))

    def ack_batch(self, job_ids: Sequence[int], worker_id: str) -> int:
        return self._loop.run(self.aio.ack_batch(job_ids, worker_id))

    def cancel(self, job_id: int) -> bool:
        return self._loop.run(self.aio.cancel(job_id))

    def get_job(self, job_id: int) -> Job | None:
        return self._loop.run(self.aio.get_job(job_id))

    def sweep_expired(self) -> SweepResult:
        return self._loop.run(self.aio.sweep_expired())

    def stats(self) -> QueueStats:
        return self._loop.run(self.aio.stats())

    def jobs(
        self, state: JobState | str | None = None, *, after_id: int = 0, limit: int = 100
    ) -> list[Job]:
        return self._loop.run(self.aio.jobs(state, after_id=after_id, limit=limit))

    def redrive(self, ids: Sequence[int] | None = None, *, limit: int = 10_000) -> list[int]:
        return self._loop.run(self.aio.redrive(ids, limit=limit))

    def purge_dead(
        self, ids: Sequence[int] | None = None, *, older_than_s: Duration | None = None
    ) -> int:
        return self._loop.run(self.aio.purge_dead(ids, older_than_s=older_than_s))

    def pause(self) -> bool:
        return self._loop.run(self.aio.pause())

    def resume(self) -> bool:
        return self._loop.run(self.aio.resume())

    def paused(self) -> bool:
        return self._loop.run(self.aio.paused())

    def __repr__(self) -> str:
        return f"<Aio {self.aio!r}>"


class AioQueue(AioQueueConsumer):
    """``alkstore.Queue`` over an ``AsyncQueue``."""

    aio: AsyncQueue

    def __init__(self, loop: LoopThread, queue: AsyncQueue) -> None:
        super().__init__(loop, queue)
        self.aio = queue

    @property
    def opts(self) -> QueueOpts:
        return self.aio.opts


class AioOutbox(AioQueueConsumer):
    """``alkstore.Outbox`` over an ``AsyncOutbox``."""

    aio: AsyncOutbox

    def __init__(self, loop: LoopThread, outbox: AsyncOutbox) -> None:
        super().__init__(loop, outbox)
        self.aio = outbox


class AioLock:
    """``alkstore.Lock`` over an ``AsyncLock``."""

    def __init__(self, loop: LoopThread, lock: AsyncLock) -> None:
        self._loop = loop
        self.aio = lock

    @property
    def name(self) -> str:
        return self.aio.name

    def acquire(self, owner: str, ttl: Duration) -> bool:
        return self._loop.run(self.aio.acquire(owner, ttl))

    def renew(self, owner: str, ttl: Duration) -> bool:
        return self._loop.run(self.aio.renew(owner, ttl))

    def release(self, owner: str) -> bool:
        return self._loop.run(self.aio.release(owner))

    def holder(self) -> LockInfo | None:
        return self._loop.run(self.aio.holder())


class AioStream:
    """``alkstore.Stream`` over an ``AsyncStream``."""

    def __init__(self, loop: LoopThread, stream: AsyncStream) -> None:
        self._loop = loop
        self.aio = stream

    @property
    def name(self) -> str:
        return self.aio.name

    def append(self, payload: Any) -> int:
        return self._loop.run(self.aio.append(payload))

    def read(self, after: int = 0, limit: int = 100) -> list[StreamEvent]:
        return self._loop.run(self.aio.read(after, limit))

    def commit(self, consumer: str, offset: int) -> None:
        self._loop.run(self.aio.commit(consumer, offset))

    def offset(self, consumer: str) -> int:
        return self._loop.run(self.aio.offset(consumer))

    def wait(
        self, after: int, timeout: Duration | None = None, stop: StopToken | None = None
    ) -> bool:
        return self._loop.run(self.aio.wait(after, timeout, stop))

    def trim_to(self, offset: int) -> int:
        return self._loop.run(self.aio.trim_to(offset))


class AioSubscription:
    """``alkstore.Subscription`` over an ``AsyncSubscription``."""

    def __init__(self, loop: LoopThread, subscription: AsyncSubscription) -> None:
        self._loop = loop
        self.aio = subscription

    @property
    def channel(self) -> str:
        return self.aio.channel

    def get(self, timeout: Duration | None = None) -> Any:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        return self._loop.run(self.aio.get(seconds))

    def __iter__(self) -> Iterator[Any]:
        while True:
            message = self.get()
            if message is None and self.aio.closed:
                return
            if message is not None:
                yield message

    def close(self) -> None:
        self._loop.run(self.aio.close())

    def __enter__(self) -> AioSubscription:
        return self

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


class AioTransaction:
    """``alkstore.Transaction`` over an ``AsyncTransaction``."""

    def __init__(self, loop: LoopThread, transaction: AsyncTransaction) -> None:
        self._loop = loop
        self.aio = transaction

    @property
    def connection(self) -> Any:
        return self.aio.connection

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> FetchedRows:
        return FetchedRows(self._loop.run(self.aio.execute(sql, params)))

    def enqueue(
        self, queue: str | AioQueue | Any, payload: Any, opts: EnqueueOpts | None = None
    ) -> int:
        target = queue.aio if isinstance(queue, AioQueue) else queue
        return self._loop.run(self.aio.enqueue(target, payload, opts))

    def outbox_enqueue(self, outbox: str, payload: Any) -> int:
        return self._loop.run(self.aio.outbox_enqueue(outbox, payload))

    def get_job_tx(self, queue: str, job_id: int) -> Job | None:
        return self._loop.run(self.aio.get_job_tx(queue, job_id))

    def stream_append(self, stream: str, payload: Any) -> int:
        return self._loop.run(self.aio.stream_append(stream, payload))

    def notify(self, channel: str, payload: Any) -> None:
        self._loop.run(self.aio.notify(channel, payload))


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


class AioStore:
    """``alkstore.Store`` over an ``AsyncStore``: each call one awaited coroutine on ``loop``."""

    def __init__(self, loop: LoopThread, store: AsyncStore) -> None:
        self._loop = loop
        self.aio = store

    @classmethod
    def open(
        cls, loop: LoopThread, provider: EngineProvider, url: str, clock: Clock | None, **opts: Any
    ) -> AioStore:
        return cls(loop, loop.run(open_async(provider, url, clock=clock, **opts)))

    @property
    def clock(self) -> Clock:
        return self.aio.clock

    def queue(self, name: str, opts: QueueOpts | None = None) -> AioQueue:
        return AioQueue(self._loop, self.aio.queue(name, opts))

    def outbox(self, name: str) -> AioOutbox:
        return AioOutbox(self._loop, self.aio.outbox(name))

    def lock(self, name: str) -> AioLock:
        return AioLock(self._loop, self.aio.lock(name))

    def stream(self, name: str) -> AioStream:
        return AioStream(self._loop, self.aio.stream(name))

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

    def transaction(self) -> AioTransactionBlock:
        return AioTransactionBlock(self._loop, self.aio.transaction())

    def attach(self, connection: Any) -> AioTransactionBlock:
        return AioTransactionBlock(self._loop, self.aio.attach(connection))

    def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        return self._loop.run(self.aio.schedule(name, spec, queue, payload, opts))

    def unschedule(self, name: str) -> bool:
        return self._loop.run(self.aio.unschedule(name))

    def get_schedule(self, name: str) -> Schedule | None:
        return self._loop.run(self.aio.get_schedule(name))

    def schedules(self) -> list[Schedule]:
        return self._loop.run(self.aio.schedules())

    def tick_schedules(self, worker_id: str) -> TickResult:
        return self._loop.run(self.aio.tick_schedules(worker_id))

    def run_schedules(self, stop: StopToken, worker_id: str | None = None) -> None:
        self._loop.run(self.aio.run_schedules(stop, worker_id))

    def notify(self, channel: str, payload: Any) -> None:
        self._loop.run(self.aio.notify(channel, payload))

    def subscribe(self, channel: str) -> AioSubscription:
        return AioSubscription(self._loop, self._loop.run(self.aio.subscribe(channel)))

    def stats(self) -> list[QueueStats]:
        return self._loop.run(self.aio.stats())

    def close(self) -> None:
        self._loop.run(self.aio.close())

    @property
    def closed(self) -> bool:
        return self.aio.closed

    def __enter__(self) -> AioStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
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
