"""Broken claim outcomes in the caller's transaction (contract 1.2 §3.8, §3.9, §3.11).

A hand-rolled "retry this job in my transaction" that looks the job up and puts it
back if it is processing has lost the claim's guard: a handle whose claim lapsed and
was claimed again by another worker retries that worker's run, and the job runs a
third time while the second is still going.

A store that remembers the claims its transactions finished, to refuse a repeat
without asking the database, and forgets that a transaction can roll back: a claim
whose ``tx.ack`` rolled back is still valid (§3.8: as it was), yet the next
transaction's outcome of it is refused with ``StaleHandle``, and the job, never
finished, runs again once the claim lapses. Each outcome of one transaction, and a
rolled-back outcome followed by the handle's own calls, look right: only a second
transaction's outcome of a rolled-back claim tells.

A ``tx.retry_all`` or ``tx.fail_all`` written as a loop of ``tx.retry`` or
``tx.fail`` checks each claim's arguments only when it reaches it: a bad delay or
error in the middle is refused after the claims before it were written, and a
caller that catches the refusal and commits keeps half a call.

A ``tx.ack_all`` that hands every claim to the engine's one statement and counts a
handle acked when its job's id comes back reports a stale claim acked when the
caller also named the job's newer claim: the statement acked the newer one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from alkstore.api import JobHandle
from alkstore.core import CoreStore
from alkstore.core.context import StoreContext
from alkstore.core.transaction import CoreTransaction
from alkstore.driver import ack_claims_of
from alkstore.errors import InvalidOptions, StaleHandle
from alkstore.params import AckClaims
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


@contextmanager
def _transaction_of(
    context: StoreContext, make: Callable[[Any], CoreTransaction]
) -> Iterator[CoreTransaction]:
    """``CoreStore.transaction`` with ``make(handle)``, a mutant's transaction, in place
    of the contract's."""
    context.require("transactions")
    with context.driver.transaction() as handle:
        tx = make(handle)
        try:
            yield tx
        finally:
            woken = tx._finish()
    for topic in woken:
        context.hub.notify(topic)


class TxRetryIgnoresClaimStore(CoreStore):
    """``store.transaction()`` yields the transaction above."""

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        make = partial(_RetryUnderTheCurrentClaim, self._context)
        with _transaction_of(self._context, make) as tx:
            yield tx


class _RemembersFinishedClaims(CoreTransaction):
    def __init__(self, context: StoreContext, handle: Any, finished: set[tuple[int, int]]) -> None:
        super().__init__(context, handle)
        self._claims_finished = finished

    def _remembered(self, handle: JobHandle) -> tuple[int, int]:
        claim = (handle.job.id, handle.job.attempts)
        if claim in self._claims_finished:
            raise StaleHandle(f"job {claim[0]}'s claim was already finished")
        return claim

    def ack(self, handle: JobHandle, result: Any = None) -> None:
        claim = self._remembered(handle)
        super().ack(handle, result)
        self._claims_finished.add(claim)

    def retry(self, handle: JobHandle, error: str, delay: Duration | None = None) -> None:
        claim = self._remembered(handle)
        super().retry(handle, error, delay)
        self._claims_finished.add(claim)

    def fail(self, handle: JobHandle, error: str) -> None:
        claim = self._remembered(handle)
        super().fail(handle, error)
        self._claims_finished.add(claim)


class TxFinishedClaimsCachedStore(CoreStore):
    """``store.transaction()`` yields the transaction above, over one set of finished
    claims per store that no rollback takes anything out of."""

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        finished: set[tuple[int, int]] = self.__dict__.setdefault("_claims_finished", set())
        make = partial(_RemembersFinishedClaims, self._context, finished=finished)
        with _transaction_of(self._context, make) as tx:
            yield tx


def _per_handle(value: Any, given: list[JobHandle], field: str) -> list[Any]:
    """``value`` once per handle: itself for each when it is not a list or tuple; the
    lengths are checked up front, as the contract's are (only the values are not)."""
    each = list(value) if isinstance(value, list | tuple) else [value] * len(given)
    if len(each) != len(given):
        raise InvalidOptions(f"{field} must give one per handle")
    return each


def _handles(handles: Any) -> list[JobHandle]:
    if not isinstance(handles, list | tuple):
        raise InvalidOptions("handles must be a sequence")
    return list(handles)


class _WritesAsItChecks(CoreTransaction):
    def retry_all(
        self,
        handles: Sequence[JobHandle],
        errors: str | Sequence[str],
        delays: Duration | Sequence[Duration | None] | None = None,
    ) -> tuple[JobHandle, ...]:
        given = _handles(handles)
        each_error = _per_handle(errors, given, "errors")
        each_delay = _per_handle(delays, given, "delays")
        refused: list[JobHandle] = []
        for handle, error, delay in zip(given, each_error, each_delay, strict=True):
            try:
                self.retry(handle, error, delay)  # checked here, after the ones before
            except StaleHandle:
                refused.append(handle)
        return tuple(refused)

    def fail_all(
        self, handles: Sequence[JobHandle], errors: str | Sequence[str]
    ) -> tuple[JobHandle, ...]:
        given = _handles(handles)
        refused: list[JobHandle] = []
        for handle, error in zip(given, _per_handle(errors, given, "errors"), strict=True):
            try:
                self.fail(handle, error)
            except StaleHandle:
                refused.append(handle)
        return tuple(refused)


class RetryAllWritesAsItChecksStore(CoreStore):
    """``store.transaction()`` yields the transaction above."""

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        make = partial(_WritesAsItChecks, self._context)
        with _transaction_of(self._context, make) as tx:
            yield tx


class _AcksEveryClaimInOneStatement(CoreTransaction):
    def ack_all(
        self, handles: Sequence[JobHandle], results: Sequence[Any] | None = None
    ) -> tuple[JobHandle, ...]:
        given = _handles(handles)
        if results is not None or not given:
            return super().ack_all(given, results)
        ctx = self._context
        jobs = [handle.job for handle in given]
        claims = AckClaims([j.id for j in jobs], [j.attempts for j in jobs], ctx.now())
        statement = ack_claims_of(ctx.driver)
        if statement is None:
            return super().ack_all(given)
        acked = set(statement(self._handle, claims))  # the bug: ids, not claims
        return tuple(handle for handle in given if handle.job.id not in acked)


class AckAllCountsJobsStore(CoreStore):
    """``store.transaction()`` yields the transaction above."""

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        make = partial(_AcksEveryClaimInOneStatement, self._context)
        with _transaction_of(self._context, make) as tx:
            yield tx
