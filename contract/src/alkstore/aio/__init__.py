"""The async surface (contract §13): ``async with alkstore.aio.open(url) as store``.

Every method of the sync store that touches storage is a coroutine here, run
on the store's own threads so the event loop never blocks; the rules are the
sync core's, not a copy. Cancelling an awaiting task leaves nothing behind: a
waiting call is stopped, a job claimed for a cancelled caller is given back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from types import TracebackType
from typing import Any

from ..clock import Clock, check_clock
from ..engine import AsyncNativeProvider, load_engine, url_scheme
from ..errors import InvalidOptions
from ._generated import (
    AsyncAckAndClaim,
    AsyncJobHandle,
    AsyncLock,
    AsyncOutbox,
    AsyncQueue,
    AsyncQueueConsumer,
)
from .profiles import AsyncStream, AsyncSubscription, AsyncWakeWatcher
from .store import AsyncStore
from .transaction import AsyncTransaction, TransactionBlock


class Opening:
    """``alkstore.aio.open(...)``: await it for an ``AsyncStore``, or ``async with`` it
    (the store closes when the block ends)."""

    def __init__(self, url: str, clock: Clock | None, threads: int | None, opts: Any) -> None:
        self._url = url
        self._clock = clock
        self._threads = threads
        self._opts = opts
        self._store: AsyncStore | None = None

    async def _open(self) -> AsyncStore:
        if not isinstance(self._url, str):
            raise InvalidOptions(
                f"url must be a str such as 'sqlite:///app.db', got {type(self._url).__name__}"
            )
        check_clock(self._clock)
        provider = load_engine(url_scheme(self._url))
        # Opening connects and may migrate: off the loop, like everything else.
        if provider.capabilities.async_native and isinstance(provider, AsyncNativeProvider):
            store = await asyncio.to_thread(
                provider.open_on_loop,
                self._url,
                asyncio.get_running_loop(),
                clock=self._clock,
                **self._opts,
            )
        else:
            store = await asyncio.to_thread(
                provider.open, self._url, clock=self._clock, **self._opts
            )
        return AsyncStore(store, threads=self._threads)

    def __await__(self) -> Generator[Any, None, AsyncStore]:
        return self._open().__await__()

    def __getattr__(self, name: str) -> Any:
        # Only names an Opening lacks get here: the store's own (``queue``, ``attach``,
        # ...) asked of an Opening kept as a value instead of awaited.
        if name.startswith("__"):
            raise AttributeError(name)  # protocol probes (copy, pickle, inspect) stay quiet
        raise AttributeError(
            f"{name!r}: alkstore.aio.open(...) is not a store until it is opened: use "
            "`async with alkstore.aio.open(...) as store:` or "
            "`store = await alkstore.aio.open(...)`"
        )

    async def __aenter__(self) -> AsyncStore:
        self._store = await self._open()
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.close()


def open(  # mirrors alkstore.open
    url: str, *, clock: Clock | None = None, threads: int | None = None, **opts: Any
) -> Opening:
    """Open a store for asyncio code: ``async with alkstore.aio.open(url) as store``.

    Args:
        url: as for ``alkstore.open``; the scheme names the engine.
        clock: as for ``alkstore.open``.
        threads: threads for the store's short calls (default 4).
        **opts: engine options, as for ``alkstore.open``.

    Raises (when awaited):
        InvalidOptions, EngineNotFound, EngineUnavailable, EngineMisconfigured:
            as ``alkstore.open``.
    """
    return Opening(url, clock, threads, opts)


__all__ = [
    "AsyncAckAndClaim",
    "AsyncJobHandle",
    "AsyncLock",
    "AsyncOutbox",
    "AsyncQueue",
    "AsyncQueueConsumer",
    "AsyncStore",
    "AsyncStream",
    "AsyncSubscription",
    "AsyncTransaction",
    "AsyncWakeWatcher",
    "Opening",
    "TransactionBlock",
    "open",
]
