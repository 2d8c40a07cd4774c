"""A pure-Python reference model of the contract's queues, outbox, transactional
enqueue, scheduler, locks, streams and operations (contract §2-§7 and §11; pub/sub
is not modelled).

The model is written from the contract text, not from ``alkstore.core``: the kit's
stateful machine drives an engine and this model side by side and fails on the
first disagreement, so a bug shared by the core and the model would go unseen.
It only borrows the contract's own pure rules: option normalization (``QueueOpts``,
``EnqueueOpts`` and ``ScheduleOpts`` validate and round on construction), the
backoff range and the constants.

What the model cannot predict it checks and adopts instead:

* job ids are the engine's to choose; the model checks they are new and larger
  than every id committed before (contract §2: unique, never reused), then uses them;
* a retry without an explicit delay draws its jitter from a range; the model
  knows the range, the engine's ``run_at`` is checked against it and then adopted
  (``settle_retry``);
* a scheduler tick creates jobs without returning their ids: the model knows what
  each fire must have enqueued, and the jobs the engine shows are matched against
  that and adopted (``adopt_fired``);
* a rolled-back stream append may or may not give its offset back: the next append
  may take either (``ModelStream.next_offsets``), and nothing else;
* a redrive's new ids are the engine's too: checked like an enqueue's, then adopted.

The ops profile (contract §11: error history, stats, job pages, redrive, purge,
pause) is modelled when the model is built with ``ops=True``; without it a job's
``errors`` stay ``()`` and ``redriven_from`` ``None``, as on an engine without it.

Time is whole seconds: every operation reads ``floor(clock.now())`` once, like a
store does. Disagreements raise ``ModelDisagreement`` (an ``AssertionError``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from alkstore import (
    CATCH_UP_CAP,
    DEFAULT_QUEUE_OPTS,
    SCHEDULER_LEASE_S,
    SCHEDULER_LOCK,
    EnqueueOpts,
    Job,
    JobError,
    JobState,
    LockInfo,
    QueueOpts,
    QueueStats,
    Schedule,
    ScheduleOpts,
    StreamEvent,
    SweepResult,
    TickResult,
)
from alkstore.backoff import retry_delay_range
from alkstore.clock import Clock
from alkstore.constants import MAX_ERROR_HISTORY, MAX_ERROR_LENGTH

ERROR_EXHAUSTED = "max attempts exceeded"
"""``last_error`` of a job whose attempt budget ran out (decision 010 §4)."""

ERROR_EXPIRED = "expired"
"""``last_error`` of a job swept past its ``expires_at`` (decision 010 §4)."""


class ModelDisagreement(AssertionError):
    """The engine did something the contract does not allow."""


def whole_seconds(duration: int | float | timedelta) -> int:
    """A duration in whole seconds, rounded up (contract §0)."""
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


SPEC_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_EVERY = re.compile(r"@every ([0-9]+)([smhd])")


def spec_interval(spec: str) -> int:
    """The interval in seconds of a spec in the v1 grammar, ``@every <n><unit>`` (§5)."""
    match = _EVERY.fullmatch(spec)
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"not a v1 schedule spec: {spec!r}")
    return int(match.group(1)) * SPEC_UNIT_SECONDS[match.group(2)]


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
    errors: tuple[JobError, ...] = ()
    redriven_from: int | None = None

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
            errors=self.errors,
            redriven_from=self.redriven_from,
        )

    def record_error(self, now: int, error: str) -> None:
        """Contract §11: the failed attempt's error, cut to its first 65,536 characters,
        appended newest last; the latest 25 kept."""
        entry = JobError(self.attempts, now, error[:MAX_ERROR_LENGTH])
        self.errors = (*self.errors, entry)[-MAX_ERROR_HISTORY:]

    # The predicates of contract §2, at whole-second ``now``.
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
    the handle carries (contract §2: a later reclaim invalidates this claim)."""

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
class ModelSchedule:
    """One schedule row (contract §5)."""

    name: str
    spec: str
    queue: str
    payload: Any
    opts: ScheduleOpts
    interval_s: int
    next_fire_at: int

    def as_schedule(self) -> Schedule:
        return Schedule(
            name=self.name,
            spec=self.spec,
            queue=self.queue,
            payload=self.payload,
            opts=self.opts,
            interval_s=self.interval_s,
            next_fire_at=self.next_fire_at,
        )

    def fire_opts(self) -> EnqueueOpts:
        """What each fire stamps over the target queue's default opts."""
        return EnqueueOpts(
            priority=self.opts.priority,
            max_attempts=self.opts.max_attempts,
            expires=self.opts.expires,
        )


@dataclass
class ModelStream:
    """One stream's events, its offset counter and its consumers' offsets (§7)."""

    events: dict[int, StreamEvent] = field(default_factory=dict)
    committed_top: int = 0
    """The largest offset ever committed: trimming never lowers it (no reuse)."""
    issued_top: int = 0
    """The largest offset ever handed out, rolled-back appends included."""
    consumers: dict[str, int] = field(default_factory=dict)

    def next_offsets(self) -> frozenset[int]:
        """Where the next append may land. Offsets strictly increase from 1 and are
        never reused; an append that rolled back never existed, so its offset may be
        handed out again (an engine whose counter rolls back with the transaction)
        or skipped (one whose counter does not). Both agree until a rollback."""
        return frozenset({self.committed_top + 1, self.issued_top + 1})

    def hand_out(self, offset: int, allowed: frozenset[int], stream: str) -> None:
        if isinstance(offset, bool) or not isinstance(offset, int) or offset not in allowed:
            raise ModelDisagreement(
                f"stream {stream!r} appended at offset {offset!r}, expected one of "
                f"{sorted(allowed)} (last committed {self.committed_top}, last handed "
                f"out {self.issued_top}): offsets increase by one and are never reused"
            )
        self.issued_top = max(self.issued_top, offset)

    def commit_events(self, events: Iterable[StreamEvent]) -> None:
        for event in events:
            self.events[event.offset] = event
            self.committed_top = max(self.committed_top, event.offset)


@dataclass
class ModelTransaction:
    """Enqueues staged inside one transaction; they exist only if it commits (§3)."""

    model: ReferenceModel
    staged: dict[int, ModelJob] = field(default_factory=dict)
    staged_events: dict[str, list[StreamEvent]] = field(default_factory=dict)
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

    def stream_append(self, stream: str, payload: Any, offset: int) -> None:
        """``tx.stream_append``: the first append of a stream in the transaction lands
        where a plain append would; the next ones follow it one by one."""
        if self.finished:
            raise RuntimeError("the model transaction has already finished")
        staged = self.staged_events.setdefault(stream, [])
        model_stream = self.model._stream(stream)
        allowed = frozenset({staged[-1].offset + 1}) if staged else model_stream.next_offsets()
        model_stream.hand_out(offset, allowed, stream)
        staged.append(StreamEvent(offset, json_round_trip(payload), self.model.now))

    def get_job(self, queue: str, job_id: int) -> Job | None:
        """``tx.get_job_tx``: queue-filtered, and it sees the transaction's own rows."""
        job = self.staged.get(job_id) or self.model._row(job_id)
        if job is None or job.queue != queue:
            return None
        return job.as_job()


class ReferenceModel:
    """The contract's queues, outbox, transactional enqueue, scheduler, locks and
    streams, in memory."""

    def __init__(self, clock: Clock, *, ops: bool = False) -> None:
        self.clock = clock
        self.ops = ops
        """Whether the engine has the ops profile (contract §11)."""
        self._paused: set[str] = set()
        self._live: dict[int, ModelJob] = {}
        self._dead: dict[int, ModelJob] = {}
        self._locks: dict[str, ModelLock] = {}
        self._seen_ids: set[int] = set()
        self._max_committed_id: int | None = None
        self._unsettled: dict[int, tuple[int, int]] = {}
        self._schedules: dict[str, ModelSchedule] = {}
        self._unadopted: list[ModelJob] = []
        """Jobs the last tick fired, awaiting the ids the engine gave them."""
        self._streams: dict[str, ModelStream] = {}

    @property
    def now(self) -> int:
        """The store's "now": the clock floored to a whole second."""
        return math.floor(self.clock.now())

    @property
    def seen_ids(self) -> frozenset[int]:
        """Every id an enqueue ever returned (committed or rolled back) or a tick fired."""
        return frozenset(self._seen_ids)

    @property
    def max_committed_id(self) -> int | None:
        """The largest id committed so far: every later job's id is larger."""
        return self._max_committed_id

    # -- reads ---------------------------------------------------------------
    def _row(self, job_id: int) -> ModelJob | None:
        return self._live.get(job_id) or self._dead.get(job_id)

    def get_job(self, job_id: int) -> Job | None:
        """``Queue.get_job`` is id-global (contract §2)."""
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
        for stream, events in tx.staged_events.items():
            self._stream(stream).commit_events(events)

    def rollback(self, tx: ModelTransaction) -> None:
        """Nothing staged survives; the ids are remembered so reads of them see nothing,
        and the offsets handed out stay handed out (``ModelStream.next_offsets``)."""
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
        if queue in self._paused:  # §11: nothing is handed out; the sweep above still ran
            return []
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
        before its deadline (decision 010 §2)."""
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
        self._record_error(job, now, error)
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
        self._record_error(job, now, error)
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

    def _record_error(self, job: ModelJob, now: int, error: str) -> None:
        if self.ops:
            job.record_error(now, error)

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
        if self._unadopted:
            raise RuntimeError(
                f"{len(self._unadopted)} fired jobs await adopt_fired(jobs the engine shows)"
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

    # -- operations (contract §11) ---------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        now = self.now
        live = [j for j in self._live.values() if j.queue == queue]
        ready = [j.run_at for j in live if j.state is JobState.PENDING and j.run_at <= now]
        processing = [j for j in live if j.state is JobState.PROCESSING]
        lapsed = sum(1 for j in processing if j.lapsed(now))
        return QueueStats(
            queue=queue,
            ready=len(ready),
            scheduled=sum(1 for j in live if j.state is JobState.PENDING) - len(ready),
            processing=len(processing) - lapsed,
            lapsed=lapsed,
            dead=sum(1 for j in self._dead.values() if j.queue == queue),
            oldest_ready_age_s=now - min(ready) if ready else None,
            paused=queue in self._paused,
        )

    def store_stats(self) -> list[QueueStats]:
        """Every queue with a live row, a dead row or a pause, by name."""
        rows = (*self._live.values(), *self._dead.values())
        names = {job.queue for job in rows} | self._paused
        return [self.stats(name) for name in sorted(names)]

    def jobs(self, queue: str, state: JobState | None, after_id: int, limit: int) -> list[Job]:
        rows = sorted((*self._live.values(), *self._dead.values()), key=lambda job: job.id)
        return [
            job.as_job()
            for job in rows
            if job.queue == queue and job.id > after_id and state in (None, job.state)
        ][:limit]

    def _to_redrive(self, queue: str, ids: Sequence[int] | None, limit: int) -> list[ModelJob]:
        dead = [job for job in self._dead.values() if job.queue == queue]
        if ids is None:
            return sorted(dead, key=lambda job: (job.died_at, job.id))[:limit]
        named = {job.id: job for job in dead}
        return [named[job_id] for job_id in dict.fromkeys(ids) if job_id in named]

    def redrive(
        self, queue: str, ids: Sequence[int] | None, limit: int, new_ids: Sequence[int]
    ) -> None:
        """Record a redrive the engine reported as ``new_ids`` (one per dead row it took,
        in order): each dead row goes, a new pending job with its payload and stamps
        comes, due now, its expiry as far from now as it was from its creation."""
        self._check_settled()
        chosen = self._to_redrive(queue, ids, limit)
        if len(new_ids) != len(chosen):
            raise ModelDisagreement(
                f"redrive of {ids!r} (limit {limit}) must redrive dead jobs "
                f"{[job.id for job in chosen]}, the engine returned {len(new_ids)} new ids"
            )
        self._check_new_ids(new_ids)
        now = self.now
        reborn = []
        for old, new_id in zip(chosen, new_ids, strict=True):
            del self._dead[old.id]
            lifetime = None if old.expires_at is None else old.expires_at - old.created_at
            reborn.append(
                replace(
                    old,
                    id=new_id,
                    state=JobState.PENDING,
                    attempts=0,
                    created_at=now,
                    run_at=now,
                    claimed_at=None,
                    expires_at=None if lifetime is None else now + lifetime,
                    worker_id=None,
                    last_error=None,
                    died_at=None,
                    deadline=None,
                    errors=(),
                    redriven_from=old.id,
                )
            )
        self._commit_jobs(reborn)

    def purge_dead(self, queue: str, ids: Sequence[int] | None, older_than_s: int | None) -> int:
        self._check_settled()
        now = self.now
        doomed = [
            job
            for job in self._dead.values()
            if job.queue == queue
            and (ids is None or job.id in ids)
            and (older_than_s is None or (job.died_at or now) < now - older_than_s)
        ]
        for job in doomed:
            del self._dead[job.id]
        return len(doomed)

    def set_paused(self, queue: str, paused: bool) -> bool:
        """Pause or resume; whether that changed anything."""
        changed = (queue in self._paused) != paused
        if paused:
            self._paused.add(queue)
        else:
            self._paused.discard(queue)
        return changed

    def paused(self, queue: str) -> bool:
        return queue in self._paused

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

    # -- scheduler -----------------------------------------------------------------------
    def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None
    ) -> Schedule:
        """Upsert by name. A new schedule, or one whose spec (the string) changed, next
        fires one interval from now; re-registering the same spec keeps its boundary."""
        interval = spec_interval(spec)
        stored = self._schedules.get(name)
        if stored is not None and stored.spec == spec:
            next_fire_at = stored.next_fire_at
        else:
            next_fire_at = self.now + interval
        row = ModelSchedule(
            name=name,
            spec=spec,
            queue=queue,
            payload=json_round_trip(payload),
            opts=opts or ScheduleOpts(),
            interval_s=interval,
            next_fire_at=next_fire_at,
        )
        self._schedules[name] = row
        return row.as_schedule()

    def unschedule(self, name: str) -> bool:
        return self._schedules.pop(name, None) is not None

    def get_schedule(self, name: str) -> Schedule | None:
        row = self._schedules.get(name)
        return None if row is None else row.as_schedule()

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name (the contract names no order: compare sorted)."""
        return [self._schedules[name].as_schedule() for name in sorted(self._schedules)]

    def tick_schedules(self, worker_id: str) -> TickResult:
        """One tick as ``worker_id``: it takes (or renews) the leadership lock, and fires
        nothing while another owner's lock is live. Each due boundary fires one job; at
        most ``CATCH_UP_CAP`` per schedule, the rest are skipped to the first boundary
        strictly after now. The fired jobs' ids are the engine's: the jobs it created
        must be passed to ``adopt_fired`` before the model is used again."""
        self._check_settled()
        if not self.lock_acquire(SCHEDULER_LOCK, worker_id, SCHEDULER_LEASE_S):
            return TickResult(fired=0, skipped=0)
        now = self.now
        fired = skipped = 0
        for row in self._schedules.values():
            boundary = row.next_fire_at
            fires = 0
            while boundary <= now and fires < CATCH_UP_CAP:
                # A fire enqueues "now", whichever boundary it stands for.
                self._unadopted.append(
                    self._new_job(0, row.queue, row.payload, DEFAULT_QUEUE_OPTS, row.fire_opts())
                )
                fires += 1
                boundary += row.interval_s
            if boundary <= now:
                missed = (now - boundary) // row.interval_s + 1
                boundary += missed * row.interval_s
                skipped += missed
            fired += fires
            row.next_fire_at = boundary
        return TickResult(fired=fired, skipped=skipped)

    def adopt_fired(self, jobs: Sequence[Job]) -> None:
        """Take the jobs the engine created since the last tick (in id order) as that
        tick's fires: each must be one the model expects, with a new id, and every
        expected fire must be among them. Fires of one schedule are indistinguishable,
        and the contract orders neither the schedules of a tick nor their ids."""
        self._check_new_ids([job.id for job in jobs])
        expected = self._unadopted
        self._unadopted = []
        # Compared without ids: the engine's are unknown until matched.
        owed = [replace(fire.as_job(), id=0) for fire in expected]
        adopted = []
        for job in jobs:
            anonymous = replace(job, id=0)
            match = next((i for i, fire in enumerate(owed) if fire == anonymous), None)
            if match is None:
                differences = "; ".join(job_differences(anonymous, owed[0])) if owed else ""
                raise ModelDisagreement(
                    f"job {job.id} appeared but is no fire the last tick owed ("
                    + (
                        f"{len(owed)} unmatched, the first differs in {differences})"
                        if owed
                        else "it owed none)"
                    )
                )
            del owed[match]
            fire = expected.pop(match)
            fire.id = job.id
            adopted.append(fire)
        if expected:
            raise ModelDisagreement(
                f"the last tick owed {len(expected)} more fired jobs than the engine shows: "
                + ", ".join(f"{fire.queue!r} payload {fire.payload!r}" for fire in expected[:5])
            )
        self._commit_jobs(adopted)

    def describe_schedules(self) -> str:
        """The model's schedules and scheduler lock (for failure messages)."""
        lock = self._locks.get(SCHEDULER_LOCK)
        held = "free" if lock is None else f"held by {lock.owner!r} until {lock.expires_at}"
        rows = ", ".join(
            f"{row.name} {row.spec} next {row.next_fire_at}" for row in self._schedules.values()
        )
        return f"now {self.now}, lock {held}; {rows or 'no schedules'}"

    # -- streams -------------------------------------------------------------------------
    def _stream(self, name: str) -> ModelStream:
        return self._streams.setdefault(name, ModelStream())

    def stream_append(self, stream: str, payload: Any, offset: int) -> None:
        """Record an append the engine reported at ``offset`` (checked, then committed)."""
        model_stream = self._stream(stream)
        model_stream.hand_out(offset, model_stream.next_offsets(), stream)
        model_stream.commit_events([StreamEvent(offset, json_round_trip(payload), self.now)])

    def stream_read(self, stream: str, after: int = 0, limit: int = 100) -> list[StreamEvent]:
        """Events with an offset greater than ``after``, in offset order, at most ``limit``."""
        events = self._stream(stream).events
        return [events[offset] for offset in sorted(events) if offset > after][:limit]

    def stream_events(self, stream: str) -> list[StreamEvent]:
        """Every event of the stream, in offset order."""
        events = self._stream(stream).events
        return [events[offset] for offset in sorted(events)]

    def stream_commit(self, stream: str, consumer: str, offset: int) -> None:
        """A consumer's offset is the one it last committed: the contract names no
        monotonic rule, so committing a smaller offset rewinds it."""
        self._stream(stream).consumers[consumer] = offset

    def stream_offset(self, stream: str, consumer: str) -> int:
        return self._stream(stream).consumers.get(consumer, 0)

    def stream_trim(self, stream: str, offset: int) -> int:
        """Deletes the events with an offset smaller than ``offset``; returns how many."""
        events = self._stream(stream).events
        doomed = [o for o in events if o < offset]
        for o in doomed:
            del events[o]
        return len(doomed)

    def stream_top(self, stream: str) -> int:
        """The largest offset handed out so far (for drawing offsets near the events)."""
        return self._stream(stream).issued_top


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
    "ModelSchedule",
    "ModelStream",
    "ModelTransaction",
    "ReferenceModel",
    "RetryOutcome",
    "job_differences",
    "json_round_trip",
    "spec_interval",
    "whole_seconds",
]
