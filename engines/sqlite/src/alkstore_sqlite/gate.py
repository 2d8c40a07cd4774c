"""Writer serialization: one alkstore writer per database file at a time, machine-wide.

SQLite lets one connection write at a time and makes the others retry in its
busy handler, which sleeps 1, 2, 5, 10 … ms between tries; under contention
most of the time goes to those sleeps. Waiting instead on an exclusive
``flock`` of a sidecar file (``<db>-alkstore.lock``) blocks in the kernel and
wakes the next writer as soon as the lock is released. Threads of one process
first queue on a ``threading.Lock`` (so one open file description serves the
whole process and only one thread per process waits in the kernel).

The gate only orders alkstore's own writers; SQLite's locks still guard the
file against everyone else (the caller's connections, other tools), with the
busy timeout as the backstop. The sidecar is not on the database file itself
because closing any descriptor of the database file drops SQLite's POSIX locks.
"""

from __future__ import annotations

import fcntl
import os
import threading

from alkstore import StoreClosed

LOCK_SUFFIX = "-alkstore.lock"


class WriterGate:
    """Held for the whole of every write transaction the engine opens."""

    def __init__(self, database_path: str) -> None:
        self.path = database_path + LOCK_SUFFIX
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._lock = threading.Lock()
        self.owner: int | None = None
        """The ident of the thread holding the gate (to refuse a nested write)."""

    def acquire(self) -> None:
        self._lock.acquire()
        try:
            if self._fd is None:
                raise StoreClosed("the store is closed")
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._lock.release()
            raise
        self.owner = threading.get_ident()

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


class NoGate:
    """Writers left to SQLite's busy handler alone (kept to measure the difference)."""

    owner: int | None = None

    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass
