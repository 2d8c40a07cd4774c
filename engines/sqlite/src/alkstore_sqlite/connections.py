"""Opening connections, and a pool of idle ones."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from alkstore import StoreClosed

from . import statements as sql
from .budget import pause
from .errors import is_busy, unavailable
from .options import SqliteOptions


def connect(
    path: str,
    options: SqliteOptions,
    deadline: float | None = None,
    *,
    busy_handler_s: float = 0.0,
) -> sqlite3.Connection:
    """A connection in autocommit mode (the driver issues BEGIN/COMMIT itself),
    usable from any thread (the pool hands it to one thread at a time).

    ``busy_handler_s`` is how long SQLite's own busy handler may sleep inside one
    statement. The driver's connections use 0: a lock conflict comes back at once
    and the driver waits for it within the call's one budget (``budget``), which
    SQLite's handler, sleeping on its own clock, would overrun. Setting up the
    connection reads the schema, which another connection can lock for a moment
    (switching a new file to WAL mode): that is tried again until ``deadline``
    (``time.monotonic()``; ``None``: tried once).
    """
    try:
        conn = sqlite3.connect(
            path, timeout=busy_handler_s, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise unavailable(exc, path) from exc
    attempt = 0
    while True:
        try:
            conn.execute(sql.SYNCHRONOUS[options.synchronous])
            conn.execute(sql.TEMP_STORE_MEMORY)
            conn.execute(sql.RECURSIVE_TRIGGERS)
            conn.execute(sql.WAL_AUTOCHECKPOINT)
            conn.execute(sql.JOURNAL_SIZE_LIMIT)
            return conn
        except sqlite3.Error as exc:
            if deadline is not None and is_busy(exc) and pause(attempt, deadline):
                attempt += 1
                continue
            conn.close()
            raise unavailable(exc, path) from exc


class ConnectionPool:
    """Idle connections, taken by one thread at a time and given back.

    ``list.pop``/``list.append`` are atomic, so the hot path takes no lock; a
    thread that finds the pool empty opens a connection, so the pool grows to
    the number of threads using the store at once and no further.
    """

    def __init__(self, opener: Callable[[float | None], sqlite3.Connection]) -> None:
        self._opener = opener
        self._idle: list[sqlite3.Connection] = []
        self._closed = False

    def take(self, deadline: float | None = None) -> sqlite3.Connection:
        """An idle connection, or a new one (set up by ``deadline``, see ``connect``)."""
        if self._closed:
            raise StoreClosed("the store is closed")
        try:
            return self._idle.pop()
        except IndexError:
            return self._opener(deadline)

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
