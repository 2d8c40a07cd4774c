"""The queue core of the model (contract §2): enqueue, claim, the handle's
ack / heartbeat / fail / retry / snooze (§14), ack_batch, cancel and the sweep; an ack
keeps a job completed when it is stamped to (§17); jobs wait for others (§18)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from alkstore import EnqueueOpts, JobState, QueueOpts, SweepResult
from alkstore.backoff import retry_delay_range
from alkstore.constants import MAX_SNOOZES

from .state import ModelState
from .values import (
    ERROR_EXHAUSTED,
    ERROR_EXPIRED,
    ERROR_SNOOZES,
    Claim,
    ModelDisagreement,
    ModelJob,
    json_round_trip,
    whole_seconds,
)


@dataclass(frozen=True, slots=True)
class RetryOutcome:
    """What ``retry`` must have done: refused, buried, or rescheduled within bounds."""

    accepted: bool
    dead: bool = False
    run_at_bounds: tuple[int, int] | None = None


class QueuesModel(ModelState):
    """Producing, claiming and finishing jobs."""

    def enqueue_many(
        self,
        queue: str,
        payloads: Sequence[Any],
        queue_opts: QueueOpts,
        opts: EnqueueOpts | None,
        ids: Sequence[int],
    ) -> None:
        """Record an enqueue the engine reported as ``ids`` (one per payload, in order)."""
        if len(ids) != len(payloads):
            raise ModelDisagreement(
                f"{len(payloads)} payloads enqueued but {len(ids)} ids returned"
            )
        self._check_new_ids(ids)
        if any(getattr(i, "duplicate", False) for i in ids):
            raise ModelDisagreement(f"an enqueue without unique= returned a duplicate: {ids}")
        resolved = opts or EnqueueOpts()
        jobs = [
            self._new_job(i, queue, p, queue_opts, resolved)
            for i, p in zip(ids, payloads, strict=True)
        ]
        self._commit_jobs(jobs)
        after = resolved.after if resolved.after is not None else resolved.after_finished
        if after is None:
            return
        if self.refuses_after(resolved):
            raise ModelDisagreement(f"an enqueue after {list(after)} was taken, not refused")
        live = {i for i in after if i in self._live or i in self._waiting}
        if not live:
            return
        for job in jobs:  # §18.1: waiting until the live ones complete
            del self._live[job.id]
            job.state = JobState.WAITING
            self._waiting[job.id] = job
            self._waits_for[job.id] = set(live)
            if resolved.after is None:
                self._fan_ins.add(job.id)

    def refuses_after(self, opts: EnqueueOpts) -> bool:
        """§18.2: whether an enqueue with ``opts`` is refused (an id that names no job,
        or a dead one unless the job waits for it to finish whatever its outcome)."""
        after = opts.after if opts.after is not None else opts.after_finished
        if after is None:
            return False
        allowed: tuple[dict[int, ModelJob], ...] = (self._live, self._waiting, self._completed)
        if opts.after is None:
            allowed = (*allowed, self._dead)
        return any(all(i not in table for table in allowed) for i in after)

    # -- dependencies (§18) --------------------------------------------------------
    def _count_finished(self, job_id: int, fan_ins_only: bool) -> None:
        """``job_id`` finished: each job waiting for it (only the fan-ins, when it will
        never complete) waits for one less, and becomes pending at none."""
        for dependent in sorted(i for i, waits in self._waits_for.items() if job_id in waits):
            if fan_ins_only and dependent not in self._fan_ins:
                continue
            waits = self._waits_for[dependent]
            waits.discard(job_id)
            if waits:
                continue
            del self._waits_for[dependent]
            self._fan_ins.discard(dependent)
            job = self._waiting.pop(dependent)
            job.state = JobState.PENDING
            self._live[dependent] = job

    def _never_completes(self, job_id: int, error: str, now: int) -> None:
        """§18.3: the jobs waiting for ``job_id`` die naming it (fan-ins count it
        finished), and the jobs waiting for those after them."""
        self._count_finished(job_id, fan_ins_only=True)
        # Every job waiting for it dies at once, naming it; then, in id order, each of
        # those passes it on to its own.
        buried = sorted(i for i, waits in self._waits_for.items() if job_id in waits)
        for dependent in buried:
            job = self._waiting.pop(dependent)
            self._dead_waits[dependent] = self._waits_for.pop(dependent)  # §18.4: kept
            job.state = JobState.DEAD
            job.last_error = error
            job.died_at = now
            self._dead[dependent] = job
        for dependent in buried:
            self._never_completes(dependent, f"dependency {dependent} is dead", now)

    def enqueue(
        self, queue: str, payload: Any, queue_opts: QueueOpts, opts: EnqueueOpts | None, job_id: int
    ) -> None:
        self.enqueue_many(queue, [payload], queue_opts, opts, [job_id])

    # -- claiming ----------------------------------------------------------------
    def _bury(self, job: ModelJob, error: str, now: int) -> None:
        # Dead rows keep worker_id and claimed_at: they say who held the job last.
        del self._live[job.id]
        job.state = JobState.DEAD
        job.last_error = error
        job.died_at = now
        job.deadline = None
        job.holding = job.holding and job.hold_dead  # §15.4: dead frees the key unless kept
        self._dead[job.id] = job
        self._never_completes(job.id, f"dependency {job.id} is dead", now)

    def _bury_exhausted(self, queue: str, now: int) -> int:
        doomed = [
            j for j in self._live.values() if j.queue == queue and j.lapsed(now) and j.exhausted()
        ]
        for job in doomed:
            self._bury(job, ERROR_EXHAUSTED, now)
        return len(doomed)

    def claim(self, queue: str, worker_id: str, limit: int = 1) -> list[Claim]:
        """The claims a ``claim_batch(worker_id, limit)`` must hand out, in order."""
        self._check_settled()
        now = self.now
        # A lapsed row whose budget is spent is never handed out again (§2).
        self._bury_exhausted(queue, now)
        if queue in self._paused:  # §11: nothing is handed out; the sweep above still ran
            return []
        concurrency = self._limits.get(queue)
        if concurrency is not None:  # §16: only the free slots; a lapsed claim holds none
            live = sum(
                1
                for j in self._live.values()
                if j.queue == queue and j.state is JobState.PROCESSING and not j.lapsed(now)
            )
            limit = min(limit, concurrency - live)
            if limit <= 0:
                return []
        rate, rate_per_key, per = self._rates.get(queue, (None, None, 0))
        if rate is not None:  # §16.6: at most rate starts in the window (now - per, now]
            limit = min(limit, rate - len(self._window(self._starts.get(queue, []), per, now)))
            if limit <= 0:
                return []
        ready = sorted(
            (j for j in self._live.values() if j.queue == queue and j.claimable(now)),
            key=ModelJob.claim_order,
        )
        per_key = self._per_key.get(queue)
        if per_key is not None or rate_per_key is not None:  # §16.9-§16.11: the keys in turn
            ready = self._in_turn(queue, ready, per_key, rate_per_key, per, now)[:limit]
            if ready:
                self._cursors[queue] = ready[-1].limit_key or ""
        claims = []
        # The core hands a batch back in claim order, whatever order the turn took it in.
        for job in sorted(ready[:limit], key=ModelJob.claim_order):
            job.state = JobState.PROCESSING
            job.attempts += 1
            job.claimed_at = now
            job.worker_id = worker_id
            job.deadline = now + job.visibility_timeout_s
            claims.append(Claim(job.id, job.attempts, job.as_job()))
        if claims and rate is not None:  # one start per claimed job, at now
            kept = self._window(self._starts.get(queue, []), per, now)
            self._starts[queue] = kept + [now] * len(claims)
        if claims and rate_per_key is not None:  # §16.11: one start per job under its key
            for key in sorted({c.job.limit_key or "" for c in claims}):
                taken = sum(1 for c in claims if (c.job.limit_key or "") == key)
                kept = self._window(self._key_starts.get((queue, key), []), per, now)
                self._key_starts[(queue, key)] = kept + [now] * taken
        return claims

    @staticmethod
    def _window(starts: list[int], per: int, now: int) -> list[int]:
        """§16.6's sliding window: the starts at ``t`` with ``now - per < t <= now``."""
        return [t for t in starts if now - per < t <= now]

    def _in_turn(
        self,
        queue: str,
        ready: list[ModelJob],
        per_key: int | None,
        rate_per_key: int | None,
        per: int,
        now: int,
    ) -> list[ModelJob]:
        """§16.10: every key's first few of ``ready`` (in claim order: its per-key limit
        less its live claims, its per-key rate less its starts in the window, §16.11),
        taken round by round, each round's keys after the cursor first, then the rest,
        in key order."""
        live: dict[str, int] = {}
        for j in self._live.values():
            if j.queue == queue and j.state is JobState.PROCESSING and not j.lapsed(now):
                live[j.limit_key or ""] = live.get(j.limit_key or "", 0) + 1

        def room(key: str) -> int:
            most = []
            if per_key is not None:
                most.append(per_key - live.get(key, 0))
            if rate_per_key is not None:
                started = self._window(self._key_starts.get((queue, key), []), per, now)
                most.append(rate_per_key - len(started))
            return min(most)

        cursor = self._cursors.get(queue)
        taken: dict[str, int] = {}
        order = []
        for job in ready:
            key = job.limit_key or ""
            turn = taken.get(key, 0)
            taken[key] = turn + 1
            if turn < room(key):
                order.append(((turn, cursor is not None and key <= cursor, key), job))
        order.sort(key=lambda entry: entry[0])
        return [job for _, job in order]

    # -- handle ops ----------------------------------------------------------------
    def _valid(self, claim: Claim, now: int) -> ModelJob | None:
        """The row, if ``claim`` is still live: processing under this very attempt and
        before its deadline (decision 010 §2)."""
        job = self._live.get(claim.job_id)
        if (
            job is None
            or job.state is not JobState.PROCESSING
            or job.attempts != claim.attempt
            or job.deadline is None
            or job.deadline <= now
        ):
            return None
        return job

    def ack(self, claim: Claim, result: Any = None) -> bool:
        """§2.12, §17: the job is deleted, or kept completed with ``result`` when it is
        stamped with a completed retention."""
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return False
        self._finish(job, now, result)
        return True

    def _finish(self, job: ModelJob, now: int, result: Any) -> None:
        del self._live[job.id]
        self._count_finished(job.id, fan_ins_only=False)
        for kept in self._dead_waits.values():  # §18.4: a kept edge to it is satisfied
            kept.discard(job.id)
        if job.completed_retention_s is None:
            return
        job.state = JobState.COMPLETED
        job.completed_at = now
        job.result = None if result is None else json_round_trip(result)
        job.deadline = None
        job.holding = False  # §15.4: an ack frees the key
        self._completed[job.id] = job

    def heartbeat(self, claim: Claim, extend: int | float | timedelta) -> bool:
        """Absolute renewal: the deadline becomes ``now + extend``, never additive."""
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return False
        job.deadline = now + whole_seconds(extend)
        return True

    def fail(self, claim: Claim, error: str) -> bool:
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return False
        self._record_error(job, now, error)
        self._bury(job, error, now)
        return True

    def retry(
        self, claim: Claim, error: str, delay: int | float | timedelta | None = None
    ) -> RetryOutcome:
        """Apply a retry; when it reschedules, the engine's ``run_at`` must be passed to
        ``settle_retry`` before the model is used again (the jitter is the engine's)."""
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return RetryOutcome(accepted=False)
        self._record_error(job, now, error)
        if job.exhausted():
            self._bury(job, ERROR_EXHAUSTED, now)
            return RetryOutcome(accepted=True, dead=True)
        if delay is not None:
            low = high = whole_seconds(delay)
        else:
            low, high = retry_delay_range(job.backoff_base_s, job.attempts)
        job.state = JobState.PENDING
        job.worker_id = None
        job.claimed_at = None
        job.deadline = None
        job.run_at = now + low
        bounds = (now + low, now + high)
        if low != high:
            self._unsettled[job.id] = bounds
        return RetryOutcome(accepted=True, run_at_bounds=bounds)

    def snooze(self, claim: Claim, delay: int | float | timedelta) -> bool:
        """§14: pending at ``now + delay``, one more snooze, the attempt refunded to the
        budget (``max_attempts + 1``, as a release), errors untouched; at ``MAX_SNOOZES``
        snoozes the job goes dead instead."""
        self._check_settled()
        now = self.now
        job = self._valid(claim, now)
        if job is None:
            return False
        if job.snoozes >= MAX_SNOOZES:
            self._bury(job, ERROR_SNOOZES, now)
            return True
        job.state = JobState.PENDING
        job.run_at = now + whole_seconds(delay)
        job.snoozes += 1
        job.max_attempts += 1
        job.worker_id = None
        job.claimed_at = None
        job.deadline = None
        return True

    def _record_error(self, job: ModelJob, now: int, error: str) -> None:
        if self.ops:
            job.record_error(now, error)

    def settle_retry(self, job_id: int, run_at: int) -> None:
        """Adopt the engine's jittered ``run_at`` once it is checked against the curve."""
        bounds = self._unsettled.pop(job_id, None)
        if bounds is None:
            return
        low, high = bounds
        if not low <= run_at <= high:
            raise ModelDisagreement(
                f"job {job_id} was retried to run_at={run_at}, outside the backoff range "
                f"[{low}, {high}]"
            )
        self._live[job_id].run_at = run_at

    # -- queue-level ops ---------------------------------------------------------------
    def ack_batch(self, queue: str, job_ids: Sequence[int], worker_id: str) -> int:
        """Acks the distinct ids of ``queue`` processing under ``worker_id``, unexpired."""
        self._check_settled()
        now = self.now
        acked = 0
        for job_id in dict.fromkeys(job_ids):
            job = self._live.get(job_id)
            if (
                job is not None
                and job.queue == queue
                and job.state is JobState.PROCESSING
                and job.worker_id == worker_id
                and job.deadline is not None
                and job.deadline > now
            ):
                self._finish(job, now, None)
                acked += 1
        return acked

    def cancel(self, queue: str, job_id: int) -> bool:
        """Deletes a pending or processing row of ``queue`` whoever holds it; dead stays."""
        self._check_settled()
        job = self._live.get(job_id) or self._waiting.get(job_id)
        if job is None or job.queue != queue:
            return False
        if job.state is JobState.WAITING:  # §18.3: a waiting job is cancelled as a pending one
            del self._waiting[job_id]
            del self._waits_for[job_id]
            self._fan_ins.discard(job_id)
        else:
            del self._live[job_id]
        self._never_completes(job_id, f"dependency {job_id} was cancelled", self.now)
        return True

    def sweep_expired(self, queue: str) -> SweepResult:
        """Expired rows first (so an expired exhausted row records ``"expired"``), then
        lapsed exhausted rows, then dead rows past their stamped retention."""
        self._check_settled()
        now = self.now
        waited = sorted(
            (j for j in self._waiting.values() if j.queue == queue and j.expired(now)),
            key=lambda job: job.id,
        )
        for job in waited:  # §18.3: a waiting job expires as a pending one does, all at once
            del self._waiting[job.id]
            del self._waits_for[job.id]
            self._fan_ins.discard(job.id)
            job.state = JobState.DEAD
            job.last_error = ERROR_EXPIRED
            job.died_at = now
            self._dead[job.id] = job
        for job in waited:  # then each passes it on
            self._never_completes(job.id, f"dependency {job.id} is dead", now)
        expired = [j for j in self._live.values() if j.queue == queue and j.expired(now)]
        for job in expired:
            self._bury(job, ERROR_EXPIRED, now)
        exhausted = self._bury_exhausted(queue, now)
        purged = [
            j
            for j in self._dead.values()
            if j.queue == queue
            and j.dead_letter_retention_s is not None
            and j.died_at is not None
            and j.died_at + j.dead_letter_retention_s < now
        ]
        for job in purged:
            del self._dead[job.id]
        swept = [
            j
            for j in self._completed.values()
            if j.queue == queue
            and j.completed_retention_s is not None
            and j.completed_at is not None
            and j.completed_at + j.completed_retention_s < now
        ]
        for job in swept:
            del self._completed[job.id]
        expired_count = len(expired) + len(waited)
        return SweepResult(expired_count, exhausted, len(purged), purged_completed=len(swept))
