"""When an open page should refresh: one watcher thread per dashboard, while any page
listens, that re-reads ``store.stats()`` on each wake and tells the pages when it
changed.

The thread waits on ``store.wake_watcher`` of the queues it last read (contract
§2.15), so an enqueue in any process shows at once; it also re-reads every
``poll_s``, since what time alone changes -- a scheduled job coming due, a claim
lapsing -- wakes nobody. Only the public surface: any ``Store`` will do.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Hashable
from contextlib import AbstractContextManager, nullcontext

from ..api import Store, WakeWatcher
from ..errors import AlkstoreError


class Listener:
    """One open page's event stream: set when the store changed since it last looked."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.changed = asyncio.Event()

    def tell(self) -> None:
        self.loop.call_soon_threadsafe(self.changed.set)


def _watcher(store: Store, queues: list[str]) -> AbstractContextManager[WakeWatcher | None]:
    """A wake watcher of ``queues``, or a no-op while there is no queue to watch."""
    if not queues:
        return nullcontext(None)
    return store.wake_watcher(queues)


class Pulse:
    """Tells every ``Listener`` when the store's stats change."""

    def __init__(self, store: Store, poll_s: float) -> None:
        self._store = store
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._listeners: set[Listener] = set()
        self._thread: threading.Thread | None = None
        self.wakes = 0
        """How many store reads the watcher made (each wake or poll): for tests."""

    def listen(self) -> Listener:
        listener = Listener(asyncio.get_running_loop())
        with self._lock:
            self._listeners.add(listener)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="alkstore-dashboard-pulse", daemon=True
                )
                self._thread.start()
        return listener

    def forget(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.discard(listener)

    def _snapshot(self) -> Hashable:
        try:
            return tuple(self._store.stats())
        except AlkstoreError as exc:  # no ops profile, a closed store, an outage
            return type(exc).__name__

    def _watch(self) -> None:
        last: Hashable = None
        queues: list[str] = []
        while True:
            with self._lock:
                if not self._listeners:
                    self._thread = None
                    return
                listeners = list(self._listeners)
            # The watcher is in place before the read, so a commit between the read
            # and the wait still wakes it.
            try:
                watcher = None if self._store.closed else _watcher(self._store, queues)
            except AlkstoreError:
                watcher = None  # the store closed meanwhile
            with watcher if watcher is not None else nullcontext(None) as wake:
                self.wakes += 1
                now = self._snapshot()
                first = last is None
                if now != last:
                    if not first:
                        for listener in listeners:
                            listener.tell()
                    last = now
                    queues = [stats.queue for stats in now] if isinstance(now, tuple) else []
                if first:
                    continue  # straight to a waiter on the queues just read
                if wake is None:
                    time.sleep(self._poll_s)
                    continue
                try:
                    wake.wait(self._poll_s)
                except AlkstoreError:  # the store closed meanwhile: the next read says so
                    time.sleep(self._poll_s)
