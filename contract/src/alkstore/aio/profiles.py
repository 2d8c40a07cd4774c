"""Async streams, subscriptions and wake watchers (contract §7, §2.15, §13): the
members written by hand.

Every other member is generated from ``alkstore.api`` (``aio/_generated.py``).
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from typing import Any

from .. import api
from .._surface import documented_as
from ..api import Stream, Subscription, WakeWatcher
from ..stop import StopToken
from ..values import StreamEvent
from ._generated import AsyncStreamBase, AsyncSubscriptionBase, AsyncWakeWatcherBase
from .runner import Runner

SUBSCRIPTION_SLICE_S = 1.0
"""How long one thread-side ``get`` blocks: a cancelled async ``get`` frees its
thread within this (a message it took meanwhile is kept for the next ``get``)."""


class AsyncStream(AsyncStreamBase):
    """``store.stream(name)`` of an ``AsyncStore``."""

    def __init__(self, runner: Runner, stream: Stream) -> None:
        self._runner = runner
        self.sync = stream
        """The sync stream every call goes to."""

    async def events(
        self, after: int = 0, *, limit: int = 100, stop: StopToken | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Every event after ``after``, then each new one as it is appended, until
        ``stop`` is set (or the task is cancelled)."""
        while stop is None or not stop.is_set():
            batch = await self.read(after, limit)
            for event in batch:
                yield event
                after = event.offset
            if not batch and not await self.wait(after, stop=stop):
                return


class AsyncSubscription(AsyncSubscriptionBase):
    """``store.subscribe(channel)`` of an ``AsyncStore``: ``async for message in sub``."""

    def __init__(self, runner: Runner, subscription: Subscription) -> None:
        self._runner = runner
        self.sync = subscription
        """The sync subscription every call goes to."""
        self._kept: collections.deque[Any] = collections.deque()

    @documented_as(
        api.Subscription.get,
        "Async: the wait runs on a waiting thread, a slice at a time; a message taken "
        "for a cancelled ``get`` is kept for the next one, never dropped.",
    )
    async def get(self, timeout: float | None = None) -> Any:
        if self._kept:
            return self._kept.popleft()
        remaining = timeout
        while True:
            step = (
                SUBSCRIPTION_SLICE_S if remaining is None else min(remaining, SUBSCRIPTION_SLICE_S)
            )
            message = await self._runner.claim(
                self.sync.get, step, handles=self._keep, waiting=True
            )
            if message is not None or self.closed:
                return message
            if remaining is not None:
                remaining -= step
                if remaining <= 0:
                    return None

    def _keep(self, message: Any) -> list[Any]:
        # A message taken for a cancelled get is kept for the next one, never dropped.
        self._kept.append(message)
        return []

    @property
    def closed(self) -> bool:
        """As ``Subscription.closed``."""
        return bool(getattr(self.sync, "closed", False))

    @documented_as(api.Subscription.__iter__, "Async: ``async for message in subscription``.")
    def __aiter__(self) -> AsyncIterator[Any]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        while True:
            message = await self.get()
            if message is None and self.closed:
                return
            if message is not None:
                yield message

    async def __aenter__(self) -> AsyncSubscription:
        """Use the subscription in an ``async with`` block; it closes on exit."""
        return self

    @documented_as(api.Subscription.__exit__, "Async: the end of an ``async with`` block.")
    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncWakeWatcher(AsyncWakeWatcherBase):
    """``store.wake_watcher(queues)`` of an ``AsyncStore``: ``await watcher.wait(timeout)``."""

    def __init__(self, runner: Runner, watcher: WakeWatcher) -> None:
        self._runner = runner
        self.sync = watcher
        """The sync watcher every call goes to."""

    async def __aenter__(self) -> AsyncWakeWatcher:
        """Use the watcher in an ``async with`` block; it closes on exit.

        Raises:
            StoreClosed: the watcher is already closed.
        """
        self.sync.__enter__()  # refuses a closed watcher; touches no storage
        return self

    @documented_as(api.WakeWatcher.__exit__, "Async: the end of an ``async with`` block.")
    async def __aexit__(self, *exc: object) -> None:
        await self.close()
