"""The transactional seam (contract §3)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import _guide, api
from .._surface import implements
from ..api import JobHandle, Queue
from ..driver import queue_topic, stream_topic
from ..errors import EngineMisconfigured, InvalidOptions, StaleHandle, StoreClosed
from ..names import outbox_queue_name, validate_name
from ..options import (
    DEFAULT_QUEUE_OPTS,
    OUTBOX_QUEUE_OPTS,
    EnqueueOpts,
    QueueOpts,
    check_type,
    resolve_stamps,
)
from ..params import GetJob, Publish, StreamAppend
from ..timeconv import Duration
from ..values import Enqueued, Job
from .checks import check_job_id, enqueue_opts, storable_id
from .context import StoreContext
from .dependencies import check_after, insert_after, waits
from .outcomes import (
    Burial,
    Putback,
    acked_all,
    acking,
    buried_all,
    fail_planned,
    failing,
    put_back_all,
    retry_planned,
    retrying,
    written_alone,
)
from .queues import CoreJobHandle
from .unique import insert_unique_one


@implements(api.Transaction)
class CoreTransaction:
    """Engine statements run on the transaction's connection; wakes wait for commit.

    What ``store.transaction()`` and ``store.attach(conn)`` yield. Everything
    done through it commits or rolls back with the caller's business writes;
    after the ``with`` block every method raises ``StoreClosed``. Full contract:
    ``alkstore.api.Transaction`` (contract §3).
    """

    def __init__(self, context: StoreContext, handle: Any) -> None:
        self._context = context
        self._handle = handle
        self._woken: set[str] = set()
        """Topics to wake in this process once the transaction has committed."""
        self._finished = False

    def commit_acks_without_waiting(self) -> None:
        """This transaction's commit may not wait for the disk, on an engine with the
        ``async_acks`` profile (§12.11; a no-op on any other). For the worker's group
        of acks (§12.10), a transaction that writes nothing but ``tx.ack``: a commit so
        made may be lost in an engine crash, and every write in it with it."""
        self._check_live()
        self._context.commit_acks_without_waiting(self._handle)

    @property
    def connection(self) -> Any:
        self._check_live()
        return self._context.driver.native_connection(self._handle)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        connection = self.connection
        execute = getattr(connection, "execute", None)
        if not callable(execute):
            # DB-API 2.0 puts execute on cursors only; sqlite3's and psycopg's
            # connections have it too, and the contract's tx.execute is that method.
            raise EngineMisconfigured(
                f"tx.execute(sql, params) calls the transaction's connection's "
                f"execute(sql, params), and {type(connection).__qualname__} has none: "
                "an engine with the sql profile hands out a connection with one (wrap a "
                "driver's connection whose execute lives only on its cursors); "
                f"{_guide.see(_guide.SQL_CONNECTION)}"
            )
        return execute(sql, params) if params is not None else execute(sql)

    def enqueue(
        self, queue: str | Queue, payload: Any, opts: EnqueueOpts | None = None
    ) -> Enqueued:
        if isinstance(queue, str) or not hasattr(queue, "opts"):
            name, queue_opts = validate_name(queue, "queue name"), DEFAULT_QUEUE_OPTS
        else:  # a Queue handle (any implementation): its name and the opts it stamps
            name, queue_opts = validate_name(queue.name, "queue name"), queue.opts
            check_type(queue_opts, QueueOpts, "queue.opts")
        return Enqueued.of(*self._insert(name, payload, queue_opts, enqueue_opts(opts)))

    def outbox_enqueue(self, outbox: str, payload: Any) -> int:
        backing = outbox_queue_name(outbox)
        job_id, _ = self._insert(backing, payload, OUTBOX_QUEUE_OPTS, enqueue_opts(None))
        return job_id

    def stream_append(self, stream: str, payload: Any) -> int:
        validate_name(stream, "stream name")
        text = self._context.encode(payload)
        self._check_live()
        ctx = self._context
        (offset,) = ctx.streams().stream_append(
            self._handle, StreamAppend(stream, [text], ctx.now())
        )
        self._woken.add(stream_topic(stream))  # the append announced it to other processes
        return offset

    def notify(self, channel: str, payload: Any) -> None:
        validate_name(channel, "channel")
        text = self._context.encode(payload)
        self._check_live()
        ctx = self._context
        ctx.pubsub().publish(self._handle, Publish(channel, text, ctx.now()))

    def ack(self, handle: JobHandle, result: Any = None) -> None:
        job = self._claim_of(handle, "ack")
        ctx = self._context
        ack = acking(ctx, job, result)  # the result is checked before anything is written
        self._check_live()
        self._guarded(job, ack)

    def ack_all(
        self, handles: Sequence[JobHandle], results: Sequence[Any] | None = None
    ) -> tuple[JobHandle, ...]:
        given = _sequence(handles, "handles")
        each = [None] * len(given) if results is None else _sequence(results, "results")
        _check_length(each, given, "results", "result")
        ctx = self._context
        jobs = [self._claim_of(handle, "ack") for handle in given]
        # Every result is checked before anything is written; a result a job keeps
        # goes with that job's own ack, every other ack with the one statement.
        units = [acking(ctx, job, result) for job, result in zip(jobs, each, strict=True)]
        kept = {
            at
            for at, (job, result) in enumerate(zip(jobs, each, strict=True))
            if result is not None and job.completed_retention_s is not None
        }
        self._check_live()
        now = ctx.now()
        refused, grouped, alone = _named_once(jobs, kept)
        acked = acked_all(ctx.driver, self._handle, [jobs[at] for at in grouped], now)
        refused.update(at for at in grouped if jobs[at].id not in acked)
        refused.update(at for at in alone if not units[at](self._handle, now))
        return tuple(given[at] for at in sorted(refused))

    def retry_all(
        self,
        handles: Sequence[JobHandle],
        errors: str | Sequence[str],
        delays: Duration | Sequence[Duration | None] | None = None,
    ) -> tuple[JobHandle, ...]:
        given = _sequence(handles, "handles")
        each_error = _errors(errors, given)
        if delays is None or not isinstance(delays, Sequence):  # one delay (or none) for all
            each_delay: list[Any] = [delays] * len(given)
        else:
            each_delay = _sequence(delays, "delays")
            _check_length(each_delay, given, "delays", "delay")
        ctx = self._context
        jobs = [self._claim_of(handle, "retry") for handle in given]
        plans = [  # every error and delay checked before anything is written
            retry_planned(ctx, job, error, delay)
            for job, error, delay in zip(jobs, each_error, each_delay, strict=True)
        ]
        return self._written_all(given, jobs, plans)

    def fail_all(
        self, handles: Sequence[JobHandle], errors: str | Sequence[str]
    ) -> tuple[JobHandle, ...]:
        given = _sequence(handles, "handles")
        each_error = _errors(errors, given)
        jobs = [self._claim_of(handle, "fail") for handle in given]
        plans = [fail_planned(job, error) for job, error in zip(jobs, each_error, strict=True)]
        return self._written_all(given, jobs, plans)

    def _written_all(
        self, given: list[JobHandle], jobs: list[Job], plans: Sequence[Putback | Burial]
    ) -> tuple[JobHandle, ...]:
        """Write ``plans`` (one per claim of ``jobs``): the reschedules in one
        statement, the burials in another; the handles refused, in order."""
        self._check_live()
        driver, now, c = self._context.driver, self._context.now(), self._handle
        refused, grouped, alone = _named_once(jobs)
        back: list[tuple[int, Putback]] = []
        dead: list[tuple[int, Burial]] = []
        for at in grouped:
            plan = plans[at]
            if isinstance(plan, Putback):
                back.append((at, plan))
            else:
                dead.append((at, plan))
        put = put_back_all(driver, c, [plan for _, plan in back], now)
        buried = buried_all(driver, c, [plan for _, plan in dead], now)
        refused.update(at for at, plan in back if plan.job.id not in put)
        refused.update(at for at, plan in dead if plan.job.id not in buried)
        refused.update(at for at in alone if not written_alone(driver, plans[at])(c, now))
        for at, plan in enumerate(plans):
            if isinstance(plan, Putback) and at not in refused:
                self._woken.add(queue_topic(plan.job.queue))  # the reschedule announced it
        return tuple(given[at] for at in sorted(refused))

    def retry(self, handle: JobHandle, error: str, delay: Duration | None = None) -> None:
        job = self._claim_of(handle, "retry")
        retry, wakes = retrying(self._context, job, error, delay)  # checked first
        self._check_live()
        self._guarded(job, retry)
        if wakes:
            self._woken.add(queue_topic(job.queue))  # the reschedule announced it

    def fail(self, handle: JobHandle, error: str) -> None:
        job = self._claim_of(handle, "fail")
        fail = failing(self._context, job, error)  # the error is checked first
        self._check_live()
        self._guarded(job, fail)

    def _claim_of(self, handle: JobHandle, verb: str) -> Job:
        """The job ``handle`` claims, refused (``InvalidOptions``) unless it is a job
        handle, and one of this store's."""
        job = getattr(handle, "job", None)
        if not isinstance(job, Job):
            raise InvalidOptions(f"handle must be a JobHandle, got {type(handle).__name__}")
        if isinstance(handle, CoreJobHandle) and not handle.opened_by(self._context):
            raise InvalidOptions(
                f"job {job.id}'s handle belongs to another store: {verb} it in a "
                "transaction of the store that claimed it"
            )
        return job

    def _guarded(self, job: Job, unit: Callable[[Any, int], bool]) -> None:
        """Run ``unit`` (an outcome under ``job``'s claim) on this transaction's
        connection; ``StaleHandle`` if the claim no longer holds (nothing written)."""
        if not unit(self._handle, self._context.now()):
            raise StaleHandle(
                f"job {job.id}'s claim (attempt {job.attempts}, by {job.worker_id!r}) is no "
                "longer valid: its deadline passed, another claim superseded it, or it was "
                "already finished; roll this transaction back, the job may run again"
            )

    def get_job_tx(self, queue: str, job_id: int) -> Job | None:
        validate_name(queue, "queue name")
        check_job_id(job_id)
        self._check_live()
        if not storable_id(job_id):
            return None
        return self._context.driver.get_job(self._handle, GetJob(job_id, queue))

    def _insert(
        self, queue: str, payload: Any, queue_opts: QueueOpts, opts: EnqueueOpts
    ) -> tuple[int, bool]:
        """``(id, duplicate)`` of one job enqueued in this transaction."""
        text = self._context.encode(payload)
        self._check_live()
        ctx = self._context
        if opts.metadata is not None:
            ctx.require("metadata")
        if waits(opts):
            after, finished = check_after(opts)
            deps = ctx.dependencies()
            stamps = resolve_stamps(queue, queue_opts, opts, ctx.now())
            (job_id,) = insert_after(deps, self._handle, stamps, [text], after, finished)
            self._woken.add(queue_topic(queue))
            return job_id, False
        unique = opts.unique
        driver = None if unique is None else ctx.unique()
        if opts.limit_key is not None:
            ctx.require("key_limits")
        stamps = resolve_stamps(queue, queue_opts, opts, ctx.now())
        if driver is None or unique is None:
            (job_id,) = ctx.driver.insert_jobs(self._handle, stamps, [text])
            self._woken.add(queue_topic(queue))  # the insert announced it to other processes
            return job_id, False
        result = insert_unique_one(driver, self._handle, stamps, text, unique)
        if not result.duplicate:
            self._woken.add(queue_topic(queue))
        return result.id, result.duplicate

    def _check_live(self) -> None:
        if self._finished:
            raise StoreClosed("this transaction has already finished")
        self._context.check_open()

    def _finish(self) -> set[str]:
        self._finished = True
        return self._woken


def _named_once(
    jobs: list[Job], alone: set[int] | None = None
) -> tuple[set[int], list[int], list[int]]:
    """The places in ``jobs`` of the claims refused for being named again (written
    as a second ``tx.ack`` would be: not at all), of those the one statement writes
    (each job once, as its statements expect), and of those written on their own:
    the places in ``alone``, and a claim of a job the statement already names by
    another claim (at most one of the two is valid, and the statement's ids could
    not tell which)."""
    refused: set[int] = set()
    named: set[tuple[int, int]] = set()
    in_statement: set[int] = set()
    grouped: list[int] = []
    single: list[int] = []
    for at, job in enumerate(jobs):
        claim = (job.id, job.attempts)
        if claim in named:
            refused.add(at)
            continue
        named.add(claim)
        if (alone is not None and at in alone) or job.id in in_statement:
            single.append(at)
        else:
            in_statement.add(job.id)
            grouped.append(at)
    return refused, grouped, single


def _errors(errors: object, given: list[JobHandle]) -> list[Any]:
    """One error per handle: ``errors`` itself for each when it is one ``str``."""
    if isinstance(errors, str):
        return [errors] * len(given)
    each = _sequence(errors, "errors")
    _check_length(each, given, "errors", "error")
    return each


def _check_length(each: list[Any], given: list[JobHandle], field: str, one: str) -> None:
    if len(each) != len(given):
        raise InvalidOptions(
            f"{field} must give one {one} per handle: {len(each)} {field} for {len(given)} handles"
        )


def _sequence(value: object, field: str) -> list[Any]:
    """``value`` as a list, refused (``InvalidOptions``) unless it is a sequence (a
    string is not one of handles or results)."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise InvalidOptions(f"{field} must be a sequence, got {type(value).__name__}")
    return list(value)
