"""Writer serialization: one alkstore writer per database file at a time, machine-wide.

SQLite lets one connection write at a time and makes the others retry in its
busy handler, which sleeps 1, 2, 5, 10 … ms between tries; under contention
most of the time goes to those sleeps. Instead every engine write first takes
this gate: threads of one process queue on a ``threading.Lock`` (so one open
file description serves the whole process and only one thread per process
contends across processes), then the process takes an exclusive ``flock`` of
a sidecar file (``<db>-alkstore.lock``).

Every wait is bounded by the call's deadline (see ``budget``): the thread lock
with a timeout, the ``flock`` by non-blocking tries with pauses of 50 µs
doubling to 2 ms. A blocking ``flock`` cannot be bounded: a process stopped or
hung while holding the gate, or a ``store.transaction()`` left open, would
block every other writer for as long, past any timeout. A release is seen
within one pause; the pauses stay short while the holder is a normal write
(well under a millisecond) and only a long hold makes them grow. Under
contention this measured faster than the blocking ``flock`` (see the engine's
docs, Measurements).

The gate only orders alkstore's own writers; SQLite's locks still guard the
file against everyone else (the caller's connections, other tools). The
sidecar is not the database file itself because closing any descriptor of the
database file drops SQLite's POSIX locks.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from alkstore import StoreClosed

from .budget import pause

LOCK_SUFFIX = "-alkstore.lock"

ANOTHER_THREAD = "another thread of this process"
ANOTHER_PROCESS = "another process"


class GateBusy(Exception):
    """The gate stayed held until the call's deadline (the driver reports it as
    ``EngineUnavailable``)."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder
        """Who held it: ``ANOTHER_THREAD`` or ``ANOTHER_PROCESS``."""


class WriterGate:
    """Held for the whole of every write transaction the engine opens."""

    def __init__(self, database_path: str) -> None:
        self.path = database_path + LOCK_SUFFIX
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._lock = threading.Lock()
        self.owner: int | None = None
        """The ident of the thread holding the gate (to refuse a nested write)."""

    def acquire(self, deadline: float) -> None:
        """Hold the gate, or raise ``GateBusy`` at ``deadline`` (``time.monotonic()``)."""
        lock = self._lock
        if not lock.acquire(False) and not lock.acquire(
            timeout=max(0.0, deadline - time.monotonic())
        ):
            raise GateBusy(ANOTHER_THREAD)
        try:
            fd = self._fd
            if fd is None:
                raise StoreClosed("the store is closed")
            if not _flock_by(fd, deadline):
                raise GateBusy(ANOTHER_PROCESS)
        except BaseException:
            lock.release()
            raise
        self.owner = threading.get_ident()

    def acquire_current(self, deadline: float) -> None:
        """``acquire``, making sure the lock held is the file now at ``self.path``: a
        failed open elsewhere may have removed the one this process opened (see
        ``leftovers``), and a lock on an unlinked file excludes nobody."""
        self.acquire(deadline)
        try:
            while not self._is_current():
                self._reopen(deadline)
        except BaseException:
            self.release()
            raise

    def _is_current(self) -> bool:
        assert self._fd is not None
        held = os.fstat(self._fd)
        try:
            there = os.stat(self.path)
        except FileNotFoundError:
            return False
        return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)

    def _reopen(self, deadline: float) -> None:
        # Holding the thread lock: nobody else in this process uses the descriptor.
        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if not _flock_by(self._fd, deadline):
            raise GateBusy(ANOTHER_PROCESS)

    def release(self) -> None:
        self.owner = None
        try:
            if self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._lock.release()

    def close(self) -> None:
        # Under the thread lock: no writer is between flock and unlock, and the
        # descriptor number cannot be reused under a waiting writer's feet.
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _flock_by(fd: int, deadline: float) -> bool:
    """Take the exclusive ``flock`` on ``fd``, trying until ``deadline``."""
    attempt = 0
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if not pause(attempt, deadline):
            return False
        attempt += 1


class NoGate:
    """Writers left to SQLite's locks alone (kept to measure the difference)."""

    owner: int | None = None

    def acquire(self, deadline: float) -> None:
        pass

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass
