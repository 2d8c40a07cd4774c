"""Frozen values returned by engines (CONTRACT.md §2, §5, §6, §7)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .options import ScheduleOpts


class JobState(enum.StrEnum):
    PENDING = "pending"
    PROCESSING = "processing"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of one job row; ``last_error``/``died_at`` are set on dead rows only."""

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
    last_error: str | None
    died_at: int | None


@dataclass(frozen=True, slots=True)
class SweepResult:
    expired: int
    exhausted: int
    purged: int


@dataclass(frozen=True, slots=True)
class TickResult:
    fired: int
    skipped: int


@dataclass(frozen=True, slots=True)
class LockInfo:
    owner: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class StreamEvent:
    offset: int
    payload: Any
    created_at: int


@dataclass(frozen=True, slots=True)
class Schedule:
    name: str
    spec: str
    queue: str
    payload: Any
    opts: ScheduleOpts
    interval_s: int
    next_fire_at: int
