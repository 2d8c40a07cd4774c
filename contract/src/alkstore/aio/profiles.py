"""Async locks, streams and subscriptions (contract §6, §7, §13)."""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from typing import Any

from ..api import Lock, Stream, Subscription
from ..stop import StopToken
from ..timeconv import Duration
from ..values import LockInfo, StreamEvent
from .runner import Runner

SUBSCRIPTION_SLICE_S = 1.0
"""How long one thread-side ``get`` blocks: a cancelled async ``get`` frees its
thread within this (a message it took meanwhile is kept for the next ``get``)."""


class AsyncLock:
    """``store.lock(name)`` of an ``AsyncStore``."""

    def __init__(self, runner: Runner, lock: Lock) -> None:
        self._runner = runner
        self.sync = lock

    @property
    def name(self) -> str:
        """As ``Lock.name``."""
        return self.sync.name

    async def acquire(self, owner: str, ttl: Duration) -> bool:
        """``Lock.acquire``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.acquire, owner, ttl)

    async def renew(self, owner: str, ttl: Duration) -> bool:
        """``Lock.renew``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.renew, owner, ttl)

    async def release(self, owner: str) -> bool:
        """``Lock.release``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.release, owner)

    async def holder(self) -> LockInfo | None:
        """``Lock.holder``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.holder)


class AsyncStream:
    """``store.stream(name)`` of an ``AsyncStore``."""

    def __init__(self, runner: Runner, stream: Stream) -> None:
        self._runner = runner
        self.sync = stream

    @property
    def name(self) -> str:
        """As ``Stream.name``."""
        return self.sync.name

    async def append(self, payload: Any) -> int:
        """``Stream.append``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.append, payload)

    async def read(self, after: int = 0, limit: int = 100) -> list[StreamEvent]:
        """``Stream.read``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.read, after, limit)

    async def commit(self, consumer: str, offset: int) -> None:
        """``Stream.commit``, awaited (run off the loop)."""
        await self._runner.call(self.sync.commit, consumer, offset)

    async def offset(self, consumer: str) -> int:
        """``Stream.offset``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.offset, consumer)

    async def wait(
        self, after: int, timeout: Duration | None = None, stop: StopToken | None = None
    ) -> bool:
        """Cancelling the awaiting task ends the wait (no waiter left registered)."""
        token = stop if stop is not None else StopToken()
        return await self._runner.wait(self.sync.wait, after, timeout, token, stop=token)

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

    async def trim_to(self, offset: int) -> int:
        """``Stream.trim_to``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.trim_to, offset)


class AsyncSubscription:
    """``store.subscribe(channel)`` of an ``AsyncStore``: ``async for message in sub``."""

    def __init__(self, runner: Runner, subscription: Subscription) -> None:
        self._runner = runner
        self.sync = subscription
        self._kept: collections.deque[Any] = collections.deque()

    @property
    def channel(self) -> str:
        """As ``Subscription.channel``."""
        return self.sync.channel

    async def get(self, timeout: float | None = None) -> Any:
        """The next message's payload; ``None`` on timeout or once closed."""
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

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        while True:
            message = await self.get()
            if message is None and self.closed:
                return
            if message is not None:
                yield message

    async def close(self) -> None:
        """``Subscription.close``, awaited (run off the loop)."""
        await self._runner.call(self.sync.close)

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
