"""A pure-Python reference model of the contract's queues, outbox, transactional
enqueue and locks (CONTRACT.md §2, §3, §4, §6).

The model is written from the contract text, not from ``alkstore.core``: the kit's
stateful machine drives an engine and this model side by side and fails on the
first disagreement, so a bug shared by the core and the model would go unseen.
It only borrows the contract's own pure rules: option normalization (``QueueOpts``
and ``EnqueueOpts`` validate and round on construction), the backoff range and the
constants.

What the model cannot predict it checks and adopts instead:

* job ids are the engine's to choose; the model checks they are new and larger
  than every id committed before (CONTRACT.md §2: unique, never reused), then uses them;
* a retry without an explicit delay draws its jitter from a range; the model
  knows the range, the engine's ``run_at`` is checked against it and then adopted
  (``settle_retry``).

Time is whole seconds: every operation reads ``floor(clock.now())`` once, like a
store does. Disagreements raise ``ModelDisagreement`` (an ``AssertionError``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from alkstore import EnqueueOpts, Job, JobState, LockInfo, QueueOpts, SweepResult
from alkstore.backoff import retry_delay_range
from alkstore.clock import Clock

ERROR_EXHAUSTED = "max attempts exceeded"
"""``last_error`` of a job whose attempt budget ran out (ADR-010 §4)."""

ERROR_EXPIRED = "expired"
"""``last_error`` of a job swept past its ``expires_at`` (ADR-010 §4)."""


class ModelDisagreement(AssertionError):
    """The engine did something the contract does not allow."""


def whole_seconds(duration: int | float | timedelta) -> int:
    """A duration in whole seconds, rounded up (CONTRACT.md §0)."""
    if isinstance(duration, timedelta):
        micros = (duration.days * 86_400 + duration.seconds) * 1_000_000 + duration.microseconds
        return -(-micros // 1_000_000)
    if isinstance(duration, float):
        return math.ceil(duration)
    return duration


def _stamp(value: object) -> int:
    # QueueOpts/EnqueueOpts normalize every duration and instant to int on construction.
    if not isinstance(value, int):
        raise TypeError(f"expected normalized options, got {value!r}")
    return value


def json_round_trip(payload: Any) -> Any:
    """What reading a payload back returns: a round trip through ``json`` (§0)."""
    return json.loads(json.dumps(payload))


@dataclass
class ModelJob:
    """One job row as the contract describes it, plus its (unobservable) deadline."""

    id: int
    queue: str
    state: JobState
    payload: Any
    priority: int
    attempts: int
    max_attempts: int
    created_at: int
    run_at: int
    claimed_at: int | None
    expires_at: int | None
    worker_id: str | None
    visibility_timeout_s: int
    backoff_base_s: int
    dead_letter_retention_s: int | None
    last_error: str | None = None
    died_at: int | None = None
    deadline: int | None = None
    """Claim deadline of a processing row; the ``Job`` value does not carry it."""

    def as_job(self) -> Job:
        return Job(
            id=self.id,
            queue=self.queue,
            state=self.state,
            payload=self.payload,
            priority=self.priority,
            attempts=self.attempts,
            max_attempts=self.max_attempts,
            created_at=self.created_at,
            run_at=self.run_at,
            claimed_at=self.claimed_at,
            expires_at=self.expires_at,
            worker_id=self.worker_id,
            visibility_timeout_s=self.visibility_timeout_s,
            backoff_base_s=self.backoff_base_s,
            dead_letter_retention_s=self.dead_letter_retention_s,
            last_error=self.last_error,
            died_at=self.died_at,
        )

    # The predicates of CONTRACT.md §2, at whole-second ``now``.
    def expired(self, now: int) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def lapsed(self, now: int) -> bool:
        return (
            self.state is JobState.PROCESSING and self.deadline is not None and self.deadline <= now
        )

    def exhausted(self) -> bool:
        return self.attempts >= self.max_attempts

    def claimable(self, now: int) -> bool:
        ready = (self.state is JobState.PENDING and self.run_at <= now) or self.lapsed(now)
        return ready and not self.expired(now) and not self.exhausted()

    def claim_order(self) -> tuple[int, int, int]:
        return (-self.priority, self.run_at, self.id)


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim handed out: ``(job_id, attempt)`` names it; ``job`` is the snapshot
    the handle carries (CONTRACT.md §2: a later reclaim invalidates this claim)."""

    job_id: int
    attempt: int
    job: Job


@dataclass(frozen=True, slots=True)
class RetryOutcome:
    """What ``retry`` must have done: refused, buried, or rescheduled within bounds."""

    accepted: bool
    dead: bool = False
    run_at_bounds: tuple[int, int] | None = None


@dataclass
class ModelLock:
    owner: str
    expires_at: int


@dataclass
class ModelTransaction:
    """Enqueues staged inside one transaction; they exist only if it commits (§3)."""

    model: ReferenceModel
    staged: dict[int, ModelJob] = field(default_factory=dict)
    finished: bool = False

    def enqueue(
        self,
        queue: str,
        payload: Any,
        queue_opts: QueueOpts,
        opts: EnqueueOpts | None,
        job_id: int,
    ) -> None:
        if self.finished:
            raise RuntimeError("the model transaction has already finished")
        self.model._check_new_ids([job_id], after=max(self.staged, default=None))
        job = self.model._new_job(job_id, queue, payload, queue_opts, opts or EnqueueOpts())
        self.staged[job_id] = job

    def get_job(self, queue: str, job_id: int) -> Job | None:
        """``tx.get_job_tx``: queue-filtered, and it sees the transaction's own rows."""
        job = self.staged.get(job_id) or self.model._row(job_id)
        if job is None or job.queue != queue:
            return None
        return job.as_job()


class ReferenceModel:
    """The contract's queues, outbox, transactional enqueue and locks, in memory."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._live: dict[int, ModelJob] = {}
        self._dead: dict[int, ModelJob] = {}
        self._locks: dict[str, ModelLock] = {}
        self._seen_ids: set[int] = set()
        self._max_committed_id: int | None = None
        self._unsettled: dict[int, tuple[int, int]] = {}

    @property
    def now(self) -> int:
        """The store's "now": the clock floored to a whole second."""
        return math.floor(self.clock.now())

    @property
    def seen_ids(self) -> frozenset[int]:
        """Every id an enqueue ever returned, committed or rolled back."""
        return frozenset(self._seen_ids)

    # -- reads ---------------------------------------------------------------
    def _row(self, job_id: int) -> ModelJob | None:
        return self._live.get(job_id) or self._dead.get(job_id)

    def get_job(self, job_id: int) -> Job | None:
        """``Queue.get_job`` is id-global (CONTRACT.md §2)."""
        job = self._row(job_id)
        return None if job is None else job.as_job()

    def describe(self, job_id: int) -> str:
        """The model's view of one row, hidden deadline included (for failure messages)."""
        job = self._row(job_id)
        if job is None:
            return f"job {job_id} absent"
        if job.state is JobState.PROCESSING:
            return (
                f"job {job_id} processing, attempt {job.attempts} of {job.max_attempts}, "
                f"deadline {job.deadline}, now {self.now}"
            )
        if job.state is JobState.PENDING:
            return f"job {job_id} pending, run_at {job.run_at}, now {self.now}"
        return f"job {job_id} dead ({job.last_error!r})"

    # -- producing -------------------------------------------------------------
    def _check_new_ids(self, ids: Sequence[int], *, after: int | None = None) -> None:
        """Ids are the engine's to choose, but each is new and larger than every id
        committed before it (and than ``after``), so enqueue order is id order.

        Only committed ids count: a rolled-back insert never existed, and an engine whose
        id sequence rolls back with the transaction (SQLite's AUTOINCREMENT) hands that id
        out again."""
        floors = [f for f in (self._max_committed_id, after) if f is not None]
        previous = max(floors) if floors else None
        for job_id in ids:
            if isinstance(job_id, bool) or not isinstance(job_id, int):
                raise ModelDisagreement(f"job id {job_id!r} is not an int")
            if previous is not None and job_id <= previous:
                raise ModelDisagreement(
                    f"job id {job_id} is not larger than every id before it ({previous}): "
                    "ids must increase in enqueue order and never be reused"
                )
            previous = job_id

    def _new_job(
        self,
        job_id: int,
        queue: str,
        payload: Any,
        queue_opts: QueueOpts,
        opts: EnqueueOpts,
    ) -> ModelJob:
        now = self.now
        if opts.delay is not None:  # delay wins over run_at
            run_at = now + _stamp(opts.delay)
        elif opts.run_at is not None:
            run_at = _stamp(opts.run_at)
        else:
            run_at = now
        retention = queue_opts.dead_letter_retention_s
        return ModelJob(
            id=job_id,
            queue=queue,
            state=JobState.PENDING,
            payload=json_round_trip(payload),
            priority=opts.priority,
            attempts=0,
            max_attempts=(
                opts.max_attempts if opts.max_attempts is not None else queue_opts.max_attempts
            ),
            created_at=now,
            run_at=run_at,
            claimed_at=None,
            expires_at=None if opts.expires is None else now + _stamp(opts.expires),
            worker_id=None,
            visibility_timeout_s=_stamp(queue_opts.visibility_timeout_s),
            backoff_base_s=_stamp(queue_opts.backoff_base_s),
            dead_letter_retention_s=None if retention is None else _stamp(retention),
        )

    def _commit_jobs(self, jobs: Iterable[ModelJob]) -> None:
        for job in jobs:
            self._live[job.id] = job
            self._seen_ids.add(job.id)
            if self._max_committed_id is None or job.id > self._max_committed_id:
                self._max_committed_id = job.id

    def enqueue_many(
        self,
        queue: str,
        payloads: Sequence[Any],
        queue_opts: QueueOpts,
        opts: EnqueueOpts | None,
        ids: Sequence[int],
    ) -> None:
        """Record an enqueue the engine reported as ``ids`` (one per payload, in order)."""
        if len(ids) != len(payloads):
            raise ModelDisagreement(
                f"{len(payloads)} payloads enqueued but {len(ids)} ids returned"
            )
        self._check_new_ids(ids)
        resolved = opts or EnqueueOpts()
        self._commit_jobs(
            self._new_job(i, queue, p, queue_opts, resolved)
            for i, p in zip(ids, payloads, strict=True)
        )

    def enqueue(
        self, queue: str, payload: Any, queue_opts: QueueOpts, opts: EnqueueOpts | None, job_id: int
    ) -> None:
        self.enqueue_many(queue, [payload], queue_opts, opts, [job_id])

    # -- transactions ------------------------------------------------------------
    def begin(self) -> ModelTransaction:
        return ModelTransaction(self)

    def commit(self, tx: ModelTransaction) -> None:
        tx.finished = True
        self._commit_jobs(tx.staged.values())

    def rollback(self, tx: ModelTransaction) -> None:
        """Nothing staged survives; the ids are remembered so reads of them see nothing."""
        tx.finished = True
        self._seen_ids.update(tx.staged)

    # -- claiming ----------------------------------------------------------------
    def _bury(self, job: ModelJob, error: str, now: int) -> None:
        # Dead rows keep worker_id and claimed_at: they say who held the job last.
        del self._live[job.id]
        job.state = JobState.DEAD
        job.last_error = error
        job.died_at = now
        job.deadline = None
        self._dead[job.id] = job

    def _bury_exhausted(self, queue: str, now: int) -> int:
        doomed = [
            j for j in self._live.values() if j.queue == queue and j.lapsed(now) and j.exhausted()
        ]
        for job in doomed:
            self._bury(job, ERROR_EXHAUSTED, now)
        return len(doomed)

    def claim(self, queue: str, worker_id: str, limit: int = 1) -> list[Claim]:
        """The claims a ``claim_batch(worker_id, limit)`` must hand out, in order."""
        self._check_settled()
        now = self.now
        # A lapsed row whose budget is spent is never handed out again (§2).
        self._bury_exhausted(queue, now)
        ready = sorted(
            (j for j in self._live.values() if j.queue == queue and j.claimable(now)),
            key=ModelJob.claim_order,
        )
        claims = []
        for job in ready[:limit]:
            job.state = JobState.PROCESSING
            job.attempts += 1
            job.claimed_at = now
            job.worker_id = worker_id
            job.deadline = now + job.visibility_timeout_s
            claims.append(Claim(job.id, job.attempts, job.as_job()))
        return claims

    # -- handle ops ----------------------------------------------------------------
    def _valid(self, claim: Claim, now: int) -> ModelJob | None:
        """The row, if ``claim`` is still live: processing under this very attempt and
        before its deadline (ADR-010 §2)."""
        job = self._live.get(claim.job_id)
        if (
            job is None
            or job.state is not JobState.PROCESSING
            or job.attempts != claim.attempt
            or job.deadline is None
            or job.deadline <= now
        ):
            return None
        return job

    def ack(self, claim: Claim) -> bool:
        self._check_settled()
        job = self._valid(claim, self.now)
        if job is None:
            return False
        del self._live[job.id]
        return True

    def heartbeat(self, claim: Claim, extend: int | float | timedelta) -> bool:
        """Absolute renewal: the deadline becomes ``now + extend``, never additive."""
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return False
        job.deadline = now + whole_seconds(extend)
        return True

    def fail(self, claim: Claim, error: str) -> bool:
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return False
        self._bury(job, error, now)
        return True

    def retry(
        self, claim: Claim, error: str, delay: int | float | timedelta | None = None
    ) -> RetryOutcome:
        """Apply a retry; when it reschedules, the engine's ``run_at`` must be passed to
        ``settle_retry`` before the model is used again (the jitter is the engine's)."""
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return RetryOutcome(accepted=False)
        if job.exhausted():
            self._bury(job, ERROR_EXHAUSTED, now)
            return RetryOutcome(accepted=True, dead=True)
        if delay is not None:
            low = high = whole_seconds(delay)
        else:
            low, high = retry_delay_range(job.backoff_base_s, job.attempts)
        job.state = JobState.PENDING
        job.worker_id = None
        job.claimed_at = None
        job.deadline = None
        job.run_at = now + low
        bounds = (now + low, now + high)
        if low != high:
            self._unsettled[job.id] = bounds
        return RetryOutcome(accepted=True, run_at_bounds=bounds)

    def settle_retry(self, job_id: int, run_at: int) -> None:
        """Adopt the engine's jittered ``run_at`` once it is checked against the curve."""
        bounds = self._unsettled.pop(job_id, None)
        if bounds is None:
            return
        low, high = bounds
        if not low <= run_at <= high:
            raise ModelDisagreement(
                f"job {job_id} was retried to run_at={run_at}, outside the backoff range "
                f"[{low}, {high}]"
            )
        self._live[job_id].run_at = run_at

    def _check_settled(self) -> None:
        if self._unsettled:
            raise RuntimeError(
                f"retries of jobs {sorted(self._unsettled)} await settle_retry(job_id, run_at)"
            )

    # -- queue-level ops ---------------------------------------------------------------
    def ack_batch(self, queue: str, job_ids: Sequence[int], worker_id: str) -> int:
        """Acks the distinct ids of ``queue`` processing under ``worker_id``, unexpired."""
        self._check_settled()
        now = self.now
        acked = 0
        for job_id in dict.fromkeys(job_ids):
            job = self._live.get(job_id)
            if (
                job is not None
                and job.queue == queue
                and job.state is JobState.PROCESSING
                and job.worker_id == worker_id
                and job.deadline is not None
                and job.deadline > now
            ):
                del self._live[job_id]
                acked += 1
        return acked

    def cancel(self, queue: str, job_id: int) -> bool:
        """Deletes a pending or processing row of ``queue`` whoever holds it; dead stays."""
        self._check_settled()
        job = self._live.get(job_id)
        if job is None or job.queue != queue:
            return False
        del self._live[job_id]
        return True

    def sweep_expired(self, queue: str) -> SweepResult:
        """Expired rows first (so an expired exhausted row records ``"expired"``), then
        lapsed exhausted rows, then dead rows past their stamped retention."""
        self._check_settled()
        now = self.now
        expired = [j for j in self._live.values() if j.queue == queue and j.expired(now)]
        for job in expired:
            self._bury(job, ERROR_EXPIRED, now)
        exhausted = self._bury_exhausted(queue, now)
        purged = [
            j
            for j in self._dead.values()
            if j.queue == queue
            and j.dead_letter_retention_s is not None
            and j.died_at is not None
            and j.died_at + j.dead_letter_retention_s < now
        ]
        for job in purged:
            del self._dead[job.id]
        return SweepResult(expired=len(expired), exhausted=exhausted, purged=len(purged))

    # -- locks ---------------------------------------------------------------------------
    def _live_lock(self, name: str, now: int) -> ModelLock | None:
        lock = self._locks.get(name)
        return lock if lock is not None and lock.expires_at > now else None

    def lock_acquire(self, name: str, owner: str, ttl: int | float | timedelta) -> bool:
        """Free, lapsed or already ``owner``'s: taken (or renewed) until ``now + ttl``."""
        now = self.now
        held = self._live_lock(name, now)
        if held is not None and held.owner != owner:
            return False
        self._locks[name] = ModelLock(owner, now + whole_seconds(ttl))
        return True

    def lock_renew(self, name: str, owner: str, ttl: int | float | timedelta) -> bool:
        """Only a live lock of ``owner``'s renews; a lapsed one is lost silently."""
        now = self.now
        held = self._live_lock(name, now)
        if held is None or held.owner != owner:
            return False
        held.expires_at = now + whole_seconds(ttl)
        return True

    def lock_release(self, name: str, owner: str) -> bool:
        held = self._live_lock(name, self.now)
        if held is None or held.owner != owner:
            return False
        del self._locks[name]
        return True

    def lock_holder(self, name: str) -> LockInfo | None:
        held = self._live_lock(name, self.now)
        return None if held is None else LockInfo(held.owner, held.expires_at)


def job_differences(actual: Job | None, expected: Job | None) -> list[str]:
    """Human-readable field differences between an engine's job and the model's."""
    if actual is None or expected is None:
        return [] if actual == expected else [f"engine has {actual!r}, model has {expected!r}"]
    return [
        f"{name}: engine {getattr(actual, name)!r}, model {getattr(expected, name)!r}"
        for name in Job.__dataclass_fields__
        if getattr(actual, name) != getattr(expected, name)
    ]


__all__ = [
    "ERROR_EXHAUSTED",
    "ERROR_EXPIRED",
    "Claim",
    "ModelDisagreement",
    "ModelJob",
    "ModelTransaction",
    "ReferenceModel",
    "RetryOutcome",
    "job_differences",
    "json_round_trip",
    "whole_seconds",
]
