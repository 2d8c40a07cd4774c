"""A loopback TCP proxy in front of a PostgreSQL server, which a test can cut.

Stores opened through the proxy's address reach the server as usual. ``cut()``
is an outage as the store sees one: every connection through the proxy is
closed at once (the store reads EOF, as after a server crash or a network
cut), and while it stays cut each new connection is accepted and closed
straight away (libpq: "server closed the connection unexpectedly").
``restore()`` lets connections through again. The listening socket stays
open throughout, so the address never changes hands.

Test infrastructure only: one thread accepts, two threads per connection copy
bytes; everything stops with ``close()``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"
_CHUNK = 65536


class CuttableProxy:
    """Forwards ``127.0.0.1:port`` to ``target`` (a ``(host, port)`` pair, or the path of
    a unix socket) until cut."""

    def __init__(self, target: tuple[str, int] | str) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._cut = False
        self._closed = False
        self._listener = socket.create_server((HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(
            target=self._accept, name="alkstore-pg-proxy", daemon=True
        )
        self._acceptor.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """Cut on entering, restored on leaving."""
        self.cut()
        try:
            yield
        finally:
            self.restore()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            _close_pair(pair)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.cut()
        # shutdown wakes the acceptor blocked in accept(); close alone may not.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._acceptor.join(5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                refuse = self._cut or self._closed
            if refuse:
                client.close()
                continue
            try:
                server = self._connect()
            except OSError:
                client.close()
                continue
            pair = (client, server)
            with self._lock:
                if self._cut or self._closed:
                    refuse = True
                else:
                    self._pairs.append(pair)
            if refuse:
                _close_pair(pair)
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(
                    target=self._copy,
                    args=(source, sink, pair),
                    name="alkstore-pg-proxy-copy",
                    daemon=True,
                ).start()

    def _copy(
        self, source: socket.socket, sink: socket.socket, pair: tuple[socket.socket, socket.socket]
    ) -> None:
        try:
            while chunk := source.recv(_CHUNK):
                sink.sendall(chunk)
        except OSError:
            pass
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)
        _close_pair(pair)

    def _connect(self) -> socket.socket:
        target = self._target
        if isinstance(target, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(target)
            except OSError:
                sock.close()
                raise
            return sock
        return socket.create_connection(target)


def _close_pair(pair: tuple[socket.socket, ...]) -> None:
    for sock in pair:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
