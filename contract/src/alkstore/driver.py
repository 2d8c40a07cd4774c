"""The engine seam: what an engine implements so the shared core can drive it.

The core (``alkstore.core``) owns every rule that is not storage-specific:
validation, option resolution, backoff, the claim path's order of steps,
handle validity, waiting and wakes. An engine implements ``Driver``: its
transaction handling plus one method per SQL statement (or per atomic move).
Methods never validate input; they receive resolved, whole-second values.

``C`` is the engine's handle on a connection inside an open transaction;
the core only passes it back to the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from typing import Any, Protocol, TypeVar

from .options import JobStamps as JobStamps
from .options import ScheduleOpts
from .payload import decode_payload, encode_payload
from .values import Job, JobError, JobState, LockInfo, QueueStats, Schedule, StreamEvent

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)
T = TypeVar("T")

JOB_COLUMNS: tuple[str, ...] = (
    "id",
    "queue",
    "state",
    "payload",
    "priority",
    "attempts",
    "max_attempts",
    "created_at",
    "run_at",
    "claimed_at",
    "expires_at",
    "worker_id",
    "visibility_timeout_s",
    "backoff_base_s",
    "dead_letter_retention_s",
    "last_error",
    "died_at",
    "errors",
    "redriven_from",
)
"""The column order ``job_from_row`` expects (the engine selects in this order).

``errors`` is the error history as JSON text: an array of ``[attempt, at, error]``
arrays, oldest first (``NULL`` or ``'[]'`` for none). An engine without the ops
profile may select only the first ``V1_JOB_COLUMNS`` columns."""

V1_JOB_COLUMNS = len(JOB_COLUMNS) - 2
"""Contract 1.0's job row: everything but ``errors`` and ``redriven_from``."""

CLAIMED_COLUMNS: tuple[str, ...] = (
    "id",
    "payload",
    "priority",
    "attempts",
    "max_attempts",
    "created_at",
    "run_at",
    "expires_at",
    "visibility_timeout_s",
    "backoff_base_s",
    "dead_letter_retention_s",
    "errors",
    "redriven_from",
)
"""The columns ``claimed_jobs`` reads from a claim's ``RETURNING``: a job row without
what the claim itself set (``queue``, ``state``, ``claimed_at``, ``worker_id``) and
what a live row never holds (``last_error``, ``died_at``). Fewer columns to send and
convert per claimed row; an engine may as well return ``JOB_COLUMNS`` and use
``job_from_row``."""

ERROR_EXHAUSTED = "max attempts exceeded"
ERROR_EXPIRED = "expired"
ERROR_UNDECODABLE = "payload cannot be decoded"
"""``last_error`` prefix of a job dead-lettered by a claim because its stored payload
cannot be decoded (``alkstore.payload.UndecodablePayload``)."""


_STATES = {state.value: state for state in JobState}

# job_from_row builds a Job positionally: its fields must be JOB_COLUMNS, in order.
# (claimed_jobs reads CLAIMED_COLUMNS, a subset of them.)
if tuple(f.name for f in fields(Job)) != JOB_COLUMNS:
    raise TypeError("Job's fields must be JOB_COLUMNS, in that order")


# Job is a frozen dataclass with slots: its __init__ sets each field through
# object.__setattr__, which costs more than the rest of building a claimed job.
# job_from_row instead unpacks the row and calls each slot's descriptor setter
# directly (held in the closure below, so each is a fast local lookup): the same
# object for about a third of the cost, once per claimed job. It skips nothing:
# Job has no __post_init__ (checked below), and the field order is JOB_COLUMNS.
if hasattr(Job, "__post_init__"):
    raise TypeError("job_from_row sets Job's slots directly: Job must have no __post_init__")

_NO_HISTORY = ((), None)  # the ops fields of a 1.0 row


def _job_builders() -> tuple[
    Callable[[Sequence[Any]], Job],
    Callable[[Iterable[Sequence[Any]], str, str, int], list[Job]],
]:
    (
        s_id,
        s_queue,
        s_state,
        s_payload,
        s_priority,
        s_attempts,
        s_max_attempts,
        s_created_at,
        s_run_at,
        s_claimed_at,
        s_expires_at,
        s_worker_id,
        s_visibility_timeout_s,
        s_backoff_base_s,
        s_dead_letter_retention_s,
        s_last_error,
        s_died_at,
        s_errors,
        s_redriven_from,
    ) = (getattr(Job, name).__set__ for name in JOB_COLUMNS)
    new = object.__new__
    states = _STATES
    decode = decode_payload
    history = decode_errors
    width = len(JOB_COLUMNS)

    def job_from_row(row: Sequence[Any]) -> Job:
        """Build a ``Job`` from a row in ``JOB_COLUMNS`` order (payload and errors as
        JSON text), or from a contract 1.0 row of the first ``V1_JOB_COLUMNS`` columns."""
        if len(row) != width:
            if len(row) != V1_JOB_COLUMNS:
                raise ValueError(f"a job row has {width} columns, got {len(row)}")
            row = (*row, *_NO_HISTORY)
        (
            id_,
            queue,
            state,
            payload,
            priority,
            attempts,
            max_attempts,
            created_at,
            run_at,
            claimed_at,
            expires_at,
            worker_id,
            visibility_timeout_s,
            backoff_base_s,
            dead_letter_retention_s,
            last_error,
            died_at,
            errors,
            redriven_from,
        ) = row
        job: Job = new(Job)
        s_id(job, id_)
        s_queue(job, queue)
        s_state(job, states[state])
        s_payload(job, decode(payload))
        s_priority(job, priority)
        s_attempts(job, attempts)
        s_max_attempts(job, max_attempts)
        s_created_at(job, created_at)
        s_run_at(job, run_at)
        s_claimed_at(job, claimed_at)
        s_expires_at(job, expires_at)
        s_worker_id(job, worker_id)
        s_visibility_timeout_s(job, visibility_timeout_s)
        s_backoff_base_s(job, backoff_base_s)
        s_dead_letter_retention_s(job, dead_letter_retention_s)
        s_last_error(job, last_error)
        s_died_at(job, died_at)
        s_errors(job, history(errors) if errors else ())
        s_redriven_from(job, redriven_from)
        return job

    processing = JobState.PROCESSING

    def claimed_jobs(
        rows: Iterable[Sequence[Any]], queue: str, worker_id: str, now: int
    ) -> list[Job]:
        """The ``Job`` of each row a claim of ``queue`` by ``worker_id`` at ``now``
        returned, the rows in ``CLAIMED_COLUMNS`` order (payload and errors as JSON
        text): processing, ``claimed_at = now``, no ``last_error`` or ``died_at``."""
        jobs: list[Job] = []
        append = jobs.append
        for (
            id_,
            payload,
            priority,
            attempts,
            max_attempts,
            created_at,
            run_at,
            expires_at,
            visibility_timeout_s,
            backoff_base_s,
            dead_letter_retention_s,
            errors,
            redriven_from,
        ) in rows:
            job: Job = new(Job)
            s_id(job, id_)
            s_queue(job, queue)
            s_state(job, processing)
            s_payload(job, decode(payload))
            s_priority(job, priority)
            s_attempts(job, attempts)
            s_max_attempts(job, max_attempts)
            s_created_at(job, created_at)
            s_run_at(job, run_at)
            s_claimed_at(job, now)
            s_expires_at(job, expires_at)
            s_worker_id(job, worker_id)
            s_visibility_timeout_s(job, visibility_timeout_s)
            s_backoff_base_s(job, backoff_base_s)
            s_dead_letter_retention_s(job, dead_letter_retention_s)
            s_last_error(job, None)
            s_died_at(job, None)
            s_errors(job, history(errors) if errors else ())
            s_redriven_from(job, redriven_from)
            append(job)
        return jobs

    return job_from_row, claimed_jobs


def decode_errors(text: str | None) -> tuple[JobError, ...]:
    """The ``errors`` column (JSON ``[[attempt, at, error], ...]``) as ``JobError``s."""
    if not text or text == "[]":
        return ()
    entries = decode_payload(text)
    if not isinstance(entries, list):  # undecodable: a history is never worth a failure
        return ()
    return tuple(
        JobError(int(entry[0]), int(entry[1]), str(entry[2]))
        for entry in entries
        if isinstance(entry, list) and len(entry) == 3
    )


job_from_row, claimed_jobs = _job_builders()


def error_entry(attempt: int, at: int, error: str) -> str:
    """One history entry as the JSON text engines append to ``errors``."""
    return encode_payload([attempt, at, error])


class WakeSink(Protocol):
    """Where a driver reports changes it learns of (from any process)."""

    def notify(self, topic: str) -> None: ...

    def notify_all(self) -> None: ...

    def has_waiters(self) -> bool: ...

    def deliver(self, channel: str, payload: str) -> None:
        """A pub/sub message committed by any process (payload as JSON text)."""
        ...


def queue_topic(queue: str) -> str:
    return "queue:" + queue


class Driver(Protocol[C]):
    """One opened engine's storage operations.

    Transaction methods
        ``write(work)`` runs ``work(c)`` as one short write unit and commits
        what it wrote (retrying transient lock conflicts only where it is safe);
        ``read(work)`` runs it on a consistent read. Every queue and lock
        ``write`` of the core is a sequence of statements that are each
        correct committed on their own (a claim and the set-aside of an
        undecodable row it found; ``schedule_upsert`` before ``announce``), so
        an engine may run those statement by statement in autocommit, one round
        trip each; the scheduler's fire (``schedule_advance`` then
        ``insert_jobs``) is the unit that must commit as one. A unit that will
        run several statements may say so first (``OneCommitHint``, optional):
        an engine whose commit costs more than the statements around it makes
        them one transaction. ``transaction()`` opens
        the caller-visible transaction (commit on normal exit, rollback on
        exception); ``attach(native)`` joins a caller-owned connection's open
        transaction and never commits or rolls it back. Connection failures
        raise ``EngineUnavailable`` with the driver error chained.

    Statement methods
        Each takes the transaction handle ``c`` and resolved values. Handle ops
        carry the claim identity ``(job_id, attempt)``: the row's ``attempts``
        counts claims, so it names one claim uniquely. "Valid" means the row is
        processing, ``attempts = attempt`` and its deadline ``> now``.
        Timestamps compare as: claimable when ``run_at <= now`` (pending) or
        ``deadline <= now`` (processing); expired when ``expires_at <= now``.
    """

    # -- transactions -----------------------------------------------------
    def write(self, work: Callable[[C], T], *, wait_s: float | None = None) -> T:
        """Run ``work`` in a write unit. ``wait_s`` is the caller's remaining time: the
        engine waits at most that long (and never longer than its own limit, e.g. a
        busy or connect timeout, which also applies when ``wait_s`` is ``None``) for a
        connection or a lock, then raises ``EngineUnavailable``. The core only passes
        it when a caller's timeout is running (``claim_wait``, ``stream.wait``)."""
        ...

    def read(self, work: Callable[[C], T], *, wait_s: float | None = None) -> T:
        """Run ``work`` on a consistent read; ``wait_s`` as for ``write``."""
        ...

    def transaction(self) -> AbstractContextManager[C]: ...

    def attach(self, native: Any) -> AbstractContextManager[C]: ...

    def native_connection(self, c: C) -> Any:
        """The DB-API connection behind ``c`` (``tx.connection``)."""
        ...

    # -- wakes --------------------------------------------------------------
    def start_watching(self, sink: WakeSink) -> None:
        """Begin reporting other processes' commits to ``sink`` (idempotent)."""
        ...

    def announce(self, c: C, topics: Sequence[str]) -> None:
        """Inside ``c``'s transaction: make other processes wake for ``topics`` on commit.

        ``insert_jobs``, ``reschedule`` and ``stream_append`` announce their own queue
        or stream (an engine may fold that into the statement); the core calls this
        only for other topics (a changed schedule)."""
        ...

    def close(self) -> None: ...

    # -- queues -------------------------------------------------------------
    def insert_jobs(self, c: C, stamps: JobStamps, payloads: Sequence[str]) -> list[int]:
        """Insert one pending row per payload (JSON text), every one stamped with
        ``stamps``; return the new ids in payload order. Announces
        ``queue_topic(stamps.queue)`` to other processes on commit."""
        ...

    def claim(self, c: C, queue: str, worker_id: str, now: int, limit: int) -> list[Job]:
        """Dead-letter the queue's exhausted lapsed rows first, then claim: one atomic
        step (one statement, or statements that are each correct committed alone).

        First, as ``bury_exhausted``: processing rows of ``queue`` with ``deadline <=
        now`` and ``attempts >= max_attempts`` move to dead (``ERROR_EXHAUSTED``,
        ``died_at = now``), so a lapsed row whose budget is spent is never handed out
        again. (A row another claimer is moving at that moment may be left to it.)
        Then up to ``limit`` claimable rows of ``queue`` (pending with ``run_at <=
        now`` or processing with ``deadline <= now``; not expired; ``attempts <
        max_attempts``), in order priority DESC, run_at ASC, id ASC, set processing
        with ``attempts + 1``, ``claimed_at = now``, ``worker_id``, ``deadline = now +
        visibility_timeout_s``. Return the claimed rows. A paused queue (ops profile:
        ``OpsDriver.set_paused``) yields no row (its exhausted rows are still moved).

        Folding the dead-lettering into the claim lets an engine do both in one
        round trip; a move and a claim are each atomic on their own (a crash between
        them leaves the rows either moved or not, never half-moved)."""
        ...

    def bury_exhausted(self, c: C, queue: str, now: int) -> int:
        """Move processing rows of ``queue`` with ``deadline <= now`` and
        ``attempts >= max_attempts`` to dead (``ERROR_EXHAUSTED``, ``died_at = now``).
        The sweep's step; ``claim`` does the same before it claims."""
        ...

    def bury_expired(self, c: C, queue: str, now: int) -> int:
        """Move pending and processing rows of ``queue`` with ``expires_at <= now``
        to dead (``ERROR_EXPIRED``, ``died_at = now``)."""
        ...

    def purge_dead(self, c: C, queue: str, now: int) -> int:
        """Delete dead rows of ``queue`` with ``died_at + dead_letter_retention_s < now``."""
        ...

    def ack(self, c: C, job_id: int, attempt: int, now: int) -> bool:
        """Delete the row if the claim ``(job_id, attempt)`` is valid."""
        ...

    def ack_batch(self, c: C, queue: str, job_ids: Sequence[int], worker_id: str, now: int) -> int:
        """Delete rows of ``queue`` among ``job_ids`` that are processing under
        ``worker_id`` with ``deadline > now``; return how many."""
        ...

    def heartbeat(self, c: C, job_id: int, attempt: int, now: int, deadline: int) -> bool:
        """Set the deadline if the claim is valid."""
        ...

    def release_claim(self, c: C, job_id: int, attempt: int, now: int) -> bool:
        """If the claim is valid: back to pending with ``max_attempts + 1`` (the claim
        given back unused costs no attempt of the budget; ``attempts`` is left as
        it is, so ``(job_id, attempt)`` still names one claim only and the released
        handle matches nothing), ``run_at`` unchanged, ``worker_id``, ``claimed_at``
        and the deadline cleared, nothing added to ``errors``. Announces the job's
        queue topic on commit (it is claimable again)."""
        ...

    def reschedule(
        self, c: C, job_id: int, attempt: int, now: int, run_at: int, error: str
    ) -> bool:
        """If the claim is valid: back to pending at ``run_at``; ``worker_id`` and
        ``claimed_at`` cleared; with the ops profile, ``error_entry(attempt, now,
        error)`` appended to ``errors`` (the latest ``MAX_ERROR_HISTORY`` kept).
        Announces the job's queue topic on commit (the job may be due now, and
        waiters elsewhere may have to move their timers)."""
        ...

    def bury(
        self, c: C, job_id: int, attempt: int, now: int, last_error: str, error: str | None
    ) -> bool:
        """If the claim is valid: move the row to dead with ``last_error``,
        ``died_at = now``; with the ops profile and an ``error``, append
        ``error_entry(attempt, now, error)`` to ``errors`` as ``reschedule`` does."""
        ...

    def cancel(self, c: C, queue: str, job_id: int) -> bool:
        """Delete a pending or processing row of ``queue``; dead rows are untouched."""
        ...

    def get_job(self, c: C, job_id: int, queue: str | None) -> Job | None:
        """The live or dead row with ``job_id`` (of ``queue`` when given)."""
        ...

    def next_wake_at(self, c: C, queue: str, now: int) -> int | None:
        """The earliest instant ``> now`` at which a row of ``queue`` becomes
        claimable (a pending ``run_at`` or a processing deadline), or ``None``."""
        ...

    # -- locks --------------------------------------------------------------
    def lock_acquire(self, c: C, name: str, owner: str, now: int, expires_at: int) -> bool:
        """Take the lock if free, lapsed (``expires_at <= now``) or already ``owner``'s."""
        ...

    def lock_renew(self, c: C, name: str, owner: str, now: int, expires_at: int) -> bool:
        """Extend only a live lock held by ``owner``."""
        ...

    def lock_release(self, c: C, name: str, owner: str, now: int) -> bool:
        """Release a live lock held by ``owner``."""
        ...

    def lock_holder(self, c: C, name: str, now: int) -> LockInfo | None:
        """The live holder, or ``None`` when free or lapsed."""
        ...


# -- an optional hint ------------------------------------------------------------


class OneCommitHint(Protocol[C_contra]):
    """What an engine may add to its ``Driver``: nothing else depends on it."""

    def prefer_one_commit(self, c: C_contra) -> None:
        """At the start of a ``write`` unit that runs several statements (the core's
        ``ack_and_claim``): commit them as one where that costs less than a commit
        each (SQLite writes every page a commit changed, so two statements on the
        same pages pay for them once). It changes no outcome: each statement stays
        correct committed on its own. Nothing inside ``transaction()`` or
        ``attach()``. An engine whose transaction costs round trips of its own
        (PostgreSQL) leaves it out, or does nothing in it."""
        ...


def one_commit_hint(driver: object) -> Callable[[Any], None]:
    """``driver.prefer_one_commit``, or a no-op for a driver without one (the hint is
    optional: without it, a unit's statements commit as the engine runs them)."""
    hint = getattr(driver, "prefer_one_commit", None)
    return hint if callable(hint) else _no_hint


def _no_hint(c: Any) -> None:
    """The engine runs the unit as it always does."""


# -- optional profiles ------------------------------------------------------
# Engines that declare the scheduler / streams / pubsub capabilities implement
# these too. They are separate protocols so the queue core stays the minimum.


def stream_topic(stream: str) -> str:
    return "stream:" + stream


SCHEDULES_TOPIC = "schedules"
"""Announced when a schedule is added or changed, so a sleeping leader re-plans."""


class SchedulerDriver(Protocol[C_contra]):
    """Schedule rows. ``payload`` is JSON text; ``expires_s`` may be ``None``."""

    def schedule_upsert(self, c: C_contra, record: ScheduleRecord) -> None:
        """Insert or update by name; keep the stored ``next_fire_at`` when the stored
        spec equals ``record.spec``, else take ``record.next_fire_at``. One statement."""
        ...

    def schedule_delete(self, c: C_contra, name: str) -> bool: ...

    def schedule_get(self, c: C_contra, name: str) -> ScheduleRecord | None: ...

    def schedule_list(self, c: C_contra) -> list[ScheduleRecord]:
        """Every schedule, ordered by name."""
        ...

    def schedules_due(self, c: C_contra, now: int) -> list[ScheduleRecord]:
        """Schedules with ``next_fire_at <= now``, ordered by ``next_fire_at``, name."""
        ...

    def schedule_advance(self, c: C_contra, name: str, expected: int, new_fire_at: int) -> bool:
        """Compare-and-set under the row lock: move ``next_fire_at`` from ``expected``
        to ``new_fire_at``; ``False`` if another ticker already moved it."""
        ...

    def schedule_next_fire_at(self, c: C_contra) -> int | None:
        """The earliest ``next_fire_at`` of all schedules."""
        ...


class StreamDriver(Protocol[C_contra]):
    def stream_append(
        self, c: C_contra, stream: str, payloads: Sequence[str], now: int
    ) -> list[int]:
        """Append in order; offsets strictly increasing per stream from 1, never reused,
        and assigned so no reader can pass a smaller offset that commits later.
        Announces ``stream_topic(stream)`` on commit."""
        ...

    def stream_read(
        self, c: C_contra, stream: str, after: int, limit: int
    ) -> list[StreamEvent]: ...

    def stream_commit(self, c: C_contra, stream: str, consumer: str, offset: int) -> None: ...

    def stream_offset(self, c: C_contra, stream: str, consumer: str) -> int: ...

    def stream_trim(self, c: C_contra, stream: str, before: int) -> int:
        """Delete events with ``offset < before``; return how many."""
        ...


class PubSubDriver(Protocol[C_contra]):
    def publish(self, c: C_contra, channel: str, payload: str, now: int) -> None:
        """Deliver ``(channel, payload)`` to every process's sink on commit of ``c``."""
        ...


class OpsDriver(Protocol[C_contra]):
    """Contract 1.1's operations profile (``Capabilities.ops``).

    Engines with it also keep ``errors`` and ``redriven_from`` on job rows
    (``JOB_COLUMNS``) and honour pauses in ``claim``."""

    def queue_stats(self, c: C_contra, queues: Sequence[str] | None, now: int) -> list[QueueStats]:
        """Stats of ``queues`` (a named queue with nothing in it: all zeros), or of
        every queue that has a live row, a dead row or a pause when ``None``;
        ordered by name. Counts come from indexes, never a scan of dead rows'
        contents: ``ready`` pending ``run_at <= now``, ``scheduled`` pending later,
        ``processing`` with ``deadline > now``, ``lapsed`` with ``deadline <= now``,
        ``dead``; ``oldest_ready_age_s = now - min(run_at)`` of ready rows."""
        ...

    def list_jobs(
        self, c: C_contra, queue: str, state: JobState | None, after_id: int, limit: int
    ) -> list[Job]:
        """Up to ``limit`` jobs of ``queue`` (live and dead, or only ``state``) with
        ``id > after_id``, in id order: a keyset page."""
        ...

    def redrive(
        self, c: C_contra, queue: str, ids: Sequence[int] | None, limit: int, now: int
    ) -> list[int]:
        """One atomic step (committed together, or not at all): each dead row of
        ``queue`` whose id is in ``ids`` (when ``None``: the oldest ``died_at``
        first, then id, up to ``limit``) becomes a new pending row -- fresh id,
        same payload, priority and stamps, ``attempts = 0``, ``run_at = now``,
        ``expires_at = now + (expires_at - created_at)`` if it had one,
        ``created_at = now``, no errors, ``redriven_from`` = the dead id -- and the
        dead row is deleted. Ids that are not dead rows of ``queue`` are skipped.
        Returns the new ids in the order of the dead rows they replaced (``ids``
        order, or oldest first). Announces the queue on commit."""
        ...

    def purge_dead_jobs(
        self,
        c: C_contra,
        queue: str,
        ids: Sequence[int] | None,
        died_before: int | None,
        now: int,
    ) -> int:
        """Delete dead rows of ``queue``: those named in ``ids`` (when given), of
        those the ones with ``died_at < died_before`` (when given); return how many."""
        ...

    def set_paused(self, c: C_contra, queue: str, paused: bool) -> bool:
        """Pause (durably, for every process) or resume ``queue``; ``True`` if that
        changed anything. A resume announces the queue on commit."""
        ...

    def is_paused(self, c: C_contra, queue: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    name: str
    spec: str
    queue: str
    payload: str
    priority: int
    max_attempts: int | None
    expires_s: int | None
    interval_s: int
    next_fire_at: int

    def to_schedule(self) -> Schedule:
        return Schedule(
            name=self.name,
            spec=self.spec,
            queue=self.queue,
            payload=decode_payload(self.payload),
            opts=ScheduleOpts(
                priority=self.priority, max_attempts=self.max_attempts, expires=self.expires_s
            ),
            interval_s=self.interval_s,
            next_fire_at=self.next_fire_at,
        )


_SET_OFFSET, _SET_EVENT_PAYLOAD, _SET_CREATED_AT = (
    getattr(StreamEvent, name).__set__ for name in ("offset", "payload", "created_at")
)


def stream_event(offset: int, payload: str, created_at: int) -> StreamEvent:
    """A ``StreamEvent`` from its stored columns (payload as JSON text).

    Built slot by slot, as ``job_from_row`` builds a ``Job``: a read of a page of
    events makes one per event, and the frozen dataclass's ``__init__`` costs
    more than the rest of the read."""
    event: StreamEvent = object.__new__(StreamEvent)
    _SET_OFFSET(event, offset)
    _SET_EVENT_PAYLOAD(event, decode_payload(payload))
    _SET_CREATED_AT(event, created_at)
    return event
