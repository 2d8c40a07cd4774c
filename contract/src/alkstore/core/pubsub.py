"""Ephemeral pub/sub (contract §7): delivered to every subscription open at commit."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

from .. import api
from .._surface import implements
from ..errors import StoreClosed
from ..payload import decode_payload
from ..timeconv import Duration
from .context import StoreContext
from .waiting import Deadline

_CLOSED = object()


@implements(api.Subscription)
class CoreSubscription:
    """Messages arrive from the engine's listener; ``get`` blocks for the next one.

    Returned by ``store.subscribe(channel)``; iterable, closable, a context
    manager (contract §7). Full contract: ``alkstore.api.Subscription``.
    """

    def __init__(self, context: StoreContext, channel: str) -> None:
        self._context = context
        self._channel = channel
        self._messages: deque[Any] = deque()
        self._ready = threading.Condition()
        self._closed = False
        context.hub.listen(channel, self._deliver)
        context.driver.start_watching(context.hub)

    @property
    def channel(self) -> str:
        return self._channel

    def _deliver(self, payload: str) -> None:
        with self._ready:
            if not self._closed:
                self._messages.append(decode_payload(payload))
                self._ready.notify()

    def get(self, timeout: Duration | None = None) -> Any:
        deadline = Deadline(timeout)
        with self._ready:
            while not self._messages:
                if self._closed or self._context.closed:
                    return None
                remaining = deadline.remaining()
                if remaining is not None and remaining <= 0:
                    return None
                # Bounded waits notice a store closed under us without extra plumbing.
                self._ready.wait(0.5 if remaining is None else min(remaining, 0.5))
            return self._messages.popleft()

    def __iter__(self) -> Iterator[Any]:
        while True:
            message = self.get()
            if message is None and (self._closed or self._context.closed):
                return
            if message is not None:
                yield message

    def close(self) -> None:
        with self._ready:
            if self._closed:
                return
            self._closed = True
            self._messages.clear()  # closed means nothing more is received, queued or not
            self._ready.notify_all()
        self._context.hub.unlisten(self._channel, self._deliver)

    @property
    def closed(self) -> bool:
        """Whether ``close()`` has been called."""
        return self._closed

    def __enter__(self) -> CoreSubscription:
        if self._closed:
            raise StoreClosed("this subscription is closed")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Subscription {self._channel!r}>"
