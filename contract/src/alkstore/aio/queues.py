"""Async queue, outbox and job handles: the sync ones, called off the loop (contract §13)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..api import AckAndClaim, JobHandle, Outbox, Queue, QueueConsumer
from ..options import EnqueueOpts, QueueOpts
from ..stop import StopToken
from ..timeconv import Duration
from ..values import Job, JobState, QueueStats, SweepResult
from .runner import Runner


class AsyncJobHandle:
    """A claimed job (``alkstore.api.JobHandle``); every operation is a coroutine."""

    def __init__(self, runner: Runner, handle: JobHandle) -> None:
        self._runner = runner
        self.sync = handle
        """The sync handle (for code that runs on a thread of its own)."""

    @property
    def job(self) -> Job:
        """As ``JobHandle.job``."""
        return self.sync.job

    @property
    def id(self) -> int:
        """As ``JobHandle.id``."""
        return self.sync.id

    @property
    def payload(self) -> Any:
        """As ``JobHandle.payload``."""
        return self.sync.payload

    @property
    def attempts(self) -> int:
        """As ``JobHandle.attempts``."""
        return self.sync.attempts

    async def ack(self) -> bool:
        """``JobHandle.ack``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.ack)

    async def ack_and_claim(self, worker_id: str, limit: int = 1) -> AsyncAckAndClaim:
        """``JobHandle.ack_and_claim``, awaited (run off the loop); a cancelled call
        gives back the jobs it claimed (``release``), its ack stands."""
        done = await self._runner.claim(
            self.sync.ack_and_claim, worker_id, limit, handles=_claimed_by
        )
        claimed = [AsyncJobHandle(self._runner, handle) for handle in done.claimed]
        return AsyncAckAndClaim(done.acked, claimed)

    async def heartbeat(self, extend: Duration) -> bool:
        """``JobHandle.heartbeat``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.heartbeat, extend)

    async def release(self) -> bool:
        """``JobHandle.release``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.release)

    async def retry(self, error: str, delay: Duration | None = None) -> bool:
        """``JobHandle.retry``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.retry, error, delay)

    async def fail(self, error: str) -> bool:
        """``JobHandle.fail``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.fail, error)

    def __repr__(self) -> str:
        return f"<AsyncJobHandle {self.sync!r}>"


class AsyncAckAndClaim(NamedTuple):
    """What ``AsyncJobHandle.ack_and_claim`` did (``alkstore.AckAndClaim``)."""

    acked: bool
    claimed: list[AsyncJobHandle]


def _claimed_by(done: AckAndClaim) -> list[JobHandle]:
    return done.claimed


def _one(handle: JobHandle | None) -> list[JobHandle]:
    return [] if handle is None else [handle]


def _many(handles: list[JobHandle]) -> list[JobHandle]:
    return handles


class AsyncQueueConsumer:
    """The async face of a queue or an outbox (``alkstore.api.QueueConsumer``)."""

    def __init__(self, runner: Runner, queue: QueueConsumer) -> None:
        self._runner = runner
        self.sync = queue
        """The sync queue handle this one calls."""

    @property
    def name(self) -> str:
        """As ``Queue.name``."""
        return self.sync.name

    async def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> int:
        """``Queue.enqueue``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.enqueue, payload, opts)

    async def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None
    ) -> list[int]:
        """``Queue.enqueue_many``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.enqueue_many, payloads, opts)

    async def claim(self, worker_id: str) -> AsyncJobHandle | None:
        """A cancelled claim gives back the job it took (``release``)."""
        handle = await self._runner.claim(self.sync.claim, worker_id, handles=_one)
        return None if handle is None else AsyncJobHandle(self._runner, handle)

    async def claim_batch(self, worker_id: str, limit: int) -> list[AsyncJobHandle]:
        """A cancelled claim gives back the jobs it took (``release``)."""
        handles = await self._runner.claim(self.sync.claim_batch, worker_id, limit, handles=_many)
        return [AsyncJobHandle(self._runner, handle) for handle in handles]

    async def claim_wait(
        self,
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> AsyncJobHandle | None:
        """``claim_wait`` off the loop; cancelling the awaiting task ends the wait
        (no waiter left registered) and gives back a job claimed meanwhile."""
        token = stop if stop is not None else StopToken()
        handle = await self._runner.claim(
            self.sync.claim_wait, worker_id, timeout, token, handles=_one, stop=token, waiting=True
        )
        return None if handle is None else AsyncJobHandle(self._runner, handle)

    async def ack_batch(self, job_ids: Sequence[int], worker_id: str) -> int:
        """``Queue.ack_batch``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.ack_batch, job_ids, worker_id)

    async def cancel(self, job_id: int) -> bool:
        """``Queue.cancel``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.cancel, job_id)

    async def get_job(self, job_id: int) -> Job | None:
        """``Queue.get_job``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.get_job, job_id)

    async def sweep_expired(self) -> SweepResult:
        """``Queue.sweep_expired``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.sweep_expired)

    # -- operations (§11) -------------------------------------------------------------
    async def stats(self) -> QueueStats:
        """``Queue.stats``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.stats)

    async def jobs(
        self, state: JobState | str | None = None, *, after_id: int = 0, limit: int = 100
    ) -> list[Job]:
        """``Queue.jobs``, awaited (run off the loop)."""
        return await self._runner.call(
            lambda: self.sync.jobs(state, after_id=after_id, limit=limit)
        )

    async def redrive(self, ids: Sequence[int] | None = None, *, limit: int = 10_000) -> list[int]:
        """``Queue.redrive``, awaited (run off the loop)."""
        return await self._runner.call(lambda: self.sync.redrive(ids, limit=limit))

    async def purge_dead(
        self, ids: Sequence[int] | None = None, *, older_than_s: Duration | None = None
    ) -> int:
        """``Queue.purge_dead``, awaited (run off the loop)."""
        return await self._runner.call(lambda: self.sync.purge_dead(ids, older_than_s=older_than_s))

    async def pause(self) -> bool:
        """``Queue.pause``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.pause)

    async def resume(self) -> bool:
        """``Queue.resume``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.resume)

    async def paused(self) -> bool:
        """``Queue.paused``, awaited (run off the loop)."""
        return await self._runner.call(self.sync.paused)

    def __repr__(self) -> str:
        return f"<Async {self.sync!r}>"


class AsyncQueue(AsyncQueueConsumer):
    """``store.queue(name, opts)`` of an ``AsyncStore``."""

    sync: Queue

    def __init__(self, runner: Runner, queue: Queue) -> None:
        super().__init__(runner, queue)
        self.sync = queue

    @property
    def opts(self) -> QueueOpts:
        """As ``Queue.opts``."""
        return self.sync.opts


class AsyncOutbox(AsyncQueueConsumer):
    """``store.outbox(name)`` of an ``AsyncStore``."""

    sync: Outbox

    def __init__(self, runner: Runner, outbox: Outbox) -> None:
        super().__init__(runner, outbox)
        self.sync = outbox
