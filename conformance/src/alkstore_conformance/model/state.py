"""What every profile of the model works on: its tables, "now", the id rule and
the row a new job becomes (like an engine's schema beside its statement mixins)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from alkstore import EnqueueOpts, Job, JobState, QueueOpts
from alkstore.clock import Clock

from .values import (
    ModelDisagreement,
    ModelJob,
    ModelLock,
    ModelSchedule,
    ModelStream,
    json_round_trip,
)


def _stamp(value: object) -> int:
    # QueueOpts/EnqueueOpts normalize every duration and instant to int on construction.
    if not isinstance(value, int):
        raise TypeError(f"expected normalized options, got {value!r}")
    return value


class ModelState:
    """The model's tables and the rules more than one profile uses; each profile's
    operations are a mixin over it (``ReferenceModel`` composes them)."""

    def __init__(self, clock: Clock, *, ops: bool = False) -> None:
        # Every profile's tables, in one place: a profile's mixin reads another's
        # (a claim reads the ops profile's pauses, a tick takes a lock).
        self.clock = clock
        self.ops = ops
        """Whether the engine has the ops profile (contract §11)."""
        self._paused: set[str] = set()
        self._limits: dict[str, int] = {}
        """Each limited queue's concurrency limit (contract §16, the limits profile)."""
        self._per_key: dict[str, int] = {}
        """Each queue's per-key limit (§16.9, the key_limits profile)."""
        self._rates: dict[str, tuple[int | None, int | None, int]] = {}
        """Each rate-limited queue's ``(rate, rate_per_key, per)`` (§16.6, §16.11)."""
        self._starts: dict[str, list[int]] = {}
        """Each queue's claim starts while it had a rate (§16.6), as the claims that
        recorded them left them: a claim that records drops the starts out of its window."""
        self._key_starts: dict[tuple[str, str], list[int]] = {}
        """Each ``(queue, key)``'s claim starts while the queue had a per-key rate (§16.11)."""
        self._cursors: dict[str, str] = {}
        """The key each per-key limited queue's last claim served (§16.10)."""
        self._live: dict[int, ModelJob] = {}
        self._dead: dict[int, ModelJob] = {}
        self._completed: dict[int, ModelJob] = {}
        """Acked jobs of a queue with a completed retention (§17), until swept."""
        self._waiting: dict[int, ModelJob] = {}
        """Jobs waiting for others (§18, the dependencies profile)."""
        self._waits_for: dict[int, set[int]] = {}
        """What each waiting job still waits for."""
        self._fan_ins: set[int] = set()
        """The waiting jobs that wait for their jobs to finish whatever the outcome."""
        self._dead_waits: dict[int, set[int]] = {}
        """The edges each dead job kept when it died because a dependency will never
        complete (§18.4), less those to jobs that completed since."""
        self._locks: dict[str, ModelLock] = {}
        self._seen_ids: set[int] = set()
        self._max_committed_id: int | None = None
        self._unsettled: dict[int, tuple[int, int]] = {}
        self._schedules: dict[str, ModelSchedule] = {}
        self._unadopted: list[ModelJob] = []
        """Jobs the last tick fired, awaiting the ids the engine gave them."""
        self._streams: dict[str, ModelStream] = {}

    @property
    def now(self) -> int:
        """The store's "now": the clock floored to a whole second."""
        return math.floor(self.clock.now())

    @property
    def seen_ids(self) -> frozenset[int]:
        """Every id an enqueue ever returned (committed or rolled back) or a tick fired."""
        return frozenset(self._seen_ids)

    @property
    def max_committed_id(self) -> int | None:
        """The largest id committed so far: every later job's id is larger."""
        return self._max_committed_id

    # -- reads ---------------------------------------------------------------
    def _row(self, job_id: int) -> ModelJob | None:
        return (
            self._live.get(job_id)
            or self._dead.get(job_id)
            or self._completed.get(job_id)
            or self._waiting.get(job_id)
        )

    def get_job(self, job_id: int) -> Job | None:
        """``Queue.get_job`` is id-global (contract §2)."""
        job = self._row(job_id)
        return None if job is None else job.as_job()

    def describe(self, job_id: int) -> str:
        """The model's view of one row, hidden deadline included (for failure messages)."""
        job = self._row(job_id)
        if job is None:
            return f"job {job_id} absent"
        if job.state is JobState.PROCESSING:
            return (
                f"job {job_id} processing, attempt {job.attempts} of {job.max_attempts}, "
                f"deadline {job.deadline}, now {self.now}"
            )
        if job.state is JobState.PENDING:
            return f"job {job_id} pending, run_at {job.run_at}, now {self.now}"
        if job.state is JobState.COMPLETED:
            return f"job {job_id} completed at {job.completed_at}, now {self.now}"
        if job.state is JobState.WAITING:
            return f"job {job_id} waiting for {sorted(self._waits_for.get(job_id, ()))}"
        return f"job {job_id} dead ({job.last_error!r})"

    # -- producing -------------------------------------------------------------
    def _check_new_ids(self, ids: Sequence[int], *, after: int | None = None) -> None:
        """Ids are the engine's to choose, but each is new and larger than every id
        committed before it (and than ``after``), so enqueue order is id order.

        Only committed ids count: a rolled-back insert never existed, and an engine whose
        id sequence rolls back with the transaction (SQLite's AUTOINCREMENT) hands that id
        out again."""
        floors = [f for f in (self._max_committed_id, after) if f is not None]
        previous = max(floors) if floors else None
        for job_id in ids:
            if isinstance(job_id, bool) or not isinstance(job_id, int):
                raise ModelDisagreement(f"job id {job_id!r} is not an int")
            if previous is not None and job_id <= previous:
                raise ModelDisagreement(
                    f"job id {job_id} is not larger than every id before it ({previous}): "
                    "ids must increase in enqueue order and never be reused"
                )
            previous = job_id

    def _new_job(
        self,
        job_id: int,
        queue: str,
        payload: Any,
        queue_opts: QueueOpts,
        opts: EnqueueOpts,
    ) -> ModelJob:
        now = self.now
        if opts.delay is not None:  # delay wins over run_at
            run_at = now + _stamp(opts.delay)
        elif opts.run_at is not None:
            run_at = _stamp(opts.run_at)
        else:
            run_at = now
        retention = queue_opts.dead_letter_retention_s
        kept = queue_opts.completed_retention_s
        return ModelJob(
            id=job_id,
            queue=queue,
            state=JobState.PENDING,
            payload=json_round_trip(payload),
            priority=opts.priority,
            attempts=0,
            max_attempts=(
                opts.max_attempts if opts.max_attempts is not None else queue_opts.max_attempts
            ),
            created_at=now,
            run_at=run_at,
            claimed_at=None,
            expires_at=None if opts.expires is None else now + _stamp(opts.expires),
            worker_id=None,
            visibility_timeout_s=_stamp(queue_opts.visibility_timeout_s),
            backoff_base_s=_stamp(queue_opts.backoff_base_s),
            dead_letter_retention_s=None if retention is None else _stamp(retention),
            completed_retention_s=None if kept is None else _stamp(kept),
            limit_key=opts.limit_key,
            metadata=None if opts.metadata is None else dict(opts.metadata),
        )

    def _commit_jobs(self, jobs: Iterable[ModelJob]) -> None:
        for job in jobs:
            self._live[job.id] = job
            self._seen_ids.add(job.id)
            if self._max_committed_id is None or job.id > self._max_committed_id:
                self._max_committed_id = job.id

    # -- what the engine still owes the model (a retry's jitter, a tick's ids) -------
    def _check_settled(self) -> None:
        if self._unsettled:
            raise RuntimeError(
                f"retries of jobs {sorted(self._unsettled)} await settle_retry(job_id, run_at)"
            )
        if self._unadopted:
            raise RuntimeError(
                f"{len(self._unadopted)} fired jobs await adopt_fired(jobs the engine shows)"
            )

    def _stream(self, name: str) -> ModelStream:
        return self._streams.setdefault(name, ModelStream())
