"""In-process wake fan-out: waiters block on a topic, drivers and commits notify.

A waiter is registered *before* the caller checks for work and cleared before
each check, so a notification that lands between the check and the wait is
never lost (the event is already set when the wait begins).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

Deliver = Callable[[str], None]


class Waiter:
    """One blocked call; woken by a notification on any of its topics."""

    def __init__(self, hub: WakeHub, topics: tuple[str, ...]) -> None:
        self._hub = hub
        self.topics = topics
        self.event = threading.Event()

    def clear(self) -> None:
        self.event.clear()

    def wait(self, timeout: float | None) -> bool:
        return self.event.wait(timeout)

    def wake(self) -> None:
        self.event.set()

    def close(self) -> None:
        self._hub._remove(self)

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WakeHub:
    """Topic-keyed fan-out of wakes to the waiters of one store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = defaultdict(set)
        self._listeners: dict[str, set[Deliver]] = defaultdict(set)
        self._closed = False

    def waiter(self, *topics: str) -> Waiter:
        """A waiter woken by a notification on any of ``topics`` (one or more)."""
        waiter = Waiter(self, topics)
        with self._lock:
            for topic in topics:
                self._waiters[topic].add(waiter)
            if self._closed:
                waiter.wake()
        return waiter

    def _remove(self, waiter: Waiter) -> None:
        with self._lock:
            for topic in waiter.topics:
                group = self._waiters.get(topic)
                if group is not None:
                    group.discard(waiter)
                    if not group:
                        del self._waiters[topic]

    def notify(self, topic: str) -> None:
        if not self._waiters:
            # Every write notifies, and there is usually no one waiting. Reading
            # without the lock loses no wake: a waiter registers before it checks
            # for work, so one that registers after this read still sees the commit.
            return
        with self._lock:
            group = list(self._waiters.get(topic, ()))
        for waiter in group:
            waiter.wake()

    def notify_all(self) -> None:
        with self._lock:
            everyone = [w for group in self._waiters.values() for w in group]
        for waiter in everyone:
            waiter.wake()

    def has_waiters(self) -> bool:
        with self._lock:
            return bool(self._waiters) or bool(self._listeners)

    # -- pub/sub: messages rather than wakes --------------------------------
    def listen(self, channel: str, deliver: Deliver) -> None:
        with self._lock:
            self._listeners[channel].add(deliver)

    def unlisten(self, channel: str, deliver: Deliver) -> None:
        with self._lock:
            group = self._listeners.get(channel)
            if group is not None:
                group.discard(deliver)
                if not group:
                    del self._listeners[channel]

    def deliver(self, channel: str, payload: str) -> None:
        with self._lock:
            group = list(self._listeners.get(channel, ()))
        for deliver in group:
            deliver(payload)

    def close(self) -> None:
        """Wake everyone so blocked calls notice the store closed."""
        with self._lock:
            self._closed = True
        self.notify_all()
