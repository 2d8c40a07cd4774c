"""A call-recording wrapper over the one in-memory driver, for testing the shared core.

The rows, their rules and their transactions are ``alkstore_memory``'s (the
example engine, certified by the kit): this module adds only what a test of
the core needs to see and to stage.

* Every unit the core starts (``write``, ``read``, ``transaction``,
  ``attach``) gets a number, and every statement is logged as a ``Call``
  tagged with it, so tests can check *what* the core asked for and *in which
  transaction*.
* ``down``/``fail_next`` refuse units with ``EngineUnavailable``, as an
  unreachable database would; ``after_transaction`` runs between the core's
  units, where another process would act; ``hold_lock``,
  ``move_next_fire_at`` and ``corrupt_payload`` change rows unrecorded, as
  another process or a stray tool would.
* Wakes: topics committed are kept in ``committed_announcements`` but never
  delivered to the store's sink (there are no other processes here, so every
  wake a test observes comes from the core itself); pub/sub messages are
  delivered on commit, like a real engine's listener.

``FakeDriver`` declares the queue core only (``capabilities``);
``FakeProfilesDriver`` declares the scheduler, streams and pub/sub too.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from alkstore.driver import WakeSink
from alkstore.engine import Capabilities
from alkstore.errors import EngineUnavailable
from alkstore.params import PARAMS, param_fields
from alkstore.values import LockInfo
from alkstore_memory.database import Database, Tx, database, drop
from alkstore_memory.driver import MemoryDriver

T = TypeVar("T")

LOCK_WAIT_S = 5.0
"""How long a fake waits for the memory database's lock (it bounds every wait)."""

LIFECYCLE = frozenset({"begin", "commit", "rollback"})
HINTS = frozenset({"prefer_one_commit"})
"""Recorded, but not statements: what a unit tells the engine about itself."""
UNITS = frozenset({"write", "read", "transaction", "attach"})
NOT_STATEMENTS = UNITS | {"native_connection", "start_watching", "close"}


@dataclass(frozen=True)
class Call:
    name: str
    txn: int
    args: tuple[Any, ...]


@dataclass(eq=False)
class FakeTx:
    """The handle the core passes back into statements: a number and the memory Tx."""

    number: int
    inner: Tx


class _MessagesOnly:
    """The store's sink as the memory database sees it: pub/sub messages pass,
    wakes are dropped (the core's own wakes are what the tests observe)."""

    def __init__(self, sink: WakeSink) -> None:
        self._sink = sink

    def notify(self, topic: str) -> None:
        pass

    def notify_all(self) -> None:
        pass

    def has_waiters(self) -> bool:
        return self._sink.has_waiters()

    def deliver(self, channel: str, payload: str) -> None:
        self._sink.deliver(channel, payload)


def _recorded(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _values(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A statement's arguments as recorded: a params value as its fields, in order
    (what the positional seam passed), so a test reads ``call.args`` either way."""
    if len(args) == 1 and isinstance(args[0], PARAMS):
        return tuple(getattr(args[0], field) for field in param_fields(type(args[0])))
    return args


class FakeDriver:
    capabilities = Capabilities()
    """The queue core only."""

    def __init__(self) -> None:
        self._name = f"fake-{uuid.uuid4().hex}"
        self._db: Database = database(self._name)
        self._inner = MemoryDriver(self._db)
        self._numbers = itertools.count(1)
        self._log_lock = threading.Lock()
        self.calls: list[Call] = []
        self.wait_budgets: list[tuple[str, float | None]] = []
        """``(unit kind, wait_s)`` of every ``write``/``read`` the core started."""
        self.committed_announcements: list[str] = []
        self.sink: WakeSink | None = None
        self.watching = threading.Event()
        self.looked_ahead = threading.Event()
        """Set once ``next_wake_at`` ran: a waiter found no work and is about to block."""
        self.stream_read_seen = threading.Event()
        """Set once ``stream_read`` ran: a stream waiter checked for events."""
        self.closed = False
        self.close_count = 0
        self.down = False
        """While true, every unit is refused with ``EngineUnavailable``."""
        self.fail_next = 0
        """Refuse this many more units, then recover."""
        self.refused = 0
        self.after_transaction: Callable[[FakeTx], None] | None = None
        """Runs after each unit that did not raise: a test acts there as another
        process between the core's units."""

    # -- inspection helpers ------------------------------------------------
    def statements(self) -> list[Call]:
        return [call for call in self.calls if call.name not in LIFECYCLE | HINTS]

    def statement_names(self) -> list[str]:
        return [call.name for call in self.statements()]

    def calls_named(self, name: str) -> list[Call]:
        return [call for call in self.calls if call.name == name]

    def ack_txns(self) -> list[int]:
        """The unit of each job acked, one entry per job: an ``ack`` is one job, an
        ``ack_claims`` (``tx.ack_all``'s one statement) one per claim it names."""
        txns: list[int] = []
        for call in self.calls:
            if call.name == "ack":
                txns.append(call.txn)
            elif call.name == "ack_claims":
                txns += [call.txn] * len(call.args[0])
        return txns

    def statement_names_in(self, txn: int) -> list[str]:
        return [call.name for call in self.statements() if call.txn == txn]

    def row(self, job_id: int) -> dict[str, Any] | None:
        tables = self._db.read(lambda tx: tx.tables, LOCK_WAIT_S)
        found = tables.jobs.get(job_id) or tables.dead.get(job_id)
        return None if found is None else asdict(found)

    def live_rows(self, queue: str) -> list[dict[str, Any]]:
        """The committed live rows of ``queue``, oldest id first."""
        tables = self._db.read(lambda tx: tx.tables, LOCK_WAIT_S)
        rows = [asdict(r) for r in tables.jobs.values() if r.queue == queue]
        return sorted(rows, key=lambda r: r["id"])

    # -- acting as another process (unrecorded) ------------------------------
    def hold_lock(self, name: str, owner: str, expires_at: int) -> None:
        """Another process holds (or steals) the lock ``name``."""
        with self._db.write_transaction(LOCK_WAIT_S) as tx:
            tx.tables.locks[name] = LockInfo(owner, expires_at)

    def move_next_fire_at(self, name: str, next_fire_at: int) -> None:
        """Another ticker advances the schedule row ``name``."""
        with self._db.write_transaction(LOCK_WAIT_S) as tx:
            record = tx.tables.schedules[name]
            tx.tables.schedules[name] = replace(record, next_fire_at=next_fire_at)

    def rewrite_schedule(self, name: str, **changes: Any) -> None:
        """Another process (perhaps of another release) rewrote the schedule row ``name``."""
        with self._db.write_transaction(LOCK_WAIT_S) as tx:
            tx.tables.schedules[name] = replace(tx.tables.schedules[name], **changes)

    def corrupt_payload(self, job_id: int, text: str) -> None:
        """What raw SQL, an older release or a broken tool could leave in a live row."""
        with self._db.write_transaction(LOCK_WAIT_S) as tx:
            tx.tables.jobs[job_id] = replace(tx.tables.jobs[job_id], payload=text)

    # -- units of work --------------------------------------------------------
    def _log(self, name: str, number: int, args: tuple[Any, ...]) -> None:
        with self._log_lock:
            self.calls.append(Call(name, number, args))

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
    def _unit(self, kind: str, opened: AbstractContextManager[Tx] | None) -> Iterator[FakeTx]:
        """``opened`` is the memory transaction of a write unit; ``None`` for a read."""
        self._check_usable()
        number = next(self._numbers)
        self._log("begin", number, (kind,))
        if opened is None:
            c = FakeTx(number, self._db.read(lambda tx: tx, LOCK_WAIT_S))
            yield c
            self._log("commit", number, ())
        else:
            try:
                with opened as inner:
                    c = FakeTx(number, inner)
                    yield c
            except BaseException:
                self._log("rollback", number, ())
                raise
            self._log("commit", number, ())
            self.committed_announcements.extend(sorted(c.inner.topics))
        if self.after_transaction is not None:
            self.after_transaction(c)

    def write(self, work: Callable[[FakeTx], T], *, wait_s: float | None = None) -> T:
        self.wait_budgets.append(("write", wait_s))
        with self._unit("write", self._db.write_transaction(LOCK_WAIT_S)) as c:
            return work(c)

    def read(self, work: Callable[[FakeTx], T], *, wait_s: float | None = None) -> T:
        self.wait_budgets.append(("read", wait_s))
        with self._unit("read", None) as c:
            return work(c)

    def transaction(self) -> AbstractContextManager[FakeTx]:
        return self._unit("transaction", self._db.write_transaction(LOCK_WAIT_S))

    def attach(self, native: Any) -> AbstractContextManager[FakeTx]:
        # The caller owns commit and rollback; here the work simply lands.
        return self._unit("attach", self._db.write_transaction(LOCK_WAIT_S))

    def native_connection(self, c: FakeTx) -> Any:
        return c

    # -- wakes and lifetime ---------------------------------------------------
    def start_watching(self, sink: WakeSink) -> None:
        if self.closed:
            raise AssertionError("the core started watching a closed driver")
        self.sink = sink
        self._inner.start_watching(_MessagesOnly(sink))
        self.watching.set()

    def close(self) -> None:
        self.closed = True
        self.close_count += 1
        self._inner.close()
        drop(self._name)

    def prefer_one_commit(self, c: FakeTx) -> None:
        """The optional hint (the memory driver has none): recorded only."""
        self._log("prefer_one_commit", c.number, ())

    # -- statements: recorded, then run by the memory driver -----------------------
    def __getattr__(self, name: str) -> Any:
        statement = getattr(self._inner, name)
        if name.startswith("_") or name in NOT_STATEMENTS or not callable(statement):
            return statement

        def recorded(c: FakeTx, *args: Any) -> Any:
            self._log(name, c.number, tuple(_recorded(a) for a in _values(args)))
            if name == "next_wake_at":
                self.looked_ahead.set()
            elif name == "stream_read":
                self.stream_read_seen.set()
            return statement(c.inner, *args)

        return recorded


class FakeProfilesDriver(FakeDriver):
    """``FakeDriver`` declaring the optional profiles: scheduler, streams, pub/sub."""

    capabilities = Capabilities(scheduler=True, streams=True, pubsub=True)


class FakeCronDriver(FakeDriver):
    """``FakeDriver`` declaring the scheduler and contract 1.2's cron profile."""

    capabilities = Capabilities(scheduler=True, cron=True)


class FakePeriodicDriver(FakeDriver):
    """``FakeDriver`` declaring the scheduler, cron and contract 1.2's periodic profile."""

    capabilities = Capabilities(scheduler=True, cron=True, periodic=True)


class FakeOpsDriver(FakeDriver):
    """``FakeDriver`` declaring contract 1.1's operations profile too."""

    capabilities = Capabilities(ops=True)


class FakeSnoozeDriver(FakeDriver):
    """``FakeDriver`` declaring contract 1.2's snooze profile too."""

    capabilities = Capabilities(snooze=True)


class FakeUniqueDriver(FakeDriver):
    """``FakeDriver`` declaring contract 1.2's unique profile too."""

    capabilities = Capabilities(unique=True, transactions=True)


class FakeLimitsDriver(FakeDriver):
    """``FakeDriver`` declaring contract 1.1's ops and contract 1.2's limits profiles."""

    capabilities = Capabilities(ops=True, limits=True)


class FakeKeyLimitsDriver(FakeDriver):
    """``FakeDriver`` declaring contract 1.2's limits and key_limits profiles (and ops)."""

    capabilities = Capabilities(ops=True, limits=True, key_limits=True, transactions=True)


class FakeResultsDriver(FakeDriver):
    """``FakeDriver`` declaring contract 1.2's results profile (and ops) too."""

    capabilities = Capabilities(results=True, ops=True, transactions=True)
