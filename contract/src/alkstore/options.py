"""Queue, enqueue and schedule options (contract §2, §5; ADR-010 §3a).

Options validate and normalize on construction, so a bad value is refused
with ``InvalidOptions`` naming the field before anything is written. Every
duration is stored as whole seconds (rounded up), every instant as whole
epoch seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from .constants import PRIORITY_RANGE
from .errors import InvalidOptions
from .timeconv import duration_seconds, instant_seconds


def _set(obj: object, field: str, value: object) -> None:
    object.__setattr__(obj, field, value)


def _check_max_attempts(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"{field} must be an int, got {type(value).__name__}")
    if not 1 <= value <= 2**31 - 1:
        raise InvalidOptions(f"{field} must be between 1 and {2**31 - 1}, got {value}")
    return value


def _check_priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"priority must be an int, got {type(value).__name__}")
    low, high = PRIORITY_RANGE
    if not low <= value <= high:
        raise InvalidOptions(f"priority must be within {low}..{high}, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class QueueOpts:
    """Per-queue defaults, stamped on each job at enqueue (never read live).

    Pass to ``store.queue(name, opts)``. Durations are ``int | float`` seconds or a
    ``timedelta``, rounded up and stored as ``int`` (contract §0, §2); after
    construction every field holds whole seconds.

    Attributes:
        visibility_timeout_s: how long a claim lasts without a heartbeat; at least 1 s.
            Default 300.
        max_attempts: how many claims a job gets (1..2**31-1); a job overrides it with
            ``EnqueueOpts.max_attempts``. Default 3.
        backoff_base_s: the base ``b`` of the retry curve (``alkstore.retry_delay``).
            Default 5.
        dead_letter_retention_s: how long a dead job is kept before ``sweep_expired``
            deletes it; ``None`` (the default) keeps it forever.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range; the message
            names the field.
    """

    visibility_timeout_s: int | float | timedelta = 300
    max_attempts: int = 3
    backoff_base_s: int | float | timedelta = 5
    dead_letter_retention_s: int | float | timedelta | None = None

    def __post_init__(self) -> None:
        _set(
            self,
            "visibility_timeout_s",
            duration_seconds(self.visibility_timeout_s, "visibility_timeout_s", minimum=1),
        )
        _set(self, "max_attempts", _check_max_attempts(self.max_attempts, "max_attempts"))
        _set(self, "backoff_base_s", duration_seconds(self.backoff_base_s, "backoff_base_s"))
        if self.dead_letter_retention_s is not None:
            _set(
                self,
                "dead_letter_retention_s",
                duration_seconds(self.dead_letter_retention_s, "dead_letter_retention_s"),
            )


@dataclass(frozen=True, slots=True)
class EnqueueOpts:
    """Per-job options. ``delay`` wins over ``run_at``; ``expires`` is relative to enqueue.

    Pass to ``enqueue``, ``enqueue_many`` or ``Transaction.enqueue`` (contract §2).
    With neither ``delay`` nor ``run_at`` the job is ready now.

    Attributes:
        delay: seconds (or a ``timedelta``) from now until the job is due.
        priority: a 32-bit int; higher is claimed first. Default 0.
        max_attempts: overrides the queue's ``max_attempts`` for this job.
        expires: seconds (at least 1) after enqueue at which the job expires:
            ``expires_at = now + expires``. An expired job is never claimed.
        run_at: the instant the job is due: epoch seconds or an aware ``datetime``
            (naive ones are refused), rounded up to a whole second.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range; the message
            names the field.
    """

    delay: int | float | timedelta | None = None
    priority: int = 0
    max_attempts: int | None = None
    expires: int | float | timedelta | None = None
    run_at: int | float | datetime | None = None

    def __post_init__(self) -> None:
        if self.delay is not None:
            _set(self, "delay", duration_seconds(self.delay, "delay"))
        _set(self, "priority", _check_priority(self.priority))
        if self.max_attempts is not None:
            _set(self, "max_attempts", _check_max_attempts(self.max_attempts, "max_attempts"))
        if self.expires is not None:
            _set(self, "expires", duration_seconds(self.expires, "expires", minimum=1))
        if self.run_at is not None:
            _set(self, "run_at", instant_seconds(self.run_at, "run_at"))


@dataclass(frozen=True, slots=True)
class ScheduleOpts:
    """What each fire of a schedule stamps over the target queue's default opts.

    Pass to ``store.schedule`` (contract §5). The fired jobs take the rest of
    their stamps from ``DEFAULT_QUEUE_OPTS``.

    Attributes:
        priority: each fired job's priority (a 32-bit int). Default 0.
        max_attempts: each fired job's claim budget; ``None`` = the queue default.
        expires: seconds (at least 1) after each fire at which its job expires;
            ``None`` = never.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range; the message
            names the field.
    """

    priority: int = 0
    max_attempts: int | None = None
    expires: int | float | timedelta | None = None

    def __post_init__(self) -> None:
        _set(self, "priority", _check_priority(self.priority))
        if self.max_attempts is not None:
            _set(self, "max_attempts", _check_max_attempts(self.max_attempts, "max_attempts"))
        if self.expires is not None:
            _set(self, "expires", duration_seconds(self.expires, "expires", minimum=1))

    def as_enqueue_opts(self) -> EnqueueOpts:
        """The ``EnqueueOpts`` one fire enqueues with: these fields, ready now."""
        return EnqueueOpts(
            priority=self.priority, max_attempts=self.max_attempts, expires=self.expires
        )


DEFAULT_QUEUE_OPTS = QueueOpts(300, 3, 5, None)
"""What ``store.queue(name)`` stamps without opts: 300 s, 3 attempts, base 5 s, kept forever."""
OUTBOX_QUEUE_OPTS = QueueOpts(60, 5, 5, None)
"""What every outbox stamps: 60 s, 5 attempts, base 5 s, kept forever (contract §4)."""
DEFAULT_ENQUEUE_OPTS = EnqueueOpts()


def check_type(value: object, cls: type, field: str) -> None:
    """Refuse a ``field`` argument that is not a ``cls`` with ``InvalidOptions``."""
    if not isinstance(value, cls):
        raise InvalidOptions(f"{field} must be a {cls.__name__}, got {type(value).__name__}")


@dataclass(slots=True)
class NewJob:
    """A job resolved for insertion: every stamp decided, payload encoded.

    Not frozen: one is built per enqueued job on the hot path, and a frozen
    dataclass's __init__ costs four times as much. Drivers only read it."""

    queue: str
    payload: str
    priority: int
    created_at: int
    run_at: int
    expires_at: int | None
    max_attempts: int
    visibility_timeout_s: int
    backoff_base_s: int
    dead_letter_retention_s: int | None

    def with_payload(self, payload: str) -> NewJob:
        """The same stamps over another payload (the jobs of one enqueue are alike)."""
        return NewJob(
            self.queue,
            payload,
            self.priority,
            self.created_at,
            self.run_at,
            self.expires_at,
            self.max_attempts,
            self.visibility_timeout_s,
            self.backoff_base_s,
            self.dead_letter_retention_s,
        )


NEW_JOB_STAMPS: tuple[str, ...] = (
    "queue",
    "priority",
    "created_at",
    "run_at",
    "expires_at",
    "max_attempts",
    "visibility_timeout_s",
    "backoff_base_s",
    "dead_letter_retention_s",
)
"""Every field of a ``NewJob`` but its payload, in the order engines bind them."""

new_job_stamps: Callable[[NewJob], tuple[Any, ...]] = attrgetter(*NEW_JOB_STAMPS)
"""The stamps of a ``NewJob``: jobs with equal stamps can share one multi-row insert."""


def _whole(value: object) -> int:
    # Options normalize every duration and instant to int in __post_init__.
    assert isinstance(value, int)
    return value


def resolve_new_job(
    queue: str, payload: str, queue_opts: QueueOpts, opts: EnqueueOpts, now: int
) -> NewJob:
    """Apply the resolution rules of contract §2 at enqueue time ``now``."""
    if opts.delay is not None:
        run_at = now + _whole(opts.delay)  # delay wins over run_at
    elif opts.run_at is not None:
        run_at = _whole(opts.run_at)
    else:
        run_at = now
    expires_at = None if opts.expires is None else now + _whole(opts.expires)
    return NewJob(
        queue=queue,
        payload=payload,
        priority=opts.priority,
        created_at=now,
        run_at=run_at,
        expires_at=expires_at,
        max_attempts=opts.max_attempts
        if opts.max_attempts is not None
        else queue_opts.max_attempts,
        visibility_timeout_s=_whole(queue_opts.visibility_timeout_s),
        backoff_base_s=_whole(queue_opts.backoff_base_s),
        dead_letter_retention_s=(
            None
            if queue_opts.dead_letter_retention_s is None
            else _whole(queue_opts.dead_letter_retention_s)
        ),
    )
