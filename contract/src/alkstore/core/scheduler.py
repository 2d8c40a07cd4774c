"""The scheduler collapsed into queues (contract §5, decision 009).

Each boundary fire is its own transaction: enqueue the payload and advance
``next_fire_at`` to the next boundary with a compare-and-set on the schedule
row. A crash mid-tick therefore refires at most the boundary in flight, and two
tickers never fire one boundary twice (the loser's compare-and-set fails).
Every boundary comes from the schedule's ``Cadence`` (``alkstore.spec``), so
``@every`` and cron take the same path; the catch-up policy only decides which
of the due boundaries fire and where one compare-and-set skips the rest to.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..cadence import Cadence
from ..clock import RealtimeClock
from ..constants import (
    CATCH_UP_CAP,
    DECLARATION_LEASE_S,
    MISFIRE_GRACE_S,
    SCHEDULER_LEASE_S,
    SCHEDULER_LOCK,
)
from ..cron_cadence import NEVER
from ..driver import SCHEDULES_TOPIC, SchedulerDriver, queue_topic
from ..errors import AlkstoreError, InvalidOptions, InvalidSpec, LeadershipLost
from ..names import validate_identifier, validate_name
from ..options import DEFAULT_QUEUE_OPTS, JobStamps, ScheduleOpts, check_type, resolve_stamps
from ..params import ScheduleAdvance, ScheduleLapse, ScheduleRenew
from ..rows import ScheduleRecord
from ..spec import parse_spec
from ..stop import StopToken
from ..values import Schedule, TickResult
from ..zones import UTC_ZONE
from .context import StoreContext
from .locks import CoreLock
from .wake import Waiter

log = logging.getLogger("alkstore.scheduler")

# The leader re-plans at least this often, so its lease never lapses while it sleeps.
_MAX_SLEEP_S = SCHEDULER_LEASE_S / 3


@dataclass(frozen=True, slots=True)
class _Step:
    """What one pass over a schedule's due boundaries did."""

    fired: int
    skipped: int
    overtaken: bool
    """Another ticker moved the row first: re-read it and carry on."""


def _needs_cron_profile(cadence: Cadence, opts: ScheduleOpts) -> bool:
    """Whether a schedule uses what only contract 1.2's ``cron`` profile stores."""
    return cadence.interval_s is None or opts.timezone != UTC_ZONE or opts.catch_up != "all"


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class CoreScheduler:
    def __init__(self, context: StoreContext) -> None:
        self._context = context

    # -- registry ----------------------------------------------------------
    def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        return self._upsert(name, spec, queue, payload, opts, declared=False)

    def declare(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        """``schedule`` with a lease (contract 1.2 §5.11, the periodic profile): the
        schedule is declared until ``now + DECLARATION_LEASE_S``."""
        return self._upsert(name, spec, queue, payload, opts, declared=True)

    def renew(self, names: Sequence[str]) -> list[str]:
        """Extend the lease of those of ``names`` that are declared schedules to
        ``now + DECLARATION_LEASE_S``; the names renewed, ordered by name."""
        if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
            raise InvalidOptions(
                f"names must be a list or tuple of schedule names, got {type(names).__name__}"
            )
        wanted = tuple(sorted({validate_name(name, "schedule name") for name in names}))
        ctx = self._context
        driver = ctx.periodic()
        if not wanted:
            return []
        params = ScheduleRenew(wanted, ctx.now() + DECLARATION_LEASE_S)
        return ctx.write(lambda c: driver.schedules_renew(c, params))

    def _upsert(
        self,
        name: str,
        spec: str,
        queue: str,
        payload: Any,
        opts: ScheduleOpts | None,
        *,
        declared: bool,
    ) -> Schedule:
        validate_name(name, "schedule name")
        validate_name(queue, "queue name")
        if opts is None:
            opts = ScheduleOpts()
        check_type(opts, ScheduleOpts, "opts")
        cadence = self.cadence(spec, opts.timezone)
        text = self._context.encode(payload)
        ctx = self._context
        driver: SchedulerDriver[Any]
        if declared:
            ctx.periodic()
            driver = ctx.scheduler()
        elif _needs_cron_profile(cadence, opts):
            driver = ctx.cron()
        else:
            driver = ctx.scheduler()
        now = ctx.now()
        first = cadence.first_after(now)
        if cadence.interval_s is None and first >= NEVER:
            raise InvalidSpec(spec, "it never fires")
        record = ScheduleRecord(
            name=name,
            spec=spec,
            queue=queue,
            payload=text,
            priority=opts.priority,
            max_attempts=opts.max_attempts,
            expires_s=opts.expires,
            interval_s=cadence.interval_s,
            next_fire_at=first,
            timezone=opts.timezone,
            catch_up=opts.catch_up,
            declared_until=now + DECLARATION_LEASE_S if declared else None,
        )

        def work(c: Any) -> ScheduleRecord | None:
            driver.schedule_upsert(c, record)
            ctx.driver.announce(c, [SCHEDULES_TOPIC])
            return driver.schedule_get(c, name)

        stored = ctx.write(work)
        ctx.hub.notify(SCHEDULES_TOPIC)
        if stored is None:  # only an engine that loses a row it just wrote gets here
            raise AlkstoreError(f"the engine lost schedule {name!r} as it stored it")
        return stored.to_schedule()

    def unschedule(self, name: str) -> bool:
        validate_name(name, "schedule name")
        ctx = self._context
        driver = ctx.scheduler()
        return ctx.write(lambda c: driver.schedule_delete(c, name))

    def get_schedule(self, name: str) -> Schedule | None:
        validate_name(name, "schedule name")
        ctx = self._context
        driver = ctx.scheduler()
        record = ctx.read(lambda c: driver.schedule_get(c, name))
        return None if record is None else record.to_schedule()

    def schedules(self) -> list[Schedule]:
        ctx = self._context
        driver = ctx.scheduler()
        return [r.to_schedule() for r in ctx.read(driver.schedule_list)]

    # -- firing ------------------------------------------------------------
    def tick(self, worker_id: str) -> TickResult:
        """One tick as ``worker_id``: take (or renew) the leadership lock, then fire.
        A live lock held by someone else means another leader ticks: fire nothing."""
        validate_identifier(worker_id, "worker_id")
        ctx = self._context
        ctx.scheduler()
        if not CoreLock(ctx, SCHEDULER_LOCK).acquire(worker_id, SCHEDULER_LEASE_S):
            return TickResult(fired=0, skipped=0)
        return self._fire_due()

    def _fire_due(self) -> TickResult:
        ctx = self._context
        driver = ctx.scheduler()
        now = ctx.now()
        self._lapse(now)
        fired = skipped = 0
        for record in ctx.read(lambda c: driver.schedules_due(c, now)):
            n, k = self._fire_schedule(record, now)
            fired += n
            skipped += k
        return TickResult(fired=fired, skipped=skipped)

    def _lapse(self, now: int) -> None:
        """Remove every declared schedule whose lease is at or before ``now``, before
        anything fires (contract §5.11): a lapsed declaration never fires again."""
        ctx = self._context
        if not (ctx.capabilities.periodic and ctx.capabilities.cron):
            return
        driver = ctx.periodic()
        removed = ctx.write(lambda c: driver.schedules_lapse(c, ScheduleLapse(now)))
        for name in removed:
            log.info("declared schedule %r removed: its lease lapsed", name)

    def cadence(self, spec: object, timezone: object) -> Cadence:
        """Every boundary of a schedule comes from here (``alkstore.spec.parse_spec``)."""
        return parse_spec(spec, timezone)

    def _fire_schedule(self, record: ScheduleRecord, now: int) -> tuple[int, int]:
        """Fire ``record``'s due boundaries as its catch-up policy says; when another
        ticker overtakes us (a lost compare-and-set), re-read the row and carry on from
        where it left off, so a tick racing a crashed ticker's late commit still fires
        every due boundary."""
        ctx = self._context
        driver = ctx.scheduler()
        name = record.name
        fired = skipped = 0
        for _ in range(CATCH_UP_CAP + 1):
            try:
                cadence = self.cadence(record.spec, record.timezone)
            except InvalidSpec as exc:
                # A zone this process's time-zone database lacks (another process
                # stored it): leave the schedule to a ticker that can read it.
                log.warning("schedule %r left unfired: %s", name, exc)
                break
            step = self._fire_policy(record, cadence, now, CATCH_UP_CAP - fired)
            fired += step.fired
            skipped += step.skipped
            if not step.overtaken:
                break
            fresh = ctx.read(lambda c: driver.schedule_get(c, name))
            if fresh is None or fresh.next_fire_at > now:
                break
            record = fresh
        return fired, skipped

    def _fire_policy(
        self, record: ScheduleRecord, cadence: Cadence, now: int, budget: int
    ) -> _Step:
        at = record.next_fire_at
        if record.catch_up == "latest":
            # The most recent due boundary fires; the older ones are skipped in the
            # same compare-and-set, in the same transaction as the fire.
            due = cadence.due(at, now)
            moved = self._fire(record, at, due.after, now)
            return _Step(int(moved), due.count - 1 if moved else 0, not moved)
        skipped = 0
        if record.catch_up == "none" and at <= now - MISFIRE_GRACE_S:
            # Boundaries that came due a grace or more ago are skipped, none fired.
            stale = cadence.due(at, now - MISFIRE_GRACE_S)
            if not self._skip(record, at, stale.after):
                return _Step(0, 0, True)
            skipped, at = stale.count, stale.after
        step = self._fire_each(record, cadence, at, now, budget)
        return _Step(step.fired, skipped + step.skipped, step.overtaken)

    def _fire_each(
        self, record: ScheduleRecord, cadence: Cadence, at: int, now: int, budget: int
    ) -> _Step:
        """Fire up to ``budget`` due boundaries from ``at`` one transaction each, then
        skip the rest to the first boundary after now if the budget ran out."""
        fired = 0
        while at <= now and fired < budget:
            following = cadence.next_after(at)
            if not self._fire(record, at, following, now):
                return _Step(fired, 0, True)  # another ticker fired this boundary
            fired += 1
            at = following
        if at > now:
            return _Step(fired, 0, False)
        # Past the catch-up cap: skip forward to the first boundary after now.
        due = cadence.due(at, now)
        moved = self._skip(record, at, due.after)
        return _Step(fired, due.count if moved else 0, not moved)

    def _fire(self, record: ScheduleRecord, at: int, following: int, now: int) -> bool:
        """One fire: move the row from boundary ``at`` to ``following`` (compare-and-set)
        and enqueue the payload, in one transaction; ``False`` if another ticker moved
        the row first (then nothing is enqueued)."""
        ctx = self._context
        driver = ctx.scheduler()
        stamps = _fire_stamps(record, now)
        payloads = [record.payload]

        def fire(c: Any) -> bool:
            if not driver.schedule_advance(c, ScheduleAdvance(record.name, at, following)):
                return False
            ctx.driver.insert_jobs(c, stamps, payloads)  # announces the queue on commit
            return True

        fired = ctx.write(fire)
        if fired:
            ctx.hub.notify(queue_topic(record.queue))
        return fired

    def _skip(self, record: ScheduleRecord, at: int, target: int) -> bool:
        """Move the row from ``at`` to ``target`` without firing (compare-and-set)."""
        ctx = self._context
        driver = ctx.scheduler()
        return ctx.write(
            lambda c: driver.schedule_advance(c, ScheduleAdvance(record.name, at, target))
        )

    # -- the leader loop -----------------------------------------------------
    def run(self, stop: StopToken, worker_id: str | None = None) -> None:
        check_type(stop, StopToken, "stop")
        owner = worker_id if worker_id is not None else default_worker_id()
        validate_identifier(owner, "worker_id")
        ctx = self._context
        ctx.scheduler()
        lock = CoreLock(ctx, SCHEDULER_LOCK)
        with ctx.hub.waiter(SCHEDULES_TOPIC) as waiter:
            ctx.driver.start_watching(ctx.hub)
            stop.add_callback(waiter.wake)
            try:
                if not self._become_leader(lock, owner, stop, waiter):
                    return
                try:
                    self._lead(lock, owner, stop, waiter)
                except LeadershipLost:
                    raise  # the lock is no longer ours to release
                except BaseException:
                    lock.release(owner)
                    raise
                lock.release(owner)
            finally:
                stop.remove_callback(waiter.wake)

    def _become_leader(self, lock: CoreLock, owner: str, stop: StopToken, waiter: Waiter) -> bool:
        """Wait while someone else leads; ``False`` if stopped first."""
        while not stop.is_set():
            waiter.clear()
            if lock.acquire(owner, SCHEDULER_LEASE_S):
                return True
            holder = lock.holder()
            wait = 1.0 if holder is None else holder.expires_at - self._context.clock.now()
            self._pause(min(max(wait, 0.0), _MAX_SLEEP_S), waiter)
        return False

    def _lead(self, lock: CoreLock, owner: str, stop: StopToken, waiter: Waiter) -> None:
        while not stop.is_set():
            if not lock.renew(owner, SCHEDULER_LEASE_S):
                raise LeadershipLost(f"scheduler leadership of {owner!r} lapsed or was taken")
            self._fire_due()
            self._sleep_until_due(stop, waiter)

    def _sleep_until_due(self, stop: StopToken, waiter: Waiter) -> None:
        """Sleep until the next boundary, for at most a third of the lease. A wake
        before then (a schedule changed, or an engine's wake that cannot tell topics
        apart) only re-reads the next boundary: renewing and ticking on every wake
        would make the leader write once per commit on such an engine."""
        ctx = self._context
        driver = ctx.scheduler()
        renew_at = ctx.clock.now() + _MAX_SLEEP_S
        while not stop.is_set():
            waiter.clear()  # before the read: a change committed after it wakes the pause
            next_at = ctx.read(driver.schedule_next_fire_at)
            wake_at = renew_at if next_at is None else min(renew_at, next_at)
            if not self._pause(wake_at - ctx.clock.now(), waiter):
                return

    def _pause(self, seconds: float, waiter: Waiter) -> bool:
        """Sleep on the store's clock; a realtime wait also ends on stop or a schedule
        change. ``True`` if it ended early for one of those."""
        clock = self._context.clock
        if isinstance(clock, RealtimeClock):
            return waiter.wait(max(seconds, 0.0))
        clock.sleep(max(seconds, 0.001))
        return False


def _fire_stamps(record: ScheduleRecord, now: int) -> JobStamps:
    """A fire enqueues "now", whichever boundary it stands for."""
    opts = ScheduleOpts(record.priority, record.max_attempts, record.expires_s)
    return resolve_stamps(record.queue, DEFAULT_QUEUE_OPTS, opts.as_enqueue_opts(), now)
