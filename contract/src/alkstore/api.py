"""The public surface every engine's store presents (CONTRACT.md §1-§4, §6).

These are ``Protocol``s: applications type against them; the shared core
(``alkstore.core``) is the reference implementation engines reuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Protocol

from .clock import Clock
from .options import EnqueueOpts, QueueOpts
from .stop import StopToken
from .timeconv import Duration
from .values import Job, LockInfo, SweepResult


class JobHandle(Protocol):
    """A claim on one job. Ops return ``True`` only while this very claim is live."""

    @property
    def job(self) -> Job: ...

    @property
    def id(self) -> int: ...

    @property
    def payload(self) -> Any: ...

    @property
    def attempts(self) -> int: ...

    def ack(self) -> bool: ...

    def heartbeat(self, extend: Duration) -> bool: ...

    def retry(self, error: str, delay: Duration | None = None) -> bool: ...

    def fail(self, error: str) -> bool: ...


class QueueConsumer(Protocol):
    """The surface queues and outboxes share."""

    @property
    def name(self) -> str: ...

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> int: ...

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None
    ) -> list[int]: ...

    def claim(self, worker_id: str) -> JobHandle | None: ...

    def claim_batch(self, worker_id: str, limit: int) -> list[JobHandle]: ...

    def claim_wait(
        self,
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> JobHandle | None: ...

    def ack_batch(self, job_ids: Sequence[int], worker_id: str) -> int: ...

    def cancel(self, job_id: int) -> bool: ...

    def get_job(self, job_id: int) -> Job | None: ...

    def sweep_expired(self) -> SweepResult: ...


class Queue(QueueConsumer, Protocol):
    @property
    def opts(self) -> QueueOpts: ...


class Outbox(QueueConsumer, Protocol):
    pass


class Lock(Protocol):
    @property
    def name(self) -> str: ...

    def acquire(self, owner: str, ttl: Duration) -> bool: ...

    def renew(self, owner: str, ttl: Duration) -> bool: ...

    def release(self, owner: str) -> bool: ...

    def holder(self) -> LockInfo | None: ...


class Transaction(Protocol):
    """Work that commits or rolls back with the caller's business writes."""

    @property
    def connection(self) -> Any: ...

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any: ...

    def enqueue(self, queue: str, payload: Any, opts: EnqueueOpts | None = None) -> int: ...

    def outbox_enqueue(self, outbox: str, payload: Any) -> int: ...

    def get_job_tx(self, queue: str, job_id: int) -> Job | None: ...


class Store(Protocol):
    @property
    def clock(self) -> Clock: ...

    def queue(self, name: str, opts: QueueOpts | None = None) -> Queue: ...

    def outbox(self, name: str) -> Outbox: ...

    def lock(self, name: str) -> Lock: ...

    def transaction(self) -> AbstractContextManager[Transaction]: ...

    def attach(self, connection: Any) -> AbstractContextManager[Transaction]: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...

    def __enter__(self) -> Store: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
