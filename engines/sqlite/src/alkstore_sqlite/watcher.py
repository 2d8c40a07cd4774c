"""Cross-process wakes and pub/sub delivery: one thread per process per database file.

``PRAGMA data_version`` on a connection changes whenever *another* connection
(of any process) has committed to the file since it last looked. The watcher
reads it on its own connection every ``poll_s`` while some sink has waiters (a
blocked call, or an open subscription), and on a change

1. wakes every sink (SQLite cannot say which queue changed, so a woken waiter
   simply tries its claim again), then
2. reads the pub/sub notifications committed after its cursor, in id order,
   and hands each one to every sink (``sink.deliver``).

With nobody waiting it sleeps on an event that ``watch`` sets, so an idle
process costs nothing.

A commit that lands between a waiter's failed claim and its wait is never
lost: the version the watcher compares against was read before the waiter
registered (or, after an idle spell, even earlier), so the next poll sees the
change. The cost of that rule is at most one spurious wake after idling.

The notification cursor. A subscription receives what commits after it opened,
and nothing that committed while the watcher was idle. So the watcher drops
its cursor when it goes idle, in one step with seeing that nobody waits, and
the ``watch`` call that finds no cursor reads the latest id itself, in the
caller's thread, before returning. A subscription registers its listener
before it calls ``watch``: either the watcher is still tracking (and, seeing
that listener, keeps tracking), or the subscription sets the cursor. Ids are
handed out under SQLite's one write lock and commit in id order, so reading
"after the cursor" never passes a message that commits later.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable

from alkstore.driver import WakeSink

from . import statements as sql

logger = logging.getLogger(__name__)

_RECONNECT_PAUSE_S = 0.1
_MESSAGE_BATCH = 1000

LatestId = Callable[[], int | None]
"""Reads the newest notification id (``None`` if the file cannot be read right now)."""


class Watcher:
    def __init__(self, opener: Callable[[], sqlite3.Connection]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._polls: dict[WakeSink, float] = {}
        self._sinks: tuple[WakeSink, ...] = ()
        self._poll_s = 1.0
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._cursor: int | None = None
        """The id of the last notification handed to the sinks; ``None`` while idle."""

    def watch(self, sink: WakeSink, poll_s: float, latest_id: LatestId) -> None:
        """Report commits and messages to ``sink`` (idempotent, cheap: called by every
        ``claim_wait``; it reads the database only when the watcher starts tracking)."""
        if sink not in self._polls or self._cursor is None:
            with self._lock:
                if self._stopping:
                    return
                if self._cursor is None:
                    self._cursor = latest_id()
                if sink not in self._polls:
                    self._polls[sink] = poll_s
                    self._sinks = tuple(self._polls)
                    self._poll_s = min(self._polls.values())
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="alkstore-sqlite-watcher", daemon=True
                    )
                    self._thread.start()
        self._wake.set()

    def forget(self, sink: WakeSink) -> None:
        with self._lock:
            if self._polls.pop(sink, None) is not None:
                self._sinks = tuple(self._polls)
                self._poll_s = min(self._polls.values(), default=1.0)

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _anyone_waiting(self) -> bool:
        return any(sink.has_waiters() for sink in self._sinks)

    def _still_tracking(self) -> bool:
        """Whether anyone waits; if nobody does, drop the cursor in the same step
        (under the lock ``watch`` takes when it finds no cursor)."""
        if self._anyone_waiting():
            return True
        with self._lock:
            if self._anyone_waiting():
                return True
            self._cursor = None
            return False

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        seen: int | None = None
        try:
            while not self._stopping:
                if not self._still_tracking():
                    self._wake.clear()
                    # Look again after clearing: a waiter that registered in between
                    # has set the event (or is seen here), so its wake is not lost.
                    if not self._anyone_waiting() and not self._stopping:
                        self._wake.wait()
                    continue
                try:
                    if conn is None:
                        conn = self._opener()
                    (version,) = conn.execute(sql.DATA_VERSION).fetchone()
                    if version != seen:
                        seen = version
                        for sink in self._sinks:
                            sink.notify_all()
                        self._deliver_messages(conn)
                except Exception:
                    # The file is unreachable for now; waiters keep their re-poll
                    # safety net, and we try a fresh connection shortly. The cursor
                    # stays: messages not yet delivered are read after reconnecting.
                    if conn is not None:
                        conn.close()
                        conn = None
                    seen = None  # versions of different connections do not compare
                    time.sleep(_RECONNECT_PAUSE_S)
                    continue
                time.sleep(self._poll_s)
        finally:
            if conn is not None:
                conn.close()

    def _deliver_messages(self, conn: sqlite3.Connection) -> None:
        """Hand every notification committed after the cursor to every sink, in id order."""
        cursor = self._cursor
        if cursor is None:
            # ``watch`` could not read where to start (the file was unreachable): the
            # messages from here on are the ones committed after tracking began.
            (latest,) = conn.execute(sql.LATEST_NOTIFICATION).fetchone()
            with self._lock:
                if self._cursor is None:
                    self._cursor = latest
            return
        while True:
            params = {"after": cursor, "limit": _MESSAGE_BATCH}
            rows = conn.execute(sql.NOTIFICATIONS_AFTER, params).fetchall()
            for _, channel, payload in rows:
                for sink in self._sinks:
                    _deliver(sink, channel, payload)
            if rows:
                # Only this thread moves a cursor that is set (``watch`` sets it only
                # when it is None, and only this thread drops it).
                cursor = self._cursor = rows[-1][0]
            if len(rows) < _MESSAGE_BATCH:
                return


def _deliver(sink: WakeSink, channel: str, payload: str) -> None:
    try:
        sink.deliver(channel, payload)
    except Exception:
        # Every store on the file relies on this thread: one sink's failure must
        # neither stop it nor make it deliver the same messages again and again.
        logger.exception("alkstore-sqlite: delivering a message on %r failed", channel)
