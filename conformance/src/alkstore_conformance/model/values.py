"""The model's rows (a job, a claim, a lock, a schedule, a stream) and the pure
rules every profile shares: whole seconds, the JSON round trip, disagreements."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from alkstore import EnqueueOpts, Job, JobError, JobState, Schedule, ScheduleOpts, StreamEvent
from alkstore.constants import MAX_ERROR_HISTORY, MAX_ERROR_LENGTH

ERROR_EXHAUSTED = "max attempts exceeded"
"""``last_error`` of a job whose attempt budget ran out (decision 010 §4)."""

ERROR_EXPIRED = "expired"
"""``last_error`` of a job swept past its ``expires_at`` (decision 010 §4)."""

ERROR_SNOOZES = "max snoozes exceeded"
"""``last_error`` of a job whose snooze found it at ``MAX_SNOOZES`` (contract §14)."""


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
    errors: tuple[JobError, ...] = ()
    redriven_from: int | None = None
    snoozes: int = 0
    unique_key: str | None = None
    holding: bool = False
    """Whether the job still holds ``unique_key`` (§15): set at enqueue, dropped by a
    move to dead unless ``hold_dead``; a passed ``hold_until`` ends it too (``holds``)."""
    hold_until: int | None = None
    hold_dead: bool = False
    completed_retention_s: int | None = None
    """The stamp of §17: an ack keeps the job completed for this long (``None``: deleted)."""
    completed_at: int | None = None
    result: Any = None
    limit_key: str | None = None
    """The key a per-key limit counts it under (§16.9; ``None``: the shared key)."""
    metadata: dict[str, str] | None = None
    """Its metadata (§20), for its whole life, a redriven copy's too; ``None``: none."""

    def holds(self, queue: str, key: str, now: int) -> bool:
        """Whether this job holds ``key`` of ``queue`` at ``now`` (§15.3)."""
        return (
            self.holding
            and self.queue == queue
            and self.unique_key == key
            and (self.hold_until is None or self.hold_until > now)
        )

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
            snoozes=self.snoozes,
            unique_key=self.unique_key,
            completed_retention_s=self.completed_retention_s,
            completed_at=self.completed_at,
            result=self.result,
            limit_key=self.limit_key,
            metadata=None if self.metadata is None else dict(self.metadata),
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
    interval_s: int | None
    next_fire_at: int
    declared_until: int | None = None
    """A declared schedule's lease (§5.11); ``None``: made by ``schedule``, never lapses."""

    def as_schedule(self) -> Schedule:
        return Schedule(
            name=self.name,
            spec=self.spec,
            queue=self.queue,
            payload=self.payload,
            opts=self.opts,
            interval_s=self.interval_s,
            next_fire_at=self.next_fire_at,
            declared_until=self.declared_until,
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


def job_differences(actual: Job | None, expected: Job | None) -> list[str]:
    """Human-readable field differences between an engine's job and the model's."""
    if actual is None or expected is None:
        return [] if actual == expected else [f"engine has {actual!r}, model has {expected!r}"]
    return [
        f"{name}: engine {getattr(actual, name)!r}, model {getattr(expected, name)!r}"
        for name in Job.__dataclass_fields__
        if getattr(actual, name) != getattr(expected, name)
    ]
