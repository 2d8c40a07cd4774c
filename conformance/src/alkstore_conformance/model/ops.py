"""The ops profile of the model (contract §11): stats, job pages, redrive, purge
and pause (the error history is ``ModelJob.record_error``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from alkstore import Job, JobState, QueueStats

from .state import ModelState
from .values import ModelDisagreement, ModelJob


class OpsModel(ModelState):
    """What an operator reads and does to a queue."""

    def stats(self, queue: str) -> QueueStats:
        now = self.now
        live = [j for j in self._live.values() if j.queue == queue]
        ready = [j.run_at for j in live if j.state is JobState.PENDING and j.run_at <= now]
        processing = [j for j in live if j.state is JobState.PROCESSING]
        lapsed = sum(1 for j in processing if j.lapsed(now))
        return QueueStats(
            queue=queue,
            ready=len(ready),
            scheduled=sum(1 for j in live if j.state is JobState.PENDING) - len(ready),
            processing=len(processing) - lapsed,
            lapsed=lapsed,
            dead=sum(1 for j in self._dead.values() if j.queue == queue),
            oldest_ready_age_s=now - min(ready) if ready else None,
            paused=queue in self._paused,
            concurrency_limit=self._limits.get(queue),
            concurrency_per_key=self._per_key.get(queue),
            rate_limit=self._rates.get(queue, (None, None, None))[0],
            rate_per_s=self._rates.get(queue, (None, None, None))[2],
            rate_per_key=self._rates.get(queue, (None, None, None))[1],
            completed=sum(1 for j in self._completed.values() if j.queue == queue),
            waiting=sum(1 for j in self._waiting.values() if j.queue == queue),
        )

    def store_stats(self) -> list[QueueStats]:
        """Every queue with a live, dead or completed row, a pause or a limit, by name."""
        rows = (
            *self._live.values(),
            *self._dead.values(),
            *self._completed.values(),
            *self._waiting.values(),
        )
        names = {job.queue for job in rows} | self._paused | set(self._limits) | set(self._per_key)
        names |= set(self._rates)
        return [self.stats(name) for name in sorted(names)]

    def jobs(self, queue: str, state: JobState | None, after_id: int, limit: int) -> list[Job]:
        every = (
            *self._live.values(),
            *self._dead.values(),
            *self._completed.values(),
            *self._waiting.values(),
        )
        rows = sorted(every, key=lambda job: job.id)
        return [
            job.as_job()
            for job in rows
            if job.queue == queue and job.id > after_id and state in (None, job.state)
        ][:limit]

    def _to_redrive(self, queue: str, ids: Sequence[int] | None, limit: int) -> list[ModelJob]:
        dead = [job for job in self._dead.values() if job.queue == queue]
        if ids is None:
            return sorted(dead, key=lambda job: (job.died_at, job.id))[:limit]
        named = {job.id: job for job in dead}
        return [named[job_id] for job_id in dict.fromkeys(ids) if job_id in named]

    def redrive(
        self,
        queue: str,
        ids: Sequence[int] | None,
        limit: int,
        new_ids: Sequence[int],
        revived: Mapping[int, int] | None = None,
    ) -> list[int]:
        """Record a redrive the engine reported as ``new_ids`` (one per dead row it took,
        in order): each dead row goes, a new pending job with its payload and stamps
        comes, due now, its expiry as far from now as it was from its creation. With
        the dependencies profile, ``revived`` maps dead ids to the ids of the waiting
        jobs the engine shows redriven from them: the dead dependents the redrive
        brought back (§18.4) are looked up there. Returns their new ids."""
        self._check_settled()
        now = self.now
        chosen = self._redrivable(queue, self._to_redrive(queue, ids, limit), now)
        if len(new_ids) != len(chosen):
            raise ModelDisagreement(
                f"redrive of {ids!r} (limit {limit}) must redrive dead jobs "
                f"{[job.id for job in chosen]}, the engine returned {len(new_ids)} new ids"
            )
        self._check_new_ids(new_ids)
        for old in chosen:
            del self._dead[old.id]
        pairs = [(old.id, new_id) for old, new_id in zip(chosen, new_ids, strict=True)]
        self._commit_jobs(
            self._reborn(old, new_id, now) for old, new_id in zip(chosen, new_ids, strict=True)
        )
        return self._revive(pairs, revived or {}, now)

    def _revive(
        self, level: list[tuple[int, int]], revived: Mapping[int, int], now: int
    ) -> list[int]:
        """§18.4, level by level: the kept edges to each redriven job move to its new
        job, each new job waits for what its dead job kept that can still complete,
        and the dead jobs whose kept edges all name live or waiting jobs come back."""
        brought_back: list[int] = []
        while level:
            made = dict(level)
            for kept in self._dead_waits.values():
                for old in made.keys() & kept:
                    kept.discard(old)
                    kept.add(made[old])
            for old, new_id in level:
                kept = self._dead_waits.pop(old, set())
                live = {i for i in kept if i in self._live or i in self._waiting}
                if live:
                    job = self._live.pop(new_id)
                    job.state = JobState.WAITING
                    self._waiting[new_id] = job
                    self._waits_for[new_id] = live
            new = set(made.values())
            back = sorted(
                dead_id
                for dead_id, kept in self._dead_waits.items()
                if dead_id in self._dead
                and kept & new
                and all(i in self._live or i in self._waiting for i in kept)
            )
            if any(dead_id not in revived for dead_id in back):
                missing = [i for i in back if i not in revived]
                raise ModelDisagreement(
                    f"the redrive must bring back dead jobs {missing} (§18.4): the engine "
                    "shows no waiting job redriven from them"
                )
            ids = [revived[dead_id] for dead_id in back]
            self._check_new_ids(ids)
            self._commit_jobs(self._reborn(self._dead.pop(i), revived[i], now) for i in back)
            brought_back.extend(ids)
            level = [(i, revived[i]) for i in back]
        return brought_back

    @staticmethod
    def _reborn(old: ModelJob, new_id: int, now: int) -> ModelJob:
        """A dead job's new life (§11.3): pending, due now, its expiry shifted."""
        lifetime = None if old.expires_at is None else old.expires_at - old.created_at
        return replace(
            old,
            id=new_id,
            state=JobState.PENDING,
            attempts=0,
            created_at=now,
            run_at=now,
            claimed_at=None,
            expires_at=None if lifetime is None else now + lifetime,
            worker_id=None,
            last_error=None,
            died_at=None,
            deadline=None,
            errors=(),
            redriven_from=old.id,
            snoozes=0,
            holding=old.unique_key is not None,
            hold_until=(None if old.hold_until is None else now + old.hold_until - old.created_at),
        )

    def _redrivable(self, queue: str, chosen: list[ModelJob], now: int) -> list[ModelJob]:
        """§15.5: of the chosen dead jobs, those whose key no other job holds (a job
        redriven before them in this call included)."""
        taken: set[str] = set()
        kept = []
        for job in chosen:
            key = job.unique_key
            if key is not None:
                holder = None
                for other in (*self._live.values(), *self._dead.values()):
                    if other.holds(queue, key, now):
                        holder = other.id
                if key in taken or holder not in (None, job.id):
                    continue
                taken.add(key)
            kept.append(job)
        return kept

    def purge_dead(self, queue: str, ids: Sequence[int] | None, older_than_s: int | None) -> int:
        self._check_settled()
        now = self.now
        doomed = [
            job
            for job in self._dead.values()
            if job.queue == queue
            and (ids is None or job.id in ids)
            and (older_than_s is None or (job.died_at or now) < now - older_than_s)
        ]
        for job in doomed:
            del self._dead[job.id]
        return len(doomed)

    def set_paused(self, queue: str, paused: bool) -> bool:
        """Pause or resume; whether that changed anything."""
        changed = (queue in self._paused) != paused
        if paused:
            self._paused.add(queue)
        else:
            self._paused.discard(queue)
        return changed

    def paused(self, queue: str) -> bool:
        return queue in self._paused

    def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        per_key: int | None = None,
        *,
        rate: int | None = None,
        rate_per_key: int | None = None,
        per: int | None = None,
    ) -> bool:
        """Store a queue's limit, per-key limit and rates (§16, §16.6, §16.9, §16.11),
        or, with all ``None``, remove them and the turn's cursor; whether that changed
        them. The starts already recorded stay: a later rate counts those in its window."""
        rates = None if rate is None and rate_per_key is None else (rate, rate_per_key, per)
        before = (self._limits.get(queue), self._per_key.get(queue), self._rates.get(queue))
        changed = before != (concurrency, per_key, rates)
        for stored, value in ((self._limits, concurrency), (self._per_key, per_key)):
            if value is None:
                stored.pop(queue, None)
            else:
                stored[queue] = value
        if rates is None:
            self._rates.pop(queue, None)
        else:
            assert per is not None, "a rate needs its window"
            self._rates[queue] = (rate, rate_per_key, per)
        if concurrency is None and per_key is None and rates is None:
            self._cursors.pop(queue, None)
        return changed

    def rates(self, queue: str) -> tuple[int | None, int | None, int] | None:
        """The queue's ``(rate, rate_per_key, per)``, or ``None`` without a rate."""
        return self._rates.get(queue)

    def per_key(self, queue: str) -> int | None:
        return self._per_key.get(queue)

    def limits(self, queue: str) -> int | None:
        return self._limits.get(queue)
