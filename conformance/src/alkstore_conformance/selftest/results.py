"""Broken finished jobs (contract §17): a result cut short, completed jobs never swept,
an ack_batch that forgets the retention; a ``tx.ack`` (§3.8) that acks outside
the caller's transaction; and a ``tx.ack_all`` (§3.10) that guards only its first claim,
or that commits each ack on its own.

A result stored in a column too small for it (a ``VARCHAR(4000)``, a driver that
truncates) reads back as something else than what the handler returned. A sweep
that never purges completed jobs lets them pile up for ever. An ``ack_batch`` that
deletes every row it acks loses the completed jobs of a retaining queue that a
batch acks, though each one's own ``ack`` would have kept it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from alkstore.api import JobHandle
from alkstore.core import CoreStore
from alkstore.core.transaction import CoreTransaction
from alkstore.params import AckBatch, AckClaims, ClaimRef, Complete, Sweep
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite import statements as sql
from alkstore_sqlite.migrations import JOBS

TRUNCATED_AT = 4000
"""The bug's column width, in characters."""


class TruncatedResultDriver(SqliteDriver):
    """Stores the first ``TRUNCATED_AT`` characters of a result's text."""

    def complete(self, c: sqlite3.Connection, params: Complete) -> bool:
        result = params.result
        if result is not None and len(result) > TRUNCATED_AT:
            params = replace(params, result=result[:TRUNCATED_AT])
        return super().complete(c, params)


class CompletedNeverSweptDriver(SqliteDriver):
    """A sweep whose purge of completed jobs deletes nothing: they stay for ever."""

    def purge_completed(self, c: sqlite3.Connection, params: Sweep) -> int:
        return 0


class AckBatchDeletesKeptDriver(SqliteDriver):
    """``ack_batch`` deletes every row it acks: the completed retention is ignored."""

    def ack_batch(self, c: sqlite3.Connection, params: AckBatch) -> int:
        job_ids, tail = (
            list(dict.fromkeys(params.job_ids)),
            (
                params.queue,
                params.worker_id,
                params.now,
            ),
        )
        acked = 0
        for job_id in job_ids:
            acked += c.execute(sql.ACK_FOR_WORKER[1], [job_id, *tail]).rowcount
        return acked


# -- tx.ack committing outside the transaction (contract §3.8) -------------------------


class AckCommitsEarlyDriver(SqliteDriver):
    """An ack that ends the transaction it runs in, as a driver that commits after
    every statement would, and opens another: inside a caller's transaction, the ack
    and the business writes before it commit before the caller's commit."""

    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        acked = super().ack(c, params)
        if c.in_transaction:
            c.execute("COMMIT")
            c.execute("BEGIN IMMEDIATE")
        return acked


class StaleAckAbortsDriver(SqliteDriver):
    """An ack that matched nothing ends the transaction it runs in, rolled back, and
    opens another, as a driver whose refusal was a failed statement would leave a
    PostgreSQL transaction aborted: every write before it in the transaction is lost."""

    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        acked = super().ack(c, params)
        if not acked and c.in_transaction:
            c.execute("ROLLBACK")
            c.execute("BEGIN IMMEDIATE")
        return acked


class AckAllGuardsFirstOnlyDriver(SqliteDriver):
    """``tx.ack_all``'s statement (§3.10) guards its first claim only: every later one
    is acked by id, whatever claim holds the job now, so a lapsed or superseded claim
    in a group ends a job that may run again, or that another worker runs."""

    def ack_claims(self, c: sqlite3.Connection, params: AckClaims) -> list[int]:
        if not params.job_ids:
            return []
        first = AckClaims(params.job_ids[:1], params.attempts[:1], params.now)
        acked = super().ack_claims(c, first)
        for job_id in params.job_ids[1:]:
            deleted = c.execute(
                f"DELETE FROM {JOBS} WHERE id = ? AND state = 'processing'", (job_id,)
            )
            if deleted.rowcount:
                acked.append(job_id)
        return acked


class AckAllCommitsEachDriver(SqliteDriver):
    """``tx.ack_all``'s acks (§3.10) written one claim at a time, each committed as soon
    as it is written, as a driver would that loops over the claims and commits after
    every statement: a crash part way through the caller's transaction keeps the acks
    written so far (and its business writes before them) and loses the rest of it."""

    def ack_claims(self, c: sqlite3.Connection, params: AckClaims) -> list[int]:
        acked: list[int] = []
        for job_id, attempt in zip(params.job_ids, params.attempts, strict=True):
            acked += super().ack_claims(c, AckClaims([job_id], [attempt], params.now))
            if c.in_transaction:
                c.execute("COMMIT")
                c.execute("BEGIN IMMEDIATE")
        return acked


class _AckAfterTheBlock(CoreTransaction):
    """Checks nothing and writes nothing in the transaction: the handles wait for it to
    end, then are acked on their own, whether it committed or rolled back."""

    def __init__(self, context: Any, handle: Any) -> None:
        super().__init__(context, handle)
        self.later: list[tuple[JobHandle, Any]] = []

    def ack(self, handle: JobHandle, result: Any = None) -> None:
        self.later.append((handle, result))


class TxAckOutsideStore(CoreStore):
    """``tx.ack`` as a hand-rolled "ack once the transaction is done": the ack is its
    own write after the block, so a rolled-back transaction's job is acked anyway."""

    @contextmanager
    def transaction(self) -> Iterator[CoreTransaction]:
        self._context.require("transactions")
        tx: _AckAfterTheBlock | None = None
        try:
            with self._context.driver.transaction() as handle:
                tx = _AckAfterTheBlock(self._context, handle)
                try:
                    yield tx
                finally:
                    tx._finish()
        finally:
            for held, result in [] if tx is None else tx.later:
                held.ack(result)
