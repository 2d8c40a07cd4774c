"""One in-memory database: its tables, its lock, its transactions, its wakes.

What an engine author must provide here, and how this engine does it:

* **All-or-nothing transactions.** A write transaction takes the database's
  ``RLock`` for its whole duration (so writers are serialized, like SQLite's
  single writer), works on a snapshot copy of the tables and commits by
  swapping the copy in. An exception drops the copy: nothing happened.
* **Consistent reads.** A read takes the same lock and sees the committed
  tables. A read issued on the thread that holds an open write transaction
  (the lock is re-entrant for exactly this) sees the committed state too, not
  the transaction's uncommitted rows, as a second connection would.
  A second *write* on that thread could only deadlock, so it is refused.
* **Sequences outside transactions.** Job ids and stream offsets come from
  counters that never go back, even when the transaction that drew a number
  rolls back (like a Postgres sequence): a number, once handed out, is never
  handed out again. Gaps are harmless.
* **Bounded waits.** A caller waits for the lock at most the store's
  ``lock_timeout_s``, or what is left of its own timeout (``claim_wait``,
  ``stream.wait``) when that is shorter; then the call raises the contract's
  ``EngineUnavailable`` (contract §8.4, §8.5). A transaction another thread
  keeps open therefore never blocks a caller past its limit. Wake sinks have
  a lock of their own, so a waiter registers even while a writer holds the
  database.
* **Outages.** ``take_down(seconds)`` (the conformance kit's outage hook, see
  ``alkstore_memory.ENGINE.make_unavailable``) makes every call raise
  ``EngineUnavailable`` until ``bring_up()``, as a server that refuses
  connections would; nothing a refused call began is kept.
* **Wakes after commit.** Topics the core announces, and pub/sub messages,
  are collected on the transaction and delivered to every watching store's
  sink only after the commit, outside the lock. Several stores opened on the
  same URL share one ``Database``, so they play the part of "other
  processes" for each other.

Databases are kept in a process-global registry keyed by name, so opening
``memory://name`` twice reaches the same data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from alkstore.driver import WakeSink
from alkstore.errors import EngineUnavailable, WriteWouldDeadlock

from .tables import Tables

T = TypeVar("T")


class Tx:
    """The transaction handle (the driver's ``C``): the tables a statement works on,
    plus what to tell the world once they are committed."""

    __slots__ = ("database", "messages", "tables", "topics")

    def __init__(self, database: Database, tables: Tables) -> None:
        self.database = database
        self.tables = tables
        self.topics: set[str] = set()
        self.messages: list[tuple[str, str]] = []  # (channel, JSON text), in publish order


class Database:
    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.RLock()
        self._tables = Tables()  # the committed state
        self._writer: Tx | None = None  # the open write transaction, if any
        self._last_job_id = 0
        self._last_offsets: dict[str, int] = {}
        # One sink per watching store; the key is that store's driver.
        self._sinks: dict[object, WakeSink] = {}
        self._sinks_lock = threading.Lock()
        self._down_until: float | None = None
        """While set (``time.monotonic()``), every call is refused: an outage."""

    # -- availability -----------------------------------------------------------
    def take_down(self, seconds: float) -> None:
        """Refuse every call for ``seconds`` at most (or until ``bring_up``)."""
        self._down_until = time.monotonic() + seconds

    def bring_up(self) -> None:
        self._down_until = None

    def _check_up(self) -> None:
        down_until = self._down_until
        if down_until is not None and time.monotonic() < down_until:
            raise EngineUnavailable(f"memory://{self.name} is unavailable (an outage)")

    @contextmanager
    def _locked(self, wait_s: float) -> Iterator[None]:
        """The database's lock, waited for at most ``wait_s`` seconds."""
        self._check_up()
        if not self._lock.acquire(timeout=max(wait_s, 0.0)):
            raise EngineUnavailable(
                f"memory://{self.name}: another thread's transaction held the database "
                f"for {wait_s:.3g} s, the call's time limit"
            )
        try:
            yield
        finally:
            self._lock.release()

    # -- transactions ---------------------------------------------------------
    @contextmanager
    def write_transaction(self, wait_s: float) -> Iterator[Tx]:
        """A write transaction; waits at most ``wait_s`` for the lock."""
        with self._locked(wait_s):
            if self._writer is not None:
                raise WriteWouldDeadlock(
                    f"memory://{self.name}: this thread already has a write transaction open; "
                    "a second write from the same thread would deadlock (use the transaction "
                    "handle instead)"
                )
            tx = Tx(self, self._tables.copy())
            self._writer = tx
            try:
                yield tx
                self._tables = tx.tables  # commit
            finally:
                self._writer = None
        with self._sinks_lock:
            sinks = list(self._sinks.values())
        # Only reached after a commit, and outside the lock: sinks never call back in
        # under it, and a rolled-back transaction wakes nobody.
        for sink in sinks:
            for topic in tx.topics:
                sink.notify(topic)
            for channel, payload in tx.messages:
                sink.deliver(channel, payload)

    def read(self, work: Callable[[Tx], T], wait_s: float) -> T:
        """``work`` on the committed tables; waits at most ``wait_s`` for the lock."""
        with self._locked(wait_s):
            return work(Tx(self, self._tables))

    # -- sequences (never rolled back) ------------------------------------------
    def next_job_id(self) -> int:
        with self._lock:
            self._last_job_id += 1
            return self._last_job_id

    def next_offset(self, stream: str) -> int:
        with self._lock:
            offset = self._last_offsets.get(stream, 0) + 1
            self._last_offsets[stream] = offset
            return offset

    # -- wake sinks ---------------------------------------------------------------
    def watch(self, key: object, sink: WakeSink) -> None:
        with self._sinks_lock:
            self._sinks[key] = sink

    def unwatch(self, key: object) -> None:
        with self._sinks_lock:
            self._sinks.pop(key, None)


# -- the process-global registry -------------------------------------------------
_registry_lock = threading.Lock()
_databases: dict[str, Database] = {}


def database(name: str) -> Database:
    """The database called ``name``, created empty on first use."""
    with _registry_lock:
        found = _databases.get(name)
        if found is None:
            found = _databases[name] = Database(name)
        return found


def drop(name: str) -> None:
    """Forget ``name``: the next ``database(name)`` starts empty. Stores still open on
    the old one keep working on it until they close."""
    with _registry_lock:
        _databases.pop(name, None)
