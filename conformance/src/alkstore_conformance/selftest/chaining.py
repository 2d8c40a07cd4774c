"""A broken ``ack_and_claim`` (contract §12.7): a ``CoreStore`` subclass.

``ack_and_claim`` is the core's, not an engine's, so this mutant replaces the
store's handles rather than a statement. Its bug is the shortcut a hand-rolled
version takes: ack first, and claim only if the ack went through. A worker
whose claim had lapsed (a long handler, a paused process) then gets nothing
next, though the queue is full, and its slot falls back to waiting.
"""

from __future__ import annotations

from typing import Any

from alkstore.api import AckAndClaim, JobHandle
from alkstore.core import CoreStore
from alkstore.core.queues import CoreJobHandle, CoreQueue
from alkstore.options import QueueOpts
from alkstore.values import Job


class _ClaimsOnlyAfterAnAck(CoreJobHandle):
    __slots__ = ()

    def ack_and_claim(self, worker_id: str, limit: int = 1, result: Any = None) -> AckAndClaim:
        if not self.ack(result):
            return AckAndClaim(False, [])
        return AckAndClaim(True, self._queue.claim_batch(worker_id, limit))


class _Queue(CoreQueue):
    def _handles(self, jobs: list[Job]) -> list[JobHandle]:
        return [_ClaimsOnlyAfterAnAck(self, handle.job) for handle in super()._handles(jobs)]


class ClaimsOnlyAfterAnAckStore(CoreStore):
    """``ack_and_claim`` claims nothing when its ack is refused."""

    def queue(self, name: str, opts: QueueOpts | None = None) -> Any:
        core = super().queue(name, opts)
        return _Queue(core._context, core.name, core.opts)
