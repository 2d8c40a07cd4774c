"""``alkstore.driver.Driver`` over stdlib ``sqlite3``: transactions plus one method per statement.

The optional profiles (scheduler, streams, pub/sub) are mixed in from ``profiles``,
the operations profile from ``operations``, the unique profile from ``unique``.

The transaction handle ``c`` is the ``sqlite3.Connection`` itself (so
``tx.connection`` and ``tx.execute("... ?", params)`` are plain sqlite3).

Writes run on a pooled connection while the process holds the database's
writer gate (``gate.py``), so alkstore writers queue on the gate rather than in
SQLite's sleeping busy handler. A ``write`` unit runs in autocommit mode: every
statement the core issues there is correct committed on its own (the contract's
rule for the queue core, ``alkstore.driver.Driver``), and a lone statement in
autocommit takes the write lock and commits exactly as ``BEGIN IMMEDIATE``,
statement, ``COMMIT`` would, with two statements fewer. A statement method whose
statements must commit together (a multi-row enqueue, an ``ack_batch`` of more
ids than one statement takes, a stream append, a redrive, the scheduler's fire)
makes the rest of its unit one ``BEGIN IMMEDIATE`` transaction first
(``begin_transaction``), committed when the unit returns and rolled back if it
raises; so does a unit that asks for one commit (``prefer_one_commit``: an ack
and the next claim change the same pages, which one commit writes once).
``transaction()`` is one transaction from the start.

A write refused with SQLITE_BUSY anyway (a lock held outside alkstore) changed
nothing, so it is tried again, unless an earlier statement of the same unit had
already committed: that unit cannot run twice, and fails. Every call waits for
the gate and for SQLite's locks within one budget, ``busy_timeout_s`` or the
caller's ``wait_s`` if shorter (``budget.py``), then fails with
``EngineUnavailable``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, NoReturn, TypeVar, cast

from alkstore import EngineUnavailable, InvalidOptions, StoreClosed, WriteWouldDeadlock
from alkstore.driver import WakeSink
from alkstore.options import JobStamps, stamp_values
from alkstore.params import (
    AckBatch,
    AckClaims,
    Bury,
    Cancel,
    Claim,
    ClaimRef,
    Complete,
    GetJob,
    Heartbeat,
    LockHolder,
    LockLease,
    LockRelease,
    NextWake,
    Reschedule,
    Snooze,
    Sweep,
)
from alkstore.rows import error_entry, job_from_row
from alkstore.values import Job, LockInfo

from . import statements as sql
from .budget import describe_limit, limit_s, pause
from .claimed import claimed_jobs
from .connections import ConnectionPool, connect
from .dependencies import DependencyStatements
from .errors import is_busy, is_out_of_space, is_unavailable, unavailable
from .gate import GateBusy, NoGate, WriterGate
from .handle import begin_transaction
from .leftovers import might_hold_nothing, missing_files, remove_created
from .migrations import LATEST_VERSION, migrate, schema_version
from .operations import OperationStatements
from .options import SqliteOptions
from .profiles import ProfileStatements
from .shared import SharedDatabase, release, share, sole_user
from .unique import UniqueStatements

T = TypeVar("T")


_NESTED_WRITE = (
    "a store.transaction() is open on this thread, and SQLite has one writer at a "
    "time: a store write outside that transaction would wait for it forever. Do the "
    "work through the transaction (tx.enqueue, tx.execute, ...) or after it ends."
)


class SqliteDriver(ProfileStatements, OperationStatements, UniqueStatements, DependencyStatements):
    def __init__(
        self, path: str, options: SqliteOptions, *, serialize_writers: bool = True
    ) -> None:
        """Open (creating if needed) and migrate the database file at ``path``.

        If that fails, the files the attempt created are removed again when that
        is safe (``leftovers``). ``serialize_writers=False`` leaves writers to SQLite's
        locks alone; it exists to measure what the writer gate buys.
        """
        self.path = path
        self._options = options
        self._pool = ConnectionPool(partial(connect, path, options))
        self._sinks: set[WakeSink] = set()
        self._closed = False
        self._out_of_space = False
        """A write failed for want of room: the next one first gives the WAL's space back."""
        deadline = time.monotonic() + options.busy_timeout_s
        missing = missing_files(path)  # before anything here can create them
        fresh = might_hold_nothing(path)
        shared = self._share(deadline)
        self._shared: SharedDatabase = shared
        self._gate: WriterGate | NoGate = shared.gate if serialize_writers else NoGate()
        first: sqlite3.Connection | None = None
        holding = False
        try:
            if fresh:
                # Nobody may remove the file while this open uses it: hold the gate
                # before the first connection touches it (see ``leftovers``).
                self._enter_gate(deadline, None, shared.gate.acquire_current)
                holding = True
            first = self._pool.take(deadline)  # EngineUnavailable, sqlite3's error chained
            self._prepare(first, deadline, holding)
        except BaseException:
            self._closed = True
            if first is not None:
                first.close()
            self._pool.close()
            if holding:
                if sole_user(shared):
                    remove_created(path, missing)
                shared.gate.release()
            release(shared)
            raise
        if holding:
            shared.gate.release()
        self._pool.give(first)

    # -- opening ------------------------------------------------------------------
    def _share(self, deadline: float) -> SharedDatabase:
        try:
            return share(self.path)
        except OSError as exc:
            # Mostly a path SQLite cannot use either (no such directory): let it say why.
            self._pool.take(deadline).close()
            raise EngineUnavailable(f"cannot open the writer lock of {self.path!r}: {exc}") from exc

    def _prepare(self, conn: sqlite3.Connection, deadline: float, holding: bool) -> None:
        """WAL mode, the latest schema and a pruned notifications table; a read when
        all three are already there. ``holding``: the caller holds the gate."""
        wal = self._retrying(lambda: _journal_mode(conn) == "wal", deadline)
        if wal and self._transact(conn, self._is_ready, sql.BEGIN_READ, deadline, None):
            return
        if not holding:
            self._enter_gate(deadline, None, self._gate.acquire)
        try:
            if not wal:
                self._retrying(lambda: self._enable_wal(conn), deadline)
            self._transact(conn, self._migrate_and_prune, sql.BEGIN_WRITE, deadline, None)
        finally:
            if not holding:
                self._gate.release()

    def _is_ready(self, conn: sqlite3.Connection) -> bool:
        if schema_version(conn) != LATEST_VERSION:
            return False
        params = {"keep": self._options.notifications_keep}
        (overflowing,) = conn.execute(sql.NOTIFICATIONS_OVERFLOW, params).fetchone()
        return not overflowing

    def _migrate_and_prune(self, conn: sqlite3.Connection) -> None:
        # Pub/sub's hygiene happens here, when a store opens, and nowhere else: the
        # engine runs nothing on a timer (the contract's no-ambient-timers rule).
        migrate(conn)
        conn.execute(sql.PRUNE_NOTIFICATIONS, {"keep": self._options.notifications_keep})

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL writes the file's first page, which fixes its page size: a
        # new file gets the configured one; on any other file this does nothing.
        conn.execute(sql.PAGE_SIZE.format(size=self._options.page_size))
        (mode,) = conn.execute(sql.JOURNAL_MODE_WAL).fetchone()
        if str(mode).lower() != "wal":
            raise EngineUnavailable(
                f"SQLite database {self.path!r} stays in journal mode {mode!r}; alkstore "
                "needs WAL mode (a local file system that supports shared memory)"
            )

    # -- transactions ---------------------------------------------------------------
    def write(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        gate = self._gate
        if gate.owner == threading.get_ident():
            raise WriteWouldDeadlock(_NESTED_WRITE)
        deadline = time.monotonic() + limit_s(wait_s, self._options.busy_timeout_s)
        conn = self._pool.take(deadline)
        try:
            self._enter_gate(deadline, wait_s, gate.acquire)
            try:
                if self._out_of_space:
                    self._reclaim_wal(conn)
                return self._run_unit(conn, work, deadline, wait_s)
            finally:
                gate.release()
        finally:
            self._pool.give(conn)

    def _run_unit(
        self,
        conn: sqlite3.Connection,
        work: Callable[[sqlite3.Connection], T],
        deadline: float,
        wait_s: float | None,
    ) -> T:
        """``work`` in autocommit (see the module docstring), tried again while a lock
        held outside alkstore refuses it and nothing of it has committed.

        "Nothing committed" is read off ``total_changes``, the rows changed on this
        connection: a statement that changed no row may run again unharmed. It
        does not see DDL, which the engine never runs in a unit. A transaction a
        statement method began holds the write lock from its ``BEGIN IMMEDIATE``,
        so the lock can only refuse it there, before any of its changes."""
        attempt = 0
        while True:
            changes = conn.total_changes
            try:
                result = work(conn)
                if conn.in_transaction:  # a statement method began one
                    conn.execute(sql.COMMIT)
                return result
            except sqlite3.Error as exc:
                _rollback(conn)
                if conn.total_changes != changes and is_busy(exc):
                    raise EngineUnavailable(
                        f"SQLite database {self.path!r} was locked by a connection outside "
                        "alkstore in the middle of a write whose first statements had "
                        "already committed (each is correct on its own); the rest was not "
                        "done and cannot be tried again as a whole"
                    ) from exc
                self._retry_or_raise(exc, attempt, deadline, wait_s)
            except BaseException:
                _rollback(conn)
                raise
            attempt += 1

    def read(self, work: Callable[[sqlite3.Connection], T], *, wait_s: float | None = None) -> T:
        deadline = time.monotonic() + limit_s(wait_s, self._options.busy_timeout_s)
        conn = self._pool.take(deadline)
        try:
            return self._transact(conn, work, sql.BEGIN_READ, deadline, wait_s)
        finally:
            self._pool.give(conn)

    def _enter_gate(
        self, deadline: float, wait_s: float | None, acquire: Callable[[float], None]
    ) -> None:
        try:
            acquire(deadline)
        except GateBusy as busy:
            raise EngineUnavailable(
                f"the writer lock of SQLite database {self.path!r} stayed held by "
                f"{busy.holder} for {self._waited(deadline, wait_s):.2f} s, the limit set by "
                f"{describe_limit(wait_s, self._options.busy_timeout_s)}. alkstore runs one "
                "write at a time per database file: a store.transaction() kept open, or a "
                "process stopped or hung inside one, holds up every writer"
            ) from None

    def _transact(
        self,
        conn: sqlite3.Connection,
        work: Callable[[sqlite3.Connection], T],
        begin: str,
        deadline: float,
        wait_s: float | None,
    ) -> T:
        attempt = 0
        while True:
            try:
                conn.execute(begin)
                try:
                    result = work(conn)
                    conn.execute(sql.COMMIT)
                except BaseException:
                    _rollback(conn)
                    raise
                return result
            except sqlite3.Error as exc:
                self._retry_or_raise(exc, attempt, deadline, wait_s)
            attempt += 1

    def _retrying(self, attempt: Callable[[], T], deadline: float) -> T:
        tries = 0
        while True:
            try:
                return attempt()
            except sqlite3.Error as exc:
                self._retry_or_raise(exc, tries, deadline, None)
            tries += 1

    def _retry_or_raise(
        self, exc: sqlite3.Error, attempt: int, deadline: float, wait_s: float | None
    ) -> None:
        """After a failed try: pause before the next, or raise."""
        if not is_busy(exc):
            self._raise_mapped(exc)
        if pause(attempt, deadline):
            return
        raise EngineUnavailable(
            f"SQLite database {self.path!r} stayed locked by a connection outside "
            f"alkstore (your own, another tool, an attached transaction) for "
            f"{self._waited(deadline, wait_s):.2f} s, the limit set by "
            f"{describe_limit(wait_s, self._options.busy_timeout_s)}"
        ) from exc

    def _waited(self, deadline: float, wait_s: float | None) -> float:
        started = deadline - limit_s(wait_s, self._options.busy_timeout_s)
        return time.monotonic() - started

    def _raise_mapped(self, exc: sqlite3.Error) -> NoReturn:
        if is_out_of_space(exc):
            self._out_of_space = True
        if is_busy(exc) or is_unavailable(exc):
            raise unavailable(exc, self.path) from exc
        raise exc

    def _reclaim_wal(self, conn: sqlite3.Connection) -> None:
        """The first write after one failed for want of room (holding the gate, before
        its own BEGIN) checkpoints the WAL into the database and truncates it to zero
        bytes: once there is room for the checkpoint, the space the WAL grew into is
        given back at once rather than kept by the WAL file."""
        try:
            conn.execute(sql.WAL_CHECKPOINT_TRUNCATE).fetchall()
        except sqlite3.Error:
            return  # still no room (or a lock outside alkstore): the next write tries again
        self._out_of_space = False

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        gate = self._gate
        if gate.owner == threading.get_ident():
            raise WriteWouldDeadlock(_NESTED_WRITE)
        deadline = time.monotonic() + self._options.busy_timeout_s
        conn = self._pool.take(deadline)
        try:
            self._enter_gate(deadline, None, gate.acquire)
            try:
                if self._out_of_space:
                    self._reclaim_wal(conn)
                self._retrying(partial(conn.execute, sql.BEGIN_WRITE), deadline)
                try:
                    yield conn
                except BaseException as exc:
                    if isinstance(exc, sqlite3.Error) and is_out_of_space(exc):
                        self._out_of_space = True
                    _rollback(conn)
                    raise
                if conn.in_transaction:  # the caller may have ended it with its own COMMIT
                    try:
                        conn.execute(sql.COMMIT)
                    except sqlite3.Error as exc:
                        _rollback(conn)  # the caller's work cannot be replayed: report it
                        self._raise_mapped(exc)
            finally:
                gate.release()
        finally:
            self._pool.give(conn)

    @contextmanager
    def attach(self, native: Any) -> Iterator[sqlite3.Connection]:
        self._check_attachable(native)
        yield native

    def _check_attachable(self, native: Any) -> None:
        if not isinstance(native, sqlite3.Connection):
            raise InvalidOptions(
                f"attach() takes a sqlite3.Connection to {self.path!r}, got {type(native).__name__}"
            )
        try:
            cursor = native.cursor()
            cursor.row_factory = None  # the caller's connection may have its own
            files = {row[1]: row[2] for row in cursor.execute(sql.DATABASE_LIST).fetchall()}
        except sqlite3.Error as exc:
            raise InvalidOptions(f"attach() cannot use that connection: {exc}") from exc
        main = files.get("main") or ""
        if not main or not _same_file(main, self.path):
            raise InvalidOptions(
                f"attach() needs a connection to this store's database file {self.path!r}; "
                f"that connection's main database is {main or 'in memory'!r}"
            )
        if not native.in_transaction:
            raise InvalidOptions(
                "attach() joins the caller's open transaction, and that connection has none "
                "(it is in autocommit mode, or its implicit transaction has not begun): each "
                "engine statement would commit on its own and could not roll back with your "
                "writes. Run conn.execute('BEGIN IMMEDIATE') first (or make your business "
                "write first in sqlite3's default isolation mode)."
            )

    def native_connection(self, c: sqlite3.Connection) -> sqlite3.Connection:
        return c

    # -- wakes ----------------------------------------------------------------------
    def start_watching(self, sink: WakeSink) -> None:
        if self._closed:
            return
        if sink not in self._sinks:
            self._sinks.add(sink)
        self._shared.watcher.watch(sink, self._options.wake_poll_s, self._latest_notification)

    def _latest_notification(self) -> int | None:
        """The newest notification id, in one autocommit read (``None`` if the file
        cannot be read now: the watcher then starts from its own first read)."""
        try:
            conn = self._pool.take()
        except (StoreClosed, EngineUnavailable):
            return None
        try:
            (latest,) = conn.execute(sql.LATEST_NOTIFICATION).fetchone()
            return int(latest)
        except sqlite3.Error:
            return None
        finally:
            self._pool.give(conn)

    def announce(self, c: sqlite3.Connection, topics: Sequence[str]) -> None:
        """Nothing to do: every process's watcher sees the commit itself."""

    def prefer_one_commit(self, c: sqlite3.Connection) -> None:
        """One ``BEGIN IMMEDIATE`` transaction for the rest of the unit: a commit writes
        every page it changed, so statements on the same pages (an ack and the next
        claim) cost less committed together (measured: 17% less CPU per pair)."""
        begin_transaction(c)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for sink in list(self._sinks):
            self._shared.watcher.forget(sink)
        self._pool.close()
        release(self._shared)

    # -- queues ---------------------------------------------------------------------
    def insert_jobs(
        self, c: sqlite3.Connection, stamps: JobStamps, payloads: Sequence[str]
    ) -> list[int]:
        # Announcing needs nothing: every process's watcher sees the commit itself.
        values = stamp_values(stamps)
        if len(payloads) == 1:
            # sqlite3 sets lastrowid after every INSERT; its type just admits None.
            return [cast(int, c.execute(sql.INSERT_JOB, (*values, payloads[0])).lastrowid)]
        # One enqueue is all of its jobs or none: the batches commit together.
        begin_transaction(c)
        # Bind the stamps once per statement and only a payload per row.
        for start, size in _batches(len(payloads)):
            c.execute(sql.INSERT_JOBS_ALIKE[size], (*values, *payloads[start : start + size]))
        (last,) = c.execute(sql.LAST_INSERT_ID).fetchone()
        # AUTOINCREMENT gives each row max(ever used) + 1, in VALUES order, and this
        # transaction is the only writer: one batch's ids are consecutive, ending at last.
        return list(range(last - len(payloads) + 1, last + 1))

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        queue, worker_id, now, limit = params.queue, params.worker_id, params.now, params.limit
        named = {"queue": queue, "worker_id": worker_id, "now": now, "limit": limit}
        one = limit == 1
        # Nearly always one statement: pending rows, while no claim of the queue has
        # lapsed (so none is exhausted either). Only when that claims nothing can
        # there be lapsed claims to dead-letter or to reclaim.
        rows = c.execute(sql.CLAIM_READY_ONE if one else sql.CLAIM_READY, named).fetchall()
        if not rows:
            if c.execute(sql.KEYED_LIMITS, named).fetchone() is not None:
                return self._claim_in_turn(c, named)  # a per-key limit (key_limits)
            if c.execute(sql.ANY_LAPSED, named).fetchone() is None:
                return []
            # Exhausted ones go dead first: never handed out again.
            c.execute(sql.BURY_EXHAUSTED, named)
            rows = c.execute(sql.CLAIM_ONE if one else sql.CLAIM, named).fetchall()
        return claimed_jobs(rows, queue, worker_id, now)

    def _claim_in_turn(self, c: sqlite3.Connection, named: dict[str, Any]) -> list[Job]:
        """A claim of a queue with a per-key limit: the rows of contract §16.10's turn,
        then the key served last stored, in one transaction under the write lock (the
        limit and the cursor read again inside it)."""
        begin_transaction(c)
        keyed = c.execute(sql.KEYED_LIMITS, named).fetchone()
        if keyed is None:  # cleared since: the plain claim
            return self.claim(c, Claim(**named))
        per_key, rate_per_key, per_s, cursor = keyed
        if c.execute(sql.ANY_LAPSED, named).fetchone() is not None:
            c.execute(sql.BURY_EXHAUSTED, named)  # never handed out again
        turn = {
            **named,
            "per_key": per_key,
            "rate_per_key": rate_per_key,
            "per_s": per_s,
            "cursor": cursor,
        }
        picked = self._picked(c, turn)
        if not picked:
            return []
        ids = json.dumps([job_id for job_id, _ in picked])
        rows = c.execute(sql.CLAIM_PICKED, {**named, "ids": ids}).fetchall()
        c.execute(sql.SET_KEY_CURSOR, {"queue": named["queue"], "cursor": picked[-1][1]})
        if rate_per_key is not None:  # §16.11: each claimed row is a start of its key
            window = {"queue": named["queue"], "now": named["now"], "per_s": per_s}
            c.execute(sql.DROP_KEY_STARTS, window)
            keys = json.dumps([key for _, key in picked])
            c.execute(sql.RECORD_KEY_STARTS, {**window, "keys": keys})
        return claimed_jobs(rows, named["queue"], named["worker_id"], named["now"])

    def _picked(self, c: sqlite3.Connection, named: dict[str, Any]) -> list[Any]:
        """``(id, key)`` of the rows a claim in turn takes, in turn order."""
        return c.execute(sql.PICK_IN_TURN, named).fetchall()

    def bury_exhausted(self, c: sqlite3.Connection, params: Sweep) -> int:
        named = {"queue": params.queue, "now": params.now}
        if c.execute(sql.ANY_EXHAUSTED, named).fetchone() is None:
            return 0
        return c.execute(sql.BURY_EXHAUSTED, named).rowcount

    def bury_expired(self, c: sqlite3.Connection, params: Sweep) -> int:
        waiting = self._bury_expired_waiting(c, params)
        named = {"queue": params.queue, "now": params.now}
        return waiting + c.execute(sql.BURY_EXPIRED, named).rowcount

    def purge_dead(self, c: sqlite3.Connection, params: Sweep) -> int:
        purged = c.execute(sql.PURGE_DEAD, {"queue": params.queue, "now": params.now}).rowcount
        if purged:
            c.execute(sql.PRUNE_KEPT_EDGES)  # their kept edges go with them (§18.4)
        return purged

    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        if c.execute(sql.ACK, sql.ACK_PARAMS(params)).rowcount == 1:
            return True
        # Not a valid claim, or one whose ack releases dependents: the release and the
        # delete commit together (the dependencies profile).
        begin_transaction(c)
        c.execute(sql.RELEASE_FOR_ACK, sql.RELEASE_FOR_ACK_PARAMS(params))
        return c.execute(sql.ACK_RELEASED, sql.ACK_RELEASED_PARAMS(params)).rowcount == 1

    def ack_batch(self, c: sqlite3.Connection, params: AckBatch) -> int:
        job_ids, tail = params.job_ids, (params.queue, params.worker_id, params.now)
        acked = 0
        most = sql.ACK_SIZES[-1]
        # An ack_batch is atomic: its statements (the completions of the rows their
        # queue keeps, the deletes) commit together.
        begin_transaction(c)
        keeps, releases = c.execute(sql.ACK_BATCH_PROBES, (params.queue,)).fetchone()
        for start in range(0, len(job_ids), most):
            chunk = list(job_ids[start : start + most])
            size = next(size for size in sql.ACK_SIZES if size >= len(chunk))
            chunk += [chunk[-1]] * (size - len(chunk))  # repeats match no second row
            if keeps:
                acked += c.execute(sql.COMPLETE_FOR_WORKER[size], [*chunk, *tail]).rowcount
            if releases:
                c.execute(sql.RELEASE_FOR_WORKER[size], [*chunk, *tail])
            acked += c.execute(sql.ACK_FOR_WORKER[size], [*chunk, *tail]).rowcount
        return acked

    def ack_claims(self, c: sqlite3.Connection, params: AckClaims) -> list[int]:
        pairs = list(zip(params.job_ids, params.attempts, strict=True))
        acked: list[int] = []
        most = sql.ACK_SIZES[-1]
        # Atomic as ack_batch: the completions, the releases and the deletes together.
        begin_transaction(c)
        keeps, releases = c.execute(sql.ACK_CLAIMS_PROBES).fetchone()
        for start in range(0, len(pairs), most):
            chunk = pairs[start : start + most]
            size = next(size for size in sql.ACK_SIZES if size >= len(chunk))
            chunk += [chunk[-1]] * (size - len(chunk))  # repeats match no second row
            values = [*(value for pair in chunk for value in pair), params.now]
            if keeps:
                acked += (row[0] for row in c.execute(sql.COMPLETE_CLAIMS[size], values))
            if releases:
                c.execute(sql.RELEASE_FOR_CLAIMS[size], values)
            acked += (row[0] for row in c.execute(sql.ACK_CLAIMS[size], values))
        return acked

    # -- finished jobs (the results profile) -----------------------------------------
    def complete(self, c: sqlite3.Connection, params: Complete) -> bool:
        # One statement: the live row completed in place (its dependents released by
        # the trigger it fires, in the same statement).
        return c.execute(sql.COMPLETE, sql.COMPLETE_PARAMS(params)).rowcount == 1

    def purge_completed(self, c: sqlite3.Connection, params: Sweep) -> int:
        named = {"queue": params.queue, "now": params.now}
        return c.execute(sql.PURGE_COMPLETED, named).rowcount

    def heartbeat(self, c: sqlite3.Connection, params: Heartbeat) -> bool:
        return c.execute(sql.HEARTBEAT, sql.HEARTBEAT_PARAMS(params)).rowcount == 1

    def release_claim(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        return c.execute(sql.RELEASE_CLAIM, sql.RELEASE_CLAIM_PARAMS(params)).rowcount == 1

    def snooze(self, c: sqlite3.Connection, params: Snooze) -> bool:
        return c.execute(sql.SNOOZE, sql.SNOOZE_PARAMS(params)).rowcount == 1

    def reschedule(self, c: sqlite3.Connection, params: Reschedule) -> bool:
        entry = error_entry(params.attempt, params.now, params.error)
        return c.execute(sql.RESCHEDULE, (*sql.RESCHEDULE_PARAMS(params), entry)).rowcount == 1

    def bury(self, c: sqlite3.Connection, params: Bury) -> bool:
        error = params.error
        entry = None if error is None else error_entry(params.attempt, params.now, error)
        return c.execute(sql.BURY, (*sql.BURY_PARAMS(params), entry)).rowcount == 1

    def cancel(self, c: sqlite3.Connection, params: Cancel) -> bool:
        return self._cancel(c, params)

    def get_job(self, c: sqlite3.Connection, params: GetJob) -> Job | None:
        cursor = c.cursor()
        cursor.row_factory = None  # an attached caller's connection may have its own
        if params.queue is None:
            row = cursor.execute(sql.GET_JOB, {"id": params.job_id}).fetchone()
        else:
            named = {"id": params.job_id, "queue": params.queue}
            row = cursor.execute(sql.GET_JOB_IN_QUEUE, named).fetchone()
        return None if row is None else job_from_row(row)

    def next_wake_at(self, c: sqlite3.Connection, params: NextWake) -> int | None:
        named = {"queue": params.queue, "now": params.now}
        row = c.execute(sql.NEXT_WAKE_AT, named).fetchone()
        run_at, deadline, at_limit, window_frees, key_window_frees = row
        blocked = [int(window_frees)] if window_frees is not None else []
        if at_limit and deadline is not None:
            blocked.append(int(deadline))
        if blocked:  # a limited queue at a limit: nothing is claimable before it frees
            return max(blocked)
        due = [instant for instant in (run_at, deadline, key_window_frees) if instant is not None]
        return int(min(due)) if due else None

    # -- locks ----------------------------------------------------------------------
    def lock_acquire(self, c: sqlite3.Connection, params: LockLease) -> bool:
        return c.execute(sql.LOCK_ACQUIRE, sql.LOCK_ACQUIRE_PARAMS(params)).rowcount == 1

    def lock_renew(self, c: sqlite3.Connection, params: LockLease) -> bool:
        return c.execute(sql.LOCK_RENEW, sql.LOCK_RENEW_PARAMS(params)).rowcount == 1

    def lock_release(self, c: sqlite3.Connection, params: LockRelease) -> bool:
        return c.execute(sql.LOCK_RELEASE, sql.LOCK_RELEASE_PARAMS(params)).rowcount == 1

    def lock_holder(self, c: sqlite3.Connection, params: LockHolder) -> LockInfo | None:
        row = c.execute(sql.LOCK_HOLDER, {"name": params.name, "now": params.now}).fetchone()
        return None if row is None else LockInfo(owner=row[0], expires_at=row[1])


def _batches(count: int) -> Iterator[tuple[int, int]]:
    """``(start, size)`` slices covering ``count`` items, sizes from ``BATCH_SIZES``."""
    start = 0
    for size in sql.BATCH_SIZES:
        while count - start >= size:
            yield start, size
            start += size


def _journal_mode(conn: sqlite3.Connection) -> str:
    (mode,) = conn.execute(sql.JOURNAL_MODE).fetchone()
    return str(mode).lower()


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is open; a failing rollback must not hide the
    error that caused it (the pool discards a connection left in a transaction)."""
    if conn.in_transaction:
        try:
            conn.execute(sql.ROLLBACK)
        except sqlite3.Error:
            pass


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
