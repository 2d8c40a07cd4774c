"""When an open page should refresh: one watcher thread per dashboard, while any page
listens, that re-reads ``store.stats()`` on each wake and tells the pages when it
changed.

The thread waits on ``store.wake_watcher`` of the queues it last read (contract
§2.15), so an enqueue in any process shows at once; it also re-reads every
``poll_s``, since what time alone changes -- a scheduled job coming due, a claim
lapsing -- wakes nobody. Each read also lists the worker registry's ids (contract
1.2 §19, with the workers profile), so a worker registering, deregistering or
lapsing refreshes the pages within ``poll_s`` too; its heartbeats alone do not.
Only the public surface: any ``Store`` will do.

The reads are capped: at most one every ``min_interval_s``, however often the store
wakes it (a busy store wakes it on every enqueue; the wakes in between coalesce
into the next read). The read it makes is shared (``SharedStats``): the open pages
it tells refresh their live part from that same read, so N pages cost one
``stats()`` per change, not N + 1.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager, nullcontext

from ..api import Store, WakeWatcher
from ..errors import AlkstoreError, ProfileUnavailable
from ..values import QueueStats

MIN_INTERVAL_S = 0.25
"""The least time between two reads of the watcher, and how old a shared read may be
when a page's live part reuses it."""


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


class SharedStats:
    """One ``store.stats()`` shared by every caller within ``max_age_s`` of it: a caller
    finding a read that young takes it; otherwise it reads, and callers arriving
    meanwhile wait for that read instead of starting their own.

    ``clock`` (monotonic seconds) is what ages a read: everyone offering a read times
    it on the same clock (tests drive it by hand).
    """

    def __init__(
        self, store: Store, max_age_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._max_age_s = max_age_s
        self.clock = clock
        self._lock = threading.Lock()
        self._value: tuple[QueueStats, ...] | None = None
        self._at = 0.0
        self.reads = 0
        """How many times it read the store: for tests."""

    def offer(self, value: tuple[QueueStats, ...], started_at: float) -> None:
        """A read someone else made (begun at ``started_at``, monotonic), to share."""
        with self._lock:
            if self._value is None or started_at > self._at:
                self._value, self._at = value, started_at

    def forget(self) -> None:
        """Drop the shared read: the next caller reads (after a write of its own)."""
        with self._lock:
            self._value = None

    def read(self) -> tuple[QueueStats, ...]:
        with self._lock:
            if self._value is not None and self.clock() - self._at <= self._max_age_s:
                return self._value
            started = self.clock()
            value = tuple(self._store.stats())
            self.reads += 1
            self._value, self._at = value, started
            return value


class Pulse:
    """Tells every ``Listener`` when the store's stats change."""

    def __init__(self, store: Store, poll_s: float, min_interval_s: float = MIN_INTERVAL_S) -> None:
        self._store = store
        self._poll_s = poll_s
        self._min_interval_s = min_interval_s
        self._lock = threading.Lock()
        self._listeners: set[Listener] = set()
        self._thread: threading.Thread | None = None
        self.shared = SharedStats(store, min_interval_s)
        """The watcher's latest read, for the pages it tells."""
        self.wakes = 0
        """How many store reads the watcher made (each wake or poll): for tests."""
        self._registry = True
        """Whether the store has a worker registry to read (false after its refusal)."""

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
        """The stats read (shared with the pages), beside the registry's worker ids."""
        started = self.shared.clock()
        try:
            value = tuple(self._store.stats())
        except AlkstoreError as exc:  # no ops profile, a closed store, an outage
            return type(exc).__name__
        self.shared.offer(value, started)
        return value, self._worker_ids()

    def _worker_ids(self) -> Hashable:
        """The live workers' ids (contract 1.2 §19): what a register, a deregister or a
        lapse changes and a heartbeat does not; ``None`` without the workers profile."""
        if not self._registry:
            return None
        try:
            return tuple(info.id for info in self._store.workers())
        except ProfileUnavailable:
            self._registry = False  # an engine's profiles do not change: ask no more
            return None
        except AlkstoreError as exc:  # a closed store, an outage: the next read retries
            return type(exc).__name__

    def _watch(self) -> None:
        last: Hashable = None
        queues: list[str] = []
        read_at = -self._min_interval_s
        while True:
            # The cap: the wakes of the last min_interval_s coalesce into this read.
            rest = read_at + self._min_interval_s - time.monotonic()
            if rest > 0:
                time.sleep(rest)
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
                read_at = time.monotonic()
                now = self._snapshot()
                first = last is None
                if now != last:
                    if not first:
                        for listener in listeners:
                            listener.tell()
                    last = now
                    queues = [stats.queue for stats in now[0]] if isinstance(now, tuple) else []
                if first:
                    continue  # straight to a waiter on the queues just read
                if wake is None:
                    time.sleep(self._poll_s)
                    continue
                try:
                    wake.wait(self._poll_s)
                except AlkstoreError:  # the store closed meanwhile: the next read says so
                    time.sleep(self._poll_s)
