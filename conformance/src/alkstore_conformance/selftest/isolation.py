"""Mutants of isolation between stores on one server (contract §1.6).

For the SQLite engine a "server" is a directory: stores side by side are files
in it (``SqliteEngine.provision_beside``). Each mutant keys one thing by the
directory where the real engine keys it by the file -- the SQLite form of a
PostgreSQL engine that names a table or a ``NOTIFY`` channel without its schema.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from typing import TypeVar

from alkstore.params import LockHolder, LockLease, LockRelease
from alkstore.values import LockInfo
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.shared import SharedDatabase, share

T = TypeVar("T")

SHARED_LOCKS_FILE = "shared-locks.db"
_CREATE_LOCKS = """
CREATE TABLE IF NOT EXISTS __alkstore_locks (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL
) WITHOUT ROWID
"""
_BUSY_S = 10.0


class LocksSharedByDirectoryDriver(SqliteDriver):
    """Keeps its locks in one database per directory, beside the store's file: every
    store of the directory takes, sees and releases the same locks. (Each lock
    statement runs alone, in autocommit, on a connection to that database.)"""

    def _on_shared_locks(self, statement: Callable[[sqlite3.Connection], T]) -> T:
        path = os.path.join(os.path.dirname(self.path), SHARED_LOCKS_FILE)
        connection = sqlite3.connect(path, timeout=_BUSY_S, isolation_level=None)
        with closing(connection) as conn:
            conn.execute(_CREATE_LOCKS)
            return statement(conn)

    def lock_acquire(self, c: sqlite3.Connection, params: LockLease) -> bool:
        return self._on_shared_locks(lambda shared: SqliteDriver.lock_acquire(self, shared, params))

    def lock_renew(self, c: sqlite3.Connection, params: LockLease) -> bool:
        return self._on_shared_locks(lambda shared: SqliteDriver.lock_renew(self, shared, params))

    def lock_release(self, c: sqlite3.Connection, params: LockRelease) -> bool:
        return self._on_shared_locks(lambda shared: SqliteDriver.lock_release(self, shared, params))

    def lock_holder(self, c: sqlite3.Connection, params: LockHolder) -> LockInfo | None:
        return self._on_shared_locks(lambda shared: SqliteDriver.lock_holder(self, shared, params))


_first_file_lock = threading.Lock()
_first_file: dict[str, str] = {}
"""Per directory, the first database file a ``WakesSharedByDirectoryDriver`` opened in it."""


class WakesSharedByDirectoryDriver(SqliteDriver):
    """Shares the process's per-file state (the watcher that wakes waiters and
    delivers messages, and the writer gate) between every store of a directory: it
    is keyed by the directory, so it watches the first file opened there, and a
    commit to that store wakes the waiters of every store beside it."""

    def _share(self, deadline: float) -> SharedDatabase:
        directory = os.path.dirname(os.path.realpath(self.path))
        with _first_file_lock:
            first = _first_file.setdefault(directory, self.path)
        return share(first)
