"""Watching queues' wakes without claiming (contract §2.15): ``store.wake_watcher``."""

from __future__ import annotations

import threading

from .. import api
from .._surface import implements
from ..driver import queue_topic
from ..errors import InvalidOptions, StoreClosed
from ..names import validate_identifier
from ..options import check_type
from ..stop import StopToken
from ..timeconv import Duration
from .context import StoreContext
from .waiting import Deadline


def watched_queues(queues: object) -> tuple[str, ...]:
    """``queues`` checked: a non-empty list or tuple of distinct queue names (reserved
    ones too: ``stats()`` lists the outboxes' backing queues)."""
    if not isinstance(queues, (list, tuple)):
        raise InvalidOptions(
            f"queues must be a list or tuple of queue names, got {type(queues).__name__}"
        )
    if not queues:
        raise InvalidOptions("queues must name at least one queue")
    names: list[str] = []
    for name in queues:
        validate_identifier(name, "queue name")
        if name in names:
            raise InvalidOptions(f"queue {name!r} is named twice in queues")
        names.append(name)
    return tuple(names)


@implements(api.WakeWatcher)
class CoreWakeWatcher:
    """A waiter on the wake hub under the queues' topics, with the engine's watch of
    other processes' commits started before it is handed out.

    Returned by ``store.wake_watcher(queues)``. Full contract: ``alkstore.api.WakeWatcher``.
    """

    def __init__(self, context: StoreContext, queues: tuple[str, ...]) -> None:
        self._context = context
        self._queues = queues
        self._lock = threading.Lock()
        self._closed = False
        # Registered before the engine's watch starts: nothing committed after this
        # returns goes unheard.
        self._waiter = context.hub.waiter(*(queue_topic(name) for name in queues))
        try:
            context.driver.start_watching(context.hub)
        except BaseException:
            self._waiter.close()
            raise

    @property
    def queues(self) -> tuple[str, ...]:
        return self._queues

    def wait(self, timeout: Duration | None = None, stop: StopToken | None = None) -> bool:
        deadline = Deadline(timeout)
        if stop is not None:
            check_type(stop, StopToken, "stop")
        self._check_open()
        waiter = self._waiter
        if stop is not None:
            stop.add_callback(waiter.wake)
        try:
            if not waiter.wait(deadline.remaining()):
                return False
            if stop is not None and stop.is_set():
                return False  # the event stays set: the next wait looks again at once
            waiter.clear()
            return True
        finally:
            if stop is not None:
                stop.remove_callback(waiter.wake)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the wake watcher is closed")
        self._context.check_open()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._waiter.close()

    def __enter__(self) -> CoreWakeWatcher:
        if self._closed:
            raise StoreClosed("the wake watcher is closed")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<alkstore WakeWatcher queues={list(self._queues)!r} {state}>"
