"""A broken wake watcher (contract §2.15): a ``CoreStore`` subclass.

``store.wake_watcher`` is the core's, not an engine's, so this mutant replaces the
store: its watcher waits on the store's own wake hub but never asks the engine to
watch other processes' commits, so it hears only this store's own writes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from alkstore.core import CoreStore
from alkstore.core.context import StoreContext
from alkstore.core.watching import CoreWakeWatcher, watched_queues
from alkstore.driver import queue_topic


class _OwnCommitsOnlyWatcher(CoreWakeWatcher):
    """Registered on the hub; the engine's watch is never started."""

    def __init__(self, context: StoreContext, queues: tuple[str, ...]) -> None:
        self._context = context
        self._queues = queues
        self._lock = threading.Lock()
        self._closed = False
        self._waiter = context.hub.waiter(*(queue_topic(name) for name in queues))


class OwnCommitsOnlyWatcherStore(CoreStore):
    """``wake_watcher`` hears this store's commits and no other store's or process's."""

    def wake_watcher(self, queues: Sequence[str]) -> CoreWakeWatcher:
        names = watched_queues(queues)
        self._context.check_open()
        return _OwnCommitsOnlyWatcher(self._context, names)
