"""The public surface every engine's store presents (contract §1-§7).

These are ``Protocol``s: applications type against them; the shared core
(``alkstore.core``) is the reference implementation engines reuse. Every
time argument follows contract §0: a duration is ``int | float`` seconds or a
``timedelta``, rounded *up* to whole seconds; an instant is epoch seconds or a
timezone-aware ``datetime``; "now" is always the store's ``Clock``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, NamedTuple, Protocol

from .clock import Clock
from .constants import MAX_REDRIVE
from .options import EnqueueOpts, Limits, QueueOpts, ScheduleOpts
from .stop import StopToken
from .timeconv import Duration
from .values import (
    Enqueued,
    Job,
    JobDependencies,
    JobState,
    LockInfo,
    QueueStats,
    QueueThroughput,
    Schedule,
    StreamEvent,
    SweepResult,
    TickResult,
    WorkerInfo,
)


class AckAndClaim(NamedTuple):
    """What ``JobHandle.ack_and_claim`` did, in its one write."""

    acked: bool
    """Whether the job was deleted (``False``: the claim was no longer live)."""
    claimed: list[JobHandle]
    """The jobs claimed next, as ``claim_batch`` returns them (possibly none)."""


class JobHandle(Protocol):
    """A claim on one job. Ops return ``True`` only while this very claim is live.

    A claim is identified by ``(job id, attempts)``: every claim increments
    ``attempts``, so once anyone reclaims the job (after this claim's deadline
    passed) this handle's operations match nothing. ``ack``, ``heartbeat``,
    ``retry`` and ``fail`` return ``True`` only if the row is still processing
    under this very claim *and* its deadline has not passed; otherwise they
    return ``False`` and change nothing (contract §2, handle-op validity). A
    lost claim is a value, not an error.
    """

    @property
    def job(self) -> Job:
        """The job as this claim saw it (a snapshot taken at claim time)."""

    @property
    def id(self) -> int:
        """The job's id (``job.id``)."""

    @property
    def payload(self) -> Any:
        """The job's decoded payload (``job.payload``)."""

    @property
    def attempts(self) -> int:
        """The attempt number of this claim (``job.attempts``, 1 on the first claim)."""

    def ack(self, result: Any = None) -> bool:
        """Finish the job: delete its row, or, for a job stamped with a
        ``completed_retention_s`` (contract 1.2 §17, the results profile), keep it as
        ``completed`` with ``completed_at`` and ``result``.

        Args:
            result: what the work produced, any JSON value (the payload's rules, at
                most ``MAX_RESULT_BYTES``); kept only by a job with a completed
                retention (a job without one is deleted, its result checked and
                dropped). ``None``: no result.

        Returns:
            ``True`` if the job was acked; ``False`` if this claim is no longer
            live (its deadline passed or the job was reclaimed), in which case
            nothing changed (contract §2).

        Raises:
            ResultError: ``result`` cannot be stored (nothing written).
            ProfileUnavailable: a ``result`` on an engine without the ``results``
                profile (nothing written).
            StoreClosed: the store was closed.
            EngineUnavailable: the database cannot be reached.
        """

    def ack_and_claim(self, worker_id: str, limit: int = 1, result: Any = None) -> AckAndClaim:
        """``ack`` this job, then ``claim_batch(worker_id, limit)`` its queue, in one
        write (contract §12.7): what a worker does when a job succeeds and its
        slot goes straight to the next one, on one connection and, where one
        commit costs less than two (SQLite), as one commit.

        The ack is exactly ``ack(result)``: refused (``acked=False``, nothing changed)
        once the claim is no longer live; the claim happens either way. Each
        step is correct committed on its own (an engine may commit them one by
        one): an error after the ack leaves the job acked and nothing claimed.

        Returns:
            ``AckAndClaim(acked, claimed)``.

        Raises:
            InvalidName: ``worker_id`` is malformed (nothing acked).
            InvalidOptions: ``limit`` is outside 1..10,000 (nothing acked).
            ResultError: ``result`` cannot be stored (nothing acked).
            StoreClosed: the store was closed.
            EngineUnavailable: the database cannot be reached (the ack may have
                committed: see above).
        """

    def heartbeat(self, extend: Duration) -> bool:
        """Keep the claim: set its deadline to ``now + extend`` (absolute, not additive).

        A late heartbeat never steals a job back: once the deadline has passed
        the claim is lost, even if nobody has reclaimed the job yet (contract §2).

        Args:
            extend: seconds (or a ``timedelta``) from now, at least 1 s after rounding up.

        Returns:
            ``True`` if the deadline moved; ``False`` if the claim is no longer live.

        Raises:
            InvalidOptions: ``extend`` is not a duration of at least 1 s.
            StoreClosed: the store was closed.
        """

    def release(self) -> bool:
        """Give the claim back unused (contract §13).

        The job is pending again at its ``run_at``, claimable at once, nothing
        is added to its errors, and the claim costs no attempt of its budget:
        ``attempts`` (which counts claims) keeps it, and ``max_attempts`` grows
        by one. This handle, like any stale one, then matches no later claim.
        What ``alkstore.aio`` does with a claim whose caller was cancelled; a
        worker that claimed more than it will run may do the same.

        Returns:
            ``True`` if released; ``False`` if the claim was no longer live.

        Raises:
            StoreClosed: the store was closed.
        """

    def snooze(self, delay: Duration) -> bool:
        """Put the job back to wait ``delay`` without spending an attempt (contract
        §14, the snooze profile).

        The job is pending again at ``now + delay``, its stamps and error history
        as they were, and ``job.snoozes`` grows by one; as with ``release``,
        ``attempts`` (which counts claims) keeps this claim and ``max_attempts``
        grows by one, so the claim costs nothing of the budget. A job already
        snoozed ``MAX_SNOOZES`` times goes dead instead, with ``last_error =
        "max snoozes exceeded"``: nothing else would stop a job that snoozes
        without end. This handle, like any stale one, then matches no later claim.

        Args:
            delay: how long to wait before the job is claimable again (``0`` = now).

        Returns:
            ``True`` if the job was snoozed (or dead-lettered at the bound);
            ``False`` if this claim is no longer live, in which case nothing changed.

        Raises:
            InvalidOptions: ``delay`` is not a non-negative duration (checked
                before anything is written, even at the bound).
            ProfileUnavailable: the engine lacks the snooze profile.
            StoreClosed: the store was closed.
        """

    def retry(self, error: str, delay: Duration | None = None) -> bool:
        """Give the job back to the queue to run again later.

        The job returns to pending with ``run_at = now + d``, where ``d`` is
        ``delay`` when given, else ``alkstore.retry_delay`` of the job's stamped
        ``backoff_base_s`` and this attempt (contract §2, backoff curve). If the
        attempt budget is spent (``attempts >= max_attempts``) the job goes dead
        with ``last_error = "max attempts exceeded"`` instead.

        Args:
            error: why this attempt failed, kept with the job.
            delay: an explicit wait before the next attempt (``0`` = ready now).

        Returns:
            ``True`` if the job was rescheduled (or dead-lettered at its budget);
            ``False`` if this claim is no longer live, in which case nothing changed.

        Raises:
            InvalidOptions: ``error`` is not a ``str`` or ``delay`` is not a
                non-negative duration (checked even when the budget is spent).
            StoreClosed: the store was closed.
        """

    def fail(self, error: str) -> bool:
        """Dead-letter the job now, with ``last_error = error`` (contract §2).

        Returns:
            ``True`` if the job moved to dead; ``False`` if this claim is no longer live.

        Raises:
            InvalidOptions: ``error`` is not a ``str``.
            StoreClosed: the store was closed.
        """


class QueueConsumer(Protocol):
    """The surface queues and outboxes share (contract §2, §4).

    A queue is a name, not a registered object: work enqueued to a queue
    nobody claims yet is durable work. Jobs move ``pending -> processing ->
    dead``; ``ack`` and ``cancel`` delete them.
    """

    @property
    def name(self) -> str:
        """The queue's name (for an outbox: its reserved backing queue's name)."""

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> Enqueued:
        """Add one job and return its id.

        The queue's ``QueueOpts`` and ``opts`` are resolved now and stamped on
        the row; later operations read the job's stamps, never the queue's
        current opts (contract §2). Waiting claimers wake after the commit.
        With ``opts.unique`` (contract §15, the unique profile) nothing is
        written when another job of the queue holds the key: the result is that
        job's id, with ``duplicate`` set.

        Args:
            payload: any JSON-serializable value; it comes back decoded.
            opts: delay or ``run_at``, priority, a ``max_attempts`` override,
                ``expires`` (relative to now) and ``unique``; default: ready now,
                priority 0.

        Returns:
            The job's id (an ``int``: unique for the store's lifetime, never reused)
            as an ``Enqueued``, whose ``duplicate`` says whether it is the id of
            the job that already held the key.

        Raises:
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes`` (nothing written).
            InvalidOptions: ``opts`` is not an ``EnqueueOpts``.
            ProfileUnavailable: ``opts.unique`` is given and the engine lacks the
                unique profile (nothing written).
            StoreClosed: the store was closed.
            EngineUnavailable: the database cannot be reached.
        """

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None
    ) -> list[Enqueued]:
        """Add one job per payload in one transaction, all stamped alike.

        Every payload is encoded before anything is written: one bad payload
        means no job at all (contract §2). With ``opts.unique`` each payload's
        key (``Unique.key``, or the payload's own when it is ``None``) is checked
        as for ``enqueue``, and a payload whose key an earlier one of the batch
        already has is that one's duplicate (contract §15).

        Args:
            payloads: a list or tuple of JSON-serializable values (may be empty).
            opts: as for ``enqueue``, applied to every job.

        Returns:
            The ids (``Enqueued``), in the order of ``payloads``.

        Raises:
            PayloadError: a payload is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes`` (nothing written).
            InvalidOptions: ``payloads`` is not a sequence, or ``opts`` is not an
                ``EnqueueOpts``.
            ProfileUnavailable: ``opts.unique`` is given and the engine lacks the
                unique profile (nothing written).
            StoreClosed: the store was closed.
        """

    def claim(self, worker_id: str) -> JobHandle | None:
        """Claim the next claimable job, or return ``None`` when there is none.

        Claimable: pending with ``run_at <= now``, or processing past its
        deadline; in both cases not past ``expires_at`` and with attempts left.
        Order: priority descending, then ``run_at``, then id. Claiming sets the
        job processing, increments ``attempts`` and sets its deadline to
        ``now + visibility_timeout_s``. Exactly one concurrent claimer wins a
        job (contract §2).

        Args:
            worker_id: who claims (a name: non-empty, at most 200 characters).

        Returns:
            A ``JobHandle`` for the claim, or ``None`` if nothing is claimable.

        Raises:
            InvalidName: ``worker_id`` is malformed.
            StoreClosed: the store was closed.
            EngineUnavailable: the database cannot be reached.
        """

    def claim_batch(self, worker_id: str, limit: int) -> list[JobHandle]:
        """Claim up to ``limit`` jobs at once, in claim order (see ``claim``).

        Args:
            worker_id: who claims.
            limit: the most jobs to claim, 1 to 10,000.

        Returns:
            The handles, possibly empty; never more than ``limit``.

        Raises:
            InvalidName: ``worker_id`` is malformed.
            InvalidOptions: ``limit`` is not an int within 1..10,000.
            StoreClosed: the store was closed.
        """

    def claim_wait(
        self,
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> JobHandle | None:
        """Claim a job, waiting until one becomes claimable.

        Wake-driven, not busy polling: returns within milliseconds of another
        process's commit, wakes for a delayed ``run_at`` or a lapsing deadline
        on time, and re-polls as a safety net. A database outage while waiting
        is waited out until the timeout (contract §2, wake).

        Args:
            worker_id: who claims.
            timeout: the longest wait; ``None`` waits until ``stop`` is set.
            stop: a ``StopToken`` that ends the wait early.

        Returns:
            A ``JobHandle``, or ``None`` on timeout or stop.

        Raises:
            InvalidName: ``worker_id`` is malformed.
            InvalidOptions: ``timeout`` is not a duration or ``stop`` is not a
                ``StopToken``.
            StoreClosed: the store was (or gets) closed.
        """

    def ack_batch(self, job_ids: Sequence[int], worker_id: str) -> int:
        """Ack every job among ``job_ids`` that ``worker_id`` holds with a live claim.

        Args:
            job_ids: ids of jobs of this queue; others are ignored.
            worker_id: the worker whose claims are acked.

        Returns:
            How many jobs were acked (deleted).

        Raises:
            InvalidName: ``worker_id`` is malformed.
            InvalidOptions: an id is not an int.
            StoreClosed: the store was closed.
        """

    def cancel(self, job_id: int) -> bool:
        """Delete a pending or processing job of this queue, whoever holds it.

        Dead jobs are untouched (contract §2).

        Returns:
            ``True`` if a row was deleted.

        Raises:
            InvalidOptions: ``job_id`` is not an int.
            StoreClosed: the store was closed.
        """

    def get_job(self, job_id: int) -> Job | None:
        """A snapshot of the job with ``job_id``, whatever its queue (id-global).

        Returns:
            A frozen ``Job`` for a pending, processing, dead or completed job;
            ``None`` for an id that names no row (acked without a completed
            retention, cancelled, purged or never issued: contract §17 says how to
            tell "ran" from "never existed"). ``Transaction.get_job_tx`` is the
            queue-filtered read (contract §2).

        Raises:
            InvalidOptions: ``job_id`` is not an int.
            StoreClosed: the store was closed.
        """

    def dependencies(self, job_id: int) -> JobDependencies:
        """Where the job ``job_id`` stands in the dependency graph now, whatever its
        queue (contract 1.2 §18.7): the jobs it still waits for, and the waiting jobs
        that still wait for it. An id that names no job, or a job with no edge, has
        neither.

        Raises:
            InvalidOptions: ``job_id`` is not an int.
            ProfileUnavailable: the engine has no ``dependencies`` profile.
            StoreClosed: the store was closed.
        """

    def sweep_expired(self) -> SweepResult:
        """Run this queue's maintenance, one atomic statement per step.

        In order: move every pending or processing job past ``expires_at`` to
        dead (``last_error = "expired"``); dead-letter lapsed jobs whose attempts
        are spent (``"max attempts exceeded"``); delete dead jobs older than
        their stamped ``dead_letter_retention_s``; with the results profile,
        delete completed jobs older than their stamped ``completed_retention_s``.
        Afterwards no job with a passed ``expires_at`` is pending or processing.
        Nothing runs this for you: call it from a schedule (contract §2, §5, §17).

        Returns:
            ``SweepResult(expired, exhausted, purged, purged_completed)`` counts.

        Raises:
            StoreClosed: the store was closed.
        """

    # -- operations (contract §11, ops profile) -----------------------------------
    def stats(self) -> QueueStats:
        """What this queue holds now (contract §11).

        Returns:
            ``QueueStats``: ready, scheduled, processing, lapsed and dead counts, the
            oldest ready job's age in seconds, and whether the queue is paused.

        Raises:
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    def jobs(
        self,
        state: JobState | str | None = None,
        *,
        after_id: int = 0,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        """A keyset page of this queue's jobs, in id order (contract §11).

        Args:
            state: only jobs in this state (``JobState`` or its name); ``None`` = all,
                dead and completed ones included. ``completed`` needs the results
                profile.
            after_id: only ids greater than this: pass the last id of a page to get
                the next one. Pages never skip or repeat a job, even while jobs are
                added.
            before_id: newest first (contract 1.2): only ids smaller than this, in
                descending id order; pass the last (smallest) id of a page to get
                the next, older one. ``None``: oldest first.
            limit: 1..1000 jobs per page.

        Raises:
            InvalidOptions: a malformed ``state``, ``after_id``, ``before_id`` or ``limit``.
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    def redrive(self, ids: Sequence[int] | None = None, *, limit: int = MAX_REDRIVE) -> list[int]:
        """Turn dead jobs of this queue back into pending work, in one transaction.

        Each dead job named in ``ids`` (``None``: the oldest ``died_at`` first, up to
        ``limit``) becomes a **new** pending job -- fresh id, same payload, priority
        and stamps, ``attempts = 0``, due now, ``expires_at`` as far from now as it
        was from its enqueue -- and its dead row is deleted: after a crash either the
        dead row or the new job exists, never both and never neither. Ids that are
        not dead jobs of this queue are skipped. ``get_job(new).redriven_from`` is
        the old id; claimers wake after the commit (contract §11).

        Returns:
            The new ids, in the order of the dead jobs they replace.

        Raises:
            InvalidOptions: an id is not an int, or ``limit`` is out of range.
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    def purge_dead(
        self, ids: Sequence[int] | None = None, *, older_than_s: Duration | None = None
    ) -> int:
        """Delete this queue's dead jobs: those named in ``ids``, or those dead longer
        than ``older_than_s``, or all of them (contract §11).

        Returns:
            How many were deleted.

        Raises:
            InvalidOptions: an id is not an int, or ``older_than_s`` is malformed.
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    def pause(self) -> bool:
        """Pause the queue, durably and for every process: claims return nothing and
        ``claim_wait`` keeps waiting; enqueue, sweeps and jobs already claimed carry
        on (contract §11).

        Returns:
            ``True`` if the queue was running.

        Raises:
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    def resume(self) -> bool:
        """Resume a paused queue; its waiters (in every process) wake.

        Returns:
            ``True`` if the queue was paused.

        Raises:
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    def paused(self) -> bool:
        """Whether the queue is paused (by any process).

        Raises:
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    # -- limits (contract 1.2 §16, limits profile) ------------------------------
    def set_limits(self, limits: Limits) -> bool:
        """Set the queue's fleet-wide limits, durably and for every process: at most
        ``limits.concurrency`` of its jobs are processing (claimed, deadline not
        passed) at any instant, and at most ``limits.rate`` claims start in any
        ``limits.per`` seconds (a sliding window); claims past them return nothing,
        and the jobs held back stay pending, spend no attempt and keep their order
        (contract §16). Replaces any earlier limits; waiters everywhere wake.

        Returns:
            ``True`` if that changed the stored limit.

        Raises:
            InvalidOptions: ``limits`` is not a ``Limits``.
            ProfileUnavailable: the engine has no limits profile.
            StoreClosed: the store was closed.
        """

    def clear_limits(self) -> bool:
        """Remove the queue's limits: claims are bounded only by their ``limit`` again.

        Returns:
            ``True`` if the queue had a limit.

        Raises:
            ProfileUnavailable: the engine has no limits profile.
            StoreClosed: the store was closed.
        """

    def limits(self) -> Limits | None:
        """The queue's limits as stored (set by any process), ``None`` when it has none.

        Raises:
            ProfileUnavailable: the engine has no limits profile.
            StoreClosed: the store was closed.
        """


class Queue(QueueConsumer, Protocol):
    """A named queue with the ``QueueOpts`` its enqueues stamp (contract §2).

    Get one with ``store.queue(name, opts)``; creating it touches no storage.
    """

    @property
    def opts(self) -> QueueOpts:
        """The options this handle stamps on each job it enqueues."""


class Outbox(QueueConsumer, Protocol):
    """The queue surface over an outbox's reserved backing queue (contract §4).

    Get one with ``store.outbox(name)``. It takes no options: its jobs are
    stamped with ``OUTBOX_QUEUE_OPTS`` (visibility 60 s, 5 attempts, backoff
    base 5 s). Enqueue in a business transaction with
    ``Transaction.outbox_enqueue``.
    """


class Lock(Protocol):
    """A named lease with a TTL (contract §6).

    Expiry is silent: a holder whose TTL lapsed learns of it at its next
    ``renew``. All times come from the store's clock.
    """

    @property
    def name(self) -> str:
        """The lock's name."""

    def acquire(self, owner: str, ttl: Duration) -> bool:
        """Take the lock for ``owner`` until ``now + ttl``.

        Succeeds when the lock is free or lapsed; re-acquiring one's own live
        lock renews it.

        Args:
            owner: who holds the lock (a name).
            ttl: how long the lease lasts, at least 1 s.

        Returns:
            ``True`` if ``owner`` now holds the lock.

        Raises:
            InvalidName: ``owner`` is malformed.
            InvalidOptions: ``ttl`` is not a duration of at least 1 s.
            StoreClosed: the store was closed.
        """

    def renew(self, owner: str, ttl: Duration) -> bool:
        """Extend ``owner``'s live lease to ``now + ttl``.

        Returns:
            ``False`` once the TTL has lapsed or another owner holds the lock.

        Raises:
            InvalidName: ``owner`` is malformed.
            InvalidOptions: ``ttl`` is not a duration of at least 1 s.
            StoreClosed: the store was closed.
        """

    def release(self, owner: str) -> bool:
        """Release ``owner``'s live lease.

        Returns:
            ``True`` if ``owner`` held the lock and it is now free.

        Raises:
            InvalidName: ``owner`` is malformed.
            StoreClosed: the store was closed.
        """

    def holder(self) -> LockInfo | None:
        """The live holder as ``LockInfo(owner, expires_at)``, or ``None`` if free or lapsed.

        Raises:
            StoreClosed: the store was closed.
        """


class Stream(Protocol):
    """An append-only log with durable consumer offsets (contract §7).

    Offsets are strictly increasing per stream, starting at 1. There is no
    engine-default retention: ``trim_to`` is the only way events go.
    """

    @property
    def name(self) -> str:
        """The stream's name."""

    def append(self, payload: Any) -> int:
        """Append one event and return its offset.

        Raises:
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes`` (nothing written).
            StoreClosed: the store was closed.
        """

    def read(self, after: int = 0, limit: int = 100) -> list[StreamEvent]:
        """Events with offsets greater than ``after``, oldest first.

        Args:
            after: the last offset already seen (0 = from the start).
            limit: the most events to return, 1 to 10,000.

        Returns:
            Up to ``limit`` ``StreamEvent(offset, payload, created_at)`` values.

        Raises:
            InvalidOptions: ``after`` is not a non-negative int or ``limit`` is
                out of range.
            StoreClosed: the store was closed.
        """

    def commit(self, consumer: str, offset: int) -> None:
        """Record durably that ``consumer`` has processed events up to ``offset``.

        Raises:
            InvalidName: ``consumer`` is malformed.
            InvalidOptions: ``offset`` is not a non-negative int.
            StoreClosed: the store was closed.
        """

    def offset(self, consumer: str) -> int:
        """The offset ``consumer`` last committed, 0 when it never did.

        Raises:
            InvalidName: ``consumer`` is malformed.
            StoreClosed: the store was closed.
        """

    def wait(
        self, after: int, timeout: Duration | None = None, stop: StopToken | None = None
    ) -> bool:
        """Wait until an event with an offset greater than ``after`` exists.

        Wake-driven like ``Queue.claim_wait`` (contract §7).

        Args:
            after: the last offset already seen.
            timeout: the longest wait; ``None`` waits until ``stop`` is set.
            stop: a ``StopToken`` that ends the wait early.

        Returns:
            ``True`` as soon as such an event exists; ``False`` on timeout or stop.

        Raises:
            InvalidOptions: ``after``, ``timeout`` or ``stop`` is malformed.
            StoreClosed: the store was (or gets) closed.
        """

    def trim_to(self, offset: int) -> int:
        """Delete the events with offsets smaller than ``offset``.

        Returns:
            How many events were deleted.

        Raises:
            InvalidOptions: ``offset`` is not a non-negative int.
            StoreClosed: the store was closed.
        """


class Subscription(Protocol):
    """Ephemeral messages of one channel, from the moment of subscribing (contract §7).

    Delivered to every subscription open when a ``notify`` commits, across
    processes; nothing is stored. Iterate it, or call ``get``; close it (or use
    it as a context manager) when done.
    """

    @property
    def channel(self) -> str:
        """The channel this subscription receives."""

    def get(self, timeout: Duration | None = None) -> Any:
        """The next message's decoded payload.

        Args:
            timeout: the longest wait; ``None`` waits until a message arrives or
                the subscription (or its store) is closed.

        Returns:
            The payload, or ``None`` on timeout or once closed.
        """

    def __iter__(self) -> Iterator[Any]:
        """Yield each message's payload until the subscription or its store closes."""

    def close(self) -> None:
        """Stop receiving; messages not yet read are dropped. Idempotent."""

    def __enter__(self) -> Subscription:
        """Use the subscription in a ``with`` block; it closes on exit.

        Raises:
            StoreClosed: the subscription is already closed.
        """

    def __exit__(self, *exc: object) -> None:
        """Close the subscription."""


class WakeWatcher(Protocol):
    """The wakes of some queues, to wait on: ``store.wake_watcher(queues)`` (contract §2.15).

    What a waiting claim hears, without claiming: a commit in any process that
    announces one of the queues (an enqueue, a release, a retry or snooze to now, a
    redrive, a resume) ends a ``wait`` within milliseconds. A wake says "look
    again", never what changed; time alone (a delayed job falling due, a claim
    lapsing) wakes nobody. Close it (or use it as a context manager) when done.
    """

    @property
    def queues(self) -> tuple[str, ...]:
        """The queues watched, in the order given."""

    def wait(self, timeout: Duration | None = None, stop: StopToken | None = None) -> bool:
        """Block until a wake of a watched queue arrives, ``timeout`` passes or ``stop``
        is set.

        Wakes since the watcher was made (or since the last ``wait`` that returned
        ``True``) count: one that came before the call ends it at once. A wake may
        come without a commit of the watched queues (an engine may report any
        commit, or wake once as it starts watching), but on an idle store the
        wakes stop and every ``wait`` runs its timeout out.

        Args:
            timeout: the longest wait; ``None`` waits until a wake or ``stop``.
            stop: a ``StopToken`` that ends the wait early.

        Returns:
            ``True`` on a wake (and when the store closes during the wait);
            ``False`` on timeout or stop.

        Raises:
            InvalidOptions: ``timeout`` or ``stop`` is malformed.
            StoreClosed: the watcher or its store was closed.
        """

    def close(self) -> None:
        """Stop watching. Idempotent."""

    def __enter__(self) -> WakeWatcher:
        """Use the watcher in a ``with`` block; it closes on exit.

        Raises:
            StoreClosed: the watcher is already closed.
        """

    def __exit__(self, *exc: object) -> None:
        """Close the watcher."""


class Transaction(Protocol):
    """Work that commits or rolls back with the caller's business writes (contract §3).

    Obtained from ``store.transaction()`` (the engine opens the transaction)
    or ``store.attach(conn)`` (the caller's own). A rollback leaves no job, no
    stream event and no wake; waiters are woken only after commit. Once the
    ``with`` block ends, every method raises ``StoreClosed``.
    """

    @property
    def connection(self) -> Any:
        """The engine's DB-API connection (``sqlite3.Connection``, ``psycopg.Connection``).

        Raises:
            StoreClosed: the transaction has finished or the store was closed.
        """

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """Run a business statement on ``connection`` in this transaction.

        Args:
            sql: the statement, in the engine driver's parameter style
                (``?`` for SQLite, ``%s`` for psycopg).
            params: its parameters.

        Returns:
            Whatever the connection's ``execute`` returns (a cursor).

        Raises:
            StoreClosed: the transaction has finished or the store was closed.
        """

    def enqueue(
        self, queue: str | Queue, payload: Any, opts: EnqueueOpts | None = None
    ) -> Enqueued:
        """Enqueue a job that exists only if this transaction commits.

        A ``Queue`` handle stamps that handle's ``QueueOpts`` (contract §11); a bare
        name stamps ``DEFAULT_QUEUE_OPTS``. Reserved
        names are refused: an outbox is reachable only through ``outbox_enqueue``
        (contract §3). With ``opts.unique`` the key is held from this transaction
        on, for the other transactions as the database shows uncommitted rows, and
        a rollback frees it (contract §15).

        Returns:
            The job's id as an ``Enqueued`` (see ``Queue.enqueue``).

        Raises:
            InvalidName: ``queue`` is malformed.
            ReservedName: ``queue`` starts with the reserved prefix.
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes``.
            InvalidOptions: ``opts`` is not an ``EnqueueOpts``.
            ProfileUnavailable: ``opts.unique`` is given and the engine lacks the
                unique profile.
            StoreClosed: the transaction has finished or the store was closed.
        """

    def outbox_enqueue(self, outbox: str, payload: Any) -> int:
        """Enqueue into the outbox ``outbox``, committed with this transaction (contract §4).

        Returns:
            The new job's id.

        Raises:
            InvalidName: ``outbox`` is malformed.
            ReservedName: ``outbox`` starts with the reserved prefix.
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes``.
            StoreClosed: the transaction has finished or the store was closed.
        """

    def ack(self, handle: JobHandle, result: Any = None) -> None:
        """Ack ``handle``'s job in this transaction (contract 1.2 §3.8): the job's
        completion commits or rolls back with the business writes made on it, so work
        whose effect is a write in this database takes effect exactly once.

        The ack is ``handle.ack(result)``'s (§2.12, §17: the job deleted, or kept
        completed with ``result`` by a queue with a completed retention), run on this
        transaction's connection; nothing of it is visible outside until the commit,
        and waiters elsewhere see the claim as it was until then.

        Args:
            handle: a claim of this store (``claim``, ``claim_batch``, ``claim_wait``,
                the worker's ``JobContext``'s job handle).
            result: as for ``JobHandle.ack``.

        Raises:
            StaleHandle: the claim is no longer valid (its deadline passed, another
                claim superseded it, or it was finished): raised here, inside the
                transaction and before it commits, so that the caller rolls back
                (leaving the ``with`` block with it does) rather than commit the
                effect of a job that may run again elsewhere.
            ResultError: ``result`` cannot be stored (nothing written).
            ProfileUnavailable: a ``result`` on an engine without the results
                profile (nothing written).
            InvalidOptions: ``handle`` is not a job handle, or is one of another store.
            StoreClosed: the transaction has finished or the store was closed.
        """

    def ack_all(
        self, handles: Sequence[JobHandle], results: Sequence[Any] | None = None
    ) -> tuple[JobHandle, ...]:
        """Ack many claims in this transaction, in one statement where the engine has
        one (contract 1.2 §3.10): each is ``tx.ack(handle, result)`` under its own
        claim ``(id, attempts)``, and a claim that is no longer valid is refused alone,
        without an exception: it changes nothing, the others are acked, and the
        transaction stays usable, to commit or roll back as the caller decides.

        Args:
            handles: claims of this store, as for ``ack``; a claim named twice is
                acked once (its second naming is refused, as a second ``tx.ack``).
            results: one result per handle (``None``: no result), as for
                ``JobHandle.ack``; ``None``: no result for any.

        Returns:
            The handles refused because their claim was no longer valid (its
            deadline passed, another claim superseded it, or it was finished), in
            the order given; ``()`` when every claim was acked.

        Raises:
            ResultError: a result cannot be stored (nothing written).
            ProfileUnavailable: a result on an engine without the results profile
                (nothing written).
            InvalidOptions: ``handles`` or ``results`` is not a sequence, their
                lengths differ, or a handle is not a job handle of this store
                (nothing written).
            StoreClosed: the transaction has finished or the store was closed.
        """

    def retry(self, handle: JobHandle, error: str, delay: Duration | None = None) -> None:
        """Retry ``handle``'s job in this transaction (contract 1.2 §3.9): what
        ``handle.retry(error, delay)`` writes (§2.10: pending again after ``delay`` or
        the backoff curve, ``error`` kept with the job; dead with ``"max attempts
        exceeded"`` at its attempt budget, its dependents with it, §18.3), run on this
        transaction's connection, committed or rolled back with it.

        Args:
            handle: a claim of this store, as for ``ack``.
            error: why this attempt failed, kept with the job.
            delay: an explicit wait before the next attempt (``0`` = ready now).

        Raises:
            StaleHandle: the claim is no longer valid, as for ``ack``: nothing of it
                is written and the transaction stays usable.
            InvalidOptions: ``error`` is not a ``str``, ``delay`` is not a
                non-negative duration, or ``handle`` is not a job handle of this
                store (nothing written).
            StoreClosed: the transaction has finished or the store was closed.
        """

    def fail(self, handle: JobHandle, error: str) -> None:
        """Dead-letter ``handle``'s job in this transaction (contract 1.2 §3.9): what
        ``handle.fail(error)`` writes (§2.11: dead with ``last_error = error``, its
        dependents with it, §18.3), run on this transaction's connection, committed
        or rolled back with it.

        Args:
            handle: a claim of this store, as for ``ack``.
            error: why the job failed, kept with the job.

        Raises:
            StaleHandle: the claim is no longer valid, as for ``ack``: nothing of it
                is written and the transaction stays usable.
            InvalidOptions: ``error`` is not a ``str``, or ``handle`` is not a job
                handle of this store (nothing written).
            StoreClosed: the transaction has finished or the store was closed.
        """

    def retry_all(
        self,
        handles: Sequence[JobHandle],
        errors: str | Sequence[str],
        delays: Duration | Sequence[Duration | None] | None = None,
    ) -> tuple[JobHandle, ...]:
        """Retry many claims in this transaction, in one statement where the engine
        has one (contract 1.2 §3.11): each is ``tx.retry(handle, error, delay)`` under
        its own claim ``(id, attempts)``, and a claim that is no longer valid is
        refused alone, without an exception, as by ``ack_all``.

        Args:
            handles: claims of this store, as for ``ack_all``.
            errors: one error per handle, or one ``str`` for every handle.
            delays: ``None`` (each waits its backoff curve), one delay for every
                handle, or one delay (or ``None``) per handle.

        Returns:
            The handles refused because their claim was no longer valid, in the
            order given; ``()`` when every claim was written.

        Raises:
            InvalidOptions: ``handles``, ``errors`` or ``delays`` is not a sequence
                of the handles' length, an error is not a ``str``, a delay is not a
                non-negative duration, or a handle is not a job handle of this store
                (nothing written).
            StoreClosed: the transaction has finished or the store was closed.
        """

    def fail_all(
        self, handles: Sequence[JobHandle], errors: str | Sequence[str]
    ) -> tuple[JobHandle, ...]:
        """Dead-letter many claims' jobs in this transaction, in one statement where
        the engine has one (contract 1.2 §3.11): each is ``tx.fail(handle, error)``
        under its own claim, a claim no longer valid refused alone, as by ``ack_all``.

        Args:
            handles: claims of this store, as for ``ack_all``.
            errors: one error per handle, or one ``str`` for every handle.

        Returns:
            The handles refused because their claim was no longer valid, in the
            order given; ``()`` when every claim was written.

        Raises:
            InvalidOptions: ``handles`` or ``errors`` is not a sequence of the
                handles' length, an error is not a ``str``, or a handle is not a job
                handle of this store (nothing written).
            StoreClosed: the transaction has finished or the store was closed.
        """

    def get_job_tx(self, queue: str, job_id: int) -> Job | None:
        """The job ``job_id`` of ``queue`` as this transaction sees it (queue-filtered).

        Returns:
            The ``Job``, or ``None`` if no row with that id belongs to ``queue``.

        Raises:
            InvalidName: ``queue`` is malformed.
            InvalidOptions: ``job_id`` is not an int.
            StoreClosed: the transaction has finished or the store was closed.
        """

    def stream_append(self, stream: str, payload: Any) -> int:
        """Append to ``stream`` as part of this transaction; returns the offset.

        Raises:
            InvalidName: ``stream`` is malformed.
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes``.
            ProfileUnavailable: the engine has no streams profile.
            StoreClosed: the transaction has finished or the store was closed.
        """

    def notify(self, channel: str, payload: Any) -> None:
        """Publish on ``channel``, delivered only if this transaction commits (contract §7).

        Raises:
            InvalidName: ``channel`` is malformed.
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes``.
            ProfileUnavailable: the engine has no pubsub profile.
            StoreClosed: the transaction has finished or the store was closed.
        """


class Store(Protocol):
    """One opened engine: thread-safe, shareable, a context manager (contract §1).

    Get one with ``alkstore.open(url)``. Queue, outbox, lock and stream handles
    are cheap views over it; ``close()`` releases its connections, after which
    every call raises ``StoreClosed``.
    """

    @property
    def clock(self) -> Clock:
        """The clock every stored time comes from (contract §1)."""

    def queue(self, name: str, opts: QueueOpts | None = None) -> Queue:
        """A handle on the queue ``name``; touches no storage.

        Args:
            name: the queue's name.
            opts: what its enqueues stamp; default ``DEFAULT_QUEUE_OPTS``
                (visibility 300 s, 3 attempts, backoff base 5 s, dead kept forever).

        Raises:
            InvalidName: ``name`` is malformed.
            ReservedName: ``name`` starts with the reserved prefix.
            InvalidOptions: ``opts`` is not a ``QueueOpts``.
            StoreClosed: the store was closed.
        """

    def outbox(self, name: str) -> Outbox:
        """A handle on the outbox ``name`` (contract §4).

        Raises:
            InvalidName: ``name`` is malformed.
            ReservedName: ``name`` starts with the reserved prefix.
            StoreClosed: the store was closed.
        """

    def lock(self, name: str) -> Lock:
        """A handle on the lock ``name`` (contract §6).

        Raises:
            InvalidName: ``name`` is malformed.
            ReservedName: ``name`` starts with the reserved prefix.
            ProfileUnavailable: the engine has no locks profile.
            StoreClosed: the store was closed.
        """

    def claim_wait_any(
        self,
        queues: Sequence[Queue | Outbox],
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> JobHandle | None:
        """Claim a job from any of ``queues``, waiting until one is claimable.

        ``claim_wait`` over several queues at once (contract §12): the queues
        are tried in the order given (a caller wanting fairness rotates them),
        and a wake from any of them -- another process's commit, a delayed
        ``run_at``, a lapsing deadline, a ``resume`` -- ends the wait within
        milliseconds. ``store.queue(q).claim_wait(w)`` is
        ``store.claim_wait_any([store.queue(q)], w)``.

        Args:
            queues: 1..``MAX_WAIT_QUEUES`` distinct queue or outbox handles of
                this store.
            worker_id: who claims.
            timeout: the longest wait; ``None`` waits until ``stop`` is set.
            stop: a ``StopToken`` that ends the wait early.

        Returns:
            A ``JobHandle`` of one of ``queues``, or ``None`` on timeout or stop.

        Raises:
            InvalidOptions: ``queues`` is not a list or tuple of 1..``MAX_WAIT_QUEUES``
                distinct handles of this store, or ``timeout``/``stop`` is malformed.
            InvalidName: ``worker_id`` is malformed.
            StoreClosed: the store was (or gets) closed.
        """

    def transaction(self) -> AbstractContextManager[Transaction]:
        """Open an engine transaction: ``with store.transaction() as tx: ...``.

        It commits when the block ends normally and rolls back on an exception;
        wakes fire only after the commit (contract §3).

        Raises:
            ProfileUnavailable: the engine has no transactions profile.
            StoreClosed: the store was closed.
            EngineUnavailable: the database cannot be reached.
        """

    def attach(self, connection: Any) -> AbstractContextManager[Transaction]:
        """Join the caller's own open transaction on ``connection`` (contract §3).

        The engine's statements run inside the caller's transaction; the store
        never commits or rolls back the caller's connection.

        Args:
            connection: a ``sqlite3.Connection`` on the same database file, or a
                ``psycopg.Connection``, as the engine accepts.

        Raises:
            InvalidOptions: the engine cannot use ``connection``.
            StoreClosed: the store was closed.
        """

    def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        """Create or update (by name) a schedule that enqueues ``payload`` into ``queue``.

        A new schedule, or one whose spec or time zone changed, first fires at
        its first boundary after now (``now + interval`` for ``@every``);
        re-registering the same spec in the same zone keeps its next boundary,
        whatever else changed. Nothing fires until someone ticks (contract §5).

        Args:
            name: the schedule's name.
            spec: ``"@every <n><s|m|h|d>"`` (``"@every 300s"``), five cron fields
                (``"0 9 * * MON-FRI"``) or a cron nickname (``"@daily"``).
            queue: the target queue's name.
            payload: what each fire enqueues.
            opts: priority, ``max_attempts`` and ``expires`` of each fired job, the
                time zone a cron spec is read in and the catch-up policy.

        Returns:
            The stored ``Schedule``.

        Raises:
            InvalidName: ``name`` or ``queue`` is malformed.
            ReservedName: ``name`` or ``queue`` starts with the reserved prefix.
            InvalidSpec: ``spec`` is not in the grammar (the message names the cron
                field at fault; six fields, seconds first, are refused).
            InvalidOptions: ``opts`` is not a ``ScheduleOpts``.
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes``.
            ProfileUnavailable: the engine has no scheduler profile, or no ``cron``
                profile for a cron spec, a zone other than ``"UTC"`` or a policy
                other than ``"all"``.
            StoreClosed: the store was closed.
        """

    def declare_schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        """``schedule``, leased: declare the schedule ``name`` until ``now +
        DECLARATION_LEASE_S`` (contract 1.2 §5.11).

        What ``Worker.periodic`` does for each declaration when the worker starts.
        Upserts as ``schedule`` does (an unchanged spec in an unchanged zone keeps
        its boundary, so a fleet starting at once declares each schedule once) and
        sets its lease; ``renew_schedules`` extends it. A tick removes a declared
        schedule whose lease has lapsed, before it fires anything; a later
        ``schedule`` of the name makes it undeclared (never lapsing) again.

        Args:
            name: the schedule's name.
            spec: a spec as ``schedule`` takes.
            queue: the target queue's name.
            payload: what each fire enqueues.
            opts: as ``schedule``'s.

        Returns:
            The stored ``Schedule``, its ``declared_until`` set.

        Raises:
            InvalidName: ``name`` or ``queue`` is malformed.
            ReservedName: ``name`` or ``queue`` starts with the reserved prefix.
            InvalidSpec: ``spec`` is not in the grammar, or the zone is unknown.
            InvalidOptions: ``opts`` is not a ``ScheduleOpts``.
            PayloadError: ``payload`` is not JSON-serializable or is too large.
            ProfileUnavailable: the engine has no ``periodic`` profile.
            StoreClosed: the store was closed.
        """

    def renew_schedules(self, names: Sequence[str]) -> list[str]:
        """Extend the lease of the declared schedules among ``names`` to ``now +
        DECLARATION_LEASE_S`` (contract 1.2 §5.11); nothing else of them changes.

        A name that is gone (its lease lapsed and a tick removed it, or it was
        unscheduled) or undeclared (``schedule`` took it over) is not renewed.

        Returns:
            The names renewed, ordered by name.

        Raises:
            InvalidOptions: ``names`` is not a list or tuple.
            InvalidName: a name is malformed.
            ReservedName: a name starts with the reserved prefix.
            ProfileUnavailable: the engine has no ``periodic`` profile.
            StoreClosed: the store was closed.
        """

    def unschedule(self, name: str) -> bool:
        """Delete the schedule ``name``; ``True`` if it existed.

        Raises:
            InvalidName: ``name`` is malformed.
            ProfileUnavailable: the engine has no scheduler profile.
            StoreClosed: the store was closed.
        """

    def get_schedule(self, name: str) -> Schedule | None:
        """The schedule ``name``, or ``None``.

        Raises:
            InvalidName: ``name`` is malformed.
            ProfileUnavailable: the engine has no scheduler profile.
            StoreClosed: the store was closed.
        """

    def schedules(self) -> list[Schedule]:
        """Every schedule, ordered by name.

        Raises:
            ProfileUnavailable: the engine has no scheduler profile.
            StoreClosed: the store was closed.
        """

    def tick_schedules(self, worker_id: str) -> TickResult:
        """Fire every due boundary once, as ``worker_id``, under the leadership lock.

        Each fire enqueues the payload and advances ``next_fire_at`` to the next
        boundary in one transaction, so two tickers never fire one boundary
        twice. Of a schedule's missed boundaries its catch-up policy fires all
        (at most ``CATCH_UP_CAP``, 64, per tick), the latest, or those due less
        than ``MISFIRE_GRACE_S`` ago; the rest are skipped forward and counted.
        If another worker holds the live leadership lock, nothing fires
        (contract §5).

        Returns:
            ``TickResult(fired, skipped)``.

        Raises:
            InvalidName: ``worker_id`` is malformed.
            ProfileUnavailable: the engine has no scheduler profile.
            StoreClosed: the store was closed.
        """

    def run_schedules(self, stop: StopToken, worker_id: str | None = None) -> None:
        """Lead the scheduler until ``stop`` is set.

        Waits while someone else holds the leadership lock, then loops: renew
        the lock, tick, sleep until the next due boundary (contract §5).

        Args:
            stop: ends the loop; the call then returns ``None``.
            worker_id: the leader's name; default: host, pid and a random suffix.

        Raises:
            LeadershipLost: the lock lapsed or was taken; raised before ticking.
            InvalidOptions: ``stop`` is not a ``StopToken``.
            InvalidName: ``worker_id`` is malformed.
            ProfileUnavailable: the engine has no scheduler profile.
            StoreClosed: the store was closed.
        """

    def register_worker(self, info: WorkerInfo) -> WorkerInfo:
        """Register the worker process ``info`` (contract 1.2 §19), listed by ``workers``
        until ``WORKER_LEASE_S`` from now unless it heartbeats.

        What ``Worker.run`` does when it starts. Registering an id again replaces its
        row (host, pid, queues, ``started_at`` and all).

        Args:
            info: the worker: ``id`` (the worker id its claims carry), ``host``,
                ``pid``, ``queues`` and ``started_at``; its ``last_seen`` and
                ``lease_until`` are ignored.

        Returns:
            The worker as stored: ``last_seen`` now, ``lease_until`` now plus
            ``WORKER_LEASE_S``, ``queues`` a tuple.

        Raises:
            InvalidOptions: ``info`` is not a ``WorkerInfo``, or its host, pid,
                queue list or ``started_at`` is out of range.
            InvalidName: its id or a queue name is malformed.
            ReservedName: a queue name starts with the reserved prefix.
            ProfileUnavailable: the engine has no ``workers`` profile.
            StoreClosed: the store was closed.
        """

    def heartbeat_worker(self, worker_id: str, finished: Mapping[str, int] | None = None) -> bool:
        """Renew the lease of the registered worker ``worker_id`` to ``WORKER_LEASE_S``
        from now (contract 1.2 §19), and count the jobs it finished.

        Args:
            worker_id: the registered worker's id.
            finished: queue name to how many of its jobs the worker finished (acked)
                since its last heartbeat; added to the current minute's count of each
                queue (``throughput``), whether or not the lease held.

        Returns:
            ``True`` if it was listed; ``False`` if it never registered, deregistered,
            or its lease had lapsed (register it again).

        Raises:
            InvalidName: ``worker_id`` or a queue name of ``finished`` is malformed.
            ReservedName: a queue name of ``finished`` starts with the reserved prefix.
            InvalidOptions: ``finished`` is not a mapping, names over
                ``MAX_WORKER_QUEUES`` queues, or a count is not an int within
                ``0..MAX_FINISHED_COUNT``.
            ProfileUnavailable: the engine has no ``workers`` profile.
            StoreClosed: the store was closed.
        """

    def throughput(self) -> list[QueueThroughput]:
        """How many jobs of each queue workers finished per minute over the last hour
        (contract 1.2 §19.6), as their heartbeats reported them; a queue with no
        count in the hour is left out. Ordered by queue name byte-wise.

        Raises:
            ProfileUnavailable: the engine has no ``workers`` profile.
            StoreClosed: the store was closed.
        """

    def deregister_worker(self, worker_id: str) -> bool:
        """Remove the worker ``worker_id`` from the registry (contract 1.2 §19): what
        ``Worker.run`` does when it stops.

        Returns:
            ``True`` if it was registered (listed or lapsed).

        Raises:
            InvalidName: ``worker_id`` is malformed.
            ProfileUnavailable: the engine has no ``workers`` profile.
            StoreClosed: the store was closed.
        """

    def workers(self) -> list[WorkerInfo]:
        """Every live worker (contract 1.2 §19): registered, its lease not lapsed,
        ordered by id. The jobs one holds are its queues' processing jobs whose
        ``worker_id`` is its id.

        Raises:
            ProfileUnavailable: the engine has no ``workers`` profile.
            StoreClosed: the store was closed.
        """

    def stream(self, name: str) -> Stream:
        """A handle on the stream ``name`` (contract §7).

        Raises:
            InvalidName: ``name`` is malformed.
            ReservedName: ``name`` starts with the reserved prefix.
            ProfileUnavailable: the engine has no streams profile.
            StoreClosed: the store was closed.
        """

    def notify(self, channel: str, payload: Any) -> None:
        """Publish ``payload`` to every subscription of ``channel`` open now (contract §7).

        Raises:
            InvalidName: ``channel`` is malformed.
            PayloadError: ``payload`` is not JSON-serializable, nests deeper than
                ``MAX_PAYLOAD_DEPTH``, or its JSON text is over the store's
                ``max_payload_bytes``.
            ProfileUnavailable: the engine has no pubsub profile.
            StoreClosed: the store was closed.
        """

    def stats(self) -> list[QueueStats]:
        """Stats of every queue with a job (live or dead) or a pause, reserved ones
        included, ordered by name (contract §11; see ``Queue.stats``).

        Raises:
            ProfileUnavailable: the engine has no ops profile.
            StoreClosed: the store was closed.
        """

    def subscribe(self, channel: str) -> Subscription:
        """Receive the messages published on ``channel`` from now on (contract §7).

        Raises:
            InvalidName: ``channel`` is malformed.
            ProfileUnavailable: the engine has no pubsub profile.
            StoreClosed: the store was closed.
        """

    def wake_watcher(self, queues: Sequence[str]) -> WakeWatcher:
        """A ``WakeWatcher`` of the queues named ``queues`` (contract §2.15).

        It hears every wake from the moment this returns: a commit that announces
        one of the queues, in this store or any other store or process on the
        same database, ends its ``wait`` promptly.

        Args:
            queues: a list or tuple of distinct queue names, as ``stats()`` lists
                them (the reserved backing queues of outboxes too).

        Raises:
            InvalidOptions: ``queues`` is not a non-empty list or tuple of
                distinct names.
            InvalidName: a name is malformed.
            StoreClosed: the store was closed.
        """

    def close(self) -> None:
        """Release the store's connections and wake its waiters. Idempotent.

        Every later call raises ``StoreClosed``.
        """

    @property
    def closed(self) -> bool:
        """Whether ``close()`` has been called."""

    def __enter__(self) -> Store:
        """Use the store in a ``with`` block; it closes on exit."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
