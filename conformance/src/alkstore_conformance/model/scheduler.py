"""The scheduler in the model (contract §5): schedules, ticks under the
leadership lock, catch-up by policy, and adopting the jobs a tick fired.

A cron schedule's boundaries come from the kit's oracle (``model.cron``), read in
the schedule's zone; an ``@every`` schedule's are one interval apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from alkstore import (
    CATCH_UP_CAP,
    DECLARATION_LEASE_S,
    DEFAULT_QUEUE_OPTS,
    MISFIRE_GRACE_S,
    SCHEDULER_LEASE_S,
    SCHEDULER_LOCK,
    Job,
    Schedule,
    ScheduleOpts,
    TickResult,
)

from . import cron
from .locks import LocksModel
from .values import ModelDisagreement, ModelSchedule, job_differences, json_round_trip

SPEC_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_EVERY = re.compile(r"@every ([0-9]+)([smhd])")


def spec_interval(spec: str) -> int | None:
    """The interval in seconds of an ``@every <n><unit>`` spec (§5); ``None`` for cron."""
    match = _EVERY.fullmatch(spec)
    if match is None:
        cron.read_spec(spec)  # (the model is only handed specs the grammar accepts)
        return None
    if int(match.group(1)) == 0:
        raise ValueError(f"not a schedule spec: {spec!r}")
    return int(match.group(1)) * SPEC_UNIT_SECONDS[match.group(2)]


def boundary_after(row: ModelSchedule, boundary: int) -> int:
    """The boundary of ``row`` that follows ``boundary`` (a new schedule's first one
    when ``boundary`` is now)."""
    if row.interval_s is not None:
        return boundary + row.interval_s
    return cron.next_fire(row.spec, row.opts.timezone, boundary)


class SchedulerModel(LocksModel):
    """Schedules and ticks; a tick's leadership is a lock (``LocksModel``)."""

    def schedule(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any,
        opts: ScheduleOpts | None,
        *,
        declared: bool = False,
    ) -> Schedule:
        """Upsert by name. A new schedule, or one whose spec (the string) or zone
        changed, next fires at its first boundary after now; re-registering the same
        spec in the same zone keeps its boundary, whatever else changed. ``declared``
        (``declare_schedule``, §5.11) leases it until now + ``DECLARATION_LEASE_S``;
        otherwise it is undeclared and never lapses."""
        interval = spec_interval(spec)
        opts = opts or ScheduleOpts()
        row = ModelSchedule(
            name=name,
            spec=spec,
            queue=queue,
            payload=json_round_trip(payload),
            opts=opts,
            interval_s=interval,
            next_fire_at=0,
            declared_until=self.now + DECLARATION_LEASE_S if declared else None,
        )
        stored = self._schedules.get(name)
        if stored is not None and (stored.spec, stored.opts.timezone) == (spec, opts.timezone):
            row.next_fire_at = stored.next_fire_at
        else:
            row.next_fire_at = boundary_after(row, self.now)
        self._schedules[name] = row
        return row.as_schedule()

    def declare_schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None
    ) -> Schedule:
        return self.schedule(name, spec, queue, payload, opts, declared=True)

    def renew_schedules(self, names: Sequence[str]) -> list[str]:
        """The declared ones of ``names`` get a lease until now + ``DECLARATION_LEASE_S``;
        nothing else changes. Returns them by name."""
        renewed = []
        for name in sorted(set(names)):
            row = self._schedules.get(name)
            if row is not None and row.declared_until is not None:
                row.declared_until = self.now + DECLARATION_LEASE_S
                renewed.append(name)
        return renewed

    def unschedule(self, name: str) -> bool:
        return self._schedules.pop(name, None) is not None

    def get_schedule(self, name: str) -> Schedule | None:
        row = self._schedules.get(name)
        return None if row is None else row.as_schedule()

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name (the contract names no order: compare sorted)."""
        return [self._schedules[name].as_schedule() for name in sorted(self._schedules)]

    def later_boundary(self, name: str, steps: int) -> int:
        """The boundary ``steps`` boundaries after the schedule's next one."""
        row = self._schedules[name]
        at = row.next_fire_at
        for _ in range(steps):
            at = boundary_after(row, at)
        return at

    def tick_schedules(self, worker_id: str) -> TickResult:
        """One tick as ``worker_id``: it takes (or renews) the leadership lock, and fires
        nothing while another owner's lock is live. Of each schedule's due boundaries,
        its catch-up policy fires: all (at most ``CATCH_UP_CAP``), the latest, or those
        due less than ``MISFIRE_GRACE_S`` ago (§5.4); the rest are skipped, and the
        schedule moves to its first boundary strictly after now. The fired jobs' ids
        are the engine's: the jobs it created must be passed to ``adopt_fired`` before
        the model is used again."""
        self._check_settled()
        if not self.lock_acquire(SCHEDULER_LOCK, worker_id, SCHEDULER_LEASE_S):
            return TickResult(fired=0, skipped=0)
        now = self.now
        # A declaration whose lease is at or before now is removed before anything fires.
        for name in [n for n, r in self._schedules.items() if _lapsed(r, now)]:
            del self._schedules[name]
        fired = skipped = 0
        for row in self._schedules.values():
            if row.next_fire_at > now:
                continue
            due = [row.next_fire_at]
            while (following := boundary_after(row, due[-1])) <= now:
                due.append(following)
            policy = row.opts.catch_up
            if policy == "latest":
                fires = due[-1:]
            elif policy == "none":
                fires = [b for b in due if now - b < MISFIRE_GRACE_S][:CATCH_UP_CAP]
            else:
                fires = due[:CATCH_UP_CAP]
            for _ in fires:
                # A fire enqueues "now", whichever boundary it stands for.
                self._unadopted.append(
                    self._new_job(0, row.queue, row.payload, DEFAULT_QUEUE_OPTS, row.fire_opts())
                )
            fired += len(fires)
            skipped += len(due) - len(fires)
            row.next_fire_at = following
        return TickResult(fired=fired, skipped=skipped)

    def adopt_fired(self, jobs: Sequence[Job]) -> None:
        """Take the jobs the engine created since the last tick (in id order) as that
        tick's fires: each must be one the model expects, with a new id, and every
        expected fire must be among them. Fires of one schedule are indistinguishable,
        and the contract orders neither the schedules of a tick nor their ids."""
        self._check_new_ids([job.id for job in jobs])
        expected = self._unadopted
        self._unadopted = []
        # Compared without ids: the engine's are unknown until matched.
        owed = [replace(fire.as_job(), id=0) for fire in expected]
        adopted = []
        for job in jobs:
            anonymous = replace(job, id=0)
            match = next((i for i, fire in enumerate(owed) if fire == anonymous), None)
            if match is None:
                differences = "; ".join(job_differences(anonymous, owed[0])) if owed else ""
                raise ModelDisagreement(
                    f"job {job.id} appeared but is no fire the last tick owed ("
                    + (
                        f"{len(owed)} unmatched, the first differs in {differences})"
                        if owed
                        else "it owed none)"
                    )
                )
            del owed[match]
            fire = expected.pop(match)
            fire.id = job.id
            adopted.append(fire)
        if expected:
            raise ModelDisagreement(
                f"the last tick owed {len(expected)} more fired jobs than the engine shows: "
                + ", ".join(f"{fire.queue!r} payload {fire.payload!r}" for fire in expected[:5])
            )
        self._commit_jobs(adopted)

    def describe_schedules(self) -> str:
        """The model's schedules and scheduler lock (for failure messages)."""
        lock = self._locks.get(SCHEDULER_LOCK)
        held = "free" if lock is None else f"held by {lock.owner!r} until {lock.expires_at}"
        rows = ", ".join(
            f"{row.name} {row.spec!r} in {row.opts.timezone} ({row.opts.catch_up}) next "
            f"{row.next_fire_at}"
            + ("" if row.declared_until is None else f" declared until {row.declared_until}")
            for row in self._schedules.values()
        )
        return f"now {self.now}, lock {held}; {rows or 'no schedules'}"


def _lapsed(row: ModelSchedule, now: int) -> bool:
    return row.declared_until is not None and row.declared_until <= now
