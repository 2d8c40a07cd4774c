"""The engine's "tables": plain dicts of immutable rows.

Every value stored here is immutable (frozen dataclasses, tuples, ints), so a
shallow copy of each dict is a complete snapshot. That is what makes the
transactions in ``database.py`` simple: a write transaction works on
``Tables.copy()`` and commits by swapping the copy in; a rollback just drops
it. A row is never changed in place; the driver puts a ``replace``-d row back.

The layout mirrors what a SQL engine would create: a live job table, a
separate dead-letter table (same ids), locks, schedules, stream events and
consumer offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alkstore.options import JOB_STAMP_FIELDS, JobStamps, Limits
from alkstore.rows import JOB_COLUMNS, ScheduleRecord, job_from_row
from alkstore.values import Job, JobState, LockInfo, WorkerInfo


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job; live rows sit in ``Tables.jobs``, dead ones in ``Tables.dead``, completed
    ones (the results profile) in ``Tables.completed``.

    ``deadline`` is storage-only (it is not part of ``Job``): the instant a
    processing row's claim lapses. So are the unique profile's hold: ``unique_hold``
    is the key while the row holds it (a dead row only if ``hold_dead``),
    ``hold_until`` when the hold ends (``None``: never, while it lives).
    """

    id: int
    queue: str
    state: JobState
    payload: str  # JSON text exactly as the core encoded it
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
    errors: str | None = None  # the history as JSON text, as a SQL engine stores it
    redriven_from: int | None = None
    snoozes: int = 0
    unique_key: str | None = None
    unique_hold: str | None = None
    hold_until: int | None = None
    hold_dead: bool = False
    completed_retention_s: int | None = None
    completed_at: int | None = None
    result: str | None = None  # JSON text exactly as the core encoded it
    limit_key: str | None = None  # the key_limits profile's key (None: the shared key)
    metadata: str | None = None  # the metadata profile's map as JSON text (None: none)

    def holds(self, queue: str, key: str, now: int) -> bool:
        """Whether this row holds ``key`` of ``queue`` at ``now`` (unique profile)."""
        return (
            self.unique_hold == key
            and self.queue == queue
            and (self.hold_until is None or self.hold_until > now)
        )

    @classmethod
    def pending(cls, job_id: int, stamps: JobStamps, payload: str) -> JobRow:
        # Every stamp by name: a new stamp is a new field here, and nothing else.
        stamped: dict[str, Any] = {name: getattr(stamps, name) for name in JOB_STAMP_FIELDS}
        return cls(
            id=job_id,
            state=JobState.PENDING,
            payload=payload,
            attempts=0,
            claimed_at=None,
            worker_id=None,
            **stamped,
        )

    def to_job(self) -> Job:
        # The same path a SQL engine takes: a row in JOB_COLUMNS order.
        return job_from_row(tuple(getattr(self, column) for column in JOB_COLUMNS))


@dataclass(frozen=True, slots=True)
class EventRow:
    offset: int
    payload: str
    created_at: int


@dataclass(slots=True)
class Tables:
    jobs: dict[int, JobRow] = field(default_factory=dict)
    dead: dict[int, JobRow] = field(default_factory=dict)
    completed: dict[int, JobRow] = field(default_factory=dict)
    # Jobs waiting for others (the dependencies profile), apart from the live table so
    # no claim reads them; what each still waits for, and who waits for each job.
    waiting: dict[int, JobRow] = field(default_factory=dict)
    waits_for: dict[int, frozenset[int]] = field(default_factory=dict)
    dependents: dict[int, frozenset[int]] = field(default_factory=dict)
    # The waiting jobs that wait for their dependencies to finish whatever the outcome.
    fan_ins: frozenset[int] = frozenset()
    # The edges a job had when it died because one of its dependencies will never
    # complete (§18.4's kept edges), and who keeps an edge to each job: a redrive of
    # that job brings the dependents back.
    dead_waits: dict[int, frozenset[int]] = field(default_factory=dict)
    dead_waited_by: dict[int, frozenset[int]] = field(default_factory=dict)
    locks: dict[str, LockInfo] = field(default_factory=dict)
    schedules: dict[str, ScheduleRecord] = field(default_factory=dict)
    # Each stream's events in offset order; a tuple so the snapshot stays shallow.
    streams: dict[str, tuple[EventRow, ...]] = field(default_factory=dict)
    # (stream, consumer) -> committed offset
    offsets: dict[tuple[str, str], int] = field(default_factory=dict)
    # Paused queues (the ops profile); a frozenset so the snapshot stays shallow.
    paused: frozenset[str] = frozenset()
    # Queue limits (the limits profile); replaced whole on a change, so the snapshot
    # stays shallow.
    limits: dict[str, Limits] = field(default_factory=dict)
    # A rate-limited queue's claim starts in its window, oldest first (one per row).
    starts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # A queue with a per-key limit (the key_limits profile): the key its last claim
    # served, where the next claim's turn starts ("" for the jobs without a key).
    key_cursors: dict[str, str] = field(default_factory=dict)
    # A queue with a per-key rate: each key's claim starts in the window, oldest first.
    key_starts: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)
    # The worker registry (the workers profile): each row as workers() lists it.
    workers: dict[str, WorkerInfo] = field(default_factory=dict)
    # Jobs finished per (queue, minute), as heartbeats report them (workers profile).
    throughput: dict[tuple[str, int], int] = field(default_factory=dict)

    def copy(self) -> Tables:
        """A snapshot: O(rows) per write transaction, the price of simplicity here
        (a production engine would keep an undo log or a persistent map instead)."""
        return Tables(
            jobs=dict(self.jobs),
            dead=dict(self.dead),
            completed=dict(self.completed),
            waiting=dict(self.waiting),
            waits_for=dict(self.waits_for),
            dependents=dict(self.dependents),
            fan_ins=self.fan_ins,
            dead_waits=dict(self.dead_waits),
            dead_waited_by=dict(self.dead_waited_by),
            locks=dict(self.locks),
            schedules=dict(self.schedules),
            streams=dict(self.streams),
            offsets=dict(self.offsets),
            paused=self.paused,
            limits=self.limits,
            starts=dict(self.starts),
            key_cursors=dict(self.key_cursors),
            key_starts=dict(self.key_starts),
            workers=dict(self.workers),
            throughput=dict(self.throughput),
        )
