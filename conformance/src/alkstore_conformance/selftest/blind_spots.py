"""Mutants for the kit's former blind spots: each breaks one sentence of the contract
in a way only a large value, a crash at the wrong statement, a race between
processes or a stopwatch can see.

Like the other mutants they subclass the SQLite reference driver and replace
one statement. Several need a commit in the middle of the core's unit of work
(``COMMIT`` then ``BEGIN IMMEDIATE`` on the same connection, still under the
writer gate): that is how an engine that runs a multi-statement move on
autocommit, or commits in chunks, behaves. (The reference driver runs a unit in
autocommit unless a statement method began a transaction, so there may be no
transaction to commit yet: ``commit_so_far`` commits only one that is open.)
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace

from alkstore.constants import ERROR_NUL_STAND_IN
from alkstore.options import JobStamps
from alkstore.params import AckBatch, Bury, LockLease, NextWake, ScheduleAdvance
from alkstore.rows import JOB_COLUMNS
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.handle import begin_transaction
from alkstore_sqlite.migrations import DEAD, JOBS, LOCKS

_COMMIT = "COMMIT"


def commit_so_far(c: sqlite3.Connection) -> None:
    """Commit the unit's open transaction, if it has one (in autocommit, every
    statement so far has committed already)."""
    if c.in_transaction:
        c.execute(_COMMIT)


def commit_and_continue(c: sqlite3.Connection) -> None:
    """Commit what the unit did so far and go on in a new transaction."""
    commit_so_far(c)
    begin_transaction(c)


def commit_and_let_others_write(driver: SqliteDriver, c: sqlite3.Connection, gap_s: float) -> None:
    """Commit what the unit read or wrote so far, leave the writer gate to other writers
    of this process (and the database to other processes) for ``gap_s``, then go on in
    a new transaction: the gap a read-then-write bug leaves between its read and its
    write."""
    commit_so_far(c)
    driver._gate.release()
    try:
        time.sleep(gap_s)
    finally:
        driver._gate.acquire(time.monotonic() + GATE_WAIT_S)
    begin_transaction(c)


# -- class 1: a value that does not come back whole ------------------------------------

ERROR_KEPT_CHARS = 4000
"""What the truncating mutant keeps of an error: a column sized for "short" messages."""


class TruncatingErrorDriver(SqliteDriver):
    """Stores at most ``ERROR_KEPT_CHARS`` of a failure's error: a traceback-sized
    ``last_error`` comes back cut."""

    def bury(self, c: sqlite3.Connection, params: Bury) -> bool:
        cut = params.last_error[:ERROR_KEPT_CHARS]
        return super().bury(c, replace(params, last_error=cut))


class NulRestoringDriver(SqliteDriver):
    """Turns the contract's NUL stand-in back into NUL in ``last_error``: fine for
    SQLite's text, but the error no longer reads the same as on an engine whose
    text cannot hold NUL (PostgreSQL)."""

    def bury(self, c: sqlite3.Connection, params: Bury) -> bool:
        restored = params.last_error.replace(ERROR_NUL_STAND_IN, "\x00")
        return super().bury(c, replace(params, last_error=restored))


# -- class 2: a batch that is not one transaction --------------------------------------

ENQUEUE_CHUNK = 100


class ChunkedEnqueueDriver(SqliteDriver):
    """Inserts a batch ``ENQUEUE_CHUNK`` rows at a time and commits between chunks:
    readers see half a batch, and a crash leaves one behind."""

    def insert_jobs(
        self, c: sqlite3.Connection, stamps: JobStamps, payloads: Sequence[str]
    ) -> list[int]:
        ids: list[int] = []
        for start in range(0, len(payloads), ENQUEUE_CHUNK):
            if start:
                commit_and_continue(c)
            ids.extend(super().insert_jobs(c, stamps, payloads[start : start + ENQUEUE_CHUNK]))
        return ids


ACK_CHUNK = 500
CHUNK_GAP_S = 0.002
"""The time between two chunks' commits (a network round trip, say)."""


class ChunkedAckBatchDriver(SqliteDriver):
    """Acks a long batch ``ACK_CHUNK`` ids at a time, each chunk committed on its own:
    a reader between two commits sees part of the batch acked."""

    def ack_batch(self, c: sqlite3.Connection, params: AckBatch) -> int:
        queue, job_ids, worker_id, now = params.queue, params.job_ids, params.worker_id, params.now
        acked = 0
        for start in range(0, len(job_ids), ACK_CHUNK):
            chunk = job_ids[start : start + ACK_CHUNK]
            acked += super().ack_batch(c, AckBatch(queue, chunk, worker_id, now))
            commit_so_far(c)
            time.sleep(CHUNK_GAP_S)
        return acked


# -- class 3: no timer for delayed work ------------------------------------------------


class NoTimerDriver(SqliteDriver):
    """Never says when the next row comes due: waiters for a delayed job only
    find it on the core's re-poll safety net (a second late, on average half)."""

    def next_wake_at(self, c: sqlite3.Connection, params: NextWake) -> int | None:
        return None


# -- class 4: a lock taken by read-then-write ------------------------------------------

READ_LOCK = f"SELECT owner, expires_at FROM {LOCKS} WHERE name = :name"
WRITE_LOCK = f"""
INSERT INTO {LOCKS} (name, owner, expires_at) VALUES (:name, :owner, :expires_at)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
"""
READ_TO_WRITE_S = 0.002
"""The gap between the check and the write (a network round trip, say)."""
GATE_WAIT_S = 30.0


class ReadThenWriteLockDriver(SqliteDriver):
    """Checks that the lock is free in one transaction and takes it in the next:
    two contenders that both checked before either wrote both win."""

    def lock_acquire(self, c: sqlite3.Connection, params: LockLease) -> bool:
        name, owner, now, expires_at = params.name, params.owner, params.now, params.expires_at
        row = c.execute(READ_LOCK, {"name": name}).fetchone()
        if row is not None and row[1] > now and row[0] != owner:
            return False
        # The read's transaction ends here; the write runs in a fresh one.
        commit_and_let_others_write(self, c, READ_TO_WRITE_S)
        named = {"name": name, "owner": owner, "expires_at": expires_at}
        c.execute(WRITE_LOCK, named)
        return True


# -- class 5: moves that are not one transaction ---------------------------------------


class SplitFireDriver(SqliteDriver):
    """Commits a schedule's advance on its own, before the fired job is inserted:
    a crash in between loses the boundary's job."""

    def schedule_advance(self, c: sqlite3.Connection, params: ScheduleAdvance) -> bool:
        moved = super().schedule_advance(c, params)
        commit_and_continue(c)
        return moved


_COLUMNS = ", ".join(JOB_COLUMNS)
READ_VALID_CLAIM = f"""
SELECT {_COLUMNS} FROM {JOBS}
 WHERE id = :id AND state = 'processing' AND attempts = :attempt AND deadline > :now
"""
DELETE_JOB = f"DELETE FROM {JOBS} WHERE id = :id"
INSERT_DEAD = f"INSERT INTO {DEAD} ({_COLUMNS.replace('state, ', '')}) VALUES ({{values}})"


class TwoStepBuryDriver(SqliteDriver):
    """Dead-letters a failed job in two separately committed statements (delete the
    live row, then insert the dead one): a crash in between loses the job."""

    def bury(self, c: sqlite3.Connection, params: Bury) -> bool:
        job_id = params.job_id
        attempt = params.attempt
        now = params.now
        last_error = params.last_error
        named = {"id": job_id, "attempt": attempt, "now": now}
        row = c.execute(READ_VALID_CLAIM, named).fetchone()
        if row is None:
            return False
        c.execute(DELETE_JOB, {"id": job_id})
        commit_and_continue(c)
        values = dict(zip(JOB_COLUMNS, row, strict=True))
        del values["state"]
        values["last_error"], values["died_at"] = last_error, now
        markers = ", ".join(f":{column}" for column in values)
        c.execute(INSERT_DEAD.format(values=markers), values)
        return True
