"""Cross-process wakes: one dedicated LISTEN connection per store, on a daemon thread.

Producers ``NOTIFY`` the store's channel inside their transaction with the
topic as payload (PostgreSQL delivers it on commit only). The listener thread
waits on its connection's socket and hands each topic to the store's wake hub.
When the connection is lost it reconnects (with a capped backoff) and then wakes
every waiter, because commits made while nobody listened were never announced:
waiters re-poll and find them. Nothing here is needed for correctness -- the
core's re-poll safety net covers a missed wake -- only for latency.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from typing import Any, Final

import psycopg
from psycopg import pq, sql

from alkstore.driver import WakeSink

logger = logging.getLogger(__name__)

WAKE_EVERYONE: Final = ""
"""The payload for "wake every waiter" (no topic is empty)."""

NOTIFY_PAYLOAD_LIMIT: Final = 8000
"""NOTIFY refuses payloads of this many bytes or more (PostgreSQL's default build)."""

PING_S: Final = 30.0
"""Probe an idle listening connection this often, so a silently dead peer is noticed."""

RECONNECT_INITIAL_S: Final = 0.05
RECONNECT_MAX_S: Final = 2.0


def notify_payload(topic: str) -> str:
    """The NOTIFY payload that wakes ``topic``'s waiters: the topic itself, or -- for a
    topic too long for NOTIFY -- the payload that wakes everyone."""
    if len(topic.encode("utf-8")) >= NOTIFY_PAYLOAD_LIMIT:
        return WAKE_EVERYONE
    return topic


class NotifyListener:
    """Owns the listening connection and its thread; ``start`` is lazy and idempotent."""

    def __init__(self, conninfo: str, connect_kwargs: dict[str, Any], channel: str) -> None:
        self._conninfo = conninfo
        self._connect_kwargs = connect_kwargs
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel)).as_bytes(None)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._sink: WakeSink | None = None
        # A socket pair, so close() can interrupt the thread's select() at once.
        self._wakeup_recv, self._wakeup_send = socket.socketpair()
        self._wakeup_recv.setblocking(False)
        self.connections = 0
        """How many times a LISTEN connection was established (for tests and metrics)."""

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, sink: WakeSink) -> None:
        with self._lock:
            if self._thread is not None or self._stopping.is_set():
                return
            self._sink = sink
            self._thread = threading.Thread(
                target=self._run, name="alkstore-postgres-listener", daemon=True
            )
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopping.set()
            thread = self._thread
        try:
            self._wakeup_send.send(b"x")
        except OSError:
            pass
        if thread is None:
            self._close_wakeup()
        elif thread is not threading.current_thread():
            # The thread closes the wakeup pair on its way out; a thread stuck in a
            # connect attempt to a dead server is a daemon and finishes on its own.
            thread.join(timeout)

    def _close_wakeup(self) -> None:
        self._wakeup_recv.close()
        self._wakeup_send.close()

    # -- the thread ------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._listen_until_closed()
        finally:
            self._close_wakeup()

    def _listen_until_closed(self) -> None:
        backoff = RECONNECT_INITIAL_S
        while not self._stopping.is_set():
            listened = self.connections
            try:
                with psycopg.connect(
                    self._conninfo, autocommit=True, **self._connect_kwargs
                ) as conn:
                    self._serve(conn)
            except psycopg.Error as exc:
                logger.debug("alkstore listener: %s", exc)
            except Exception:  # never let the thread die silently: log and go on
                logger.exception("alkstore listener failed; reconnecting")
            if self.connections > listened:
                backoff = RECONNECT_INITIAL_S  # it was listening: reconnect at once
                continue
            # Could not connect or LISTEN: back off, so a down server is not hammered.
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, RECONNECT_MAX_S)

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        # Notifications that arrive while a statement runs here are dispatched by psycopg.
        conn.add_notify_handler(lambda notify: self._deliver(notify.payload))
        conn.execute(self._listen)
        self.connections += 1
        # Commits made while nobody listened were never announced to us: re-poll.
        self._wake_everyone()
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ)
            selector.register(self._wakeup_recv, selectors.EVENT_READ)
            while not self._stopping.is_set():
                if not selector.select(PING_S):
                    conn.execute(b"SELECT 1")  # an idle peer may be silently gone: probe it
                    continue
                if self._stopping.is_set():
                    return
                pgconn = conn.pgconn
                pgconn.consume_input()  # raises once the server has closed the connection
                while (received := pgconn.notifies()) is not None:
                    self._deliver(received.extra.decode("utf-8"))
                if pgconn.status != pq.ConnStatus.OK:
                    raise psycopg.OperationalError("the listening connection is broken")

    def _deliver(self, payload: str) -> None:
        sink = self._sink
        if sink is None:
            return
        if payload == WAKE_EVERYONE:
            sink.notify_all()
        else:
            sink.notify(payload)

    def _wake_everyone(self) -> None:
        if self._sink is not None:
            self._sink.notify_all()
