"""A store whose database I/O runs on an event loop (``alkstore.aio``, contract §13).

``alkstore.aio.open(url)`` calls ``PostgresEngine.open_on_loop(url, loop)``, which
returns the ordinary ``CoreStore`` over the ordinary ``PostgresDriver`` -- the same
statements, the same rules -- with only the I/O swapped:

* the pool is a ``psycopg_pool.AsyncConnectionPool`` living on ``loop``
  (``LoopPool``, with the sync pool's waiting and reconnect policy);
* each connection is a ``psycopg.AsyncConnection`` behind ``LoopConnection``,
  which offers the driver the sync subset it uses (``execute`` returning a
  buffered cursor, ``transaction()``, ``info``, ``autocommit``) by running
  each coroutine on ``loop`` and waiting for its result on the calling thread;
* LISTEN is a task on ``loop`` (``LoopListener``), with the thread listener's
  reconnect, backoff and routing (``listener.Routing``).

``alkstore.aio`` calls the store from threads of its own, so they wait while
the loop, free, does the I/O. Called from the loop's own thread the store
would wait on itself: it raises ``InvalidOptions`` instead. ``attach`` takes
a ``psycopg.AsyncConnection`` (the application's, on the same loop), and
``tx.connection`` is one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from concurrent.futures import wait as wait_for_future
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import psycopg
from psycopg import pq
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from alkstore.driver import WakeSink
from alkstore.errors import EngineUnavailable, InvalidOptions

from .clock import ServerClock
from .connections import ConnectOutcome, Pool, WaitPolicy, idle_verdict, pool_name
from .driver import PostgresDriver, check_attachable
from .errors import unavailable
from .handle import PgHandle
from .listener import PING_S, Backoff, Listener, Notification, Routing, stored_rows
from .options import PostgresOptions

logger = logging.getLogger(__name__)

T = TypeVar("T")

LIVENESS_S: Final = 1.0
"""While a thread waits for the loop, it checks this often that the loop still runs."""

ON_LOOP_THREAD: Final = (
    "this store does its I/O on the event loop it was opened on, so calling it "
    "synchronously from that loop's thread would wait on itself: use alkstore.aio "
    "(await store.queue(...).enqueue(...)), which calls it from threads of its own"
)


class LoopBridge:
    """Runs coroutines on ``loop`` for the threads that call the store."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def on_loop_thread(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def check_thread(self) -> None:
        """Refuse a blocking call made on the loop's own thread (it would deadlock)."""
        if self.on_loop_thread():
            raise InvalidOptions(ON_LOOP_THREAD)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coro`` on the loop without waiting for it."""
        if self.loop.is_closed():
            coro.close()
            raise EngineUnavailable(
                "the event loop this store was opened on (alkstore.aio) is closed"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro``'s result (or exception, as raised), waited for on this thread."""
        if self.on_loop_thread():
            coro.close()
            raise InvalidOptions(ON_LOOP_THREAD)
        future = self.submit(coro)
        # A loop that stopped would never finish the coroutine: notice, don't hang.
        while not wait_for_future([future], LIVENESS_S).done:
            if not self.loop.is_running():
                future.cancel()
                raise EngineUnavailable(
                    "the event loop this store was opened on (alkstore.aio) stopped running"
                )
        try:
            return future.result()
        except FutureCancelled:
            # The loop cancelled the task (it is shutting down), not the caller.
            raise EngineUnavailable(
                "the event loop this store was opened on (alkstore.aio) cancelled the call"
            ) from None


class BufferedCursor:
    """A statement's outcome, its rows fetched already on the loop."""

    def __init__(self, rows: list[Any], rowcount: int, description: Any) -> None:
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount
        self.description = description

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        row = self._rows[self._next]
        self._next += 1
        return row

    def fetchall(self) -> list[Any]:
        rows = self._rows[self._next :]
        self._next = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        while (row := self.fetchone()) is not None:
            yield row


async def _execute(
    conn: psycopg.AsyncConnection[Any], query: Any, params: Any, prepare: bool | None, binary: bool
) -> BufferedCursor:
    cursor = await conn.execute(query, params, prepare=prepare, binary=binary)
    rows = await cursor.fetchall() if cursor.description is not None else []
    return BufferedCursor(rows, cursor.rowcount, cursor.description)


async def _execute_after(
    conn: psycopg.AsyncConnection[Any],
    prelude: bytes,
    query: Any,
    params: Any,
    prepare: bool | None,
    binary: bool,
) -> BufferedCursor:
    async with conn.pipeline():
        await conn.execute(prelude, prepare=False)
        cursor = await conn.execute(query, params, prepare=prepare, binary=binary)
    rows = await cursor.fetchall() if cursor.description is not None else []
    return BufferedCursor(rows, cursor.rowcount, cursor.description)


class LoopConnection:
    """A ``psycopg.AsyncConnection`` as the driver's ``SqlConnection``: each call runs
    on the loop while the calling thread waits."""

    def __init__(self, native: psycopg.AsyncConnection[Any], bridge: LoopBridge) -> None:
        self.native = native
        """The async connection (what ``tx.connection`` returns)."""
        self._bridge = bridge

    def execute(
        self,
        query: bytes | str,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> BufferedCursor:
        return self._bridge.run(_execute(self.native, query, params, prepare, binary))

    def execute_after(
        self,
        prelude: bytes,
        query: bytes,
        params: Any,
        *,
        prepare: bool | None,
        binary: bool,
    ) -> BufferedCursor:
        """``prelude`` and then ``query`` in one pipeline (one implicit transaction):
        ``handle``'s per-statement ``SET LOCAL`` behind a transaction pooler."""
        pipeline = _execute_after(self.native, prelude, query, params, prepare, binary)
        return self._bridge.run(pipeline)

    def transaction(self) -> LoopTransaction:
        return LoopTransaction(self.native, self._bridge)

    @property
    def info(self) -> psycopg.ConnectionInfo:
        return self.native.info

    @property
    def autocommit(self) -> bool:
        return self.native.autocommit


class LoopTransaction:
    """``with conn.transaction():`` over the async connection's ``transaction()``."""

    def __init__(self, native: psycopg.AsyncConnection[Any], bridge: LoopBridge) -> None:
        self._block = native.transaction()
        self._bridge = bridge

    def __enter__(self) -> Self:
        self._bridge.run(self._block.__aenter__())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        # Commits, or rolls back when the block raised (and lets the error go on).
        return bool(self._bridge.run(self._block.__aexit__(exc_type, exc, traceback)))


def _reporting_connection_class(report: ConnectOutcome) -> type[psycopg.AsyncConnection[Any]]:
    """As ``connections``' sync one: each connect reports its outcome to the pool's
    policy, which then says why no connection came."""

    class ReportingAsyncConnection(psycopg.AsyncConnection[Any]):
        alkstore_pool = True  # connections.QuietPoolLog: a connection of ours

        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = await super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                report(exc)
                raise
            report(None)
            return conn

    return ReportingAsyncConnection


async def _closed_by_server(conn: psycopg.AsyncConnection[Any]) -> bool:
    verdict = idle_verdict(conn)
    if verdict is not None:
        return verdict
    try:
        await conn.execute(b"")
    except psycopg.Error:
        return True
    return False


class LoopPool(WaitPolicy):
    """``connections.StorePool``'s behaviour over an ``AsyncConnectionPool`` on the loop:
    checkouts bounded by the caller's budget, in slices of ``reconnect_max_s``, dead idle
    connections skipped, the same errors."""

    def __init__(
        self,
        bridge: LoopBridge,
        conninfo: str,
        connect_kwargs: dict[str, Any],
        options: PostgresOptions,
    ) -> None:
        super().__init__(options, pool_name(options, "-aio"))
        self._bridge = bridge
        self._pool = bridge.run(self._open(conninfo, connect_kwargs, options))

    async def _open(
        self, conninfo: str, connect_kwargs: dict[str, Any], options: PostgresOptions
    ) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        # Made on the loop: the pool's locks and tasks belong to it.
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            conninfo,
            **self.pool_settings(
                _reporting_connection_class(self._connected), connect_kwargs, options
            ),
            name=pool_name(options, "-aio"),
        )
        try:
            await pool.open(wait=options.pool_min_size > 0, timeout=options.connect_timeout_s)
        except PoolTimeout as exc:
            await pool.close()
            self._no_connection(exc, "opening the connection pool")
        return pool

    @property
    def max_size(self) -> int:
        return self._pool.max_size

    @contextmanager
    def connection(self, wait_s: float | None) -> Iterator[LoopConnection]:
        """A usable connection within the call's budget, given back afterwards."""
        conn = self.checkout(wait_s)
        try:
            yield conn
        finally:
            self.checkin(conn)

    def checkout(self, wait_s: float | None) -> LoopConnection:
        """A usable connection within the call's budget; give it back with ``checkin``."""
        deadline = time.monotonic() + self.budget(wait_s)
        return LoopConnection(self._bridge.run(self._checkout(deadline)), self._bridge)

    def checkin(self, conn: LoopConnection) -> None:
        # Not waited for: the loop runs it before anything submitted later, and
        # the caller saves a round trip to the loop on every call.
        self._give_back(conn.native)

    def _give_back(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if self._bridge.loop.is_closed():
            return  # its connections went with the loop
        self._bridge.submit(self._pool.putconn(conn)).add_done_callback(_log_failure)

    async def _checkout(self, deadline: float) -> psycopg.AsyncConnection[Any]:
        conn = await self._take(deadline)
        # After a restart every idle connection is dead: skip (and let the pool
        # replace) each one, at most one pool's worth, within the budget.
        for _ in range(self._pool.max_size):
            if not await _closed_by_server(conn):
                break
            await self._pool.putconn(conn)
            conn = await self._take(deadline)
        return conn

    async def _take(self, deadline: float) -> psycopg.AsyncConnection[Any]:
        while True:
            try:
                return await self._pool.getconn(timeout=self._slice(deadline))
            except PoolTimeout as exc:
                if time.monotonic() >= deadline:
                    self._no_connection(exc, "waiting for a connection")
            except psycopg.Error as exc:  # e.g. the pool is closed
                raise unavailable(exc, "waiting for a connection") from exc

    def prompt(self) -> None:
        """As ``StorePool.prompt``; never waits (the listener calls it on the loop)."""
        if self._pool.closed or self._bridge.loop.is_closed():
            return
        self._bridge.submit(self._pool.check()).add_done_callback(_log_failure)

    def close(self) -> None:
        if self._bridge.loop.is_closed():
            return  # its connections went with the loop
        if self._bridge.on_loop_thread() or not self._bridge.loop.is_running():
            # Nobody can wait here for the loop: close when it next runs.
            self._bridge.submit(self._pool.close()).add_done_callback(_log_failure)
            return
        self._bridge.run(self._pool.close())


def _log_failure(future: Future[Any]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        logger.debug("alkstore: a background pool call failed: %s", exc)


class LoopListener:
    """``listener.NotifyListener`` as a task on the loop: the same LISTEN statements,
    routing, reconnect and backoff; ``start`` (from a store thread) returns once the
    first LISTEN is in place (or failed, or ``ready_timeout_s`` passed)."""

    def __init__(
        self,
        bridge: LoopBridge,
        conninfo: str,
        connect_kwargs: dict[str, Any],
        routing: Routing,
        *,
        ready_timeout_s: float,
        reconnect_max_s: float,
    ) -> None:
        self._bridge = bridge
        self._conninfo = conninfo
        self._connect_kwargs = connect_kwargs
        self._routing = routing
        self._ready_timeout_s = ready_timeout_s
        self._reconnect_max_s = reconnect_max_s
        self._lock = threading.Lock()
        self._stopping = False
        self._first_attempt = threading.Event()
        self._task: asyncio.Task[None] | None = None
        self.connections = 0
        """How many times a LISTEN connection was established (for tests and metrics)."""

    @property
    def running(self) -> bool:
        task = self._task
        return task is not None and not task.done()

    def start(self, sink: WakeSink) -> None:
        self._bridge.check_thread()  # waiting for the first LISTEN would block the loop
        with self._lock:
            if self._task is None and not self._stopping:
                self._routing.sink = sink
                self._task = self._bridge.run(self._spawn())
            started = self._task is not None
        if started:
            self._first_attempt.wait(self._ready_timeout_s)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopping = True
            task = self._task
        self._first_attempt.set()
        if task is None or self._bridge.loop.is_closed():
            return
        if self._bridge.on_loop_thread() or not self._bridge.loop.is_running():
            # Nobody can wait here for the loop: the task ends when it next runs.
            self._bridge.loop.call_soon_threadsafe(task.cancel)
            return
        self._bridge.run(_cancel(task, timeout))

    async def _spawn(self) -> asyncio.Task[None]:
        # Held in self._task: the loop keeps only a weak reference to a task.
        return asyncio.create_task(self._run(), name="alkstore-postgres-listener")

    async def _run(self) -> None:
        try:
            await self._listen_until_closed()
        finally:
            self._first_attempt.set()

    async def _listen_until_closed(self) -> None:
        backoff = Backoff(self._reconnect_max_s)
        lost = False  # whether the server was lost (or never reached) since the last LISTEN
        while not self._stopping:
            listened = self.connections
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, **self._connect_kwargs
                )
                async with conn:
                    await self._serve(conn, reconnected=lost)
            except psycopg.Error as exc:
                logger.debug("alkstore listener: %s", exc)
            except Exception:  # never let the task die silently: log and go on
                logger.exception("alkstore listener failed; reconnecting")
            self._first_attempt.set()  # a first attempt that failed: stop making start() wait
            lost = True
            if self.connections > listened:
                backoff.reset()  # it was listening: reconnect at once
                continue
            # Could not connect or LISTEN: back off, so a down server is not hammered.
            await asyncio.sleep(backoff.next())

    async def _serve(self, conn: psycopg.AsyncConnection[Any], *, reconnected: bool) -> None:
        routing = self._routing
        # Notifications arriving while a statement runs here (LISTEN, the ping, a read
        # of stored messages) wait in psycopg's backlog and come first from notifies().
        for listen in routing.listen:
            await conn.execute(listen)
        self.connections += 1
        self._first_attempt.set()
        routing.listening(reconnected=reconnected)
        while not self._stopping:
            # One packet's worth at a time: its stored messages are read in one query.
            batch: list[Notification] = [
                (n.channel, n.payload) async for n in conn.notifies(timeout=PING_S, stop_after=1)
            ]
            if not batch:
                await conn.execute(b"SELECT 1")  # an idle peer may be silently gone: probe it
                continue
            if conn.pgconn.status != pq.ConnStatus.OK:
                raise psycopg.OperationalError("the listening connection is broken")
            stored = {}
            ids = routing.stored_ids(batch)
            if ids and routing.fetch_messages is not None:
                cursor = await conn.execute(routing.fetch_messages, {"ids": ids})
                stored = stored_rows(await cursor.fetchall())
            routing.deliver(batch, stored)


async def _cancel(task: asyncio.Task[None], timeout: float) -> None:
    """Cancel ``task`` and let it close its connection (for at most ``timeout``)."""
    task.cancel()
    await asyncio.wait([task], timeout=timeout)


class LoopDriver(PostgresDriver):
    """``PostgresDriver`` with its pool and listener on ``loop``; ``attach`` takes a
    ``psycopg.AsyncConnection``. Opening (the schema check or migration, the first clock
    reading) uses one short-lived sync connection on the opening thread, as ``open``
    does: ``alkstore.aio`` opens from a thread of its own."""

    def __init__(
        self,
        conninfo: str,
        options: PostgresOptions,
        server_clock: ServerClock | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._bridge = LoopBridge(loop)
        super().__init__(conninfo, options, server_clock)

    def _open_pool(
        self, conninfo: str, connect_kwargs: dict[str, Any], options: PostgresOptions
    ) -> Pool:
        return LoopPool(self._bridge, conninfo, connect_kwargs, options)

    def _open_listener(
        self, conninfo: str, connect_kwargs: dict[str, Any], options: PostgresOptions
    ) -> Listener:
        routing = Routing(
            self.channel, self.message_channel, self._sql.fetch_messages, self._pool.prompt
        )
        return LoopListener(
            self._bridge,
            conninfo,
            connect_kwargs,
            routing,
            ready_timeout_s=options.connect_timeout_s,
            reconnect_max_s=options.reconnect_max_s,
        )

    @contextmanager
    def attach(self, native: Any) -> Iterator[PgHandle]:
        if isinstance(native, psycopg.Connection):
            raise InvalidOptions(
                "attach() of a store opened with alkstore.aio takes a psycopg.AsyncConnection "
                "(SQLAlchemy's: (await conn.get_raw_connection()).driver_connection), "
                "got a sync psycopg.Connection"
            )
        if not isinstance(native, psycopg.AsyncConnection):
            raise InvalidOptions(
                f"attach() takes a psycopg.AsyncConnection, got {type(native).__name__}"
            )
        check_attachable(native)
        yield PgHandle(LoopConnection(native, self._bridge), standalone=False)

    def native_connection(self, c: PgHandle) -> Any:
        conn = c.conn
        return conn.native if isinstance(conn, LoopConnection) else conn
