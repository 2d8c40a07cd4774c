"""Frozen values returned by engines (contract §2, §5, §6, §7, §11).

Every timestamp is an ``int`` of whole UTC epoch seconds from the store's clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .options import ScheduleOpts


class JobState(enum.StrEnum):
    """Where a job is in its life: ``pending -> processing -> dead`` (contract §2), or
    ``processing -> completed`` when its queue keeps acked jobs (contract 1.2 §17),
    and ``waiting -> pending`` for a job enqueued after others (contract 1.2 §18).

    An acked job without that retention, and a cancelled job, have no state: the row
    is gone.
    """

    PENDING = "pending"
    PROCESSING = "processing"
    DEAD = "dead"
    COMPLETED = "completed"
    WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of one job row; ``last_error``/``died_at`` are set on dead rows only.

    Returned by ``get_job`` and carried by every ``JobHandle`` (contract §2).
    The stamps (``max_attempts``, ``visibility_timeout_s``, ``backoff_base_s``,
    ``dead_letter_retention_s``) were resolved at enqueue; every later
    operation reads them rather than the queue's current options.

    Attributes:
        id: unique for the store's lifetime, never reused.
        queue: the queue's name.
        state: ``JobState.PENDING``, ``PROCESSING`` or ``DEAD``.
        payload: the decoded payload (``alkstore.payload.UndecodablePayload`` if
            its stored text cannot be decoded).
        priority: higher is claimed first.
        attempts: how many times the job has been claimed.
        max_attempts: the claim budget; a lapsed job at it goes dead.
        created_at: when it was enqueued.
        run_at: when it is (or was) due.
        claimed_at: when the current claim began (on a dead job, the last one, if any);
            ``None`` while pending.
        expires_at: after this it is never claimed and the sweep moves it to dead;
            ``None`` = never.
        worker_id: who holds the current claim (on a dead job, the last one, if any);
            ``None`` while pending.
        visibility_timeout_s: how long a claim lasts without a heartbeat.
        backoff_base_s: the base of the retry curve.
        dead_letter_retention_s: how long the job stays once dead; ``None`` = forever.
        last_error: why it died (``"expired"``, ``"max attempts exceeded"`` or the
            caller's ``fail`` error); ``None`` unless dead.
        died_at: when it moved to dead; ``None`` unless dead.
        errors: why its attempts failed (contract §11, ops profile): one ``JobError``
            per ``retry(error)``/``fail(error)``, newest last, the latest 25 kept;
            ``()`` on an engine without the ops profile.
        redriven_from: the id of the dead job this one was redriven from
            (``Queue.redrive``), else ``None``.
        snoozes: how many times it was snoozed (``JobHandle.snooze``, contract 1.2's
            snooze profile); ``0`` on an engine without the profile and after a redrive.
        unique_key: the key it was enqueued with (``EnqueueOpts(unique=...)``, contract
            1.2's unique profile; a payload's own key when ``Unique.key`` was ``None``),
            for its whole life, even once it no longer holds it; ``None`` otherwise.
        completed_retention_s: how long the job is kept as ``completed`` once acked
            (``QueueOpts.completed_retention_s``, contract 1.2's results profile);
            ``None``: an ack deletes it.
        completed_at: when it was acked; ``None`` unless completed.
        result: what its handler returned (``ack(result=...)``), decoded; ``None``
            unless completed with one (``alkstore.payload.UndecodablePayload`` if its
            stored text cannot be decoded).
        limit_key: the key a per-key limit counts it under (``EnqueueOpts.limit_key``,
            contract 1.2's key_limits profile), for its whole life; ``None`` without one.
        metadata: the small map of strings it was enqueued with
            (``EnqueueOpts.metadata``, contract 1.2's metadata profile), for its whole
            life, redriven jobs' too; ``None`` without any.
    """

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
    errors: tuple[JobError, ...] = ()
    redriven_from: int | None = None
    snoozes: int = 0
    unique_key: str | None = None
    completed_retention_s: int | None = None
    completed_at: int | None = None
    result: Any = None
    limit_key: str | None = None
    metadata: dict[str, str] | None = None


class Enqueued(int):
    """What an enqueue returns: the job's id, an ``int``, that also says whether the
    enqueue made the job (contract §2, §15).

    It is an ``int`` in every way code reading an id relies on (``==``, hashing, JSON,
    ``%d``, database parameters, pickling). ``duplicate`` is ``True`` when a unique
    enqueue found its key held (``EnqueueOpts(unique=...)``): nothing was written and
    the id is the holder's. ``False`` is the class's own value, so a new job's id
    stores nothing of its own; only a duplicate's carries the flag. One class for
    both, so a list of results holds one type (psycopg refuses to send a list of
    mixed types whose integers need different sizes).

    Attributes:
        duplicate: ``False``: a new job; ``True``: the job that already held the key.
    """

    duplicate: bool = False

    @property
    def id(self) -> int:
        """The job's id as a plain ``int``."""
        return int(self)

    @staticmethod
    def of(job_id: int, duplicate: bool) -> Enqueued:
        """``job_id`` as a new job's id, or as a duplicate's (``duplicate`` set)."""
        result = Enqueued(job_id)
        if duplicate:
            object.__setattr__(result, "duplicate", True)
        return result

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Enqueued is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Enqueued is immutable: cannot delete {name!r}")


@dataclass(frozen=True, slots=True)
class JobError:
    """One failed attempt of a job, as its handler reported it (contract §11).

    Attributes:
        attempt: the attempt (claim) that failed, 1-based.
        at: when the failure was reported.
        error: the caller's error text, its first 65,536 characters.
    """

    attempt: int
    at: int
    error: str


@dataclass(frozen=True, slots=True)
class QueueStats:
    """What a queue holds right now (contract §11, ops profile).

    Attributes:
        queue: the queue's name (reserved ones included: outboxes' backing queues).
        ready: pending jobs due now (``run_at <= now``).
        scheduled: pending jobs due later.
        processing: claimed jobs whose deadline has not passed.
        lapsed: claimed jobs past their deadline: the next claim takes them back.
        dead: dead jobs kept.
        oldest_ready_age_s: ``now`` minus the oldest ready job's ``run_at``; ``None``
            when nothing is ready.
        paused: whether the queue is paused (``Queue.pause``).
        concurrency_limit: the queue's concurrency limit (contract 1.2 §16, the
            limits profile: ``Queue.set_limits``), ``None`` when it has none.
        rate_limit: how many claims its rate limit lets start per ``rate_per_s``
            seconds (§16), ``None`` when it has none.
        rate_per_s: the window of its rate limit, in seconds, or ``None``.
        completed: completed jobs kept (contract 1.2's results profile; ``0`` on an
            engine without it).
        concurrency_per_key: its limit per limit key (§16.9, the key_limits profile),
            ``None`` when it has none.
        rate_per_key: how many claims of each limit key its per-key rate lets start per
            ``rate_per_s`` seconds (§16.11), ``None`` when it has none.
        waiting: jobs waiting for their dependencies (contract 1.2 §18, the
            dependencies profile; ``0`` on an engine without it).
    """

    queue: str
    ready: int
    scheduled: int
    processing: int
    lapsed: int
    dead: int
    oldest_ready_age_s: int | None
    paused: bool
    concurrency_limit: int | None = None
    rate_limit: int | None = None
    rate_per_s: int | None = None
    completed: int = 0
    concurrency_per_key: int | None = None
    rate_per_key: int | None = None
    waiting: int = 0


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What one ``sweep_expired`` did (contract §2).

    Attributes:
        expired: jobs moved to dead because they passed ``expires_at``.
        exhausted: lapsed jobs moved to dead because their attempts were spent.
        purged: dead jobs deleted because their retention had passed.
        purged_completed: completed jobs deleted because their retention had passed
            (contract 1.2's results profile; ``0`` on an engine without it).
    """

    expired: int
    exhausted: int
    purged: int
    purged_completed: int = 0


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one ``tick_schedules`` did (contract §5).

    Attributes:
        fired: boundaries fired (one job enqueued each).
        skipped: missed boundaries skipped forward past the catch-up cap.
    """

    fired: int
    skipped: int


@dataclass(frozen=True, slots=True)
class LockInfo:
    """The live holder of a lock (contract §6).

    Attributes:
        owner: who holds it.
        expires_at: when the lease lapses unless renewed.
    """

    owner: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a stream (contract §7).

    Attributes:
        offset: its position, strictly increasing per stream from 1.
        payload: the decoded payload.
        created_at: when it was appended.
    """

    offset: int
    payload: Any
    created_at: int


@dataclass(frozen=True, slots=True)
class Schedule:
    """A registered schedule (contract §5).

    Attributes:
        name: the schedule's name.
        spec: its spec as given, e.g. ``"@every 300s"`` or ``"0 9 * * MON-FRI"``.
        queue: the queue each fire enqueues into.
        payload: what each fire enqueues (decoded).
        opts: the ``ScheduleOpts`` it was registered with: each fired job's stamps,
            the zone its spec is read in and its catch-up policy.
        interval_s: an ``@every`` spec's interval in seconds; ``None`` for a cron spec,
            whose boundaries are not evenly spaced.
        next_fire_at: the next boundary to fire (epoch seconds).
        declared_until: when a declared schedule's lease lapses (epoch seconds,
            contract 1.2 §5.11): a worker that declares it renews it; ``None`` for a
            schedule made by ``store.schedule``, which never lapses.
    """

    name: str
    spec: str
    queue: str
    payload: Any
    opts: ScheduleOpts
    interval_s: int | None
    next_fire_at: int
    declared_until: int | None = None

    @property
    def timezone(self) -> str:
        """The IANA zone the spec is read in (``opts.timezone``)."""
        return self.opts.timezone

    @property
    def catch_up(self) -> str:
        """The catch-up policy: ``"all"``, ``"latest"`` or ``"none"`` (``opts.catch_up``)."""
        return self.opts.catch_up


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process in the registry (contract 1.2 §19, the workers profile).

    What ``store.register_worker`` takes (``last_seen`` and ``lease_until`` left
    ``None``: the store sets them) and what ``store.workers()`` lists. The jobs a
    worker holds are its queues' processing jobs whose ``worker_id`` is its ``id``.

    Attributes:
        id: the worker id its claims carry (``Job.worker_id``).
        host: the host it runs on.
        pid: its process id on that host.
        queues: the queues it claims from, in its own order.
        started_at: when it started (epoch seconds).
        last_seen: its last registration or heartbeat (epoch seconds).
        lease_until: when it drops out of the listing unless it heartbeats again
            (``last_seen + WORKER_LEASE_S``).
    """

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    started_at: int
    last_seen: int | None = None
    lease_until: int | None = None


@dataclass(frozen=True, slots=True)
class JobDependencies:
    """Where a job stands in the dependency graph now (contract 1.2 §18.7).

    Attributes:
        job_id: the job.
        waits_for: the jobs it still waits for (``after`` or ``after_finished``), by
            id; the ones that finished already are gone from it, and it is empty
            unless the job is waiting.
        waited_by: the waiting jobs that still wait for it, by id (empty once it
            finished: they were released, counted it or died with it).
    """

    job_id: int
    waits_for: tuple[int, ...] = ()
    waited_by: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueThroughput:
    """How many jobs of a queue workers finished over the last hour (contract 1.2 §19.6).

    Attributes:
        queue: the queue.
        total: the sum of ``per_minute``.
        per_minute: one count per minute of the last hour, oldest first, the last
            one the current minute (``THROUGHPUT_WINDOW_S // THROUGHPUT_BUCKET_S``
            of them), as the workers' heartbeats reported them.
    """

    queue: str
    total: int
    per_minute: tuple[int, ...]
