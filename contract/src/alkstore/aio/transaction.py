"""``async with store.transaction() as tx``: one engine transaction on one thread."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from .. import api
from .._surface import documented_as
from ..api import JobHandle, Queue, Transaction
from ..options import EnqueueOpts
from ..timeconv import Duration
from ..values import Enqueued
from ._generated import AsyncJobHandle, AsyncQueue, AsyncTransactionBase
from .runner import Lane


class AsyncTransaction(AsyncTransactionBase):
    """The async face of ``alkstore.api.Transaction`` (contract §3, §13).

    Everything in it -- begin, each statement, commit or rollback -- runs in
    order on one thread of its own; the loop only awaits.
    """

    def __init__(self, lane: Lane, transaction: Transaction) -> None:
        self._lane = lane
        self.sync = transaction
        """The sync transaction every call goes to."""

    @property
    @documented_as(
        api.Transaction.connection,
        "Async: on an engine whose I/O runs on the loop (``Capabilities.async_native``) "
        "it is the async connection itself; elsewhere it belongs to the transaction's "
        "thread: run SQL with ``await tx.execute(...)``.",
    )
    def connection(self) -> Any:
        return self.sync.connection

    @documented_as(
        api.Transaction.execute,
        "Async: returns the statement's rows (``[]`` when it has none) rather than a "
        "cursor. On an ``async_native`` engine the connection is the engine's async "
        "one, and the statement runs on the loop with it; elsewhere on the "
        "transaction's thread.",
    )
    async def execute(self, sql: str, params: Any = None) -> list[Any]:
        connection = await self._lane.call(lambda: self.sync.connection)  # checks it is live
        if inspect.iscoroutinefunction(getattr(connection, "execute", None)):
            cursor = await connection.execute(sql, params)
            return list(await cursor.fetchall()) if cursor.description else []
        return await self._lane.call(_execute_and_fetch, self.sync, sql, params)

    @documented_as(
        api.Transaction.enqueue,
        "Async: awaited, on the transaction's thread; ``queue`` may be an ``AsyncQueue`` too.",
    )
    async def enqueue(
        self, queue: str | Queue | AsyncQueue, payload: Any, opts: EnqueueOpts | None = None
    ) -> Enqueued:
        target = queue.sync if isinstance(queue, AsyncQueue) else queue
        return await self._lane.call(self.sync.enqueue, target, payload, opts)

    @documented_as(
        api.Transaction.ack,
        "Async: awaited, on the transaction's thread; ``handle`` may be an ``AsyncJobHandle`` too.",
    )
    async def ack(self, handle: JobHandle | AsyncJobHandle, result: Any = None) -> None:
        target = handle.sync if isinstance(handle, AsyncJobHandle) else handle
        await self._lane.call(self.sync.ack, target, result)

    @documented_as(
        api.Transaction.ack_all,
        "Async: awaited, on the transaction's thread; ``handles`` may be ``AsyncJobHandle`` "
        "values too, and the refused ones come back as given.",
    )
    async def ack_all(
        self,
        handles: Sequence[JobHandle | AsyncJobHandle],
        results: Sequence[Any] | None = None,
    ) -> tuple[JobHandle | AsyncJobHandle, ...]:
        given, targets = _targets(handles)
        refused = await self._lane.call(self.sync.ack_all, targets, results)
        return _as_given(given, targets, refused)

    @documented_as(
        api.Transaction.retry,
        "Async: awaited, on the transaction's thread; ``handle`` may be an ``AsyncJobHandle`` too.",
    )
    async def retry(
        self, handle: JobHandle | AsyncJobHandle, error: str, delay: Duration | None = None
    ) -> None:
        target = handle.sync if isinstance(handle, AsyncJobHandle) else handle
        await self._lane.call(self.sync.retry, target, error, delay)

    @documented_as(
        api.Transaction.fail,
        "Async: awaited, on the transaction's thread; ``handle`` may be an ``AsyncJobHandle`` too.",
    )
    async def fail(self, handle: JobHandle | AsyncJobHandle, error: str) -> None:
        target = handle.sync if isinstance(handle, AsyncJobHandle) else handle
        await self._lane.call(self.sync.fail, target, error)

    @documented_as(
        api.Transaction.retry_all,
        "Async: awaited, on the transaction's thread; ``handles`` may be ``AsyncJobHandle`` "
        "values too, and the refused ones come back as given.",
    )
    async def retry_all(
        self,
        handles: Sequence[JobHandle | AsyncJobHandle],
        errors: str | Sequence[str],
        delays: Duration | Sequence[Duration | None] | None = None,
    ) -> tuple[JobHandle | AsyncJobHandle, ...]:
        given, targets = _targets(handles)
        refused = await self._lane.call(self.sync.retry_all, targets, errors, delays)
        return _as_given(given, targets, refused)

    @documented_as(
        api.Transaction.fail_all,
        "Async: awaited, on the transaction's thread; ``handles`` may be ``AsyncJobHandle`` "
        "values too, and the refused ones come back as given.",
    )
    async def fail_all(
        self, handles: Sequence[JobHandle | AsyncJobHandle], errors: str | Sequence[str]
    ) -> tuple[JobHandle | AsyncJobHandle, ...]:
        given, targets = _targets(handles)
        refused = await self._lane.call(self.sync.fail_all, targets, errors)
        return _as_given(given, targets, refused)


def _targets(handles: Any) -> tuple[Any, Any]:
    """``handles`` as given (a list, for a sequence) and as the sync call takes them
    (an ``AsyncJobHandle``'s own handle); not a sequence: as is, for the sync call
    to refuse."""
    if not isinstance(handles, Sequence):
        return handles, handles
    given = list(handles)
    return given, [h.sync if isinstance(h, AsyncJobHandle) else h for h in given]


def _as_given(given: Any, targets: Any, refused: tuple[JobHandle, ...]) -> tuple[Any, ...]:
    """The refused handles as the caller gave them (an ``AsyncJobHandle`` for one)."""
    if not isinstance(given, list):
        return refused
    back = {id(target): handle for target, handle in zip(targets, given, strict=True)}
    return tuple(back.get(id(handle), handle) for handle in refused)


def _execute_and_fetch(transaction: Transaction, sql: str, params: Any) -> list[Any]:
    cursor = transaction.execute(sql, params)
    description = getattr(cursor, "description", None)
    return list(cursor.fetchall()) if description else []


class TransactionBlock:
    """What ``AsyncStore.transaction()`` and ``attach()`` return: ``async with``."""

    def __init__(self, opening: AbstractContextManager[Transaction]) -> None:
        self._opening = opening
        self._lane = Lane()

    async def __aenter__(self) -> AsyncTransaction:
        try:
            transaction = await self._lane.call(self._opening.__enter__)
        except BaseException:
            self._lane.close()
            raise
        return AsyncTransaction(self._lane, transaction)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        try:
            return bool(await self._lane.call(self._opening.__exit__, exc_type, exc, traceback))
        finally:
            self._lane.close()
