"""A broken ``tx.retry`` (contract 1.2 §3.9): guarded by the job's claim as the
transaction reads it, not by the handle's.

A hand-rolled "retry this job in my transaction" that looks the job up and puts it
back if it is processing has lost the claim's guard: a handle whose claim lapsed and
was claimed again by another worker retries that worker's run, and the job runs a
third time while the second is still going.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from alkstore.api import JobHandle
from alkstore.core import CoreStore
from alkstore.core.transaction import CoreTransaction
from alkstore.timeconv import Duration
from alkstore.values import Job, JobState


@dataclass(frozen=True)
class _CurrentClaim:
    """What the broken retry hands on: the job as it is now, under whoever holds it."""

    job: Job


class _RetryUnderTheCurrentClaim(CoreTransaction):
    def retry(self, handle: JobHandle, error: str, delay: Duration | None = None) -> None:
        now = self.get_job_tx(handle.job.queue, handle.job.id)
        if now is not None and now.state is JobState.PROCESSING:
            current: Any = _CurrentClaim(replace(handle.job, attempts=now.attempts))
            super().retry(current, error, delay)
            return
        super().retry(handle, error, delay)


class TxRetryIgnoresClaimStore(CoreStore):
    """``store.transaction()`` yields the transaction above."""

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        self._context.require("transactions")
        with self._context.driver.transaction() as handle:
            tx = _RetryUnderTheCurrentClaim(self._context, handle)
            try:
                yield tx
            finally:
                woken = tx._finish()
        for topic in woken:
            self._context.hub.notify(topic)
