"""Cross-process wakes and pub/sub: one dedicated LISTEN connection per store, on a thread.

Producers ``NOTIFY`` inside their transaction (PostgreSQL delivers on commit
only) on one of the store's two channels:

* the wake channel, with a topic as payload: handed to ``sink.notify`` (the
  empty payload to ``sink.notify_all``);
* the message channel, with a pub/sub message (see ``messages``): handed to
  ``sink.deliver(channel, payload)``. A message too large for NOTIFY arrives
  as a reference to a row of the ``messages`` table, which this thread reads
  on its own connection (every reference pending at once, in one query).

Notifications are handled in arrival order, which is commit order. The first
``start`` waits (bounded) until ``LISTEN`` is in place, so a subscription that
has opened receives every message committed afterwards. When the connection is
lost it reconnects (with a backoff capped at ``reconnect_max_s``), tells the
store (``on_reconnect``: its pool reconnects at once too) and then wakes every
waiter, because commits made while nobody listened were never announced:
waiters re-poll and find them. (Pub/sub messages published meanwhile are not
replayed: pub/sub is ephemeral.) For wakes nothing here is needed for
correctness -- the core's re-poll safety net covers a missed wake -- only for
latency.

A store opened on an event loop (``loop_io``) listens in a task on that loop
instead of a thread; both share what is done with a notification (``Routing``)
and the backoff (``Backoff``).
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Protocol

import psycopg
from psycopg import pq, sql

from alkstore.driver import WakeSink

from .messages import NOTIFY_PAYLOAD_LIMIT, Message, decode_message, reference_id

logger = logging.getLogger(__name__)

WAKE_EVERYONE: Final = ""
"""The payload for "wake every waiter" (no topic is empty)."""

PING_S: Final = 30.0
"""Probe an idle listening connection this often, so a silently dead peer is noticed."""

RECONNECT_INITIAL_S: Final = 0.05
RECONNECT_MAX_S: Final = 1.0
"""The default cap of the reconnect backoff (the store passes its ``reconnect_max_s``)."""

Notification = tuple[str, str]
"""``(NOTIFY channel, payload)`` as received."""


def notify_payload(topic: str) -> str:
    """The NOTIFY payload that wakes ``topic``'s waiters: the topic itself, or -- for a
    topic too long for NOTIFY -- the payload that wakes everyone."""
    if len(topic.encode("utf-8")) >= NOTIFY_PAYLOAD_LIMIT:
        return WAKE_EVERYONE
    return topic


class Listener(Protocol):
    """What the driver uses of its listener: ``NotifyListener`` (a thread), or
    ``loop_io.LoopListener`` (a task on the store's event loop)."""

    connections: int
    """How many times a LISTEN connection was established (for tests and metrics)."""

    @property
    def running(self) -> bool: ...

    def start(self, sink: WakeSink) -> None: ...

    def close(self, timeout: float = 5.0) -> None: ...


class PollOnlyListener:
    """No listener: behind a transaction pooler without ``listen_url`` LISTEN has no
    session to live in (the pooler would hand its server connection to others and
    the notifications to nobody). Waiting calls find other processes' work at their
    next re-poll (``repoll_s``), and the store declares no pub/sub."""

    connections = 0

    @property
    def running(self) -> bool:
        return False

    def start(self, sink: WakeSink) -> None:
        return None

    def close(self, timeout: float = 5.0) -> None:
        return None


def listen_statements(channels: list[str]) -> list[bytes]:
    """The ``LISTEN`` statements for ``channels``."""
    return [sql.SQL("LISTEN {}").format(sql.Identifier(c)).as_bytes(None) for c in channels]


class Backoff:
    """The delay before the next connect attempt: from ``RECONNECT_INITIAL_S``,
    doubling up to ``cap``; back to the start once a connection listened."""

    def __init__(self, cap: float) -> None:
        self._cap = cap
        self._next = RECONNECT_INITIAL_S

    def reset(self) -> None:
        self._next = RECONNECT_INITIAL_S

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self._cap)
        return delay


class Routing:
    """What a listener does with what it receives, however it receives it (on a
    thread here, on an event loop in ``loop_io``): wakes to ``sink.notify``, pub/sub
    messages to ``sink.deliver``, in arrival (= commit) order; and what it tells
    when LISTEN is back in place."""

    def __init__(
        self,
        wake_channel: str,
        message_channel: str | None,
        fetch_messages: bytes | None,
        on_reconnect: Callable[[], None] | None,
    ) -> None:
        self.wake_channel = wake_channel
        self.message_channel = message_channel
        self.fetch_messages = fetch_messages
        """A statement selecting ``id, channel, payload`` of the stored messages whose
        ids are ``%(ids)s`` (``None``: no pub/sub)."""
        self._on_reconnect = on_reconnect
        self.sink: WakeSink | None = None
        self.listen = listen_statements(
            [wake_channel] if message_channel is None else [wake_channel, message_channel]
        )

    def stored_ids(self, batch: list[Notification]) -> list[int]:
        """The ids of the stored messages ``batch`` refers to (read them in one query)."""
        if self.fetch_messages is None:
            return []
        return [
            ref
            for channel, payload in batch
            if channel == self.message_channel and (ref := reference_id(payload)) is not None
        ]

    def deliver(self, batch: list[Notification], stored: dict[int, Message]) -> None:
        """Hand ``batch`` to the sink in order; ``stored`` holds the messages it refers to."""
        for channel, payload in batch:
            if channel == self.wake_channel:
                self._deliver_wake(payload)
            elif channel == self.message_channel:
                message = decode_message(payload, stored)
                if message is None:
                    logger.debug("alkstore listener: message %r is gone", payload[:40])
                else:
                    self._deliver_message(message)

    def _deliver_wake(self, payload: str) -> None:
        sink = self.sink
        if sink is None:
            return
        if payload == WAKE_EVERYONE:
            sink.notify_all()
        else:
            sink.notify(payload)

    def _deliver_message(self, message: Message) -> None:
        sink = self.sink
        if sink is None:
            return
        try:
            sink.deliver(*message)
        except Exception:
            # One failing delivery must neither stop the listener nor drop the
            # connection (which would lose the messages behind it).
            logger.exception("alkstore listener: delivering a message on %r failed", message[0])

    def listening(self, *, reconnected: bool) -> None:
        """LISTEN is in place: tell the store if it was lost before, and wake every
        waiter -- commits made while nobody listened were never announced: re-poll."""
        if reconnected and self._on_reconnect is not None:
            try:
                self._on_reconnect()
            except Exception:  # the store's business; listening goes on regardless
                logger.exception("alkstore listener: the reconnect callback failed")
        if self.sink is not None:
            self.sink.notify_all()


def stored_rows(rows: list[Any]) -> dict[int, Message]:
    """``fetch_messages``' rows by id."""
    return {row[0]: (row[1], row[2]) for row in rows}


class NotifyListener:
    """Owns the listening connection and its thread; ``start`` is lazy and idempotent.

    ``message_channel`` and ``fetch_messages`` (a statement selecting ``id, channel,
    payload`` of the stored messages whose ids are ``%(ids)s``) enable pub/sub;
    ``on_reconnect`` is called (on this thread) each time LISTEN is back in place
    after the connection was lost or could not be made."""

    def __init__(
        self,
        conninfo: str,
        connect_kwargs: dict[str, Any],
        channel: str,
        *,
        message_channel: str | None = None,
        fetch_messages: bytes | None = None,
        ready_timeout_s: float = 10.0,
        reconnect_max_s: float = RECONNECT_MAX_S,
        on_reconnect: Callable[[], None] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._connect_kwargs = connect_kwargs
        self._routing = Routing(channel, message_channel, fetch_messages, on_reconnect)
        self._ready_timeout_s = ready_timeout_s
        self._reconnect_max_s = reconnect_max_s
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._first_attempt = threading.Event()
        """Set once the first connection listens, or failed to (start() waits for it)."""
        self._thread: threading.Thread | None = None
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
        """Start listening for ``sink``; returns once the first LISTEN is in place (or
        failed, or ``ready_timeout_s`` passed), so a subscription opened before this
        returns receives every message committed after it returned."""
        with self._lock:
            if self._thread is None and not self._stopping.is_set():
                self._routing.sink = sink
                self._thread = threading.Thread(
                    target=self._run, name="alkstore-postgres-listener", daemon=True
                )
                self._thread.start()
            started = self._thread is not None
        if started:
            self._first_attempt.wait(self._ready_timeout_s)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopping.set()
            thread = self._thread
        self._first_attempt.set()
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
            self._first_attempt.set()
            self._close_wakeup()

    def _listen_until_closed(self) -> None:
        backoff = Backoff(self._reconnect_max_s)
        lost = False  # whether the server was lost (or never reached) since the last LISTEN
        while not self._stopping.is_set():
            listened = self.connections
            try:
                with psycopg.connect(
                    self._conninfo, autocommit=True, **self._connect_kwargs
                ) as conn:
                    self._serve(conn, reconnected=lost)
            except psycopg.Error as exc:
                logger.debug("alkstore listener: %s", exc)
            except Exception:  # never let the thread die silently: log and go on
                logger.exception("alkstore listener failed; reconnecting")
            self._first_attempt.set()  # a first attempt that failed: stop making start() wait
            lost = True
            if self.connections > listened:
                backoff.reset()  # it was listening: reconnect at once
                continue
            # Could not connect or LISTEN: back off, so a down server is not hammered.
            self._stopping.wait(backoff.next())

    def _serve(self, conn: psycopg.Connection[Any], *, reconnected: bool) -> None:
        # Notifications that arrive while a statement runs here (LISTEN, the ping, a
        # read of stored messages) are queued by psycopg's handler and handled after it.
        pending: deque[Notification] = deque()
        conn.add_notify_handler(lambda n: pending.append((n.channel, n.payload)))
        for listen in self._routing.listen:
            conn.execute(listen)
        self.connections += 1
        self._first_attempt.set()
        self._routing.listening(reconnected=reconnected)
        encoding = conn.info.encoding
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ)
            selector.register(self._wakeup_recv, selectors.EVENT_READ)
            while not self._stopping.is_set():
                self._dispatch(conn, pending)
                if not selector.select(PING_S):
                    conn.execute(b"SELECT 1")  # an idle peer may be silently gone: probe it
                    continue
                if self._stopping.is_set():
                    return
                pgconn = conn.pgconn
                pgconn.consume_input()  # raises once the server has closed the connection
                while (received := pgconn.notifies()) is not None:
                    pending.append(
                        (received.relname.decode(encoding), received.extra.decode(encoding))
                    )
                if pgconn.status != pq.ConnStatus.OK:
                    raise psycopg.OperationalError("the listening connection is broken")

    def _dispatch(self, conn: psycopg.Connection[Any], pending: deque[Notification]) -> None:
        """Hand every pending notification to the sink, in arrival (= commit) order."""
        while pending:
            batch = list(pending)
            pending.clear()
            ids = self._routing.stored_ids(batch)
            stored: dict[int, Message] = {}
            if ids and self._routing.fetch_messages is not None:
                rows = conn.execute(self._routing.fetch_messages, {"ids": ids}).fetchall()
                stored = stored_rows(rows)
            self._routing.deliver(batch, stored)
