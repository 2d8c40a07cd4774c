"""Cross-process wakes: one thread per process per database file notices commits.

``PRAGMA data_version`` on a connection changes whenever *another* connection
(of any process) has committed to the file since it last looked. The watcher
reads it on its own connection every ``poll_s`` while some sink has waiters,
and on a change wakes every sink (SQLite cannot say which queue changed, so a
woken waiter simply tries its claim again). With nobody waiting it sleeps on
an event that ``watch`` sets, so an idle process costs nothing.

A commit that lands between a waiter's failed claim and its wait is never
lost: the version the watcher compares against was read before the waiter
registered (or, after an idle spell, even earlier), so the next poll sees the
change. The cost of that rule is at most one spurious wake after idling.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable

from alkstore.driver import WakeSink

from . import statements as sql

_RECONNECT_PAUSE_S = 0.1


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

    def watch(self, sink: WakeSink, poll_s: float) -> None:
        """Report commits to ``sink`` (idempotent, cheap: called by every ``claim_wait``)."""
        if sink not in self._polls:
            with self._lock:
                if self._stopping:
                    return
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

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        seen: int | None = None
        try:
            while not self._stopping:
                if not self._anyone_waiting():
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
                except Exception:
                    # The file is unreachable for now; waiters keep their re-poll
                    # safety net, and we try a fresh connection shortly.
                    if conn is not None:
                        conn.close()
                        conn = None
                    seen = None  # versions of different connections do not compare
                    time.sleep(_RECONNECT_PAUSE_S)
                    continue
                if version != seen:
                    seen = version
                    for sink in self._sinks:
                        sink.notify_all()
                time.sleep(self._poll_s)
        finally:
            if conn is not None:
                conn.close()
