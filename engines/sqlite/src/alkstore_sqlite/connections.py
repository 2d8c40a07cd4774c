"""Opening connections, a pool of idle ones, and what a sqlite3 error means to a caller."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from alkstore import EngineUnavailable, StoreClosed

from . import statements as sql
from .options import SqliteOptions

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def connect(path: str, options: SqliteOptions) -> sqlite3.Connection:
    """A connection in autocommit mode (the driver issues BEGIN/COMMIT itself),
    usable from any thread (the pool hands it to one thread at a time)."""
    try:
        conn = sqlite3.connect(
            path,
            timeout=options.busy_timeout_s,  # sqlite3_busy_timeout: the backstop, see driver
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise unavailable(exc, path) from exc
    try:
        conn.execute(sql.SYNCHRONOUS[options.synchronous])
        conn.execute(sql.TEMP_STORE_MEMORY)
        conn.execute(sql.WAL_AUTOCHECKPOINT)
    except sqlite3.Error as exc:
        conn.close()
        raise unavailable(exc, path) from exc
    return conn


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds a lock; retrying is safe."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _BUSY_CODES


def is_unavailable(exc: sqlite3.Error) -> bool:
    """Errors that say the database cannot be used right now (I/O, permissions, full
    disk, not a database, corruption) as opposed to a wrong statement or value."""
    return type(exc) in (sqlite3.OperationalError, sqlite3.DatabaseError)


def unavailable(exc: sqlite3.Error, path: str) -> EngineUnavailable:
    return EngineUnavailable(f"SQLite database {path!r} is unavailable: {exc}")


class ConnectionPool:
    """Idle connections, taken by one thread at a time and given back.

    ``list.pop``/``list.append`` are atomic, so the hot path takes no lock; a
    thread that finds the pool empty opens a connection, so the pool grows to
    the number of threads using the store at once and no further.
    """

    def __init__(self, opener: Callable[[], sqlite3.Connection]) -> None:
        self._opener = opener
        self._idle: list[sqlite3.Connection] = []
        self._closed = False

    def take(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            return self._idle.pop()
        except IndexError:
            return self._opener()

    def give(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            # Only reachable if a rollback itself failed: never reuse a dirty connection.
            conn.close()
            return
        self._idle.append(conn)
        # Append first, then look: a close() racing with us either finds the
        # connection in the list or has already set the flag we read here.
        if self._closed:
            self._drain()

    def close(self) -> None:
        self._closed = True
        self._drain()

    def _drain(self) -> None:
        while True:
            try:
                conn = self._idle.pop()
            except IndexError:
                return
            conn.close()
