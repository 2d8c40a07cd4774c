"""The bound on a unit of work the server never ends: ``call_timeout_s``.

Lock waits end at ``lock_timeout_s`` on the server, but nothing on the server ends
a commit waiting for a synchronous standby that stopped answering (PostgreSQL 15
has no such timeout): the call would hang for ever, where the contract (§8.4)
says no call waits past the engine's limit. So the store watches its own units
from the client: one daemon thread, started with the first unit, looks every
``POLL_S`` at the units running and cancels (``cancel_safe``) each one older
than the bound, again at every look until it ends. A commit cancelled in that
wait has committed on this server and is not confirmed by the standby (a
failover may lose it); a statement
cancelled while it ran has rolled back. Either way the call raises
``EngineUnavailable``, which says which.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import psycopg

from alkstore.errors import EngineUnavailable

POLL_S = 0.5
"""How often the watchdog looks at the running units: a unit is cancelled at most
this long after its bound."""

CANCEL_TIMEOUT_S = 5.0
"""The most the watchdog waits for the server to take a cancel request."""


class Watchdog:
    """Cancels the store's units that outlast ``limit_s`` (see the module's doc).

    A unit's path is two dict operations, each atomic under the GIL: ``start`` adds
    the unit, ``finish`` takes it out. Whoever takes an entry out first owns it: when
    the watchdog took it, ``finish`` waits on the lock the watchdog cancels under, so
    no cancel reaches a connection after its unit is over."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._lock = threading.Lock()
        self._keys = itertools.count()
        self._running: dict[int, tuple[float, Any, bool]] = {}
        """Each unit's key: when it is due to be cancelled, its connection, and
        whether it has been cancelled already."""
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, conn: Any) -> int:
        """Watch ``conn``'s unit from now on; the key to ``finish`` it with, before the
        connection is used for anything else."""
        key = next(self._keys)
        self._running[key] = (time.monotonic() + self.limit_s, conn, False)
        if self._thread is None:
            self._start_thread()
        return key

    def finish(self, key: int) -> bool:
        """Stop watching; whether the unit was cancelled (then only once the cancel
        request has been sent). Idempotent only as long as the unit was not cancelled."""
        taken = self._running.pop(key, None)
        if taken is not None:
            return taken[2]  # cancelled before, and put back to be cancelled again
        with self._lock:  # the watchdog holds it: wait until its cancel is sent
            self._running.pop(key, None)  # put back meanwhile: no more cancels
            return True

    def close(self) -> None:
        self._closed.set()
        thread = self._thread
        if thread is not None:
            thread.join(CANCEL_TIMEOUT_S + POLL_S)

    def _start_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="alkstore-postgres-watchdog", daemon=True
                )
                self._thread.start()

    def _watch(self) -> None:
        while not self._closed.wait(POLL_S):
            now = time.monotonic()
            for key, (due, _, _) in list(self._running.items()):
                if due > now:
                    continue
                with self._lock:
                    taken = self._running.pop(key, None)
                    if taken is not None:
                        _cancel(taken[1])
                        # Cancelled again each poll until the unit ends: a cancel that
                        # reached the server between two of the unit's statements
                        # ends nothing, and the next statement (or the commit) may wait.
                        self._running[key] = (now + POLL_S, taken[1], True)


def _cancel(conn: Any) -> None:
    """Ask the server to cancel what ``conn`` runs (a store on an event loop hands
    out ``loop_io.LoopConnection``s, whose ``native`` is the async connection)."""
    native = getattr(conn, "native", conn)
    try:
        if isinstance(native, psycopg.Connection):
            native.cancel_safe(timeout=CANCEL_TIMEOUT_S)
        else:
            native.cancel()  # libpq's own, safe from any thread
    except psycopg.Error:
        pass  # the connection is gone: its call fails on its own


def timed_out(limit_s: float, committed: bool, cause: BaseException | None) -> EngineUnavailable:
    """The error of a unit the watchdog cancelled (chain ``cause`` with ``from``)."""
    if committed:
        what = (
            "its commit was not confirmed in time (a synchronous standby that stopped "
            "answering?): it committed on this server, and a failover may lose it"
        )
    else:
        what = "it was cancelled, and wrote nothing"
    detail = f": {cause}" if cause is not None else ""
    return EngineUnavailable(
        f"PostgreSQL did not finish a call within call_timeout_s={limit_s:g}: {what}{detail}"
    )
