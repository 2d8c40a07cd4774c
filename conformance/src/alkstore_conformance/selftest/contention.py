"""Broken time limits and outages (contract §3.7, §8.4, §8.5): ``SqliteDriver``
subclasses.

Each keeps every statement and breaks what a unit of work does when what it
needs is held or gone: waiting past the caller's time, letting the driver's
own error through, staying broken once the database was unreachable, refusing
a write beside the thread's own transaction with an error outside the taxonomy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from alkstore import EngineUnavailable, WriteWouldDeadlock
from alkstore_sqlite import SqliteDriver

T = TypeVar("T")


class WaitPastTimeoutDriver(SqliteDriver):
    """Waits for locks up to ``busy_timeout_s`` whatever the caller's remaining time:
    a ``claim_wait`` behind a held write lock sits the holder out."""

    def write(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        return super().write(work, wait_s=None)

    def read(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        return super().read(work, wait_s=None)


class RawLockErrorDriver(SqliteDriver):
    """A write that cannot get the database raises sqlite3's own error, not the
    contract's ``EngineUnavailable``."""

    def write(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        try:
            return super().write(work, wait_s=wait_s)
        except EngineUnavailable as exc:
            raise sqlite3.OperationalError(f"database is locked: {exc}") from exc


class NeverRecoversDriver(SqliteDriver):
    """Once a write found the database unavailable, every later write fails too: the
    store never notices the database is back."""

    _gone: bool = False

    def write(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        if self._gone:
            raise EngineUnavailable(f"SQLite database {self.path!r} was unavailable before")
        try:
            return super().write(work, wait_s=wait_s)
        except EngineUnavailable:
            self._gone = True
            raise


class NestedWriteRawErrorDriver(SqliteDriver):
    """Refuses a write beside the thread's own open transaction, as it must, but with
    a bare ``RuntimeError`` rather than the contract's ``WriteWouldDeadlock``."""

    def write(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        try:
            return super().write(work, wait_s=wait_s)
        except WriteWouldDeadlock as exc:
            raise RuntimeError(str(exc)) from None
