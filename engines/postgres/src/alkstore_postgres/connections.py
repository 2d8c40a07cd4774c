"""The store's connection pool: waits bounded by the caller, reconnects soon after an outage.

psycopg_pool replaces a lost connection in the background, retrying a failed
connect with a backoff that doubles from about 1 s (1, 2, 4, 8, 16, 32 s, ...)
until ``reconnect_timeout`` (5 minutes by default); a caller waiting for a
connection only waits. After a 35 s outage its next try could be half a minute
away, and every call failed until then although the server was back. The pool
has no setting for the backoff itself, so this module bounds it with what it
does offer:

* ``reconnect_timeout`` is ``reconnect_max_s``: a background attempt gives up
  after about that long (two tries) and the pool stops counting the connection
  it was trying to open;
* a caller waits for a connection in slices of ``reconnect_max_s``; each new
  slice finds that room in the pool and starts a new attempt at once. So the
  server is tried about every ``reconnect_max_s`` while anyone waits for it, and
  not at all while nobody does;
* ``prompt()`` (called when the store's listener has reconnected) starts an
  attempt at once, so waiting workers find the server as soon as it is back.

Every wait is bounded by the caller's remaining time (``wait_s``) and by
``connect_timeout_s``, whichever is shorter; then the call raises
``EngineUnavailable`` -- or ``EngineMisconfigured`` when the pool's last connect
was refused for its configuration (a wrong password, a dropped role).

An outage is logged once per change of state (``OutageLog``: a warning when
connects start failing, an info line when one succeeds again), not once per
attempt: psycopg_pool's own warnings about an alkstore pool's connects and the
dead connections it discards are dropped (``QuietPoolLog``); every other
record of its logger passes.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NoReturn, Protocol, Self

import psycopg
from psycopg import pq
from psycopg_pool import ConnectionPool, PoolTimeout

from .errors import is_misconfigured, misconfigured, unavailable
from .handle import SqlConnection
from .options import PostgresOptions

ConnectOutcome = Callable[[psycopg.Error | None], None]
"""Told each connect's error, or ``None`` when it connected."""

logger = logging.getLogger(__name__)
POOL_NAME_PREFIX = "alkstore"
"""Every pool the engine makes is named ``alkstore:<schema>`` or ``alkstore-aio:<schema>``."""
_QUIETED = ("error connecting in ", "reconnection attempt in pool ", "discarding closed connection")
"""psycopg_pool's per-attempt records that ``OutageLog`` replaces."""


def pool_name(options: PostgresOptions, kind: str = "") -> str:
    return f"{POOL_NAME_PREFIX}{kind}:{options.schema}"


class QuietPoolLog(logging.Filter):
    """Drops psycopg_pool's per-attempt warnings about an alkstore pool or its connections."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str) or not record.msg.startswith(_QUIETED):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(_ours(arg) for arg in args)


def _ours(arg: object) -> bool:
    if isinstance(arg, str):
        return arg.startswith(POOL_NAME_PREFIX)
    return bool(getattr(arg, "alkstore_pool", False))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def quiet_pool_log() -> None:
    """Install ``QuietPoolLog`` on psycopg_pool's logger, once per process."""
    pool_logger = logging.getLogger("psycopg.pool")
    if not any(isinstance(f, QuietPoolLog) for f in pool_logger.filters):
        pool_logger.addFilter(QuietPoolLog())


class OutageLog:
    """A pool's connect outcomes, logged once per change: down (a warning naming the
    error), then back (an info line with how long and how many attempts failed)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._failures = 0

    def __call__(self, error: psycopg.Error | None) -> None:
        with self._lock:
            if error is None:
                if self._down_since is not None:
                    logger.info(
                        "%s: PostgreSQL accepts connections again after %.1f s"
                        " (%d failed connects)",
                        self._name,
                        time.monotonic() - self._down_since,
                        self._failures,
                    )
                    self._down_since, self._failures = None, 0
                return
            self._failures += 1
            if self._down_since is None:
                self._down_since = time.monotonic()
                logger.warning(
                    "%s: cannot connect to PostgreSQL (%s); retrying, quietly until it answers",
                    self._name,
                    str(error).strip().splitlines()[0]
                    if str(error).strip()
                    else type(error).__name__,
                )


def _has_unread_input(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    fd = conn.fileno()
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def idle_verdict(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool | None:
    """Whether an idle pooled connection is unusable (``True``), usable (``False``), or
    must be asked with a round trip (``None``): the server sent something unasked (on
    shutdown: FATAL, then EOF). No I/O, so the async pool shares it."""
    if conn.closed or conn.broken or conn.pgconn.status != pq.ConnStatus.OK:
        return True
    if not _has_unread_input(conn):
        return False
    return None


def closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle pooled connection is unusable, at the cost of a round trip only
    when the server sent something unasked."""
    verdict = idle_verdict(conn)
    if verdict is not None:
        return verdict
    try:
        conn.execute(b"")
    except psycopg.Error:
        return True
    return False


def _reporting_connection_class(report: ConnectOutcome) -> type[psycopg.Connection[Any]]:
    """A connection class whose ``connect`` reports each outcome (the error, or ``None``):
    the pool connects in its own threads and only logs why it could not."""

    class ReportingConnection(psycopg.Connection[Any]):
        alkstore_pool = True  # QuietPoolLog: a connection of ours

        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                report(exc)
                raise
            report(None)
            return conn

    return ReportingConnection


class Pool(Protocol):
    """What the driver uses of its pool: ``StorePool``, or ``loop_io.LoopPool`` for a
    store opened on an event loop."""

    def connection(self, wait_s: float | None) -> AbstractContextManager[SqlConnection]: ...

    def checkout(self, wait_s: float | None) -> Any:
        """``connection`` as two calls (the driver's hot path): a ``SqlConnection``."""
        ...

    def checkin(self, conn: Any) -> None: ...

    def prompt(self) -> None: ...

    def close(self) -> None: ...


class WaitPolicy:
    """How long a checkout waits, in which slices, and what it raises when nothing
    came: shared by the sync pool and the event-loop one (see the module's doc)."""

    @staticmethod
    def pool_settings(
        connection_class: type[Any], connect_kwargs: dict[str, Any], options: PostgresOptions
    ) -> dict[str, Any]:
        """What the sync and the async pool are made with alike (``open=False``: the
        caller opens it with the time budget)."""
        return {
            "connection_class": connection_class,
            "kwargs": {"autocommit": True, **connect_kwargs},
            "min_size": options.pool_min_size,
            "max_size": options.pool_max_size,
            "timeout": options.connect_timeout_s,
            "reconnect_timeout": options.reconnect_max_s,
            "open": False,
        }

    def __init__(self, options: PostgresOptions, name: str) -> None:
        self._connect_timeout_s = options.connect_timeout_s
        self._reconnect_max_s = options.reconnect_max_s
        self._last_connect_error: psycopg.Error | None = None
        self._outages = OutageLog(name)
        quiet_pool_log()

    def _connected(self, error: psycopg.Error | None) -> None:
        self._last_connect_error = error
        self._outages(error)

    def budget(self, wait_s: float | None) -> float:
        """How long a call may wait for a connection: its own remaining time, at most
        ``connect_timeout_s``."""
        if wait_s is None:
            return self._connect_timeout_s
        return min(wait_s, self._connect_timeout_s)

    def _slice(self, deadline: float) -> float:
        # A slice of at most reconnect_max_s: a new wait makes the pool start a
        # connect attempt when its last one gave up (see the module's doc).
        return max(min(deadline - time.monotonic(), self._reconnect_max_s), 0)

    def _no_connection(self, timeout: PoolTimeout, doing: str) -> NoReturn:
        """Raise why no connection came: the pool's last failed connect says more than
        its timeout ("connection refused", "password authentication failed")."""
        cause = self._last_connect_error or timeout
        if is_misconfigured(cause):
            raise misconfigured(cause, doing) from cause
        raise unavailable(cause, doing) from cause


class StorePool(WaitPolicy):
    """A ``psycopg_pool.ConnectionPool`` of autocommit connections, checked out with a
    time budget."""

    def __init__(
        self,
        conninfo: str,
        connect_kwargs: dict[str, Any],
        options: PostgresOptions,
        configure: Callable[[psycopg.Connection[Any]], None],
    ) -> None:
        super().__init__(options, pool_name(options))
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conninfo,
            **self.pool_settings(
                _reporting_connection_class(self._connected), connect_kwargs, options
            ),
            configure=configure,
            name=pool_name(options),
        )
        try:
            self._pool.open(wait=options.pool_min_size > 0, timeout=options.connect_timeout_s)
        except PoolTimeout as exc:
            self._pool.close()
            self._no_connection(exc, "opening the connection pool")

    @property
    def max_size(self) -> int:
        return self._pool.max_size

    @contextmanager
    def connection(self, wait_s: float | None) -> Iterator[psycopg.Connection[Any]]:
        """A usable connection within the call's budget, given back afterwards."""
        conn = self.checkout(wait_s)
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    def checkout(self, wait_s: float | None) -> psycopg.Connection[Any]:
        """A usable connection within the call's budget; the caller gives it back with
        ``checkin`` (``connection`` as two calls, for the driver's hot path)."""
        deadline = time.monotonic() + self.budget(wait_s)
        conn = self._take(deadline)
        # A server restart kills every idle connection at once: skip (and let the
        # pool replace) each dead one, at most one pool's worth, within the budget.
        for _ in range(self._pool.max_size):
            if not closed_by_server(conn):
                break
            self._pool.putconn(conn)
            conn = self._take(deadline)
        return conn

    def checkin(self, conn: psycopg.Connection[Any]) -> None:
        self._pool.putconn(conn)

    def _take(self, deadline: float) -> psycopg.Connection[Any]:
        while True:
            try:
                return self._pool.getconn(timeout=self._slice(deadline))
            except PoolTimeout as exc:
                if time.monotonic() >= deadline:
                    self._no_connection(exc, "waiting for a connection")
            except psycopg.Error as exc:  # e.g. the pool is closed
                raise unavailable(exc, "waiting for a connection") from exc

    def prompt(self) -> None:
        """The server answers again (the listener reconnected): replace the pool's dead
        idle connections and start a connect attempt now, not at the next backoff."""
        if not self._pool.closed:
            self._pool.check()

    def close(self) -> None:
        self._pool.close()
