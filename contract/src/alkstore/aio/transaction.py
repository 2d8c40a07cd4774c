"""``async with store.transaction() as tx``: one engine transaction on one thread."""

from __future__ import annotations

import inspect
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from ..api import Queue, Transaction
from ..options import EnqueueOpts
from ..values import Job
from .queues import AsyncQueue
from .runner import Lane


class AsyncTransaction:
    """The async face of ``alkstore.api.Transaction`` (contract §3, §13).

    Everything in it -- begin, each statement, commit or rollback -- runs in
    order on one thread of its own; the loop only awaits.
    """

    def __init__(self, lane: Lane, transaction: Transaction) -> None:
        self._lane = lane
        self.sync = transaction

    @property
    def connection(self) -> Any:
        """The engine's connection inside this transaction. On an engine whose
        I/O runs on the loop (``Capabilities.async_native``) it is the async
        connection itself; elsewhere it belongs to the transaction's thread:
        run SQL with ``await tx.execute(...)``."""
        return self.sync.connection

    async def execute(self, sql: str, params: Any = None) -> list[Any]:
        """Run ``sql`` in this transaction; return its rows (``[]`` when it has none).

        On an ``async_native`` engine the connection is the engine's async one,
        and the statement runs on the loop with it; elsewhere on the
        transaction's thread."""
        connection = await self._lane.call(lambda: self.sync.connection)  # checks it is live
        if inspect.iscoroutinefunction(getattr(connection, "execute", None)):
            cursor = await connection.execute(sql, params)
            return list(await cursor.fetchall()) if cursor.description else []
        return await self._lane.call(_execute_and_fetch, self.sync, sql, params)

    async def enqueue(
        self, queue: str | Queue | AsyncQueue, payload: Any, opts: EnqueueOpts | None = None
    ) -> int:
        """``Transaction.enqueue``, awaited (run off the loop)."""
        target = queue.sync if isinstance(queue, AsyncQueue) else queue
        return await self._lane.call(self.sync.enqueue, target, payload, opts)

    async def outbox_enqueue(self, outbox: str, payload: Any) -> int:
        """``Transaction.outbox_enqueue``, awaited (run off the loop)."""
        return await self._lane.call(self.sync.outbox_enqueue, outbox, payload)

    async def get_job_tx(self, queue: str, job_id: int) -> Job | None:
        """``Transaction.get_job_tx``, awaited (run off the loop)."""
        return await self._lane.call(self.sync.get_job_tx, queue, job_id)

    async def stream_append(self, stream: str, payload: Any) -> int:
        """``Transaction.stream_append``, awaited (run off the loop)."""
        return await self._lane.call(self.sync.stream_append, stream, payload)

    async def notify(self, channel: str, payload: Any) -> None:
        """``Transaction.notify``, awaited (run off the loop)."""
        await self._lane.call(self.sync.notify, channel, payload)


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
