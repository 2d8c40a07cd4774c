"""``MemoryDriver``: the ``alkstore.driver.Driver`` seam over plain Python data.

An engine does not implement the contract's rules. ``alkstore.core.CoreStore``
validates every argument, resolves options, computes backoff, orders the
claim path's steps, reads the clock and runs the waiting loops; it then calls
one driver method per statement, inside a transaction the driver opened. So
each method below is the in-memory equivalent of one SQL statement: it
*stores and selects*, with the predicates spelled out in ``driver.py``'s
docstrings, and decides nothing else. Time arrives as whole epoch seconds
(``now``); the engine never reads a clock of its own.

Besides the queue core and locks, this engine implements the three optional
profiles (``SchedulerDriver``, ``StreamDriver``, ``PubSubDriver``) and says so
in its ``Capabilities``. It does not support ``attach`` (there is no
caller-owned connection to join) and has no DB-API connection to expose.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn, TypeGuard, TypeVar

from alkstore.constants import MAX_ERROR_HISTORY
from alkstore.driver import (
    ERROR_DEPENDENCY_CANCELLED,
    ERROR_DEPENDENCY_DEAD,
    ERROR_EXHAUSTED,
    ERROR_EXPIRED,
    WakeSink,
    queue_topic,
    stream_topic,
)
from alkstore.options import JobStamps, Limits
from alkstore.params import (
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
from alkstore.rows import ScheduleRecord, error_entry, stream_event
from alkstore.values import Job, JobState, LockInfo, QueueStats, StreamEvent, WorkerInfo

from .database import Database, Tx
from .tables import EventRow, JobRow, Tables

if TYPE_CHECKING:
    from alkstore.driver import (
        DependenciesDriver,
        Driver,
        LimitsDriver,
        OpsDriver,
        PeriodicDriver,
        PubSubDriver,
        ResultsDriver,
        SchedulerDriver,
        StreamDriver,
        UniqueDriver,
        WorkersDriver,
    )

T = TypeVar("T")

PENDING, PROCESSING, DEAD = JobState.PENDING, JobState.PROCESSING, JobState.DEAD
COMPLETED = JobState.COMPLETED
WAITING = JobState.WAITING

DEFAULT_LOCK_TIMEOUT_S = 5.0
"""The most a call waits for the database's lock (the ``lock_timeout_s`` option)."""


class NoConnection:
    """What ``tx.connection`` returns: there is no SQL connection behind this engine."""

    def __bool__(self) -> bool:
        return False

    def execute(self, *args: Any) -> NoReturn:
        raise NotImplementedError("the memory engine has no SQL connection to execute on")

    def __repr__(self) -> str:
        return "<memory engine: no connection>"


NO_CONNECTION = NoConnection()


# -- predicates, named after the contract's words ------------------------------------
def _claimable(row: JobRow, now: int) -> bool:
    due = (row.state == PENDING and row.run_at <= now) or (
        row.state == PROCESSING and row.deadline is not None and row.deadline <= now
    )
    not_expired = row.expires_at is None or row.expires_at > now
    return due and not_expired and row.attempts < row.max_attempts


def _claim_order(row: JobRow) -> tuple[int, int, int]:
    return (-row.priority, row.run_at, row.id)  # priority DESC, run_at ASC, id ASC


def _valid_claim(row: JobRow | None, attempt: int, now: int) -> TypeGuard[JobRow]:
    """The handle-op predicate: processing under this very claim, deadline not passed."""
    return (
        row is not None
        and row.state == PROCESSING
        and row.attempts == attempt
        and row.deadline is not None
        and row.deadline > now
    )


def _live(row: JobRow, now: int) -> bool:
    """A claim whose deadline has not passed: it holds one of its queue's slots."""
    return row.state == PROCESSING and row.deadline is not None and row.deadline > now


def _live_claims(tables: Tables, queue: str, now: int) -> int:
    return sum(1 for r in tables.jobs.values() if r.queue == queue and _live(r, now))


def _window(tables: Tables, queue: str, per: int, now: int) -> tuple[int, ...]:
    """The queue's claim starts inside the window ``(now - per, now]``, oldest first."""
    return tuple(t for t in tables.starts.get(queue, ()) if t > now - per)


def _free_slots(tables: Tables, queue: str, limits: Limits, now: int) -> int | None:
    """The queue's free slots under its concurrency and rate limits; ``None`` when it has
    neither (only a per-key limit)."""
    free = []
    if limits.concurrency is not None:
        free.append(limits.concurrency - _live_claims(tables, queue, now))
    if limits.rate is not None and limits.per is not None:
        free.append(limits.rate - len(_window(tables, queue, limits.per, now)))
    return min(free) if free else None


def _keyed(limits: Limits) -> bool:
    """Whether the queue's claims serve its keys in turn (a per-key limit or rate)."""
    return limits.concurrency_per_key is not None or limits.rate_per_key is not None


def _shared_key(row: JobRow) -> str:
    """The key a per-key limit counts ``row`` under: its own, or "" for no key."""
    return "" if row.limit_key is None else row.limit_key


def _key_window(tables: Tables, queue: str, key: str, per: int, now: int) -> tuple[int, ...]:
    """The key's claim starts inside the window ``(now - per, now]``, oldest first."""
    return tuple(t for t in tables.key_starts.get((queue, key), ()) if t > now - per)


def _key_free(tables: Tables, queue: str, limits: Limits, now: int) -> Callable[[str], int]:
    """How many rows each key may still take: its per-key limit less its live claims,
    its per-key rate less its starts in the window (§16.9, §16.11)."""
    live: dict[str, int] = {}
    for r in tables.jobs.values():
        if r.queue == queue and _live(r, now):
            live[_shared_key(r)] = live.get(_shared_key(r), 0) + 1

    def free(key: str) -> int:
        most = []
        if limits.concurrency_per_key is not None:
            most.append(limits.concurrency_per_key - live.get(key, 0))
        if limits.rate_per_key is not None and limits.per is not None:
            most.append(limits.rate_per_key - len(_key_window(tables, queue, key, limits.per, now)))
        return max(0, min(most))

    return free


def _in_turn(
    candidates: Iterable[JobRow], free: Callable[[str], int], cursor: str | None
) -> list[JobRow]:
    """Contract §16.10's order: each key offers its first ``free(key)`` claimable rows
    in claim order; the claim takes the first row of every key, then the second, and
    so on, the keys of each round in turn after ``cursor`` (the key the queue's last
    claim served: first the keys after it, then the rest, each group in key order)."""
    by_key: dict[str, list[JobRow]] = {}
    for row in sorted(candidates, key=_claim_order):
        by_key.setdefault(_shared_key(row), []).append(row)
    offered = [
        (rank, cursor is not None and key <= cursor, key, row)
        for key, rows in by_key.items()
        for rank, row in enumerate(rows[: free(key)])
    ]
    offered.sort(key=lambda entry: entry[:3])
    return [row for *_, row in offered]


def _slot_frees_at(tables: Tables, queue: str, limits: Limits, now: int) -> list[int]:
    """When each limit the queue is at frees a slot: its earliest live deadline, its
    oldest start in the window plus the window; empty when it is at none."""
    blocked = []
    if limits.concurrency is not None:
        deadlines = [
            r.deadline
            for r in tables.jobs.values()
            if r.queue == queue and _live(r, now) and r.deadline is not None
        ]
        if len(deadlines) >= limits.concurrency:
            blocked.append(min(deadlines))
    if limits.rate is not None and limits.per is not None:
        window = _window(tables, queue, limits.per, now)
        if len(window) >= limits.rate:
            blocked.append(min(window) + limits.per)
    return blocked


def _slot_freed(c: Tx, queue: str) -> None:
    """A live claim of ``queue`` ended: if the queue is limited, a slot is free, so
    its waiters (in every store on this database) try again."""
    if queue in c.tables.limits:
        c.topics.add(queue_topic(queue))


def _lapsed(row: JobRow, now: int) -> bool:
    return row.state == PROCESSING and row.deadline is not None and row.deadline <= now


def _expired(row: JobRow, now: int) -> bool:
    return row.expires_at is not None and row.expires_at <= now


def _to_dead(tables: Tables, row: JobRow, error: str, now: int) -> None:
    """The dead-letter move: same id, out of the live table, into the dead one. A
    unique job keeps holding its key only if it was enqueued to hold it while dead."""
    del tables.jobs[row.id]
    hold = row.unique_hold if row.hold_dead else None
    tables.dead[row.id] = replace(
        row, state=DEAD, last_error=error, died_at=now, deadline=None, unique_hold=hold
    )
    _bury_dependents(tables, row.id, ERROR_DEPENDENCY_DEAD, now)


def _bury_dependents(tables: Tables, job_id: int, error: str, now: int) -> None:
    """The dependencies profile: the jobs waiting for ``job_id``, which will never
    complete, move to dead naming it, and theirs after them (transitively); those
    waiting for it to finish whatever its outcome (fan-ins) count it finished."""
    # Every job waiting for it dies at once, naming it; then, in id order, each of
    # those buries its own (as the SQL engines' triggers do, level by level).
    buried = []
    for dependent in sorted(tables.dependents.pop(job_id, frozenset())):
        if dependent in tables.fan_ins:
            _count_finished(tables, dependent, job_id)
            continue
        row = tables.waiting.pop(dependent, None)
        if row is None:
            continue
        _keep_edges(tables, dependent, tables.waits_for.get(dependent, frozenset()))
        _forget_waits(tables, dependent)
        tables.dead[dependent] = replace(
            row, state=DEAD, last_error=error.format(id=job_id), died_at=now
        )
        buried.append(dependent)
    for dependent in buried:
        _bury_dependents(tables, dependent, ERROR_DEPENDENCY_DEAD, now)


def _keep_edges(tables: Tables, dependent: int, dependencies: frozenset[int]) -> None:
    """§18.4: ``dependent`` dies waiting for ``dependencies``: its edges are kept."""
    if not dependencies:
        return
    tables.dead_waits[dependent] = dependencies
    for dependency in dependencies:
        kept = tables.dead_waited_by.get(dependency, frozenset())
        tables.dead_waited_by[dependency] = kept | {dependent}


def _drop_kept_edges(tables: Tables, dependent: int) -> None:
    """The dead row ``dependent`` goes (redriven, purged, swept): its kept edges too."""
    for dependency in tables.dead_waits.pop(dependent, frozenset()):
        left = tables.dead_waited_by.get(dependency, frozenset()) - {dependent}
        if left:
            tables.dead_waited_by[dependency] = left
        else:
            tables.dead_waited_by.pop(dependency, None)


def _count_finished(tables: Tables, dependent: int, job_id: int) -> str | None:
    """``job_id``, which ``dependent`` waits for, finished: one job less to wait for;
    at none, ``dependent`` becomes pending. The queue of a job released, else ``None``."""
    left = tables.waits_for.get(dependent, frozenset()) - {job_id}
    if left:
        tables.waits_for[dependent] = left
        return None
    tables.waits_for.pop(dependent, None)
    tables.fan_ins = tables.fan_ins - {dependent}
    row = tables.waiting.pop(dependent)
    tables.jobs[dependent] = replace(row, state=PENDING)
    return row.queue


def _forget_waits(tables: Tables, dependent: int) -> None:
    """Drop the edges of ``dependent``, which waits no more."""
    for dependency in tables.waits_for.pop(dependent, frozenset()):
        left = tables.dependents.get(dependency, frozenset()) - {dependent}
        if left:
            tables.dependents[dependency] = left
        else:
            tables.dependents.pop(dependency, None)


def _release_dependents(tx: Tx, job_id: int) -> None:
    """The dependencies profile: ``job_id`` completed, so the jobs waiting for it wait
    for one job less; those that wait for none any more become pending."""
    tables = tx.tables
    for dependent in tables.dependents.pop(job_id, frozenset()):
        queue = _count_finished(tables, dependent, job_id)
        if queue is not None:
            tx.topics.add(queue_topic(queue))
    for dependent in tables.dead_waited_by.pop(job_id, frozenset()):  # §18.4: satisfied
        left = tables.dead_waits.get(dependent, frozenset()) - {job_id}
        if left:
            tables.dead_waits[dependent] = left
        else:
            tables.dead_waits.pop(dependent, None)


def _to_completed(tables: Tables, row: JobRow, now: int, result: str | None) -> None:
    """The move of an acked job its queue keeps: same id, out of the live table, into
    the completed one, holding no key."""
    del tables.jobs[row.id]
    tables.completed[row.id] = replace(
        row, state=COMPLETED, completed_at=now, result=result, deadline=None, unique_hold=None
    )


def _holder(tables: Tables, queue: str, key: str, now: int) -> int | None:
    """The id of the job of ``queue`` holding ``key`` at ``now``, live or dead (the write
    lock is held for the whole transaction, so this read and the insert that follows
    it are as one statement: nobody writes in between)."""
    for rows in (tables.jobs, tables.dead):
        for row in rows.values():
            if row.holds(queue, key, now):
                return row.id
    return None


def _bury_where(tx: Tx, queue: str, now: int, error: str, test: Callable[[JobRow], bool]) -> int:
    rows = [r for r in tx.tables.jobs.values() if r.queue == queue and test(r)]
    for row in rows:
        _to_dead(tx.tables, row, error, now)
    return len(rows)


def _live_lock(tables: Tables, name: str, now: int) -> LockInfo | None:
    lock = tables.locks.get(name)
    return lock if lock is not None and lock.expires_at > now else None  # lapsed: <= now


class MemoryDriver:
    """One store's driver; several drivers may share one ``Database``.

    ``error_history`` keeps every failed attempt's error (the ops profile's
    ``Job.errors``); without the ops profile there is none (contract §11)."""

    def __init__(
        self,
        database: Database,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        *,
        error_history: bool = True,
    ) -> None:
        self._db = database
        self._lock_timeout_s = lock_timeout_s
        self._error_history = error_history

    def _limit_s(self, wait_s: float | None) -> float:
        # An in-memory write holds the lock for microseconds, but a caller's
        # store.transaction() on another thread holds it as long as it stays open:
        # wait no longer than the store's limit, nor than the caller's own time.
        return self._lock_timeout_s if wait_s is None else min(wait_s, self._lock_timeout_s)

    # -- transactions ---------------------------------------------------------------
    def write(self, work: Callable[[Tx], T], *, wait_s: float | None = None) -> T:
        with self._db.write_transaction(self._limit_s(wait_s)) as tx:
            return work(tx)

    def read(self, work: Callable[[Tx], T], *, wait_s: float | None = None) -> T:
        return self._db.read(work, self._limit_s(wait_s))

    def transaction(self) -> AbstractContextManager[Tx]:
        return self._db.write_transaction(self._lock_timeout_s)

    def attach(self, native: Any) -> AbstractContextManager[Tx]:
        raise NotImplementedError(
            "the memory engine cannot attach to a caller's connection: it has none "
            "(Capabilities.attach is False); use store.transaction() instead"
        )

    def native_connection(self, c: Tx) -> Any:
        return NO_CONNECTION

    # -- wakes ------------------------------------------------------------------------
    def start_watching(self, sink: WakeSink) -> None:
        self._db.watch(self, sink)

    def announce(self, c: Tx, topics: Sequence[str]) -> None:
        c.topics.update(topics)  # delivered by the database after commit

    def close(self) -> None:
        self._db.unwatch(self)

    # -- queues -----------------------------------------------------------------------
    def insert_jobs(self, c: Tx, stamps: JobStamps, payloads: Sequence[str]) -> list[int]:
        ids = []
        for payload in payloads:
            job_id = self._db.next_job_id()
            c.tables.jobs[job_id] = JobRow.pending(job_id, stamps, payload)
            ids.append(job_id)
        c.topics.add(queue_topic(stamps.queue))
        return ids

    def job_edges(self, c: Tx, params: GetJob) -> tuple[list[int], list[int]]:
        tables = c.tables
        waits_for = sorted(tables.waits_for.get(params.job_id, frozenset()))
        waited_by = sorted(tables.dependents.get(params.job_id, frozenset()))
        return waits_for, waited_by

    def insert_after_jobs(
        self, c: Tx, params: InsertAfter
    ) -> tuple[list[int], dict[int, JobState | None]]:
        tables = c.tables
        live: set[int] = set()
        blocked: dict[int, JobState | None] = {}
        for dependency in params.after:
            if dependency in tables.jobs or dependency in tables.waiting:
                live.add(dependency)
            elif dependency in tables.dead:
                if not params.finished:  # a dead job has finished: a fan-in counts it
                    blocked[dependency] = DEAD
            elif dependency not in tables.completed:
                blocked[dependency] = None
        if blocked:
            return [], blocked
        if not live:
            return self.insert_jobs(c, params.stamps, params.payloads), {}
        waits = frozenset(live)
        ids = []
        for payload in params.payloads:
            job_id = self._db.next_job_id()
            row = JobRow.pending(job_id, params.stamps, payload)
            tables.waiting[job_id] = replace(row, state=WAITING)
            tables.waits_for[job_id] = waits
            ids.append(job_id)
        if params.finished:
            tables.fan_ins = tables.fan_ins | set(ids)
        for dependency in live:
            tables.dependents[dependency] = tables.dependents.get(dependency, frozenset()) | set(
                ids
            )
        return ids, {}

    def redrive_dependents(self, c: Tx, params: RedriveDependents) -> list[int]:
        tables = c.tables
        made = {}
        for new_id in params.job_ids:
            row = tables.jobs.get(new_id) or tables.waiting.get(new_id)
            assert row is not None
            assert row.redriven_from is not None
            made[new_id] = row.redriven_from
        candidates: set[int] = set()
        for new_id, old in made.items():  # the kept edges to the old job move to the new
            waited_by = tables.dead_waited_by.pop(old, frozenset())
            for dependent in waited_by:
                tables.dead_waits[dependent] = (tables.dead_waits[dependent] - {old}) | {new_id}
            if waited_by:
                tables.dead_waited_by[new_id] = waited_by
            candidates |= waited_by
        for new_id, old in made.items():  # each new job waits for what can still complete
            live = frozenset(
                i
                for i in tables.dead_waits.get(old, frozenset())
                if i in tables.jobs or i in tables.waiting
            )
            _drop_kept_edges(tables, old)
            if live:
                tables.waiting[new_id] = replace(tables.jobs.pop(new_id), state=WAITING)
                tables.waits_for[new_id] = live
                for dependency in live:
                    waiting = tables.dependents.get(dependency, frozenset())
                    tables.dependents[dependency] = waiting | {new_id}
        revived = []
        for dependent in sorted(candidates):
            waits = tables.dead_waits.get(dependent, frozenset())
            row = tables.dead.get(dependent)
            if row is None or not all(i in tables.jobs or i in tables.waiting for i in waits):
                continue  # it still waits for a job that is dead or gone: it stays dead
            del tables.dead[dependent]
            job_id = self._db.next_job_id()
            tables.jobs[job_id] = _redriven(row, job_id, params.now)
            revived.append(job_id)
        return revived

    def insert_unique_jobs(self, c: Tx, params: InsertUnique) -> list[tuple[int, bool]]:
        stamps = params.stamps
        queue, now = stamps.queue, stamps.created_at
        outcomes: list[tuple[int, bool]] = []
        for payload, key in zip(params.payloads, params.keys, strict=True):
            holder = _holder(c.tables, queue, key, now)
            if holder is not None:
                outcomes.append((holder, True))
                continue
            job_id = self._db.next_job_id()
            c.tables.jobs[job_id] = replace(
                JobRow.pending(job_id, stamps, payload),
                unique_key=key,
                unique_hold=key,
                hold_until=params.hold_until,
                hold_dead=params.hold_dead,
            )
            outcomes.append((job_id, False))
        if any(not duplicate for _, duplicate in outcomes):
            c.topics.add(queue_topic(queue))
        return outcomes

    def claim(self, c: Tx, params: Claim) -> list[Job]:
        queue, worker_id, now, limit = params.queue, params.worker_id, params.now, params.limit
        # Lapsed rows at their budget go dead first (paused or not): never handed out.
        self.bury_exhausted(c, Sweep(queue, now))
        if queue in c.tables.paused:
            return []
        limits = c.tables.limits.get(queue)
        if limits is not None:  # the limits profile: only the free slots
            free = _free_slots(c.tables, queue, limits, now)
            limit = limit if free is None else min(limit, free)
            if limit <= 0:
                return []
        candidates = (r for r in c.tables.jobs.values() if r.queue == queue and _claimable(r, now))
        if limits is None or not _keyed(limits):
            chosen = heapq.nsmallest(limit, candidates, key=_claim_order)
        else:  # the key_limits profile: each key's free slots, the keys in turn
            key_free = _key_free(c.tables, queue, limits, now)
            cursor = c.tables.key_cursors.get(queue)
            chosen = _in_turn(candidates, key_free, cursor)[:limit]
            if chosen:
                c.tables.key_cursors = {**c.tables.key_cursors, queue: _shared_key(chosen[-1])}
            if chosen and limits.rate_per_key is not None and limits.per is not None:
                self._record_key_starts(c, queue, chosen, limits.per, now)
        claimed = []
        for row in chosen:
            row = replace(
                row,
                state=PROCESSING,
                attempts=row.attempts + 1,
                claimed_at=now,
                worker_id=worker_id,
                deadline=now + row.visibility_timeout_s,
            )
            c.tables.jobs[row.id] = row
            claimed.append(row.to_job())
        if limits is not None and limits.rate is not None and limits.per is not None and claimed:
            kept = _window(c.tables, queue, limits.per, now)
            c.tables.starts[queue] = (*kept, *([now] * len(claimed)))
        return claimed

    def _record_key_starts(
        self, c: Tx, queue: str, chosen: list[JobRow], per: int, now: int
    ) -> None:
        """A per-key rate's starts (§16.11): one per claimed row, at ``now``, under its
        key; the starts that left the window dropped."""
        taken = Counter(_shared_key(row) for row in chosen)
        starts = dict(c.tables.key_starts)
        for key, count in taken.items():
            kept = _key_window(c.tables, queue, key, per, now)
            starts[(queue, key)] = (*kept, *([now] * count))
        c.tables.key_starts = starts

    def bury_exhausted(self, c: Tx, params: Sweep) -> int:
        queue, now = params.queue, params.now

        def exhausted(row: JobRow) -> bool:
            return _lapsed(row, now) and row.attempts >= row.max_attempts

        return _bury_where(c, queue, now, ERROR_EXHAUSTED, exhausted)

    def bury_expired(self, c: Tx, params: Sweep) -> int:
        queue, now = params.queue, params.now
        tables = c.tables
        waited = [r for r in tables.waiting.values() if r.queue == queue and _expired(r, now)]
        waited.sort(key=lambda r: r.id)
        for row in waited:  # a waiting job expires as a pending one does, all at once
            del tables.waiting[row.id]
            _forget_waits(tables, row.id)
            tables.fan_ins = tables.fan_ins - {row.id}
            tables.dead[row.id] = replace(row, state=DEAD, last_error=ERROR_EXPIRED, died_at=now)
        for row in waited:  # then each passes it on to its own dependents
            _bury_dependents(tables, row.id, ERROR_DEPENDENCY_DEAD, now)
        return len(waited) + _bury_where(c, queue, now, ERROR_EXPIRED, lambda r: _expired(r, now))

    def purge_dead(self, c: Tx, params: Sweep) -> int:
        queue, now = params.queue, params.now
        doomed = [
            r.id
            for r in c.tables.dead.values()
            if r.queue == queue
            and r.dead_letter_retention_s is not None
            and r.died_at is not None
            and r.died_at + r.dead_letter_retention_s < now
        ]
        for job_id in doomed:
            del c.tables.dead[job_id]
            _drop_kept_edges(c.tables, job_id)
        return len(doomed)

    def ack(self, c: Tx, params: ClaimRef) -> bool:
        job_id, attempt, now = params.job_id, params.attempt, params.now
        row = c.tables.jobs.get(job_id)
        if not _valid_claim(row, attempt, now):
            return False
        del c.tables.jobs[job_id]
        _slot_freed(c, row.queue)
        _release_dependents(c, job_id)
        return True

    def ack_batch(self, c: Tx, params: AckBatch) -> int:
        queue, job_ids, worker_id, now = params.queue, params.job_ids, params.worker_id, params.now
        acked = 0
        for job_id in set(job_ids):  # a repeated id is still one row
            row = c.tables.jobs.get(job_id)
            if (
                row is not None
                and row.queue == queue
                and row.state == PROCESSING
                and row.worker_id == worker_id
                and row.deadline is not None
                and row.deadline > now
            ):
                if row.completed_retention_s is None:
                    del c.tables.jobs[job_id]
                else:
                    _to_completed(c.tables, row, now, None)
                _release_dependents(c, job_id)
                acked += 1
        if acked:
            _slot_freed(c, queue)
        return acked

    def ack_claims(self, c: Tx, params: AckClaims) -> list[int]:
        # tx.ack_all's statement (§3.10): each claim under its own guard, one step.
        acked: list[int] = []
        for job_id, attempt in zip(params.job_ids, params.attempts, strict=True):
            row = c.tables.jobs.get(job_id)
            if not _valid_claim(row, attempt, params.now):
                continue
            if row.completed_retention_s is None:
                del c.tables.jobs[job_id]
            else:
                _to_completed(c.tables, row, params.now, None)
            _slot_freed(c, row.queue)
            _release_dependents(c, job_id)
            acked.append(job_id)
        return acked

    # -- finished jobs (the results profile) -------------------------------------------
    def complete(self, c: Tx, params: Complete) -> bool:
        row = c.tables.jobs.get(params.job_id)
        if not _valid_claim(row, params.attempt, params.now):
            return False
        _to_completed(c.tables, row, params.now, params.result)
        _slot_freed(c, row.queue)
        _release_dependents(c, row.id)
        return True

    def purge_completed(self, c: Tx, params: Sweep) -> int:
        queue, now = params.queue, params.now
        doomed = [
            r.id
            for r in c.tables.completed.values()
            if r.queue == queue
            and r.completed_retention_s is not None
            and r.completed_at is not None
            and r.completed_at + r.completed_retention_s < now
        ]
        for job_id in doomed:
            del c.tables.completed[job_id]
        return len(doomed)

    def heartbeat(self, c: Tx, params: Heartbeat) -> bool:
        job_id, attempt, now, deadline = params.job_id, params.attempt, params.now, params.deadline
        row = c.tables.jobs.get(job_id)
        if not _valid_claim(row, attempt, now):
            return False
        c.tables.jobs[job_id] = replace(row, deadline=deadline)
        return True

    def release_claim(self, c: Tx, params: ClaimRef) -> bool:
        job_id, attempt, now = params.job_id, params.attempt, params.now
        row = c.tables.jobs.get(job_id)
        if not _valid_claim(row, attempt, now):
            return False
        c.tables.jobs[job_id] = replace(
            row,
            state=PENDING,
            max_attempts=row.max_attempts + 1,
            worker_id=None,
            claimed_at=None,
            deadline=None,
        )
        c.topics.add(queue_topic(row.queue))
        return True

    def snooze(self, c: Tx, params: Snooze) -> bool:
        row = c.tables.jobs.get(params.job_id)
        if not _valid_claim(row, params.attempt, params.now):
            return False
        c.tables.jobs[params.job_id] = replace(
            row,
            state=PENDING,
            run_at=params.run_at,
            snoozes=row.snoozes + 1,
            max_attempts=row.max_attempts + 1,
            worker_id=None,
            claimed_at=None,
            deadline=None,
        )
        c.topics.add(queue_topic(row.queue))
        return True

    def reschedule(self, c: Tx, params: Reschedule) -> bool:
        job_id = params.job_id
        attempt = params.attempt
        now = params.now
        run_at = params.run_at
        error = params.error
        row = c.tables.jobs.get(job_id)
        if not _valid_claim(row, attempt, now):
            return False
        c.tables.jobs[job_id] = replace(
            row,
            state=PENDING,
            run_at=run_at,
            worker_id=None,
            claimed_at=None,
            deadline=None,
            errors=self._with_error(row.errors, attempt, now, error),
        )
        c.topics.add(queue_topic(row.queue))
        return True

    def bury(self, c: Tx, params: Bury) -> bool:
        job_id = params.job_id
        attempt = params.attempt
        now = params.now
        last_error = params.last_error
        error = params.error
        row = c.tables.jobs.get(job_id)
        if not _valid_claim(row, attempt, now):
            return False
        if error is not None:
            row = replace(row, errors=self._with_error(row.errors, attempt, now, error))
        _to_dead(c.tables, row, last_error, now)
        _slot_freed(c, row.queue)
        return True

    def reschedule_claims(self, c: Tx, params: RescheduleClaims) -> list[int]:
        # tx.retry_all's statement (§3.11): each claim under its own guard, one step
        # (the transaction holds the store's lock throughout).
        claims = zip(params.job_ids, params.attempts, params.run_ats, params.errors, strict=True)
        return [
            job_id
            for job_id, attempt, run_at, error in claims
            if self.reschedule(c, Reschedule(job_id, attempt, params.now, run_at, error))
        ]

    def bury_claims(self, c: Tx, params: BuryClaims) -> list[int]:
        # tx.fail_all's statement (§3.11), as reschedule_claims.
        claims = zip(
            params.job_ids, params.attempts, params.last_errors, params.errors, strict=True
        )
        return [
            job_id
            for job_id, attempt, last_error, error in claims
            if self.bury(c, Bury(job_id, attempt, params.now, last_error, error))
        ]

    def _with_error(self, errors: str | None, attempt: int, at: int, error: str) -> str | None:
        return _with_error(errors, attempt, at, error) if self._error_history else errors

    def cancel(self, c: Tx, params: Cancel) -> bool:
        queue, job_id = params.queue, params.job_id
        tables = c.tables
        row = tables.jobs.get(job_id) or tables.waiting.get(job_id)  # dead rows are untouched
        if row is None or row.queue != queue:
            return False
        if row.state == WAITING:
            del tables.waiting[job_id]
            _forget_waits(tables, job_id)
            tables.fan_ins = tables.fan_ins - {job_id}
        else:
            del tables.jobs[job_id]
        if row.state == PROCESSING:
            _slot_freed(c, queue)
        _bury_dependents(tables, job_id, ERROR_DEPENDENCY_CANCELLED, params.now)
        return True

    def get_job(self, c: Tx, params: GetJob) -> Job | None:
        job_id, queue = params.job_id, params.queue
        tables = c.tables
        row = (
            tables.jobs.get(job_id)
            or tables.dead.get(job_id)
            or tables.completed.get(job_id)
            or tables.waiting.get(job_id)
        )
        if row is None or (queue is not None and row.queue != queue):
            return None
        return row.to_job()

    def next_wake_at(self, c: Tx, params: NextWake) -> int | None:
        queue, now = params.queue, params.now
        limits = c.tables.limits.get(queue)
        blocked = [] if limits is None else _slot_frees_at(c.tables, queue, limits, now)
        if blocked:  # at a limit: nothing is claimable before a slot frees
            return max(blocked)
        instants = [
            r.run_at if r.state == PENDING else r.deadline
            for r in c.tables.jobs.values()
            if r.queue == queue
        ]
        if limits is not None and limits.rate_per_key is not None and limits.per is not None:
            per = limits.per  # §16.11: a key's oldest start in the window leaves it
            instants += [
                min(window) + per
                for (q, key) in c.tables.key_starts
                if q == queue and (window := _key_window(c.tables, queue, key, per, now))
            ]
        future = [t for t in instants if t is not None and t > now]
        return min(future, default=None)

    # -- operations (the ops profile) --------------------------------------------------
    def queue_stats(self, c: Tx, params: QueueStatsAt) -> list[QueueStats]:
        queues, now = params.queues, params.now
        tables = c.tables
        if queues is None:
            names = {
                r.queue
                for rows in (tables.jobs, tables.dead, tables.completed, tables.waiting)
                for r in rows.values()
            }
            queues = sorted(names | tables.paused)
        return [_stats(tables, queue, now) for queue in sorted(set(queues))]

    def list_jobs(self, c: Tx, params: ListJobs) -> list[Job]:
        queue, state, after_id, limit = params.queue, params.state, params.after_id, params.limit
        before_id = params.before_id
        tables = c.tables
        rows = itertools.chain(
            tables.jobs.values(),
            tables.dead.values(),
            tables.completed.values(),
            tables.waiting.values(),
        )
        wanted = (
            r
            for r in rows
            if r.queue == queue
            and after_id < r.id
            and (before_id is None or r.id < before_id)
            and (state is None or r.state == state)
        )
        # Newest first below before_id: the largest ids, largest first.
        pick = heapq.nsmallest if before_id is None else heapq.nlargest
        page = pick(limit, wanted, key=lambda r: r.id)
        return [row.to_job() for row in page]

    def redrive(self, c: Tx, params: Redrive) -> list[int]:
        queue, ids, limit, now = params.queue, params.ids, params.limit, params.now
        dead = c.tables.dead
        if ids is None:
            chosen = heapq.nsmallest(
                limit,
                (r for r in dead.values() if r.queue == queue),
                key=lambda r: (r.died_at, r.id),
            )
        else:
            chosen = []
            for job_id in dict.fromkeys(ids):  # a repeated id is redriven once
                row = dead.get(job_id)
                if row is not None and row.queue == queue:
                    chosen.append(row)
        new_ids = []
        for row in chosen:
            key = row.unique_key
            if key is not None and _holder(c.tables, queue, key, now) not in (None, row.id):
                continue  # another job holds its key: it stays dead
            new_id = self._db.next_job_id()
            del dead[row.id]  # its kept edges are redrive_dependents' to read
            c.tables.jobs[new_id] = _redriven(row, new_id, now)
            new_ids.append(new_id)
        if new_ids:
            c.topics.add(queue_topic(queue))
        return new_ids

    def purge_dead_jobs(self, c: Tx, params: PurgeDeadJobs) -> int:
        queue, ids, died_before = params.queue, params.ids, params.died_before
        named = None if ids is None else set(ids)
        doomed = [
            row.id
            for row in c.tables.dead.values()
            if row.queue == queue
            and (named is None or row.id in named)
            and (died_before is None or (row.died_at or 0) < died_before)
        ]
        for job_id in doomed:
            del c.tables.dead[job_id]
            _drop_kept_edges(c.tables, job_id)
        return len(doomed)

    def set_paused(self, c: Tx, params: SetPaused) -> bool:
        queue, paused = params.queue, params.paused
        if (queue in c.tables.paused) == paused:
            return False
        if paused:
            c.tables.paused = c.tables.paused | {queue}
        else:
            c.tables.paused = c.tables.paused - {queue}
            c.topics.add(queue_topic(queue))  # waiters everywhere try again
        return True

    def is_paused(self, c: Tx, queue: str) -> bool:
        return queue in c.tables.paused

    # -- limits (the limits profile) ---------------------------------------------------
    def set_limits(self, c: Tx, params: SetLimits) -> bool:
        queue = params.queue
        wanted = (
            None
            if params.concurrency is None
            and params.rate is None
            and params.concurrency_per_key is None
            and params.rate_per_key is None
            else Limits(
                params.concurrency,
                rate=params.rate,
                per=params.per_s,
                concurrency_per_key=params.concurrency_per_key,
                rate_per_key=params.rate_per_key,
            )
        )
        limits = c.tables.limits
        if limits.get(queue) == wanted:
            return False
        changed = dict(limits)
        if wanted is None:
            del changed[queue]
            c.tables.key_cursors = {q: k for q, k in c.tables.key_cursors.items() if q != queue}
        else:
            changed[queue] = wanted
        c.tables.limits = changed
        c.topics.add(queue_topic(queue))  # a raised or removed limit frees slots
        return True

    def queue_limits(self, c: Tx, queue: str | None) -> dict[str, Limits]:
        limits = c.tables.limits
        if queue is None:
            return dict(sorted(limits.items()))
        return {queue: limits[queue]} if queue in limits else {}

    # -- locks ------------------------------------------------------------------------
    def lock_acquire(self, c: Tx, params: LockLease) -> bool:
        name, owner, now, expires_at = params.name, params.owner, params.now, params.expires_at
        held = _live_lock(c.tables, name, now)
        if held is not None and held.owner != owner:
            return False
        c.tables.locks[name] = LockInfo(owner=owner, expires_at=expires_at)
        return True

    def lock_renew(self, c: Tx, params: LockLease) -> bool:
        name, owner, now, expires_at = params.name, params.owner, params.now, params.expires_at
        held = _live_lock(c.tables, name, now)
        if held is None or held.owner != owner:
            return False
        c.tables.locks[name] = LockInfo(owner=owner, expires_at=expires_at)
        return True

    def lock_release(self, c: Tx, params: LockRelease) -> bool:
        name, owner, now = params.name, params.owner, params.now
        held = _live_lock(c.tables, name, now)
        if held is None or held.owner != owner:
            return False
        del c.tables.locks[name]
        return True

    def lock_holder(self, c: Tx, params: LockHolder) -> LockInfo | None:
        name, now = params.name, params.now
        return _live_lock(c.tables, name, now)

    # -- scheduler profile ------------------------------------------------------------
    def schedule_upsert(self, c: Tx, record: ScheduleRecord) -> None:
        stored = c.tables.schedules.get(record.name)
        if stored is not None and stored.spec == record.spec and stored.timezone == record.timezone:
            record = replace(record, next_fire_at=stored.next_fire_at)  # keep the boundary
        c.tables.schedules[record.name] = record

    def schedule_delete(self, c: Tx, name: str) -> bool:
        return c.tables.schedules.pop(name, None) is not None

    def schedule_get(self, c: Tx, name: str) -> ScheduleRecord | None:
        return c.tables.schedules.get(name)

    def schedule_list(self, c: Tx) -> list[ScheduleRecord]:
        return sorted(c.tables.schedules.values(), key=lambda s: s.name)

    def schedules_due(self, c: Tx, now: int) -> list[ScheduleRecord]:
        due = (s for s in c.tables.schedules.values() if s.next_fire_at <= now)
        return sorted(due, key=lambda s: (s.next_fire_at, s.name))

    def schedule_advance(self, c: Tx, params: ScheduleAdvance) -> bool:
        name, expected, new_fire_at = params.name, params.expected, params.new_fire_at
        # The write lock is held for the whole transaction, so this check-then-set is
        # the compare-and-set a SQL engine gets from "UPDATE ... WHERE next_fire_at = ?".
        stored = c.tables.schedules.get(name)
        if stored is None or stored.next_fire_at != expected:
            return False
        c.tables.schedules[name] = replace(stored, next_fire_at=new_fire_at)
        return True

    def schedule_next_fire_at(self, c: Tx) -> int | None:
        return min((s.next_fire_at for s in c.tables.schedules.values()), default=None)

    # -- periodic profile (contract 1.2 §5.11) ----------------------------------------
    def schedules_renew(self, c: Tx, params: ScheduleRenew) -> list[str]:
        names, until = params.names, params.declared_until
        renewed = []
        for name in sorted(set(names)):
            stored = c.tables.schedules.get(name)
            if stored is not None and stored.declared_until is not None:
                c.tables.schedules[name] = replace(stored, declared_until=until)
                renewed.append(name)
        return renewed

    def schedules_lapse(self, c: Tx, params: ScheduleLapse) -> list[str]:
        now = params.now
        lapsed = sorted(
            name
            for name, s in c.tables.schedules.items()
            if s.declared_until is not None and s.declared_until <= now
        )
        for name in lapsed:
            del c.tables.schedules[name]
        return lapsed

    # -- workers profile (contract 1.2 §19) --------------------------------------------
    def worker_register(self, c: Tx, params: WorkerRegister) -> None:
        workers = c.tables.workers
        now = params.now
        for lapsed in [w for w, row in workers.items() if (row.lease_until or 0) <= now]:
            del workers[lapsed]
        workers[params.worker_id] = WorkerInfo(
            params.worker_id,
            params.host,
            params.pid,
            tuple(params.queues),
            params.started_at,
            last_seen=now,
            lease_until=params.lease_until,
        )

    def worker_renew(self, c: Tx, params: WorkerRenew) -> bool:
        stored = c.tables.workers.get(params.worker_id)
        if stored is None or stored.lease_until is None or stored.lease_until <= params.now:
            return False
        c.tables.workers[params.worker_id] = replace(
            stored, last_seen=params.now, lease_until=params.lease_until
        )
        return True

    def worker_deregister(self, c: Tx, params: WorkerRef) -> bool:
        return c.tables.workers.pop(params.worker_id, None) is not None

    def workers_list(self, c: Tx, params: WorkersAt) -> list[WorkerInfo]:
        now = params.now
        live = [w for w in c.tables.workers.values() if (w.lease_until or 0) > now]
        return sorted(live, key=lambda w: w.id.encode("utf-8"))

    def throughput_add(self, c: Tx, params: ThroughputAdd) -> None:
        counts = c.tables.throughput
        for queue, count in zip(params.queues, params.counts, strict=True):
            key = (queue, params.minute)
            counts[key] = counts.get(key, 0) + count
        for key in [k for k in counts if k[1] <= params.prune_through]:
            del counts[key]

    def throughput_read(self, c: Tx, params: ThroughputSince) -> list[tuple[str, int, int]]:
        return [
            (queue, minute, count)
            for (queue, minute), count in c.tables.throughput.items()
            if minute > params.after
        ]

    # -- streams profile --------------------------------------------------------------
    def stream_append(self, c: Tx, params: StreamAppend) -> list[int]:
        stream, payloads, now = params.stream, params.payloads, params.now
        # Offsets come from a per-stream sequence, not from the events left after a
        # trim, so they are never reused.
        added = tuple(EventRow(self._db.next_offset(stream), p, now) for p in payloads)
        c.tables.streams[stream] = c.tables.streams.get(stream, ()) + added
        c.topics.add(stream_topic(stream))
        return [event.offset for event in added]

    def stream_read(self, c: Tx, params: StreamRead) -> list[StreamEvent]:
        stream, after, limit = params.stream, params.after, params.limit
        events = c.tables.streams.get(stream, ())
        start = bisect.bisect_right(events, after, key=lambda e: e.offset)
        page = events[start : start + limit]
        return [stream_event(e.offset, e.payload, e.created_at) for e in page]

    def stream_commit(self, c: Tx, params: StreamCommit) -> None:
        stream, consumer, offset = params.stream, params.consumer, params.offset
        c.tables.offsets[(stream, consumer)] = offset

    def stream_offset(self, c: Tx, params: StreamOffset) -> int:
        stream, consumer = params.stream, params.consumer
        return c.tables.offsets.get((stream, consumer), 0)

    def stream_trim(self, c: Tx, params: StreamTrim) -> int:
        stream, before = params.stream, params.before
        events = c.tables.streams.get(stream, ())
        cut = bisect.bisect_left(events, before, key=lambda e: e.offset)
        if cut:
            c.tables.streams[stream] = events[cut:]
        return cut

    # -- pub/sub profile --------------------------------------------------------------
    def publish(self, c: Tx, params: Publish) -> None:
        channel, payload = params.channel, params.payload
        c.messages.append((channel, payload))  # delivered by the database after commit


def _with_error(errors: str | None, attempt: int, at: int, error: str) -> str:
    """The history with one more entry, the latest ``MAX_ERROR_HISTORY`` kept."""
    history = [] if errors is None else json.loads(errors)
    history.append(json.loads(error_entry(attempt, at, error)))
    return json.dumps(history[-MAX_ERROR_HISTORY:], ensure_ascii=False)


def _redriven(dead: JobRow, new_id: int, now: int) -> JobRow:
    """A dead job's new life: same payload, priority and stamps, everything else fresh."""
    lifetime = None if dead.expires_at is None else dead.expires_at - dead.created_at
    hold = None if dead.hold_until is None else dead.hold_until - dead.created_at
    return replace(
        dead,
        id=new_id,
        state=PENDING,
        attempts=0,
        created_at=now,
        run_at=now,
        claimed_at=None,
        expires_at=None if lifetime is None else now + lifetime,
        worker_id=None,
        last_error=None,
        died_at=None,
        deadline=None,
        errors=None,
        redriven_from=dead.id,
        snoozes=0,
        unique_hold=dead.unique_key,
        hold_until=None if hold is None else now + hold,
    )


def _stats(tables: Tables, queue: str, now: int) -> QueueStats:
    ready = scheduled = processing = lapsed = 0
    oldest_ready: int | None = None
    for row in tables.jobs.values():
        if row.queue != queue:
            continue
        if row.state == PENDING:
            if row.run_at <= now:
                ready += 1
                oldest_ready = row.run_at if oldest_ready is None else min(oldest_ready, row.run_at)
            else:
                scheduled += 1
        elif _lapsed(row, now):
            lapsed += 1
        else:
            processing += 1
    dead = sum(1 for row in tables.dead.values() if row.queue == queue)
    completed = sum(1 for row in tables.completed.values() if row.queue == queue)
    waiting = sum(1 for row in tables.waiting.values() if row.queue == queue)
    return QueueStats(
        queue=queue,
        ready=ready,
        scheduled=scheduled,
        processing=processing,
        lapsed=lapsed,
        dead=dead,
        oldest_ready_age_s=None if oldest_ready is None else now - oldest_ready,
        paused=queue in tables.paused,
        completed=completed,
        waiting=waiting,
    )


if TYPE_CHECKING:
    # Static proof that this class fills the seam and every profile it declares.
    def _conforms(
        d: MemoryDriver,
    ) -> tuple[
        Driver[Tx],
        SchedulerDriver[Tx],
        StreamDriver[Tx],
        PubSubDriver[Tx],
        OpsDriver[Tx],
        UniqueDriver[Tx],
        PeriodicDriver[Tx],
        LimitsDriver[Tx],
        ResultsDriver[Tx],
        WorkersDriver[Tx],
        DependenciesDriver[Tx],
    ]:
        return d, d, d, d, d, d, d, d, d, d, d
