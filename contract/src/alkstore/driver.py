"""The engine seam: what an engine implements so the shared core can drive it.

The core (``alkstore.core``) owns every rule that is not storage-specific:
validation, option resolution, backoff, the claim path's order of steps,
handle validity, waiting and wakes. An engine implements ``Driver``: its
transaction handling plus one method per SQL statement (or per atomic move).
Methods never validate input; they receive resolved, whole-second values, one
params value per statement (``alkstore.params``); rows are decoded by the
``alkstore.rows`` decoders. ``check_seam`` refuses a driver of the older
positional seam at open, ``check_methods`` one that lacks a method the core
calls (``PROFILE_DRIVERS`` names each optional profile's protocol); the
statements that announce their own topic are ``ANNOUNCES``.

``C`` is the engine's handle on a connection inside an open transaction;
the core only passes it back to the driver.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from types import MappingProxyType
from typing import Any, Final, Protocol, TypeVar

from . import _guide
from .errors import EngineMisconfigured
from .options import JobStamps as JobStamps
from .options import Limits
from .params import SEAM as SEAM
from .params import (
    AckBatch,
    AckClaims,
    Bury,
    BuryClaims,
    Cancel,
    Claim,
    ClaimRef,
    Complete,
    GetJob,
    Heartbeat,
    InsertAfter,
    InsertUnique,
    ListJobs,
    LockHolder,
    LockLease,
    LockRelease,
    NextWake,
    Publish,
    PurgeDeadJobs,
    QueueStatsAt,
    Redrive,
    RedriveDependents,
    Reschedule,
    RescheduleClaims,
    ScheduleAdvance,
    ScheduleLapse,
    ScheduleRenew,
    SetLimits,
    SetPaused,
    Snooze,
    StreamAppend,
    StreamCommit,
    StreamOffset,
    StreamRead,
    StreamTrim,
    Sweep,
    ThroughputAdd,
    ThroughputSince,
    WorkerRef,
    WorkerRegister,
    WorkerRenew,
    WorkersAt,
)

# The rows module is the home of these; they stay importable from here, where
# engines written for alkstore 0.1 import them.
from .rows import CLAIMED_COLUMNS as CLAIMED_COLUMNS
from .rows import JOB_COLUMNS as JOB_COLUMNS
from .rows import ScheduleRecord as ScheduleRecord
from .rows import claimed_jobs as claimed_jobs
from .rows import decode_errors as decode_errors
from .rows import error_entry as error_entry
from .rows import job_from_row as job_from_row
from .rows import stream_event as stream_event
from .values import Job, JobState, LockInfo, QueueStats, StreamEvent, WorkerInfo

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)
T = TypeVar("T")

ERROR_EXHAUSTED = "max attempts exceeded"
ERROR_EXPIRED = "expired"
ERROR_UNDECODABLE = "payload cannot be decoded"
"""``last_error`` prefix of a job dead-lettered by a claim because its stored payload
cannot be decoded (``alkstore.payload.UndecodablePayload``)."""
ERROR_SNOOZES = "max snoozes exceeded"
"""``last_error`` of a job whose snooze found it at ``MAX_SNOOZES`` (snooze profile)."""


def check_seam(driver: object) -> None:
    """Refuse a driver written for seam 1 (alkstore 0.1), whose statement methods
    took each value as a positional argument: its ``claim`` takes more than ``(c,
    params)``. Checked once, when the store opens (a wrapper taking ``*args`` is
    given the benefit of the doubt).

    Raises:
        EngineMisconfigured: naming the change and where the guide describes it."""
    claim = getattr(driver, "claim", None)
    if claim is None:
        return
    try:
        parameters = inspect.signature(claim).parameters.values()
    except (TypeError, ValueError):  # a builtin or C method: nothing to read
        return
    kinds = {p.kind for p in parameters}
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(positional) > 2:
        names = ", ".join(p.name for p in positional)
        raise EngineMisconfigured(
            f"{type(driver).__name__}.claim({names}) is a driver of the positional seam "
            f"(alkstore 0.1); this alkstore speaks driver seam {SEAM}: every statement "
            "method taking more than one value besides c takes (c, params), params one "
            "frozen value per statement from alkstore.params (claim(c, Claim(queue, "
            "worker_id, now, limit)), ack(c, ClaimRef(job_id, attempt, now)), ...), "
            f"and rows are decoded with alkstore.rows; {_guide.see(_guide.DRIVER_SEAM)}"
        )


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
        Each takes the transaction handle ``c`` and, when it needs more than one
        value, one frozen params value named after it (``alkstore.params``: e.g.
        ``claim(c, Claim(queue, worker_id, now, limit))``, ``ack(c, ClaimRef(job_id,
        attempt, now))``); a docstring's bare names are that value's fields. Rows
        come back through ``alkstore.rows`` (its column tuples and decoders).
        Handle ops carry the claim identity ``(job_id, attempt)``: the row's ``attempts``
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

    def transaction(self) -> AbstractContextManager[C]:
        """The caller-visible transaction (``store.transaction()``): yields ``c``, commits
        on normal exit, rolls back on an exception."""
        ...

    def attach(self, native: Any) -> AbstractContextManager[C]:
        """Join ``native``'s open transaction (``store.attach(conn)``: a connection the
        caller opened, of the type ``native_connection`` returns) and yield ``c`` on
        it; never commit, roll back or close it."""
        ...

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

    def close(self) -> None:
        """Stop watching and release every connection (``store.close()``; called once)."""
        ...

    # -- queues -------------------------------------------------------------
    def insert_jobs(self, c: C, stamps: JobStamps, payloads: Sequence[str]) -> list[int]:
        """Insert one pending row per payload (JSON text), every one stamped with
        ``stamps``; return the new ids in payload order. Announces
        ``queue_topic(stamps.queue)`` to other processes on commit."""
        ...

    def claim(self, c: C, params: Claim) -> list[Job]:
        """Dead-letter the queue's exhausted lapsed rows first, then claim: one atomic
        step (one statement, or statements that are each correct committed alone).

        First, as ``bury_exhausted``: processing rows of ``params.queue`` with
        ``deadline <= now`` and ``attempts >= max_attempts`` move to dead
        (``ERROR_EXHAUSTED``, ``died_at = now``), so a lapsed row whose budget is
        spent is never handed out again. (A row another claimer is moving at that
        moment may be left to it.) Then up to ``limit`` claimable rows of ``queue``
        (pending with ``run_at <= now`` or processing with ``deadline <= now``; not
        expired; ``attempts < max_attempts``), in order priority DESC, run_at ASC, id
        ASC, set processing with ``attempts + 1``, ``claimed_at = now``,
        ``worker_id``, ``deadline = now + visibility_timeout_s``. Return the claimed
        rows (``alkstore.rows.claimed_jobs`` builds them). A paused queue (ops
        profile: ``OpsDriver.set_paused``) yields no row (its exhausted rows are
        still moved). A queue with a concurrency limit (limits profile:
        ``LimitsDriver``) yields at most ``concurrency`` minus its processing rows
        with ``deadline > now``, and a queue with a rate limit at most ``rate`` minus
        the claims that started at instants ``t`` with ``now - per < t <= now``
        (each claimed row is one start, recorded by the claim); both read in the
        same atomic step as the claim so that no two claimers, in any processes,
        both take the last free slot.

        Folding the dead-lettering into the claim lets an engine do both in one
        round trip; a move and a claim are each atomic on their own (a crash between
        them leaves the rows either moved or not, never half-moved)."""
        ...

    def bury_exhausted(self, c: C, params: Sweep) -> int:
        """Move processing rows of ``params.queue`` with ``deadline <= now`` and
        ``attempts >= max_attempts`` to dead (``ERROR_EXHAUSTED``, ``died_at = now``).
        The sweep's step; ``claim`` does the same before it claims."""
        ...

    def bury_expired(self, c: C, params: Sweep) -> int:
        """Move pending and processing rows of ``params.queue`` with ``expires_at <=
        now`` to dead (``ERROR_EXPIRED``, ``died_at = now``)."""
        ...

    def purge_dead(self, c: C, params: Sweep) -> int:
        """Delete dead rows of ``params.queue`` with ``died_at +
        dead_letter_retention_s < now``."""
        ...

    def ack(self, c: C, params: ClaimRef) -> bool:
        """Delete the row if the claim ``(job_id, attempt)`` is valid at ``now``."""
        ...

    def ack_batch(self, c: C, params: AckBatch) -> int:
        """Delete rows of ``params.queue`` among ``job_ids`` that are processing under
        ``worker_id`` with ``deadline > now``; return how many. With the results
        profile, those of them stamped with a ``completed_retention_s`` move to the
        completed rows instead, without a result (see ``ResultsDriver``)."""
        ...

    def heartbeat(self, c: C, params: Heartbeat) -> bool:
        """Set the claim's deadline to ``params.deadline`` if the claim is valid."""
        ...

    def release_claim(self, c: C, params: ClaimRef) -> bool:
        """If the claim is valid: back to pending with ``max_attempts + 1`` (the claim
        given back unused costs no attempt of the budget; ``attempts`` is left as
        it is, so ``(job_id, attempt)`` still names one claim only and the released
        handle matches nothing), ``run_at`` unchanged, ``worker_id``, ``claimed_at``
        and the deadline cleared, nothing added to ``errors``. Announces the job's
        queue topic on commit (it is claimable again)."""
        ...

    def reschedule(self, c: C, params: Reschedule) -> bool:
        """If the claim is valid: back to pending at ``params.run_at``; ``worker_id``
        and ``claimed_at`` cleared; with the ops profile, ``error_entry(attempt, now,
        error)`` appended to ``errors`` (the latest ``MAX_ERROR_HISTORY`` kept).
        Announces the job's queue topic on commit (the job may be due now, and
        waiters elsewhere may have to move their timers)."""
        ...

    def bury(self, c: C, params: Bury) -> bool:
        """If the claim is valid: move the row to dead with ``params.last_error``,
        ``died_at = now``; with the ops profile and an ``error``, append
        ``error_entry(attempt, now, error)`` to ``errors`` as ``reschedule`` does."""
        ...

    def cancel(self, c: C, params: Cancel) -> bool:
        """Delete a pending or processing row ``job_id`` of ``queue``; dead rows are
        untouched."""
        ...

    def get_job(self, c: C, params: GetJob) -> Job | None:
        """The live or dead row ``params.job_id`` (of ``queue`` when given); with the
        results profile, a completed one too."""
        ...

    def next_wake_at(self, c: C, params: NextWake) -> int | None:
        """The earliest instant ``> now`` at which a row of ``params.queue`` becomes
        claimable (a pending ``run_at`` or a processing deadline), or ``None``. A
        queue at its concurrency limit (limits profile: as many processing rows with
        ``deadline > now`` as its limit) frees a slot no sooner than the earliest of
        those deadlines: that instant, not a pending ``run_at``; a queue at its rate
        limit (``rate`` starts in its window) frees one no sooner than its oldest
        start in the window leaves it (that start ``+ per``); at both, the later of
        the two."""
        ...

    # -- locks --------------------------------------------------------------
    def lock_acquire(self, c: C, params: LockLease) -> bool:
        """Take the lock ``name`` until ``expires_at`` if it is free, lapsed
        (``expires_at <= now``) or already ``owner``'s."""
        ...

    def lock_renew(self, c: C, params: LockLease) -> bool:
        """Extend to ``expires_at`` only a live lock held by ``owner``."""
        ...

    def lock_release(self, c: C, params: LockRelease) -> bool:
        """Release a live lock held by ``owner``."""
        ...

    def lock_holder(self, c: C, params: LockHolder) -> LockInfo | None:
        """The live holder at ``now``, or ``None`` when free or lapsed."""
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


class AckClaimsDriver(Protocol[C_contra]):
    """What an engine may add to its ``Driver`` (contract 1.2 §3.10): the acks of many
    claims in one statement, for ``tx.ack_all``. Without it the core acks them one
    ``ack`` at a time, with the same outcome."""

    def ack_claims(self, c: C_contra, params: AckClaims) -> Sequence[int]:
        """In one atomic step, ack each claim ``(job_ids[i], attempts[i])`` that is
        valid at ``now`` (as ``ack``, each under its own guard: processing, that
        attempt, ``deadline > now``) and return the ids acked; a claim that is not
        valid changes nothing and does not stop the others, nor the transaction.
        What ``ack_batch`` does beside each acked row is done here too: with the
        results profile a row stamped with a ``completed_retention_s`` moves to the
        completed rows without a result, dependents are released (the dependencies
        profile), a limited queue's freed slot is announced on commit (the limits
        profile). The claims may be of several queues; a claim named twice is one
        row. The core passes only claims whose ack keeps no result."""
        ...


def ack_claims_of(driver: object) -> Callable[[Any, AckClaims], Sequence[int]] | None:
    """``driver.ack_claims``, or ``None`` for a driver without it (``AckClaimsDriver``
    is optional: the core then acks each claim with ``ack``)."""
    method = getattr(driver, "ack_claims", None)
    return method if callable(method) else None


class RescheduleClaimsDriver(Protocol[C_contra]):
    """What an engine may add to its ``Driver`` (contract 1.2 §3.11): the retries of
    many claims in one statement, for ``tx.retry_all``. Without it the core writes
    each with ``reschedule``, with the same outcome."""

    def reschedule_claims(self, c: C_contra, params: RescheduleClaims) -> Sequence[int]:
        """In one atomic step, do what ``reschedule`` does for each claim ``(job_ids[i],
        attempts[i])`` that is valid at ``now`` (each under its own guard), at
        ``run_ats[i]`` with ``errors[i]``, and return the ids rescheduled; a claim that
        is not valid changes nothing and does not stop the others, nor the
        transaction. Announces each rescheduled job's queue on commit. The claims may
        be of several queues; the core names each job once."""
        ...


class BuryClaimsDriver(Protocol[C_contra]):
    """What an engine may add to its ``Driver`` (contract 1.2 §3.11): many claims
    dead-lettered in one statement, for ``tx.fail_all`` (and ``tx.retry_all`` at the
    attempt budget). Without it the core writes each with ``bury``."""

    def bury_claims(self, c: C_contra, params: BuryClaims) -> Sequence[int]:
        """In one atomic step, do what ``bury`` does for each claim ``(job_ids[i],
        attempts[i])`` that is valid at ``now`` (each under its own guard), with
        ``last_errors[i]`` and ``errors[i]``, and return the ids buried; what ``bury``
        does beside (dependents dead-lettered, unique keys released, a limited
        queue's freed slot announced) is done for each. A claim that is not valid
        changes nothing and does not stop the others. The core names each job once."""
        ...


def reschedule_claims_of(
    driver: object,
) -> Callable[[Any, RescheduleClaims], Sequence[int]] | None:
    """``driver.reschedule_claims``, or ``None`` for a driver without it."""
    method = getattr(driver, "reschedule_claims", None)
    return method if callable(method) else None


def bury_claims_of(driver: object) -> Callable[[Any, BuryClaims], Sequence[int]] | None:
    """``driver.bury_claims``, or ``None`` for a driver without it."""
    method = getattr(driver, "bury_claims", None)
    return method if callable(method) else None


def one_commit_hint(driver: object) -> Callable[[Any], None]:
    """``driver.prefer_one_commit``, or a no-op for a driver without one (the hint is
    optional: without it, a unit's statements commit as the engine runs them)."""
    hint = getattr(driver, "prefer_one_commit", None)
    return hint if callable(hint) else _no_hint


def _no_hint(c: Any) -> None:
    """The engine runs the unit as it always does."""


class AsyncAcksDriver(Protocol[C_contra]):
    """What an engine with the ``async_acks`` profile adds to its ``Driver`` (§12.11):
    a hint, like ``OneCommitHint``, that changes no outcome but a commit's durability."""

    def commit_acks_without_waiting(self, c: C_contra) -> None:
        """The acks that follow on ``c`` may commit without waiting for the disk.

        In a ``write`` unit the core calls it just before the unit's one ack (``ack``
        or ``complete``, alone or as ``ack_and_claim``'s first statement): that ack's
        own commit may return before it is durable; the claim after it, and every
        other statement, commit as durably as ever. In a ``transaction()`` the core
        calls it first, in a transaction that writes nothing but ``tx.ack`` of a
        worker's group (§12.10): that transaction's commit may. Never a setting that
        outlives the commit it was asked for: a pooled connection carries nothing to
        the next unit. An engine whose commits are all alike leaves it out (and
        declares no ``async_acks``)."""
        ...


def async_ack_hint(driver: object, declared: bool) -> Callable[[Any], None]:
    """``driver.commit_acks_without_waiting`` for an engine that declares the
    ``async_acks`` profile, else a no-op: asynchronous acks are a permission, never
    a demand, so an engine without them acks durably and nothing else changes."""
    hint = getattr(driver, "commit_acks_without_waiting", None)
    return hint if declared and callable(hint) else _no_hint


# -- optional profiles ------------------------------------------------------
# Engines that declare the scheduler / streams / pubsub capabilities implement
# these too. They are separate protocols so the queue core stays the minimum.


def stream_topic(stream: str) -> str:
    return "stream:" + stream


SCHEDULES_TOPIC = "schedules"
"""Announced when a schedule is added or changed, so a sleeping leader re-plans."""


class SchedulerDriver(Protocol[C_contra]):
    """Schedule rows (``alkstore.rows.ScheduleRecord``)."""

    def schedule_upsert(self, c: C_contra, record: ScheduleRecord) -> None:
        """Insert or update by name; keep the stored ``next_fire_at`` when the stored
        spec equals ``record.spec`` and the stored ``timezone`` equals
        ``record.timezone``, else take ``record.next_fire_at``. One statement.

        An engine with the ``cron`` profile stores every field of the record,
        ``timezone`` and ``catch_up`` included, and ``interval_s`` may be ``None``.
        Without it, the core hands it only ``@every`` specs in UTC with the policy
        ``"all"`` (the defaults of those fields), so it may leave them out."""
        ...

    def schedule_delete(self, c: C_contra, name: str) -> bool:
        """Delete the schedule ``name``; ``True`` if there was one."""
        ...

    def schedule_get(self, c: C_contra, name: str) -> ScheduleRecord | None:
        """The schedule ``name``, or ``None``."""
        ...

    def schedule_list(self, c: C_contra) -> list[ScheduleRecord]:
        """Every schedule, ordered by name."""
        ...

    def schedules_due(self, c: C_contra, now: int) -> list[ScheduleRecord]:
        """Schedules with ``next_fire_at <= now``, ordered by ``next_fire_at``, name."""
        ...

    def schedule_advance(self, c: C_contra, params: ScheduleAdvance) -> bool:
        """Compare-and-set under the row lock: move ``params.name``'s ``next_fire_at``
        from ``expected`` to ``new_fire_at``; ``False`` if another ticker already
        moved it."""
        ...

    def schedule_next_fire_at(self, c: C_contra) -> int | None:
        """The earliest ``next_fire_at`` of all schedules."""
        ...


class StreamDriver(Protocol[C_contra]):
    def stream_append(self, c: C_contra, params: StreamAppend) -> list[int]:
        """Append ``params.payloads`` to ``stream`` in order, stamped ``now``; offsets
        strictly increasing per stream from 1, never reused, and assigned so no
        reader can pass a smaller offset that commits later. Announces
        ``stream_topic(stream)`` on commit."""
        ...

    def stream_read(self, c: C_contra, params: StreamRead) -> list[StreamEvent]:
        """Up to ``limit`` events of ``stream`` with ``offset > after``, in offset order
        (``alkstore.rows.stream_event`` builds them)."""
        ...

    def stream_commit(self, c: C_contra, params: StreamCommit) -> None:
        """Store ``offset`` as ``consumer``'s position in ``stream``."""
        ...

    def stream_offset(self, c: C_contra, params: StreamOffset) -> int:
        """``consumer``'s stored position in ``stream`` (0 when none)."""
        ...

    def stream_trim(self, c: C_contra, params: StreamTrim) -> int:
        """Delete events of ``stream`` with ``offset < before``; return how many."""
        ...


class PubSubDriver(Protocol[C_contra]):
    def publish(self, c: C_contra, params: Publish) -> None:
        """Deliver ``(channel, payload)`` to every process's sink on commit of ``c``."""
        ...


class OpsDriver(Protocol[C_contra]):
    """Contract 1.1's operations profile (``Capabilities.ops``).

    Engines with it also keep ``errors`` and ``redriven_from`` on job rows
    (``alkstore.rows.OPS_JOB_COLUMNS``) and honour pauses in ``claim``."""

    def queue_stats(self, c: C_contra, params: QueueStatsAt) -> list[QueueStats]:
        """Stats of ``params.queues`` (a named queue with nothing in it: all zeros),
        or of every queue that has a live row, a dead row or a pause when ``None``;
        ordered by name. Counts come from indexes, never a scan of dead rows'
        contents: ``ready`` pending ``run_at <= now``, ``scheduled`` pending later,
        ``processing`` with ``deadline > now``, ``lapsed`` with ``deadline <= now``,
        ``dead``; ``oldest_ready_age_s = now - min(run_at)`` of ready rows."""
        ...

    def list_jobs(self, c: C_contra, params: ListJobs) -> list[Job]:
        """Up to ``limit`` jobs of ``params.queue`` (live and dead, or only ``state``)
        with ``id > after_id``, in id order: a keyset page. With ``before_id`` (not
        ``None``): the jobs with ``after_id < id < before_id``, the largest ids first,
        in descending id order (contract 1.2, newest first)."""
        ...

    def redrive(self, c: C_contra, params: Redrive) -> list[int]:
        """One atomic step (committed together, or not at all): each dead row of
        ``params.queue`` whose id is in ``ids`` (when ``None``: the oldest
        ``died_at`` first, then id, up to ``limit``) becomes a new pending row --
        fresh id, same payload, priority and stamps, ``attempts = 0``, ``run_at =
        now``, ``expires_at = now + (expires_at - created_at)`` if it had one,
        ``created_at = now``, no errors, ``redriven_from`` = the dead id -- and the
        dead row is deleted. Ids that are not dead rows of ``queue`` are skipped.
        Returns the new ids in the order of the dead rows they replaced (``ids``
        order, or oldest first). Announces the queue on commit. With the unique
        profile, a dead row with a ``unique_key`` that another job holds is skipped
        (it stays dead; its own hold, if any, passes to its new row), see
        ``UniqueDriver``."""
        ...

    def purge_dead_jobs(self, c: C_contra, params: PurgeDeadJobs) -> int:
        """Delete dead rows of ``params.queue``: those named in ``ids`` (when given),
        of those the ones with ``died_at < died_before`` (when given); return how
        many."""
        ...

    def set_paused(self, c: C_contra, params: SetPaused) -> bool:
        """Pause (``params.paused``, durably, for every process) or resume ``queue``;
        ``True`` if that changed anything. A resume announces the queue on commit."""
        ...

    def is_paused(self, c: C_contra, queue: str) -> bool:
        """Whether ``queue`` is paused (by any process)."""
        ...


class SnoozeDriver(Protocol[C_contra]):
    """Contract 1.2's snooze profile (``Capabilities.snooze``).

    Engines with it keep ``snoozes`` on job rows (``alkstore.rows.SNOOZE_JOB_COLUMNS``,
    ``0`` on insert and on redrive) and carry it to the dead table with the row."""

    def snooze(self, c: C_contra, params: Snooze) -> bool:
        """If the claim is valid: back to pending at ``params.run_at`` with
        ``snoozes + 1`` and ``max_attempts + 1`` (as ``release_claim``: the claim
        costs no attempt of the budget, ``attempts`` is left as it is, so the
        snoozed handle matches nothing); ``worker_id``, ``claimed_at`` and the
        deadline cleared, nothing added to ``errors``. Announces the job's queue
        topic on commit (waiters elsewhere move their timers)."""
        ...


class UniqueDriver(Protocol[C_contra]):
    """Contract 1.2's unique profile (``Capabilities.unique``).

    Engines with it keep, on every job row, the ``unique_key`` it was enqueued with
    (``alkstore.rows.UNIQUE_JOB_COLUMNS``; ``NULL`` for a job enqueued without one)
    and, out of sight, whether and until when the row *holds* that key. A job holds
    its key while it is pending or processing, until its ``hold_until`` if it has
    one, and while dead only if it was enqueued with ``hold_dead``; ack, cancel,
    purge and a dead move without ``hold_dead`` free the key by removing the row
    (or its hold) from wherever holds are kept. At most one job of a queue holds a
    key at any moment, in every transaction's view that commits: that is enforced
    by the storage (a unique index over the holds, or an equivalent no concurrent
    writer can slip past), never by a read followed by a write.

    Other statements then honour holds too: a retry, snooze, release, heartbeat or
    reclaim keeps the job's hold as it is; a move to dead keeps it only for a
    ``hold_dead`` job; ``OpsDriver.redrive`` skips a dead row whose key another job
    holds (it stays dead, its id is not returned) and otherwise makes its new row
    hold the key, ``hold_until`` shifted with its ``created_at`` as ``expires_at``
    is."""

    def insert_unique_jobs(self, c: C_contra, params: InsertUnique) -> list[tuple[int, bool]]:
        """For each payload in order, one atomic step: if a job of ``stamps.queue``
        holds ``keys[i]`` -- a live row whose hold has not passed (``hold_until``
        absent or ``> now``, ``now`` being ``stamps.created_at``) or a dead row that
        holds it (enqueued with ``hold_dead``, its hold not passed) -- write nothing
        and give ``(holder id, True)``; else insert a pending row as ``insert_jobs``
        would, with ``unique_key = keys[i]``, holding it until ``params.hold_until``
        (through its death when ``hold_dead``), and give ``(new id, False)``. A live
        row whose hold has passed gives the key up (it keeps its ``unique_key``)
        before the insert, in the same step. Ids of new rows increase in payload
        order. Announces ``queue_topic(stamps.queue)`` to other processes on commit
        when it inserted a row.

        Race-safe: when several writers insert the same key at once, in any
        processes, exactly one row is inserted; a writer meeting an uncommitted
        holder waits for its transaction (or sees it, as the database lets it), and
        a holder rolled back frees the key. Inside ``transaction()`` and ``attach()``
        the rows commit or roll back with the caller's transaction."""
        ...


class PeriodicDriver(Protocol[C_contra]):
    """Contract 1.2's periodic profile (``Capabilities.periodic``): declared schedules.

    Engines with it keep ``declared_until`` on every schedule row (``NULL`` for a
    schedule made by ``store.schedule``, which never lapses) and read it back in
    every ``ScheduleRecord``; ``SchedulerDriver.schedule_upsert`` stores the
    record's ``declared_until`` as given (``None`` included, which makes a declared
    schedule undeclared) and keeps the boundary as it always does."""

    def schedules_renew(self, c: C_contra, params: ScheduleRenew) -> list[str]:
        """One statement: set ``declared_until = params.declared_until`` on each
        schedule named in ``params.names`` whose ``declared_until`` is not ``NULL``;
        nothing else of the row changes. Returns the names it renewed, ordered by
        name (a name that is gone or undeclared is left out)."""
        ...

    def schedules_lapse(self, c: C_contra, params: ScheduleLapse) -> list[str]:
        """One statement: delete every schedule whose ``declared_until`` is not
        ``NULL`` and ``<= params.now``. Returns the names it deleted, ordered by
        name."""
        ...


class LimitsDriver(Protocol[C_contra]):
    """Contract 1.2's limits profile (``Capabilities.limits``): a queue's concurrency
    limit, stored with the queue's other state (as its pause is) and honoured by
    every process at once.

    Other statements then honour limits too: ``claim`` claims no more than the
    queue's free slots (its limit minus its processing rows with ``deadline >
    now``, read atomically with the claim: on a server, claims of a limited queue
    serialise on something, e.g. the limit row locked before the claim's snapshot,
    while claims of an unlimited queue keep their own path), and a claim of a queue
    with a rate limit records its starts (one per claimed row, at ``now``) in the
    same step, kept at least ``per`` seconds; ``next_wake_at`` of a queue at its
    limit is the instant a slot frees (``Driver.next_wake_at``); and each
    statement that ends a live claim of a limited queue -- ``ack``, ``ack_batch``,
    ``bury``, ``cancel`` (as ``release_claim``, ``reschedule`` and ``snooze``
    already do) -- announces the queue's topic on commit, so a waiter in any
    process takes the freed slot at once. (An engine whose every commit wakes
    every process's waiters, as SQLite's watcher does, has nothing to add.)

    With the key_limits profile (``Capabilities.key_limits``) a queue's limits also
    hold ``concurrency_per_key`` (``SetLimits.concurrency_per_key``, read back in
    ``Limits``), and every job row keeps its ``limit_key`` (``JobStamps.limit_key``;
    ``alkstore.rows.KEY_LIMITS_JOB_COLUMNS``; ``NULL`` is the key every job without
    one shares, ``''``). ``claim`` of a queue with a per-key limit then takes, within
    the queue's free slots, each key's first ``concurrency_per_key`` less its
    processing rows with ``deadline > now``, in turn (contract §16.10): every key's
    first claimable row in claim order, then every key's second, and so on, the keys
    of each round after the queue's cursor (the key of the last row its previous claim
    took) first, then the rest, each in code-point order; it stores the key of the
    last row it took as the new cursor, all in the claim's atomic step. A cleared
    limit drops the cursor. With ``rate_per_key`` (per ``per_s``, contract §16.11) each
    key also takes no more than ``rate_per_key`` less its claim starts in the window
    ``(now - per_s, now]``, and the claim records one start per row it took under
    that row's key (``''`` for none), kept at least ``per_s`` seconds; ``next_wake_at``
    of such a queue is no later than the instant its oldest key start leaves the
    window."""

    def set_limits(self, c: C_contra, params: SetLimits) -> bool:
        """Store ``params``' ``concurrency`` and ``rate`` per ``per_s`` as ``queue``'s
        limits (durably, for every process; ``None`` fields: that limit absent), or
        remove them when every field is ``None``; ``True`` if that changed anything.
        A change announces the queue on commit (a raised or removed limit frees
        slots). Starts already recorded keep counting against a new rate."""
        ...

    def queue_limits(self, c: C_contra, queue: str | None) -> dict[str, Limits]:
        """The limits of ``queue`` (``{}`` when it has none), or of every queue that
        has some when ``None``: queue name to ``Limits(concurrency, rate=, per=)``."""
        ...


class ResultsDriver(Protocol[C_contra]):
    """Contract 1.2's results profile (``Capabilities.results``): finished jobs kept.

    Engines with it store every job's stamp ``completed_retention_s``
    (``alkstore.rows.RESULTS_JOB_COLUMNS``; ``NULL``: an ack deletes the job) and keep
    completed rows apart from the live ones (the claim path never reads them), each
    with its ``completed_at`` and ``result`` (JSON text or ``NULL``). ``get_job``
    finds them (state ``completed``), ``OpsDriver.list_jobs`` lists them (with
    ``state`` ``None`` or ``COMPLETED``), ``queue_stats`` counts them
    (``QueueStats.completed``) and lists a queue that has one; ``ack_batch`` moves the
    retained ones there; ``cancel``, ``redrive`` and ``purge_dead_jobs`` leave them
    alone. A completed job holds no unique key."""

    def complete(self, c: C_contra, params: Complete) -> bool:
        """If the claim is valid (as ``ack``): in one atomic step, move the row to the
        completed rows (same id, every column kept) with ``completed_at = now`` and
        ``result = params.result``. The core calls it only for a job stamped with a
        ``completed_retention_s``; ``ack`` stays the plain delete."""
        ...

    def purge_completed(self, c: C_contra, params: Sweep) -> int:
        """Delete completed rows of ``params.queue`` with ``completed_at +
        completed_retention_s < now``; return how many (the sweep's step)."""
        ...


ERROR_DEPENDENCY_DEAD = "dependency {id} is dead"
"""The ``last_error`` of a waiting job dead-lettered because a job it waits for moved to
dead (contract 1.2 §18.3); ``{id}`` is that job's id."""

ERROR_DEPENDENCY_CANCELLED = "dependency {id} was cancelled"
"""The ``last_error`` of a waiting job dead-lettered because a job it waits for was
cancelled (contract 1.2 §18.3)."""


class DependenciesDriver(Protocol[C_contra]):
    """Contract 1.2's dependencies profile (``Capabilities.dependencies``): jobs that
    wait for others.

    A waiting row lives apart from the claim path (no claim, ``next_wake_at`` or
    claim index ever reads it) with the count of the jobs it still waits for and one
    edge per such job. ``get_job`` finds it (state ``waiting``), ``OpsDriver.list_jobs``
    lists it (``state`` ``None`` or ``WAITING``), ``queue_stats`` counts it
    (``QueueStats.waiting``) and lists a queue that has one; ``cancel`` deletes it
    (its edges too) and ``bury_expired`` moves one past its ``expires_at`` to dead.

    Every statement that finishes a job resolves its edges in the same atomic step
    (the same statement, or triggers it fires), whatever path it takes:

    - the job completes (``ack``, ``ack_batch``, ``ResultsDriver.complete``): each
      waiting row with an edge to it counts one job less; a row whose count reaches 0
      becomes pending (same id, its own ``run_at``) and its queue is announced. Two
      completions committed concurrently must not both leave the row waiting.
    - the job moves to dead (any path: ``bury``, ``bury_exhausted``, ``bury_expired``,
      a claim's exhaustion) or is cancelled: each waiting row with an edge to it
      moves to dead with ``ERROR_DEPENDENCY_DEAD`` (or ``ERROR_DEPENDENCY_CANCELLED``)
      naming it and ``died_at`` that job's, and so on transitively.

    A job that finishes without any waiting row naming it pays nothing for this."""

    def insert_after_jobs(
        self, c: C_contra, params: InsertAfter
    ) -> tuple[list[int], dict[int, JobState | None]]:
        """In one atomic step: look up every id of ``params.after`` in the store. If
        each is live (pending, processing, waiting) or completed, insert one row per
        payload, waiting on the live ones (pending when none is live: then it
        announces its queue), and return ``(ids in payload order, {})``; the live
        ones must stay live until the step commits (lock them), so none finishes
        unseen. Otherwise write nothing and return ``([], {id: JobState.DEAD or
        None})`` for the dead and the absent ones."""
        ...

    def job_edges(self, c: C_contra, params: GetJob) -> tuple[list[int], list[int]]:
        """The edges of ``params.job_id`` as they stand: ``(the ids of the jobs it
        still waits for, the ids of the waiting jobs that still wait for it)``, each
        ascending; an id with no edge has two empty lists."""
        ...

    def redrive_dependents(self, c: C_contra, params: RedriveDependents) -> list[int]:
        """Inside the redrive's write, one level of §18.4's revival. Each job ``N`` of
        ``params.job_ids`` was made just now (pending) from the dead job ``D`` it names
        in ``redriven_from``, whose dead row is gone. In this order: (1) every kept edge
        to ``D`` of every such ``D`` now points to its ``N``; (2) each ``N`` waits for
        the jobs ``D``'s own kept edges name that are live or waiting (``N`` becomes
        waiting, those marked depended on; pending when there is none), and ``D``'s
        kept edges go; (3) each dead job with a kept edge to one of ``params.job_ids``
        whose kept edges all name live or waiting jobs is redriven as
        ``OpsDriver.redrive`` makes a row (pending, fresh id, ``redriven_from``,
        restamped), in id order, its dead row deleted and its kept edges left for the
        next level's (2). Returns those new ids, ascending (the core calls again with
        them until none is returned).

        Kept edges: when a waiting job that is not a fan-in moves to dead because a
        job it waits for will never complete (§18.3's cascade, either error), its
        edges as they stood (the dying dependency's among them) are kept with its dead
        row; a completion of one of those dependencies removes its kept edges in the
        completion's own step, and a purge or retention sweep of the dead row removes
        its kept edges with it."""
        ...


# -- what the core requires of a driver ------------------------------------------------


class WorkersDriver(Protocol[C_contra]):
    """Contract 1.2's workers profile (``Capabilities.workers``): the registry of live
    worker processes (§19).

    One row per worker id: its host, pid, queues (in the worker's order), when it
    started, when it was last seen and when its lease ends. The rule of when a
    worker is listed (its lease after now) is the core's, stated in the params."""

    def worker_register(self, c: C_contra, params: WorkerRegister) -> None:
        """Store the row of ``params.worker_id``, replacing one of that id (every
        column, ``started_at`` too), and delete every row whose ``lease_until`` is at
        or before ``params.now``, so lapsed workers never pile up."""
        ...

    def worker_renew(self, c: C_contra, params: WorkerRenew) -> bool:
        """One statement: set ``last_seen = params.now`` and ``lease_until =
        params.lease_until`` on the row of ``params.worker_id`` if its
        ``lease_until`` is after ``params.now``; ``True`` if it did."""
        ...

    def worker_deregister(self, c: C_contra, params: WorkerRef) -> bool:
        """Delete the row of ``params.worker_id``; ``True`` if there was one."""
        ...

    def workers_list(self, c: C_contra, params: WorkersAt) -> list[WorkerInfo]:
        """Every worker whose ``lease_until`` is after ``params.now``, ordered by id
        (byte-wise, as names compare)."""
        ...

    def throughput_add(self, c: C_contra, params: ThroughputAdd) -> None:
        """Add each of ``params.counts`` to its queue's count of ``params.minute``
        (one row per queue and minute, created at 0: an add, never a replace, as
        several workers report the same minute), then delete the rows whose minute
        is at or before ``params.prune_through``."""
        ...

    def throughput_read(self, c: C_contra, params: ThroughputSince) -> list[tuple[str, int, int]]:
        """Every ``(queue, minute, count)`` whose minute is after ``params.after``."""
        ...


OPTIONAL_DRIVERS: Final[tuple[type, ...]] = (
    OneCommitHint,
    AckClaimsDriver,
    RescheduleClaimsDriver,
    BuryClaimsDriver,
)
"""The protocols a driver may implement on any engine, with no profile to declare:
each is a faster path the core otherwise takes with the ``Driver``'s own methods."""

PROFILE_DRIVERS: Final[Mapping[str, type]] = MappingProxyType(
    {
        "scheduler": SchedulerDriver,
        "streams": StreamDriver,
        "pubsub": PubSubDriver,
        "ops": OpsDriver,
        "snooze": SnoozeDriver,
        "unique": UniqueDriver,
        "periodic": PeriodicDriver,
        "limits": LimitsDriver,
        "results": ResultsDriver,
        "workers": WorkersDriver,
        "dependencies": DependenciesDriver,
        "async_acks": AsyncAcksDriver,
    }
)
"""The protocol a driver also implements for each optional profile its engine's
``Capabilities`` declare (the other profiles add no driver method)."""

ANNOUNCES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "insert_jobs": "its queue",
        "reschedule": "the job's queue",
        "reschedule_claims": "each rescheduled job's queue",
        "release_claim": "the job's queue",
        "redrive": "its queue",
        "set_paused": "its queue, on a resume",
        "stream_append": "its stream",
        "snooze": "the job's queue",
        "insert_unique_jobs": "its queue, when it inserted a row",
        "set_limits": "its queue, when it changed anything",
        "insert_after_jobs": "its queue, when it inserted a pending row",
    }
)
"""The statements that announce their own topic to other processes on commit
(``queue_topic``/``stream_topic``), as their docstrings say: after them the core
wakes only its own process's waiters and calls no ``announce``."""


def protocol_methods(protocol: type) -> tuple[str, ...]:
    """The methods ``protocol`` declares itself, in the order it declares them."""
    members = vars(protocol).items()
    return tuple(name for name, value in members if not name.startswith("_") and callable(value))


def check_methods(driver: object, profiles: frozenset[str]) -> None:
    """Refuse a driver lacking a method the core calls: every method of ``Driver``,
    and of each ``PROFILE_DRIVERS`` protocol whose profile is in ``profiles`` (the
    engine's ``Capabilities.profiles()``). Checked once, when the store opens.

    Raises:
        EngineMisconfigured: naming each missing method, its protocol and where
            the guide lists them."""
    required = [(Driver, "")] + [
        (protocol, profile) for profile, protocol in PROFILE_DRIVERS.items() if profile in profiles
    ]
    missing = [
        f"{name} ({protocol.__name__}" + (f", profile {profile}" if profile else "") + ")"
        for protocol, profile in required
        for name in protocol_methods(protocol)
        if not callable(getattr(driver, name, None))
    ]
    if missing:
        raise EngineMisconfigured(
            f"{type(driver).__name__} lacks {len(missing)} method(s) the core calls: "
            f"{', '.join(missing)}. A driver implements every method of "
            "alkstore.driver.Driver, and of the protocol of each optional profile its "
            f"engine's Capabilities declare; {_guide.see(_guide.DRIVER_METHODS)}"
        )
