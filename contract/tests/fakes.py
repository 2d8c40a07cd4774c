"""An in-memory ``Driver`` that records every call, for testing the shared core.

Rows live in dicts; each transaction works on a deep copy of the state and
swaps it in on commit, so a rolled-back transaction leaves nothing behind.
Every statement is logged as a ``Call`` tagged with the number of the
transaction it ran in, so tests can check *what* the core asked for and
*in which transaction*.

Announcements are recorded but never delivered to the wake sink: there are no
other processes here, so every wake a test observes comes from the core itself.

``FakeProfilesDriver`` adds the optional scheduler, streams and pub/sub
profiles. Published messages *are* delivered on commit, like a real engine's
listener, and only to the sink given to ``start_watching``.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from alkstore.driver import (
    ERROR_EXHAUSTED,
    ERROR_EXPIRED,
    JOB_COLUMNS,
    PubSubDriver,
    SchedulerDriver,
    ScheduleRecord,
    StreamDriver,
    WakeSink,
    job_from_row,
    queue_topic,
    stream_event,
    stream_topic,
)
from alkstore.engine import Capabilities
from alkstore.errors import EngineUnavailable
from alkstore.options import JobStamps
from alkstore.values import Job, LockInfo, StreamEvent

T = TypeVar("T")

LIFECYCLE = frozenset({"begin", "commit", "rollback"})


@dataclass(frozen=True)
class Call:
    name: str
    txn: int
    args: tuple[Any, ...]


@dataclass
class State:
    live: dict[int, dict[str, Any]] = field(default_factory=dict)
    dead: dict[int, dict[str, Any]] = field(default_factory=dict)
    locks: dict[str, LockInfo] = field(default_factory=dict)
    next_id: int = 1
    schedules: dict[str, ScheduleRecord] = field(default_factory=dict)
    events: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)
    """Per stream: offset -> (payload JSON text, created_at)."""
    last_offset: dict[str, int] = field(default_factory=dict)
    """Per stream: the highest offset ever given out (trimming never lowers it)."""
    consumer_offsets: dict[tuple[str, str], int] = field(default_factory=dict)


class FakeTx:
    """The transaction handle ``C`` the core passes back to the driver."""

    def __init__(self, number: int, state: State) -> None:
        self.number = number
        self.state = state
        self.announced: list[str] = []
        self.published: list[tuple[str, str]] = []


def _as_job(row: dict[str, Any]) -> Job:
    return job_from_row([row[column] for column in JOB_COLUMNS])


def _claimable(row: dict[str, Any], now: int) -> bool:
    due = (row["state"] == "pending" and row["run_at"] <= now) or (
        row["state"] == "processing" and row["deadline"] <= now
    )
    alive = row["expires_at"] is None or row["expires_at"] > now
    return bool(due and alive and row["attempts"] < row["max_attempts"])


def _valid_claim(row: dict[str, Any] | None, attempt: int, now: int) -> bool:
    return (
        row is not None
        and row["state"] == "processing"
        and row["attempts"] == attempt
        and row["deadline"] > now
    )


class FakeDriver:
    capabilities = Capabilities()
    """The queue core only."""

    def __init__(self) -> None:
        self._mutex = threading.RLock()
        self._state = State()
        self._numbers = itertools.count(1)
        self.calls: list[Call] = []
        self.wait_budgets: list[tuple[str, float | None]] = []
        """``(unit kind, wait_s)`` of every ``write``/``read`` the core started."""
        self.committed_announcements: list[str] = []
        self.sink: WakeSink | None = None
        self.watching = threading.Event()
        self.looked_ahead = threading.Event()
        """Set once ``next_wake_at`` ran: a waiter found no work and is about to block."""
        self.closed = False
        self.close_count = 0
        self.down = False
        """While true, every transaction is refused with ``EngineUnavailable``."""
        self.fail_next = 0
        """Refuse this many more transactions, then recover."""
        self.refused = 0
        self.after_transaction: Callable[[FakeTx], None] | None = None
        """Runs after each transaction that did not raise, outside the driver's lock:
        a test acts there as another process between the core's transactions."""

    # -- inspection helpers ------------------------------------------------
    def statements(self) -> list[Call]:
        return [call for call in self.calls if call.name not in LIFECYCLE]

    def statement_names(self) -> list[str]:
        return [call.name for call in self.statements()]

    def calls_named(self, name: str) -> list[Call]:
        return [call for call in self.calls if call.name == name]

    def statement_names_in(self, txn: int) -> list[str]:
        return [call.name for call in self.statements() if call.txn == txn]

    def row(self, job_id: int) -> dict[str, Any] | None:
        with self._mutex:
            found = self._state.live.get(job_id) or self._state.dead.get(job_id)
            return dict(found) if found is not None else None

    def live_rows(self, queue: str) -> list[dict[str, Any]]:
        """The committed live rows of ``queue``, oldest id first."""
        with self._mutex:
            rows = [dict(r) for r in self._state.live.values() if r["queue"] == queue]
        return sorted(rows, key=lambda r: r["id"])

    # -- acting as another process ---------------------------------------------
    def hold_lock(self, name: str, owner: str, expires_at: int) -> None:
        """Another process holds (or steals) the lock ``name``, unrecorded."""
        with self._mutex:
            self._state.locks[name] = LockInfo(owner, expires_at)

    # -- transactions --------------------------------------------------------
    def _record(self, name: str, c: FakeTx, *args: Any) -> None:
        self.calls.append(Call(name, c.number, args))

    def _check_usable(self) -> None:
        if self.closed:
            raise AssertionError("the core used the driver after close()")
        if self.down or self.fail_next > 0:
            if self.fail_next > 0:
                self.fail_next -= 1
            self.refused += 1
            raise EngineUnavailable("fake database unreachable") from ConnectionRefusedError(
                "connection refused"
            )

    @contextmanager
    def _tx(self, kind: str, *, commit: bool) -> Iterator[FakeTx]:
        with self._mutex:
            self._check_usable()
            c = FakeTx(next(self._numbers), copy.deepcopy(self._state))
            self._record("begin", c, kind)
            try:
                yield c
            except BaseException:
                self._record("rollback", c)
                raise
            if commit:
                self._state = c.state
                self.committed_announcements.extend(c.announced)
            self._record("commit", c)
        # Outside the lock, as a listener thread or another process would run.
        if commit:
            self._committed(c)
        if self.after_transaction is not None:
            self.after_transaction(c)

    def _committed(self, c: FakeTx) -> None:
        """What a commit makes visible beyond the database (nothing, without profiles)."""

    def write(self, work: Callable[[FakeTx], T], *, wait_s: float | None = None) -> T:
        self.wait_budgets.append(("write", wait_s))
        with self._tx("write", commit=True) as c:
            return work(c)

    def read(self, work: Callable[[FakeTx], T], *, wait_s: float | None = None) -> T:
        self.wait_budgets.append(("read", wait_s))
        with self._tx("read", commit=False) as c:
            return work(c)

    def transaction(self) -> AbstractContextManager[FakeTx]:
        return self._tx("transaction", commit=True)

    def attach(self, native: Any) -> AbstractContextManager[FakeTx]:
        # The caller owns commit and rollback; here the work simply lands.
        return self._tx("attach", commit=True)

    def native_connection(self, c: FakeTx) -> Any:
        return c

    # -- wakes -----------------------------------------------------------------
    def start_watching(self, sink: WakeSink) -> None:
        if self.closed:
            raise AssertionError("the core started watching a closed driver")
        self.sink = sink
        self.watching.set()

    def announce(self, c: FakeTx, topics: Sequence[str]) -> None:
        self._record("announce", c, tuple(topics))
        c.announced.extend(topics)

    def close(self) -> None:
        self.closed = True
        self.close_count += 1

    # -- queues ------------------------------------------------------------------
    def insert_jobs(self, c: FakeTx, stamps: JobStamps, payloads: Sequence[str]) -> list[int]:
        self._record("insert_jobs", c, stamps, tuple(payloads))
        ids = []
        for payload in payloads:
            job_id = c.state.next_id
            c.state.next_id += 1
            c.state.live[job_id] = {
                "id": job_id,
                "queue": stamps.queue,
                "state": "pending",
                "payload": payload,
                "priority": stamps.priority,
                "attempts": 0,
                "max_attempts": stamps.max_attempts,
                "created_at": stamps.created_at,
                "run_at": stamps.run_at,
                "claimed_at": None,
                "expires_at": stamps.expires_at,
                "worker_id": None,
                "visibility_timeout_s": stamps.visibility_timeout_s,
                "backoff_base_s": stamps.backoff_base_s,
                "dead_letter_retention_s": stamps.dead_letter_retention_s,
                "last_error": None,
                "died_at": None,
                "deadline": None,
            }
            ids.append(job_id)
        c.announced.append(queue_topic(stamps.queue))  # the seam: an insert announces
        return ids

    def claim(self, c: FakeTx, queue: str, worker_id: str, now: int, limit: int) -> list[Job]:
        self._record("claim", c, queue, worker_id, now, limit)
        rows = sorted(
            (r for r in c.state.live.values() if r["queue"] == queue and _claimable(r, now)),
            key=lambda r: (-r["priority"], r["run_at"], r["id"]),
        )[:limit]
        for row in rows:
            row.update(
                state="processing",
                attempts=row["attempts"] + 1,
                claimed_at=now,
                worker_id=worker_id,
                deadline=now + row["visibility_timeout_s"],
            )
        return [_as_job(row) for row in rows]

    def _move_to_dead(self, c: FakeTx, job_id: int, now: int, error: str) -> None:
        row = c.state.live.pop(job_id)
        row.update(state="dead", last_error=error, died_at=now, deadline=None)
        c.state.dead[job_id] = row

    def bury_exhausted(self, c: FakeTx, queue: str, now: int) -> int:
        self._record("bury_exhausted", c, queue, now)
        doomed = [
            r["id"]
            for r in c.state.live.values()
            if r["queue"] == queue
            and r["state"] == "processing"
            and r["deadline"] <= now
            and r["attempts"] >= r["max_attempts"]
        ]
        for job_id in doomed:
            self._move_to_dead(c, job_id, now, ERROR_EXHAUSTED)
        return len(doomed)

    def bury_expired(self, c: FakeTx, queue: str, now: int) -> int:
        self._record("bury_expired", c, queue, now)
        doomed = [
            r["id"]
            for r in c.state.live.values()
            if r["queue"] == queue and r["expires_at"] is not None and r["expires_at"] <= now
        ]
        for job_id in doomed:
            self._move_to_dead(c, job_id, now, ERROR_EXPIRED)
        return len(doomed)

    def purge_dead(self, c: FakeTx, queue: str, now: int) -> int:
        self._record("purge_dead", c, queue, now)
        doomed = [
            r["id"]
            for r in c.state.dead.values()
            if r["queue"] == queue
            and r["dead_letter_retention_s"] is not None
            and r["died_at"] + r["dead_letter_retention_s"] < now
        ]
        for job_id in doomed:
            del c.state.dead[job_id]
        return len(doomed)

    def ack(self, c: FakeTx, job_id: int, attempt: int, now: int) -> bool:
        self._record("ack", c, job_id, attempt, now)
        if not _valid_claim(c.state.live.get(job_id), attempt, now):
            return False
        del c.state.live[job_id]
        return True

    def ack_batch(
        self, c: FakeTx, queue: str, job_ids: Sequence[int], worker_id: str, now: int
    ) -> int:
        self._record("ack_batch", c, queue, tuple(job_ids), worker_id, now)
        acked = 0
        for job_id in set(job_ids):
            row = c.state.live.get(job_id)
            if (
                row is not None
                and row["queue"] == queue
                and row["state"] == "processing"
                and row["worker_id"] == worker_id
                and row["deadline"] > now
            ):
                del c.state.live[job_id]
                acked += 1
        return acked

    def heartbeat(self, c: FakeTx, job_id: int, attempt: int, now: int, deadline: int) -> bool:
        self._record("heartbeat", c, job_id, attempt, now, deadline)
        row = c.state.live.get(job_id)
        if not _valid_claim(row, attempt, now):
            return False
        assert row is not None
        row["deadline"] = deadline
        return True

    def reschedule(self, c: FakeTx, job_id: int, attempt: int, now: int, run_at: int) -> bool:
        self._record("reschedule", c, job_id, attempt, now, run_at)
        row = c.state.live.get(job_id)
        if not _valid_claim(row, attempt, now):
            return False
        assert row is not None
        row.update(state="pending", run_at=run_at, worker_id=None, claimed_at=None, deadline=None)
        c.announced.append(queue_topic(row["queue"]))  # the seam: a reschedule announces
        return True

    def bury(self, c: FakeTx, job_id: int, attempt: int, now: int, error: str) -> bool:
        self._record("bury", c, job_id, attempt, now, error)
        if not _valid_claim(c.state.live.get(job_id), attempt, now):
            return False
        self._move_to_dead(c, job_id, now, error)
        return True

    def cancel(self, c: FakeTx, queue: str, job_id: int) -> bool:
        self._record("cancel", c, queue, job_id)
        row = c.state.live.get(job_id)
        if row is None or row["queue"] != queue:
            return False
        del c.state.live[job_id]
        return True

    def get_job(self, c: FakeTx, job_id: int, queue: str | None) -> Job | None:
        self._record("get_job", c, job_id, queue)
        row = c.state.live.get(job_id) or c.state.dead.get(job_id)
        if row is None or (queue is not None and row["queue"] != queue):
            return None
        return _as_job(row)

    def next_wake_at(self, c: FakeTx, queue: str, now: int) -> int | None:
        self._record("next_wake_at", c, queue, now)
        self.looked_ahead.set()
        instants = [
            r["run_at"] if r["state"] == "pending" else r["deadline"]
            for r in c.state.live.values()
            if r["queue"] == queue
        ]
        future = [t for t in instants if t > now]
        return min(future) if future else None

    # -- locks -------------------------------------------------------------------
    def lock_acquire(self, c: FakeTx, name: str, owner: str, now: int, expires_at: int) -> bool:
        self._record("lock_acquire", c, name, owner, now, expires_at)
        held = c.state.locks.get(name)
        if held is not None and held.expires_at > now and held.owner != owner:
            return False
        c.state.locks[name] = LockInfo(owner, expires_at)
        return True

    def lock_renew(self, c: FakeTx, name: str, owner: str, now: int, expires_at: int) -> bool:
        self._record("lock_renew", c, name, owner, now, expires_at)
        held = c.state.locks.get(name)
        if held is None or held.owner != owner or held.expires_at <= now:
            return False
        c.state.locks[name] = LockInfo(owner, expires_at)
        return True

    def lock_release(self, c: FakeTx, name: str, owner: str, now: int) -> bool:
        self._record("lock_release", c, name, owner, now)
        held = c.state.locks.get(name)
        if held is None or held.owner != owner or held.expires_at <= now:
            return False
        del c.state.locks[name]
        return True

    def lock_holder(self, c: FakeTx, name: str, now: int) -> LockInfo | None:
        self._record("lock_holder", c, name, now)
        held = c.state.locks.get(name)
        return held if held is not None and held.expires_at > now else None


class FakeProfilesDriver(FakeDriver):
    """``FakeDriver`` plus the optional profiles: ``SchedulerDriver``,
    ``StreamDriver`` and ``PubSubDriver``, faithful to their docstrings."""

    capabilities = Capabilities(scheduler=True, streams=True, pubsub=True)

    def __init__(self) -> None:
        super().__init__()
        self.stream_read_seen = threading.Event()
        """Set once ``stream_read`` ran: a stream waiter checked for events."""

    # -- acting as another process ---------------------------------------------
    def move_next_fire_at(self, name: str, next_fire_at: int) -> None:
        """Another ticker advances the schedule row ``name``, unrecorded."""
        with self._mutex:
            record = self._state.schedules[name]
            self._state.schedules[name] = dataclasses.replace(record, next_fire_at=next_fire_at)

    # -- scheduler ---------------------------------------------------------------
    def schedule_upsert(self, c: FakeTx, record: ScheduleRecord) -> None:
        self._record("schedule_upsert", c, record)
        stored = c.state.schedules.get(record.name)
        if stored is not None and stored.spec == record.spec:
            record = dataclasses.replace(record, next_fire_at=stored.next_fire_at)
        c.state.schedules[record.name] = record

    def schedule_delete(self, c: FakeTx, name: str) -> bool:
        self._record("schedule_delete", c, name)
        return c.state.schedules.pop(name, None) is not None

    def schedule_get(self, c: FakeTx, name: str) -> ScheduleRecord | None:
        self._record("schedule_get", c, name)
        return c.state.schedules.get(name)

    def schedule_list(self, c: FakeTx) -> list[ScheduleRecord]:
        self._record("schedule_list", c)
        return sorted(c.state.schedules.values(), key=lambda r: r.name)

    def schedules_due(self, c: FakeTx, now: int) -> list[ScheduleRecord]:
        self._record("schedules_due", c, now)
        due = (r for r in c.state.schedules.values() if r.next_fire_at <= now)
        return sorted(due, key=lambda r: (r.next_fire_at, r.name))

    def schedule_advance(self, c: FakeTx, name: str, expected: int, new_fire_at: int) -> bool:
        self._record("schedule_advance", c, name, expected, new_fire_at)
        stored = c.state.schedules.get(name)
        if stored is None or stored.next_fire_at != expected:
            return False
        c.state.schedules[name] = dataclasses.replace(stored, next_fire_at=new_fire_at)
        return True

    def schedule_next_fire_at(self, c: FakeTx) -> int | None:
        self._record("schedule_next_fire_at", c)
        return min((r.next_fire_at for r in c.state.schedules.values()), default=None)

    # -- streams -----------------------------------------------------------------
    def stream_append(self, c: FakeTx, stream: str, payloads: Sequence[str], now: int) -> list[int]:
        self._record("stream_append", c, stream, tuple(payloads), now)
        events = c.state.events.setdefault(stream, {})
        offsets = []
        for payload in payloads:
            offset = c.state.last_offset.get(stream, 0) + 1
            c.state.last_offset[stream] = offset
            events[offset] = (payload, now)
            offsets.append(offset)
        c.announced.append(stream_topic(stream))  # the seam: an append announces
        return offsets

    def stream_read(self, c: FakeTx, stream: str, after: int, limit: int) -> list[StreamEvent]:
        self._record("stream_read", c, stream, after, limit)
        self.stream_read_seen.set()
        events = c.state.events.get(stream, {})
        offsets = sorted(offset for offset in events if offset > after)[:limit]
        return [stream_event(offset, *events[offset]) for offset in offsets]

    def stream_commit(self, c: FakeTx, stream: str, consumer: str, offset: int) -> None:
        self._record("stream_commit", c, stream, consumer, offset)
        c.state.consumer_offsets[(stream, consumer)] = offset

    def stream_offset(self, c: FakeTx, stream: str, consumer: str) -> int:
        self._record("stream_offset", c, stream, consumer)
        return c.state.consumer_offsets.get((stream, consumer), 0)

    def stream_trim(self, c: FakeTx, stream: str, before: int) -> int:
        self._record("stream_trim", c, stream, before)
        events = c.state.events.get(stream, {})
        doomed = [offset for offset in events if offset < before]
        for offset in doomed:
            del events[offset]
        return len(doomed)

    # -- pub/sub -------------------------------------------------------------------
    def publish(self, c: FakeTx, channel: str, payload: str, now: int) -> None:
        self._record("publish", c, channel, payload, now)
        c.published.append((channel, payload))

    def _committed(self, c: FakeTx) -> None:
        # Only a watching process hears messages; nobody replays them later.
        sink = self.sink
        if sink is not None:
            for channel, payload in c.published:
                sink.deliver(channel, payload)


if TYPE_CHECKING:
    # Static proof that the fake implements every optional profile's protocol.
    def _implements_the_profiles(
        driver: FakeProfilesDriver,
    ) -> tuple[SchedulerDriver[FakeTx], StreamDriver[FakeTx], PubSubDriver[FakeTx]]:
        return driver, driver, driver
