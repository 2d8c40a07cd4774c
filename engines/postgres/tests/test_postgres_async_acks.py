"""Acks that need not wait for the disk (contract 1.2 §12.11, the async_acks profile).

A worker with ``durable_acks=False`` acks with ``synchronous_commit = off`` for each
ack's own transaction (``ACK_ASYNC``, ``COMPLETE_ASYNC``; ``SET LOCAL`` in a group's
transaction), and nothing else. The crash tests run a real throwaway cluster with
fsync on and ``wal_writer_delay`` at its longest, so an asynchronous commit stays in
the WAL buffers (unwritten) for seconds, and stop it with ``pg_ctl stop -m
immediate`` mid-run: what was asynchronous and unwritten is lost, even without an OS
crash. Every enqueue that returned must be there after the restart; a mutant engine
that lets the setting outlive its ack (session-wide on a pooled connection, so the
enqueues that reuse it go asynchronous too) loses the last burst of enqueues.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from pg_helpers import fresh_schema_name

import alkstore
from alkstore import EnqueueOpts, JobState, QueueOpts
from alkstore.core import CoreStore
from alkstore.driver import Driver
from alkstore.worker import Worker
from alkstore_postgres import statements
from alkstore_postgres.driver import _async_ack
from alkstore_postgres.engine import open_store
from alkstore_postgres.handle import PgHandle
from alkstore_postgres.testing.server import LocalPostgres

QUEUE = "crash"
BACKLOG = 200
"""Jobs enqueued (durably) before the worker starts."""
RUN_S = 1.5
"""How long the worker runs beside a steady trickle of enqueues before the burst."""
BURST = 60
"""Enqueues one after another just before the immediate stop, due in an hour so that
no claim follows them: the last of them are in the WAL buffers' unwritten page when
the server dies, unless each one flushed its own commit."""


@pytest.fixture(scope="module")
def crash_pg() -> Iterator[LocalPostgres]:
    """A throwaway cluster of this module's own, fsync on; its WAL writer waits as
    long as it may (10 s) before it writes a partial page, so asynchronous commits
    stay unwritten and an immediate stop loses them. No autovacuum: a worker of it
    analyzes the catalogs the migrations grew about 0.5 s after every start, and its
    commit is durable, so it writes every WAL record before its own; under load it
    can land between the burst and the stop, which then loses nothing (a CI run lost
    nothing once, 7 December; a mutant run loses as few as 2 enqueues)."""
    settings = {"wal_writer_delay": "10s", "autovacuum": "off"}
    with LocalPostgres(fsync=True, settings=settings) as pg:
        yield pg


class SessionWideAsync:
    """The mutant: the reference driver, whose ack turns ``synchronous_commit`` off
    for the whole session (``SET``, not ``SET LOCAL``): the pooled connection goes
    back to the pool asynchronous, and the next enqueue on it commits unflushed."""

    def __init__(self, inner: Driver[Any]) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def commit_acks_without_waiting(self, c: PgHandle) -> None:
        c.conn.execute(b"SET synchronous_commit = off")


@dataclass
class CrashRun:
    enqueued: list[int]
    """Every id whose enqueue returned before the stop."""
    states: dict[int, JobState | None]
    """Each of them as the restarted server has it (``None``: no such job)."""

    @property
    def lost(self) -> list[int]:
        return [i for i in self.enqueued if self.states[i] is None]

    def count(self, state: JobState) -> int:
        return sum(1 for s in self.states.values() if s is state)


DRAIN_S = 60.0
"""The longest a run waits for its worker to take the last due job before the burst."""


def _drained(queue: Any) -> None:
    """Until the worker has nothing due left to claim: a claim commits durably, which
    writes out every asynchronous commit before it, so a claim between the burst and
    the stop saves the burst (under load the worker can still be at the backlog)."""
    until = time.monotonic() + DRAIN_S
    while time.monotonic() < until:
        stats = queue.stats()
        if stats.ready == 0 and stats.processing == 0 and stats.lapsed == 0:
            return
        time.sleep(0.01)
    raise AssertionError(f"the worker left jobs due after {DRAIN_S:g} s: {queue.stats()}")


def _run_and_crash(
    pg: LocalPostgres,
    wrap: Callable[[Driver[Any]], Driver[Any]] | None,
    ack_window_s: float,
    *,
    drain: bool = False,
) -> CrashRun:
    pg.start()
    schema = fresh_schema_name()
    # A small pool: the enqueues share their connections with the worker's acks.
    store = open_store(pg.dsn, schema=schema, wrap=wrap, connect_timeout_s=1, pool_max_size=2)
    queue = store.queue(QUEUE, QueueOpts(completed_retention_s=3600))
    enqueued = [int(queue.enqueue({"n": n})) for n in range(BACKLOG)]
    worker = Worker(store, "crash-worker", ack_window_s=ack_window_s, durable_acks=False)

    @worker.task(QUEUE, concurrency=2)
    def handle(job: alkstore.Job) -> None:
        return None

    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    try:
        until = time.monotonic() + RUN_S
        n = BACKLOG
        while time.monotonic() < until:  # enqueues go on while the worker acks
            enqueued.append(int(queue.enqueue({"n": n})))
            n += 1
            time.sleep(0.005)
        if drain:
            _drained(queue)
        later = EnqueueOpts(delay=3600)  # no claim (and no claim's flush) follows them
        for _ in range(BURST):
            enqueued.append(int(queue.enqueue({"n": n}, later)))
            n += 1
        pg.stop("immediate")
    finally:
        worker.stop(force=True)
        running.join(60)
        store.close()
    pg.start()
    with alkstore.open(pg.dsn, schema=schema, connect_timeout_s=5) as after:
        reread = after.queue(QUEUE)
        states = {}
        for job_id in enqueued:
            job = reread.get_job(job_id)
            states[job_id] = None if job is None else job.state
    with psycopg.connect(pg.dsn, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return CrashRun(enqueued, states)


@pytest.mark.parametrize("ack_window_s", [0.0, 0.002], ids=["one-at-a-time", "grouped"])
def test_an_immediate_stop_with_async_acks_loses_no_enqueued_job(
    crash_pg: LocalPostgres, ack_window_s: float
) -> None:
    run = _run_and_crash(crash_pg, None, ack_window_s)
    assert run.lost == []
    assert run.count(JobState.COMPLETED) > 0  # the worker was acking when it stopped
    assert run.count(JobState.COMPLETED) < len(run.enqueued)  # ... mid-run


def test_an_immediate_stop_with_async_acks_acks_no_job_twice(crash_pg: LocalPostgres) -> None:
    # A completed job is one row of the completed table and no live row: a lost ack
    # leaves its job live (to run again), never completed and live at once.
    run = _run_and_crash(crash_pg, None, 0.0)
    live = {JobState.PENDING, JobState.PROCESSING}
    completed = [i for i, s in run.states.items() if s is JobState.COMPLETED]
    assert len(completed) + sum(1 for s in run.states.values() if s in live) == len(run.enqueued)
    assert len(set(completed)) == len(completed)


@pytest.mark.parametrize("attempt", range(3))
def test_a_session_wide_async_ack_loses_enqueues_in_an_immediate_stop(
    crash_pg: LocalPostgres, attempt: int
) -> None:
    run = _run_and_crash(crash_pg, SessionWideAsync, 0.0, drain=True)  # type: ignore[arg-type]
    assert run.lost != []
    assert run.lost == run.enqueued[-len(run.lost) :]  # the last ones, unflushed


def test_an_async_ack_leaves_its_pooled_connection_durable(crash_pg: LocalPostgres) -> None:
    crash_pg.start()
    schema = fresh_schema_name()
    with alkstore.open(crash_pg.dsn, schema=schema, pool_max_size=1) as store:
        assert isinstance(store, CoreStore)
        queue = store.queue("q")
        queue.enqueue(1)
        queue.enqueue(2)
        handle = queue.claim("w")
        assert handle is not None
        assert handle.ack_durably(durable=False)  # type: ignore[attr-defined]
        second = queue.claim("w")
        assert second is not None
        assert second.ack_durably_and_claim("w", 1, durable=False).acked  # type: ignore[attr-defined]
        with store.transaction() as tx:
            (setting,) = tx.execute("SHOW synchronous_commit").fetchone()
    with psycopg.connect(crash_pg.dsn, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    assert setting == "on"


def test_a_group_of_async_acks_commits_its_own_transaction_only(crash_pg: LocalPostgres) -> None:
    crash_pg.start()
    schema = fresh_schema_name()
    with alkstore.open(crash_pg.dsn, schema=schema, pool_max_size=1) as store:
        queue = store.queue("q")
        queue.enqueue(1)
        handle = queue.claim("w")
        assert handle is not None
        with store.transaction() as tx:
            tx.commit_acks_without_waiting()  # type: ignore[attr-defined]
            (inside,) = tx.execute("SHOW synchronous_commit").fetchone()
            tx.ack(handle)
        with store.transaction() as tx:
            (after,) = tx.execute("SHOW synchronous_commit").fetchone()
        acked = queue.get_job(handle.id)
    with psycopg.connect(crash_pg.dsn, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    assert (inside, after, acked) == ("off", "on", None)


def test_the_async_ack_statements_are_the_acks_with_a_local_setting() -> None:
    local = ", set_config('synchronous_commit', 'off', true)\n"
    assert statements.ACK.removesuffix("\n") + local == statements.ACK_ASYNC
    assert statements.COMPLETE.removesuffix("\n") + local == statements.COMPLETE_ASYNC


def test_the_request_is_spent_by_the_ack_it_was_for() -> None:
    handle = PgHandle(conn=None, standalone=True, async_ack=True)  # type: ignore[arg-type]
    assert _async_ack(handle)
    assert not _async_ack(handle)  # ack_and_claim's claim after it: durable


def test_in_a_transaction_the_request_is_never_the_statements() -> None:
    handle = PgHandle(conn=None, standalone=False, async_ack=True)  # type: ignore[arg-type]
    assert not _async_ack(handle)  # a transaction's commit is SET LOCAL's, not the ack's
