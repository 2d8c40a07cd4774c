"""How long a statement waits for a lock another session holds (contract §8.4, §8.5).

PostgreSQL waits for a lock as long as the session's ``lock_timeout`` allows, and
that is forever by default: a claim queued behind a migration's ``ALTER TABLE``,
a ``LOCK TABLE`` or a ``CREATE INDEX`` would outlive any ``claim_wait`` timeout
and every limit the engine documents. So the engine sets ``lock_timeout`` on
each pooled connection it uses, to one of two values:

* the engine's limit, ``lock_timeout_s``: what every transaction
  (``store.transaction()``, the scheduler's advance and its job) waits at most
  per statement, and where a new connection starts;
* ``SLICE_MS``: set when a call with a shorter budget of its own uses the
  connection (a waiting call, ``claim_wait`` or ``stream.wait``, hands the
  engine what is left of its timeout). The connection keeps it until a
  transaction needs the limit again.

A standalone statement (autocommit: it rolled back alone) that ran out of
``lock_timeout`` is run again until its call's deadline -- the caller's
remaining time or ``lock_timeout_s``, whichever is shorter -- and then the
call raises ``EngineUnavailable``. So a call that does not wait still waits
its whole limit on a connection left at the slice, and a waiting call
overruns its caller's time by at most one slice. While nobody holds a lock
this adds no round trip, except one ``SET`` when a connection goes from one
setting to the other. (A statement run again joins the back of the lock's
queue: only under a lock held that long, where order no longer matters.)

Behind a transaction pooler (``pooler="transaction"``) a session's setting would
stay on whichever server connection the ``SET`` happened to reach, and the next
statement may run on another: nothing is set per session there. A
standalone statement is sent in one pipeline after ``SET LOCAL lock_timeout``
(both in the one implicit transaction the pooler gives a single server
connection: still one round trip), and a transaction sets it with ``SET LOCAL``
right after ``BEGIN``.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .handle import SqlConnection

SLICE_MS: Final = 100
"""``lock_timeout`` of a connection a waiting call used: how long one statement of a
waiting call may wait for a lock before it is run again (or gives up)."""


def _native(conn: SqlConnection) -> Any:
    # A store on an event loop wraps each checkout anew (``loop_io.LoopConnection``):
    # the setting belongs to the psycopg connection underneath.
    return getattr(conn, "native", conn)


def set_local(milliseconds: int) -> bytes:
    """The statement that bounds lock waits for the rest of the current transaction."""
    return f"SET LOCAL lock_timeout = {int(milliseconds)}".encode()


class LockWaits:
    """The store's lock-wait budget, and each pooled connection's ``lock_timeout``."""

    def __init__(self, lock_timeout_s: float, *, per_transaction: bool = False) -> None:
        self.limit_s = lock_timeout_s
        self.per_transaction = per_transaction
        """Behind a transaction pooler: ``SET LOCAL`` per transaction, never per session."""
        # At least 1 ms: PostgreSQL reads 0 as "wait forever".
        self._limit_ms = max(1, round(lock_timeout_s * 1000))
        self._slice_ms = min(SLICE_MS, self._limit_ms)
        self._settings: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def deadline(self, wait_s: float | None) -> float:
        """When a standalone unit with the caller's ``wait_s`` stops waiting for locks
        (``time.monotonic()``)."""
        budget = self.limit_s if wait_s is None else min(wait_s, self.limit_s)
        return time.monotonic() + budget

    def for_unit(self, conn: SqlConnection, wait_s: float | None) -> int | None:
        """Before a ``write``/``read`` unit: a call with less time than the limit
        waits for a lock one slice at a time; any other takes the connection as it is
        (its statements are run again until the deadline). A new connection gets the
        limit. Behind a transaction pooler nothing is set: the ``lock_timeout`` each
        standalone statement of the unit sets locally is returned instead."""
        waiting = wait_s is not None and wait_s < self.limit_s
        if self.per_transaction:
            return self._slice_ms if waiting else self._limit_ms
        current = self._current(conn)
        if current is None:
            self._set(conn, self._slice_ms if waiting else self._limit_ms)
        elif waiting and current > self._slice_ms:
            self._set(conn, self._slice_ms)
        return None

    def for_transaction(self, conn: SqlConnection) -> None:
        """Before ``BEGIN``: a transaction's statements each wait up to the limit (one
        that gives up aborts the transaction, so it cannot be run again). Behind a
        transaction pooler: nothing (see ``in_transaction``)."""
        if self.per_transaction:
            return
        if self._current(conn) != self._limit_ms:
            self._set(conn, self._limit_ms)

    def in_transaction(self, conn: SqlConnection) -> None:
        """Right after ``BEGIN``, behind a transaction pooler: the limit for this
        transaction only (``SET LOCAL``). Without a pooler: nothing (``for_transaction``
        set the session)."""
        if self.per_transaction:
            conn.execute(set_local(self._limit_ms), prepare=False)

    def _current(self, conn: SqlConnection) -> int | None:
        with self._lock:
            return self._settings.get(_native(conn))

    def _set(self, conn: SqlConnection, milliseconds: int) -> None:
        # Outside any transaction (autocommit), so the setting stays with the session.
        conn.execute(f"SET lock_timeout = {int(milliseconds)}".encode())
        with self._lock:
            self._settings[_native(conn)] = milliseconds
