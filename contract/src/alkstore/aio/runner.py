"""Where an ``AsyncStore``'s calls run: threads of its own, never the event loop.

Every rule lives in the sync core; the async surface only moves each call off
the loop. Three kinds of work, three places:

* short calls (enqueue, ack, a claim, a read) share a small pool per store;
* waiting calls (``claim_wait``, ``stream.wait``, a subscription's ``get``,
  ``run_schedules``) take a thread of a second, larger pool, so many waiters
  never starve the short calls;
* a transaction runs on one thread of its own from ``begin`` to ``commit``
  (a connection inside a transaction belongs to one thread).

Cancelling an awaiting task never stops a call half way: a call that writes
completes (or fails) whole. A call that claims and whose caller was cancelled
gives back what it claimed (``JobHandle.release``), and a waiting call is
stopped through its ``StopToken`` before the cancellation is re-raised, so no
claim and no waiter outlive a cancelled task.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ..api import AckAndClaim, JobHandle
from ..stop import StopToken

T = TypeVar("T")

DEFAULT_CALL_THREADS = 4
"""Threads for short calls, per store (engine option ``aio_threads``)."""
MAX_WAIT_THREADS = 512
"""Most waiting calls of one store at once (each holds a thread while it waits)."""


class Runner:
    """The threads of one ``AsyncStore``."""

    def __init__(self, call_threads: int = DEFAULT_CALL_THREADS) -> None:
        self._calls = ThreadPoolExecutor(call_threads, thread_name_prefix="alkstore-aio")
        self._waits = ThreadPoolExecutor(MAX_WAIT_THREADS, thread_name_prefix="alkstore-aio-wait")
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def _submit(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> Future[T]:
        if self._closed:
            # The store is closed too: the call raises StoreClosed at once, but
            # still off the loop (an engine doing its I/O on the loop must never
            # be called from the loop's own thread).
            return _once(fn, *args)
        return pool.submit(fn, *args)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a short call on the store's pool."""
        return await asyncio.wrap_future(self._submit(self._calls, fn, *args))

    async def wait(self, fn: Callable[..., T], *args: Any, stop: StopToken | None = None) -> T:
        """Run a call that may block for long; cancelling sets ``stop`` and waits
        for the call to return before re-raising."""
        future = self._submit(self._waits, fn, *args)
        try:
            return await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            if not future.cancel():
                if stop is not None:
                    stop.stop()
                await _despite_cancel(future)
            raise

    async def claim(
        self,
        fn: Callable[..., T],
        *args: Any,
        handles: Callable[[T], Iterable[JobHandle]],
        stop: StopToken | None = None,
        waiting: bool = False,
    ) -> T:
        """Run a call that claims; if the caller is cancelled, what it claimed is
        given back (``handles(result)`` lists it) before the cancellation goes on."""
        future = self._submit(self._waits if waiting else self._calls, fn, *args)
        try:
            return await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            if not future.cancel():
                if stop is not None:
                    stop.stop()
                result = await _despite_cancel(future)
                claimed = [] if result is None else list(handles(result))
                if claimed:
                    await _despite_cancel(self._submit(self._calls, _release_all, claimed))
            raise

    def close(self) -> None:
        # Nothing is waited for: closing the store wakes every waiting call.
        self._closed = True
        self._calls.shutdown(wait=False)
        self._waits.shutdown(wait=False)


class Lane:
    """A single thread: every call of one transaction, in order."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="alkstore-aio-tx")

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        future = self._executor.submit(fn, *args)
        try:
            return await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            # The statement runs to its end either way; the transaction then rolls
            # back as the cancellation leaves the ``async with`` block.
            await _despite_cancel(future)
            raise

    def close(self) -> None:
        self._executor.shutdown(wait=False)


async def _despite_cancel(future: Future[T]) -> T | None:
    """``future``'s result once it ends, however often this task is cancelled
    meanwhile; ``None`` if it raised (the caller is re-raising a cancellation)."""
    while True:
        try:
            return await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            continue
        except Exception:
            return None


def _once(fn: Callable[..., T], *args: Any) -> Future[T]:
    """``fn(*args)`` on a thread of its own (after the pools are shut down)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name="alkstore-aio-closed", daemon=True).start()
    return future


# What a claiming call's result holds, for ``Runner.claim(..., handles=...)``.
def one(handle: JobHandle | None) -> list[JobHandle]:
    """The handle of a call that claims at most one job (``claim``, ``claim_wait``)."""
    return [] if handle is None else [handle]


def many(handles: list[JobHandle]) -> list[JobHandle]:
    """The handles of a call that claims a batch (``claim_batch``)."""
    return handles


def ack_and_claim(done: AckAndClaim) -> list[JobHandle]:
    """The handles ``JobHandle.ack_and_claim`` claimed (its ack stands either way)."""
    return done.claimed


def _release_all(handles: list[JobHandle]) -> None:
    for handle in handles:
        handle.release()
