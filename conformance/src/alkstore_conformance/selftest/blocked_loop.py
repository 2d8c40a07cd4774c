"""An async-native engine whose listener blocks the event loop (contract §13).

Where an engine can get ASYNC-LOOP-NEVER-BLOCKED wrong. ``alkstore.aio`` runs every
call of a store on threads of its own (``alkstore.aio.runner``): the contract decides
that, not the engine, so through the ordinary door (``open``) no engine can put a
call on the loop's thread. The door an engine can get wrong is ``open_on_loop``
(``Capabilities.async_native``): that store does its I/O on the event loop itself
(PostgreSQL's ``alkstore_postgres.loop_io``: its pool, its statements and its LISTEN
task), and everything the engine runs there must await, never block.

The mutant is the SQLite engine declaring ``async_native``. A store it opens on a
loop listens for other processes' commits in a task on that loop, as PostgreSQL's
LISTEN does, but the task waits for the next change with a blocking call: the
thread listener's wait, called from the coroutine instead of awaited. From the first
``claim_wait`` on (which starts the engine's watch), the loop stands still for a
whole round of that wait at a time. Its statements stay on the aio threads, so a
claim, an enqueue or an ack alone would not show it: a waiting claim_wait does.
Wakes and pub/sub messages still come from the reference engine's file watcher
beside the listener, so the one bug is where the listener waits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from alkstore import Store
from alkstore.clock import Clock
from alkstore.driver import Driver, WakeSink
from alkstore_sqlite import SqliteDriver, SqliteOptions, database_path, parse_options
from alkstore_sqlite import statements as sql

from .engine import MutantEngine, _unwrapped

LISTEN_ROUND_S = 1.0
"""The longest the listener's wait lasts before it looks again (a LISTEN's ping)."""
LISTEN_POLL_S = 0.01
"""How often, inside that wait, it reads the database's ``data_version``."""


class LoopListeningDriver(SqliteDriver):
    """The SQLite driver with a listener task on ``loop`` whose wait blocks the loop."""

    def __init__(self, path: str, options: SqliteOptions, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(path, options)
        self._loop = loop
        self._listener: Future[None] | None = None
        self._stop_listening = threading.Event()

    def start_watching(self, sink: WakeSink) -> None:
        super().start_watching(sink)
        if self._listener is None and not self._closed and not self._loop.is_closed():
            self._listener = asyncio.run_coroutine_threadsafe(self._listen(sink), self._loop)

    async def _listen(self, sink: WakeSink) -> None:
        conn = sqlite3.connect(self.path)  # on the loop's thread, used only there
        try:
            (seen,) = conn.execute(sql.DATA_VERSION).fetchone()
            while not self._stop_listening.is_set():
                version = self._wait_for_change(conn, seen)  # the bug: not awaited
                if version != seen:
                    seen = version
                    sink.notify_all()
                await asyncio.sleep(0)
        finally:
            conn.close()

    def _wait_for_change(self, conn: sqlite3.Connection, seen: int) -> int:
        """The database's ``data_version`` once it differs from ``seen``, or at the end
        of a round: a blocking wait, as a listener thread would do."""
        end = time.monotonic() + LISTEN_ROUND_S
        while not self._stop_listening.wait(LISTEN_POLL_S):
            (version,) = conn.execute(sql.DATA_VERSION).fetchone()
            if version != seen or time.monotonic() >= end:
                return int(version)
        return seen

    def close(self) -> None:
        self._stop_listening.set()
        super().close()


class LoopListeningEngine(MutantEngine):
    """A mutant with ``open_on_loop``: the store it opens there is over ``LoopListeningDriver``."""

    def __init__(self, name: str, *, catches: str, bug: str) -> None:
        super().__init__(name, catches=catches, bug=bug)
        self.capabilities = dataclasses.replace(self.capabilities, async_native=True)

    def open_on_loop(
        self, url: str, loop: asyncio.AbstractEventLoop, *, clock: Clock | None = None, **opts: Any
    ) -> Store:
        options = parse_options(dict(opts))
        driver = LoopListeningDriver(database_path(url), options, loop)
        wrap: Callable[[Driver[Any]], Driver[Any]] = _unwrapped
        return self._store_over(driver, wrap, options, clock)
