"""The scheduler collapsed into queues (contract §5, decision 009).

Each boundary fire is its own transaction: enqueue the payload and advance
``next_fire_at`` by one interval with a compare-and-set on the schedule row.
A crash mid-tick therefore refires at most the boundary in flight, and two
tickers never fire one boundary twice (the loser's compare-and-set fails).
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

from ..clock import RealtimeClock
from ..constants import CATCH_UP_CAP, SCHEDULER_LEASE_S, SCHEDULER_LOCK
from ..driver import SCHEDULES_TOPIC, queue_topic
from ..errors import AlkstoreError, LeadershipLost
from ..names import validate_identifier, validate_name
from ..options import DEFAULT_QUEUE_OPTS, ScheduleOpts, check_type, resolve_stamps
from ..params import ScheduleAdvance
from ..rows import ScheduleRecord
from ..spec import parse_spec
from ..stop import StopToken
from ..values import Schedule, TickResult
from .context import StoreContext
from .locks import CoreLock
from .wake import Waiter

# The leader re-plans at least this often, so its lease never lapses while it sleeps.
_MAX_SLEEP_S = SCHEDULER_LEASE_S / 3


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class CoreScheduler:
    def __init__(self, context: StoreContext) -> None:
        self._context = context

    # -- registry ----------------------------------------------------------
    def schedule(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None = None
    ) -> Schedule:
        validate_name(name, "schedule name")
        validate_name(queue, "queue name")
        interval = parse_spec(spec)
        if opts is None:
            opts = ScheduleOpts()
        check_type(opts, ScheduleOpts, "opts")
        text = self._context.encode(payload)
        ctx = self._context
        driver = ctx.scheduler()
        now = ctx.now()
        record = ScheduleRecord(
            name=name,
            spec=spec,
            queue=queue,
            payload=text,
            priority=opts.priority,
            max_attempts=opts.max_attempts,
            expires_s=opts.expires,
            interval_s=interval,
            next_fire_at=now + interval,
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
        fired = skipped = 0
        for record in ctx.read(lambda c: driver.schedules_due(c, now)):
            n, k = self._fire_schedule(record, now)
            fired += n
            skipped += k
        return TickResult(fired=fired, skipped=skipped)

    def _fire_schedule(self, record: ScheduleRecord, now: int) -> tuple[int, int]:
        """Fire ``record``'s due boundaries; when another ticker overtakes us (a lost
        compare-and-set), re-read the row and carry on from where it left off, so a
        tick racing a crashed ticker's late commit still fires every due boundary."""
        ctx = self._context
        driver = ctx.scheduler()
        name = record.name
        fired = 0
        for _ in range(CATCH_UP_CAP + 1):
            n, skipped, overtaken = self._fire_boundaries(record, now, CATCH_UP_CAP - fired)
            fired += n
            if not overtaken:
                return fired, skipped
            fresh = ctx.read(lambda c: driver.schedule_get(c, name))
            if fresh is None or fresh.next_fire_at > now:
                break
            record = fresh
        return fired, 0

    def _fire_boundaries(
        self, record: ScheduleRecord, now: int, budget: int
    ) -> tuple[int, int, bool]:
        """Fire up to ``budget`` due boundaries one transaction each, then skip the rest
        forward if the budget ran out. Returns ``(fired, skipped, overtaken)``."""
        ctx = self._context
        driver = ctx.scheduler()
        opts = ScheduleOpts(record.priority, record.max_attempts, record.expires_s)
        stamps = resolve_stamps(record.queue, DEFAULT_QUEUE_OPTS, opts.as_enqueue_opts(), now)
        payloads = [record.payload]
        interval = record.interval_s
        at = record.next_fire_at
        fired = 0

        def fire(c: Any) -> bool:
            if not driver.schedule_advance(c, ScheduleAdvance(record.name, at, at + interval)):
                return False  # another ticker fired this boundary
            ctx.driver.insert_jobs(c, stamps, payloads)  # announces the queue on commit
            return True

        overtaken = False
        while at <= now and fired < budget:
            if not ctx.write(fire):
                overtaken = True
                break
            fired += 1
            at += interval
        if fired:
            ctx.hub.notify(
                queue_topic(record.queue)
            )  # also when overtaken: the jobs fired so far are real
        if overtaken or at > now:
            return fired, 0, overtaken
        # Past the catch-up cap: skip forward to the first boundary after now.
        missed = (now - at) // interval + 1
        target = at + missed * interval
        moved = ctx.write(
            lambda c: driver.schedule_advance(c, ScheduleAdvance(record.name, at, target))
        )
        return fired, (missed if moved else 0), not moved

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
