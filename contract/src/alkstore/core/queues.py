"""Queue, outbox and job-handle front ends over a ``Driver`` (contract §2, §4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

from .. import api
from .._surface import implements
from ..api import AckAndClaim, JobHandle
from ..constants import MAX_REDRIVE, MAX_SNOOZES
from ..driver import ERROR_SNOOZES, ERROR_UNDECODABLE, Driver, queue_topic
from ..errors import InvalidOptions
from ..names import validate_identifier
from ..options import EnqueueOpts, Limits, QueueOpts, Unique, check_type, resolve_stamps
from ..params import (
    AckBatch,
    Bury,
    Cancel,
    Claim,
    ClaimRef,
    GetJob,
    Heartbeat,
    ListJobs,
    NextWake,
    PurgeDeadJobs,
    QueueStatsAt,
    Redrive,
    SetLimits,
    SetPaused,
    Snooze,
    Sweep,
)
from ..payload import UndecodablePayload
from ..stop import StopToken
from ..timeconv import Duration, duration_seconds
from ..values import Enqueued, Job, JobDependencies, JobState, QueueStats, SweepResult
from .checks import (
    MAX_JOB_ID,
    check_job_id,
    check_limit,
    check_page_limit,
    check_state,
    enqueue_opts,
    storable_id,
)
from .claiming import claim_waiting
from .context import StoreContext
from .dependencies import check_after, insert_after, revive_dependents, waits
from .limits import with_limits
from .outcomes import acking, burying, failing, retrying
from .unique import any_new, insert_unique, insert_unique_one
from .waiting import Deadline

_BY_RUN_AT_THEN_ID = attrgetter("run_at", "id")
_BY_PRIORITY = attrgetter("priority")


def _sort_in_claim_order(jobs: list[Job]) -> None:
    """Priority descending, then run_at, then id: two stable C-level sorts (the later
    one by priority keeps the run_at/id order among equals), cheaper than one sort
    with a Python key function per job."""
    jobs.sort(key=_BY_RUN_AT_THEN_ID)
    jobs.sort(key=_BY_PRIORITY, reverse=True)


@implements(api.JobHandle)
class CoreJobHandle:
    """One claim: ``(job.id, job.attempts)`` identifies it for every handle op.

    Returned by ``claim``, ``claim_batch`` and ``claim_wait``. ``ack``,
    ``heartbeat``, ``retry`` and ``fail`` return ``False`` and change nothing once
    the claim is lost (deadline passed, or reclaimed): see
    ``alkstore.api.JobHandle`` (contract §2).
    """

    __slots__ = ("_job", "_queue")

    def __init__(self, queue: CoreQueue, job: Job) -> None:
        self._queue = queue
        self._job = job

    @property
    def job(self) -> Job:
        return self._job

    @property
    def id(self) -> int:
        return self._job.id

    @property
    def payload(self) -> Any:
        return self._job.payload

    @property
    def attempts(self) -> int:
        return self._job.attempts

    @property
    def queue(self) -> str:
        """The name of the job's queue."""
        return self._job.queue

    @property
    def worker_id(self) -> str | None:
        """The worker that holds this claim."""
        return self._job.worker_id

    def opened_by(self, context: StoreContext) -> bool:
        """Whether this claim was made by the store whose context is ``context``."""
        return self._queue.opened_by(context)

    def ack(self, result: Any = None) -> bool:
        return self.ack_durably(result, durable=True)

    def ack_durably(self, result: Any = None, *, durable: bool) -> bool:
        """``ack``; with ``durable=False`` its commit may not wait for the disk on an
        engine with the ``async_acks`` profile (§12.11; ignored by any other)."""
        ctx = self._queue._context
        job = self._job
        hint = _async_ack_hint(ctx, durable)
        if result is None and job.completed_retention_s is None and hint is None:
            now = ctx.now()  # the plain ack: today's statement, at today's cost
            return ctx.write(lambda c: ctx.driver.ack(c, ClaimRef(job.id, job.attempts, now)))
        ack = acking(ctx, job, result)
        now = ctx.now()

        def work(c: Any) -> bool:
            if hint is not None:
                hint(c)
            return ack(c, now)

        return ctx.write(work)

    def ack_and_claim(self, worker_id: str, limit: int = 1, result: Any = None) -> AckAndClaim:
        return self.ack_durably_and_claim(worker_id, limit, result, durable=True)

    def ack_durably_and_claim(
        self, worker_id: str, limit: int = 1, result: Any = None, *, durable: bool
    ) -> AckAndClaim:
        """``ack_and_claim``; with ``durable=False`` the ack's commit (never the
        claim's) may not wait for the disk, as ``ack_durably`` has it (§12.11)."""
        queue = self._queue
        validate_identifier(worker_id, "worker_id")
        check_limit(limit)
        ctx = queue._context
        job = self._job
        ack = acking(ctx, job, result)
        hint = _async_ack_hint(ctx, durable)
        now = ctx.now()

        def work(c: Any) -> tuple[bool, list[Job]]:
            ctx.prefer_one_commit(c)  # the ack and the claim change the same pages
            if hint is not None:
                hint(c)  # the ack's commit only: the claim stays durable
            acked = ack(c, now)
            return acked, queue._claim_rows(c, worker_id, now, limit)

        acked, jobs = ctx.write(work)
        return AckAndClaim(acked, queue._handles(jobs))

    def heartbeat(self, extend: Duration) -> bool:
        seconds = duration_seconds(extend, "extend", minimum=1)
        ctx = self._queue._context
        now = ctx.now()
        job = self._job
        return ctx.write(
            lambda c: ctx.driver.heartbeat(c, Heartbeat(job.id, job.attempts, now, now + seconds))
        )

    def release(self) -> bool:
        ctx = self._queue._context
        now = ctx.now()
        job = self._job
        # The statement announces the queue to other processes; wake our own waiters.
        released = ctx.write(
            lambda c: ctx.driver.release_claim(c, ClaimRef(job.id, job.attempts, now))
        )
        if released:
            ctx.hub.notify(queue_topic(job.queue))
        return released

    def snooze(self, delay: Duration) -> bool:
        seconds = duration_seconds(delay, "delay")
        ctx = self._queue._context
        driver = ctx.snooze()
        job = self._job
        if job.snoozes >= MAX_SNOOZES:
            return self._bury(ERROR_SNOOZES, None)
        now = ctx.now()
        # The statement announces the queue to other processes; wake our own waiters.
        snoozed = ctx.write(
            lambda c: driver.snooze(c, Snooze(job.id, job.attempts, now, now + seconds))
        )
        if snoozed:
            ctx.hub.notify(queue_topic(job.queue))
        return snoozed

    def retry(self, error: str, delay: Duration | None = None) -> bool:
        ctx = self._queue._context
        job = self._job
        retry, wakes = retrying(ctx, job, error, delay)
        now = ctx.now()
        ok = ctx.write(lambda c: retry(c, now))
        if ok and wakes:
            # The reschedule announced the queue: waiters elsewhere re-plan, as do ours.
            ctx.hub.notify(queue_topic(job.queue))
        return ok

    def fail(self, error: str) -> bool:
        ctx = self._queue._context
        fail = failing(ctx, self._job, error)
        now = ctx.now()
        return ctx.write(lambda c: fail(c, now))

    def _bury(self, last_error: str, error: str | None) -> bool:
        ctx = self._queue._context
        bury = burying(ctx, self._job, last_error, error)
        now = ctx.now()
        return ctx.write(lambda c: bury(c, now))

    def __repr__(self) -> str:
        return (
            f"<JobHandle queue={self._job.queue!r} id={self._job.id} attempt={self._job.attempts}>"
        )


@implements(api.Queue)
class CoreQueue:
    """A queue is a name plus the opts its enqueues stamp; it touches no storage.

    Returned by ``store.queue(name, opts)``; the full contract of each method is
    on ``alkstore.api.QueueConsumer`` (contract §2).
    """

    def __init__(self, context: StoreContext, name: str, opts: QueueOpts) -> None:
        self._context = context
        self._name = name
        self._opts = opts
        self._topic = queue_topic(name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def opts(self) -> QueueOpts:
        return self._opts

    # -- producing --------------------------------------------------------
    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> Enqueued:
        # enqueue_many of one payload, without the checks a one-item list passes anyway.
        self._context.check_open()
        resolved = enqueue_opts(opts)
        text = self._context.encode(payload)
        if resolved.limit_key is not None:
            self._context.require("key_limits")
        if resolved.metadata is not None:
            self._context.require("metadata")
        if waits(resolved):
            return Enqueued(self._insert_after([text], resolved)[0])
        unique = resolved.unique
        if unique is not None:
            return self._insert_unique_one(text, resolved, unique)
        return Enqueued(self._insert([text], resolved)[0])

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None
    ) -> list[Enqueued]:
        ctx = self._context
        ctx.check_open()
        if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Sequence):
            raise InvalidOptions("payloads must be a sequence (list or tuple) of payloads")
        resolved = enqueue_opts(opts)
        texts = [ctx.encode(p) for p in payloads]  # refuse bad payloads before writing
        if resolved.limit_key is not None:
            ctx.require("key_limits")  # even for an empty batch
        if resolved.metadata is not None:
            ctx.require("metadata")  # even for an empty batch
        if waits(resolved):
            return list(map(Enqueued, self._insert_after(texts, resolved)))
        if resolved.unique is not None:
            ctx.unique()  # an engine without the profile refuses even an empty batch
            return self._insert_unique(texts, resolved, resolved.unique) if texts else []
        if not texts:
            return []
        return list(map(Enqueued, self._insert(texts, resolved)))

    def _insert(self, texts: list[str], resolved: EnqueueOpts) -> list[int]:
        ctx = self._context
        # Every job of one enqueue is stamped alike: the stamps are resolved once.
        stamps = resolve_stamps(self._name, self._opts, resolved, ctx.now())
        driver = ctx.driver
        ids = ctx.write(lambda c: driver.insert_jobs(c, stamps, texts))
        ctx.hub.notify(self._topic)
        return ids

    def _insert_after(self, texts: list[str], resolved: EnqueueOpts) -> list[int]:
        """The enqueue of jobs that wait for others (contract 1.2 §18)."""
        after, finished = check_after(resolved)
        ctx = self._context
        driver = ctx.dependencies()  # an engine without the profile refuses even an empty batch
        if not texts:
            return []
        stamps = resolve_stamps(self._name, self._opts, resolved, ctx.now())
        ids = ctx.write(lambda c: insert_after(driver, c, stamps, texts, after, finished))
        ctx.hub.notify(self._topic)
        return ids

    def _insert_unique_one(self, text: str, resolved: EnqueueOpts, unique: Unique) -> Enqueued:
        """``_insert_unique`` of one payload (the hot path of a unique enqueue)."""
        ctx = self._context
        driver = ctx.unique()
        stamps = resolve_stamps(self._name, self._opts, resolved, ctx.now())
        result = ctx.write(lambda c: insert_unique_one(driver, c, stamps, text, unique))
        if not result.duplicate:
            ctx.hub.notify(self._topic)
        return result

    def _insert_unique(
        self, texts: list[str], resolved: EnqueueOpts, unique: Unique
    ) -> list[Enqueued]:
        """The unique enqueue (contract §15), its own statement: the plain path above
        pays nothing for it."""
        ctx = self._context
        driver = ctx.unique()
        stamps = resolve_stamps(self._name, self._opts, resolved, ctx.now())
        results = ctx.write(lambda c: insert_unique(driver, c, stamps, texts, unique))
        if any_new(results):
            ctx.hub.notify(self._topic)
        return results

    # -- consuming --------------------------------------------------------
    def claim(self, worker_id: str) -> JobHandle | None:
        handles = self.claim_batch(worker_id, 1)
        return handles[0] if handles else None

    def claim_batch(self, worker_id: str, limit: int) -> list[JobHandle]:
        return self._claim_batch(worker_id, limit, None)

    def _claim_batch(self, worker_id: str, limit: int, wait_s: float | None) -> list[JobHandle]:
        validate_identifier(worker_id, "worker_id")
        check_limit(limit)
        ctx = self._context
        now = ctx.now()
        jobs = ctx.write(lambda c: self._claim_rows(c, worker_id, now, limit), wait_s)
        return self._handles(jobs)

    def _claim_rows(self, c: Any, worker_id: str, now: int, limit: int) -> list[Job]:
        """Inside a write transaction: claim up to ``limit`` jobs (arguments checked)."""
        driver = self._context.driver
        # The claim dead-letters lapsed rows whose budget is spent before it
        # claims: such a row is never handed out again.
        jobs = driver.claim(c, Claim(self._name, worker_id, now, limit))
        for job in jobs:
            if type(job.payload) is UndecodablePayload:  # is_undecodable, inlined: per job
                return _set_aside_undecodable(driver, c, self._name, worker_id, now, limit, jobs)
        return jobs

    def _handles(self, jobs: list[Job]) -> list[JobHandle]:
        if len(jobs) > 1:
            _sort_in_claim_order(jobs)
        # CoreJobHandle(self, job), one per job, without a Python __init__ call each.
        new = object.__new__
        handles: list[JobHandle] = []
        append = handles.append
        for job in jobs:
            handle = new(CoreJobHandle)
            handle._queue = self
            handle._job = job
            append(handle)
        return handles

    def claim_wait(
        self,
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> JobHandle | None:
        validate_identifier(worker_id, "worker_id")
        if stop is not None:
            check_type(stop, StopToken, "stop")
        return claim_waiting(self._context, (self,), worker_id, Deadline(timeout), stop)

    # -- what the waiting loop (core/claiming.py) needs ---------------------
    def opened_by(self, context: StoreContext) -> bool:
        """Whether this handle belongs to the store whose context is ``context``."""
        return self._context is context

    @property
    def topic(self) -> str:
        """The wake topic of this queue."""
        return self._topic

    def claim_for_wait(self, worker_id: str, wait_s: float | None) -> JobHandle | None:
        """One claim attempt for a waiting call (``worker_id`` already checked)."""
        handles = self._claim_batch(worker_id, 1, wait_s)
        return handles[0] if handles else None

    def next_wake_at(self, wait_s: float | None) -> int | None:
        """When a job of this queue next becomes claimable (``None``: unknown)."""
        ctx = self._context
        now = ctx.now()
        return ctx.read(lambda c: ctx.driver.next_wake_at(c, NextWake(self._name, now)), wait_s)

    def ack_batch(self, job_ids: Sequence[int], worker_id: str) -> int:
        validate_identifier(worker_id, "worker_id")
        ids = _storable_ids(job_ids)
        if not ids:
            return 0
        ctx = self._context
        now = ctx.now()
        return ctx.write(
            lambda c: ctx.driver.ack_batch(c, AckBatch(self._name, ids, worker_id, now))
        )

    def cancel(self, job_id: int) -> bool:
        check_job_id(job_id)
        ctx = self._context
        ctx.check_open()
        if not storable_id(job_id):
            return False
        now = ctx.now()
        return ctx.write(lambda c: ctx.driver.cancel(c, Cancel(self._name, job_id, now)))

    def get_job(self, job_id: int) -> Job | None:
        check_job_id(job_id)
        ctx = self._context
        ctx.check_open()
        if not storable_id(job_id):
            return None
        return ctx.read(lambda c: ctx.driver.get_job(c, GetJob(job_id)))

    def dependencies(self, job_id: int) -> JobDependencies:
        check_job_id(job_id)
        ctx = self._context
        driver = ctx.dependencies()
        if not storable_id(job_id):
            return JobDependencies(job_id)
        waits_for, waited_by = ctx.read(lambda c: driver.job_edges(c, GetJob(job_id)))
        return JobDependencies(job_id, tuple(sorted(waits_for)), tuple(sorted(waited_by)))

    def sweep_expired(self) -> SweepResult:
        ctx = self._context
        now = ctx.now()
        driver = ctx.driver
        sweep = Sweep(self._name, now)
        # Each step is its own atomic statement (contract §2); expiry first so a
        # row that is both expired and exhausted records "expired".
        expired = ctx.write(lambda c: driver.bury_expired(c, sweep))
        exhausted = ctx.write(lambda c: driver.bury_exhausted(c, sweep))
        purged = ctx.write(lambda c: driver.purge_dead(c, sweep))
        if not ctx.capabilities.results:
            return SweepResult(expired=expired, exhausted=exhausted, purged=purged)
        results = ctx.results()
        completed = ctx.write(lambda c: results.purge_completed(c, sweep))
        return SweepResult(expired, exhausted, purged, purged_completed=completed)

    # -- operations (contract §11, ops profile) -----------------------------------
    def stats(self) -> QueueStats:
        ctx = self._context
        driver = ctx.ops()
        now = ctx.now()
        (stats,) = ctx.read(
            lambda c: with_limits(ctx, c, driver.queue_stats(c, QueueStatsAt([self._name], now)))
        )
        return stats

    def jobs(
        self,
        state: JobState | str | None = None,
        *,
        after_id: int = 0,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        wanted = check_state(state)
        if wanted is JobState.COMPLETED:
            self._context.results()  # an engine without the profile has no such state
        elif wanted is JobState.WAITING:
            self._context.dependencies()
        check_job_id(after_id)
        if before_id is not None and (
            isinstance(before_id, bool) or not isinstance(before_id, int)
        ):
            raise InvalidOptions(
                f"before_id must be an int or None, got {type(before_id).__name__}"
            )
        check_page_limit(limit)
        ctx = self._context
        driver = ctx.ops()
        ctx.check_open()
        if after_id < 0 or not storable_id(after_id):
            raise InvalidOptions(f"after_id must be within 0..{MAX_JOB_ID}, got {after_id}")
        if before_id is not None and not 1 <= before_id <= MAX_JOB_ID:
            # One past the largest id is no id: a cursor is an id a page handed out.
            raise InvalidOptions(f"before_id must be within 1..{MAX_JOB_ID}, got {before_id}")
        params = ListJobs(self._name, wanted, after_id, limit, before_id)
        return ctx.read(lambda c: driver.list_jobs(c, params))

    def redrive(self, ids: Sequence[int] | None = None, *, limit: int = MAX_REDRIVE) -> list[int]:
        chosen = None if ids is None else _ids(ids)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_REDRIVE:
            raise InvalidOptions(f"limit must be an int within 1..{MAX_REDRIVE}, got {limit!r}")
        ctx = self._context
        driver = ctx.ops()
        now = ctx.now()
        if chosen == []:
            return []
        params = Redrive(self._name, chosen, limit, now)
        if ctx.capabilities.dependencies:
            deps = ctx.dependencies()

            def redrive_reviving(c: Any) -> list[int]:
                new = driver.redrive(c, params)
                revive_dependents(deps, c, new, now)
                return new

            new_ids = ctx.write(redrive_reviving)
        else:
            new_ids = ctx.write(lambda c: driver.redrive(c, params))
        if new_ids:
            ctx.hub.notify(self._topic)
        return new_ids

    def purge_dead(
        self, ids: Sequence[int] | None = None, *, older_than_s: Duration | None = None
    ) -> int:
        chosen = None if ids is None else _ids(ids)
        older = None if older_than_s is None else duration_seconds(older_than_s, "older_than_s")
        ctx = self._context
        driver = ctx.ops()
        now = ctx.now()
        if chosen == []:
            return 0
        died_before = None if older is None else now - older
        return ctx.write(
            lambda c: driver.purge_dead_jobs(c, PurgeDeadJobs(self._name, chosen, died_before, now))
        )

    def pause(self) -> bool:
        return self._set_paused(True)

    def resume(self) -> bool:
        return self._set_paused(False)

    def paused(self) -> bool:
        ctx = self._context
        driver = ctx.ops()
        return ctx.read(lambda c: driver.is_paused(c, self._name))

    def _set_paused(self, paused: bool) -> bool:
        ctx = self._context
        driver = ctx.ops()
        ctx.check_open()
        changed = ctx.write(lambda c: driver.set_paused(c, SetPaused(self._name, paused)))
        if changed and not paused:
            ctx.hub.notify(self._topic)  # waiters here; the statement told other processes
        return changed

    # -- limits (contract 1.2 §16, limits profile) --------------------------------
    def set_limits(self, limits: Limits) -> bool:
        check_type(limits, Limits, "limits")
        if limits.concurrency_per_key is not None or limits.rate_per_key is not None:
            self._context.require("key_limits")
        return self._store_limits(
            SetLimits(
                self._name,
                limits.concurrency,
                limits.rate,
                limits.per,
                limits.concurrency_per_key,
                limits.rate_per_key,
            )
        )

    def clear_limits(self) -> bool:
        return self._store_limits(SetLimits(self._name, None))

    def limits(self) -> Limits | None:
        ctx = self._context
        driver = ctx.limits()
        stored = ctx.read(lambda c: driver.queue_limits(c, self._name))
        return stored.get(self._name)

    def _store_limits(self, params: SetLimits) -> bool:
        ctx = self._context
        driver = ctx.limits()
        ctx.check_open()
        changed = ctx.write(lambda c: driver.set_limits(c, params))
        if changed:
            ctx.hub.notify(self._topic)  # waiters here; the statement told other processes
        return changed

    def __repr__(self) -> str:
        return f"<Queue {self._name!r}>"


@implements(api.Outbox)
class CoreOutbox(CoreQueue):
    """The queue surface over the outbox's reserved backing queue (contract §4).

    Returned by ``store.outbox(name)``; its jobs are stamped ``OUTBOX_QUEUE_OPTS``.
    """

    def __init__(
        self, context: StoreContext, name: str, backing_queue: str, opts: QueueOpts
    ) -> None:
        super().__init__(context, backing_queue, opts)
        self._outbox_name = name

    @property
    def outbox_name(self) -> str:
        """The outbox's own name (``name`` is its backing queue's)."""
        return self._outbox_name

    def __repr__(self) -> str:
        return f"<Outbox {self._outbox_name!r}>"


def _async_ack_hint(ctx: StoreContext, durable: bool) -> Callable[[Any], None] | None:
    """The driver's hint for an ack asked not to wait for the disk (§12.11), or ``None``
    for a durable ack or on an engine without the async_acks profile (which ignores
    the request: its ack is the plain one, at the plain one's cost)."""
    if durable or not ctx.capabilities.async_acks:
        return None
    return ctx.commit_acks_without_waiting


def _storable_ids(job_ids: Sequence[int]) -> list[int]:
    """The ids among ``job_ids`` that can name a job, as plain ints (an ``Enqueued``
    too: a driver's list of ids holds one type); ``InvalidOptions`` for one that is not
    an int. (Plain ints in range, the usual case, are checked in one pass.)"""
    if type(job_ids) is list or type(job_ids) is tuple:
        kept = [i for i in job_ids if type(i) is int and 0 <= i <= MAX_JOB_ID]
        if len(kept) == len(job_ids):
            return kept
    if all(type(i) is int for i in job_ids):
        return [i for i in job_ids if 0 <= i <= MAX_JOB_ID]
    return [int(i) for i in (check_job_id(i) for i in job_ids) if storable_id(i)]


def _ids(ids: Sequence[int]) -> list[int]:
    """Checked ids as plain ints (see ``_storable_ids``), without those that can name
    no job."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise InvalidOptions("ids must be a sequence (list or tuple) of job ids")
    return [int(i) for i in (check_job_id(i) for i in ids) if storable_id(i)]


def _set_aside_undecodable(
    driver: Driver[Any], c: Any, queue: str, worker_id: str, now: int, limit: int, jobs: list[Job]
) -> list[Job]:
    """Dead-letter the claimed jobs whose payload cannot be decoded (a row written
    around alkstore) and claim again in their place, so such a row never wedges the
    queue nor reaches a handler. Each round buries at least one row: it ends."""
    claimed: list[Job] = []
    wanted = limit
    while jobs:
        for job in jobs:
            payload = job.payload
            if isinstance(payload, UndecodablePayload):
                error = f"{ERROR_UNDECODABLE}: {payload.reason}"
                driver.bury(c, Bury(job.id, job.attempts, now, error, error))
            else:
                claimed.append(job)
        if len(claimed) == limit or len(jobs) < wanted:
            break  # filled, or the queue had no more claimable rows
        wanted = limit - len(claimed)
        jobs = driver.claim(c, Claim(queue, worker_id, now, wanted))
    return claimed
