"""``alkstore.aio`` on PostgreSQL: the same core, its I/O on the event loop (``loop_io``).

Every test runs its own event loop (``asyncio.run``) against the session's server
on a fresh schema; the outage test gets a private server it can stop. The two
timing checks are mechanism checks with generous bounds (a loop that is blocked
shows gaps of tens of milliseconds; a missed wake shows the re-poll interval).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import psycopg
import pytest
from pg_helpers import fresh_schema_name
from psycopg import sql

import alkstore
import alkstore.aio
from alkstore import EngineUnavailable, InvalidOptions
from alkstore.aio import AsyncStore, TransactionBlock
from alkstore.core import CoreStore
from alkstore.options import QueueOpts
from alkstore.values import JobState, SweepResult
from alkstore_postgres import ENGINE
from alkstore_postgres.loop_io import LoopDriver
from alkstore_postgres.testing.server import LocalPostgres

T = TypeVar("T")
SAFETY_NET_S = 60.0


def run(test: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), SAFETY_NET_S))


def core(store: AsyncStore) -> CoreStore:
    assert isinstance(store.sync, CoreStore)
    return store.sync


def has_waiters(store: AsyncStore) -> bool:
    return core(store)._context.hub.has_waiters()


def listener(store: AsyncStore) -> Any:
    driver: Any = core(store).driver
    return driver.listener


async def until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.005)


@pytest.fixture
def app_table(admin: psycopg.Connection[Any], schema: str) -> sql.Composed:
    """The application's own table, in the test's schema (dropped with it)."""
    admin.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    table = sql.SQL("{}.app_orders").format(sql.Identifier(schema))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY)").format(table))
    return table


def orders(admin: psycopg.Connection[Any], table: sql.Composed) -> list[int]:
    return [row[0] for row in admin.execute(sql.SQL("SELECT id FROM {}").format(table))]


def ready_payloads(pg_dsn: str, schema: str, queue: str) -> list[Any]:
    with alkstore.open(pg_dsn, schema=schema) as store:
        return [job.payload for job in store.queue(queue).jobs(JobState.PENDING)]


# -- the store --------------------------------------------------------------------------
def test_aio_open_does_the_io_on_the_loop(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            assert isinstance(core(store).driver, LoopDriver)
            async with store.transaction() as tx:
                assert isinstance(tx.connection, psycopg.AsyncConnection)

    run(body)


def test_the_engine_declares_async_native() -> None:
    assert ENGINE.capabilities.async_native is True


def test_enqueue_claim_and_ack_through_aio(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q")
            job_id = await queue.enqueue({"n": 1})
            handle = await queue.claim("w")
            assert handle is not None
            assert (handle.id, handle.payload, handle.attempts) == (job_id, {"n": 1}, 1)
            assert await handle.heartbeat(30) is True
            assert await handle.ack() is True
            assert await queue.get_job(job_id) is None  # acked jobs are deleted
            assert await queue.claim("w") is None

    run(body)


def test_batches_through_aio(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q")
            ids = await queue.enqueue_many(["a", "b", "c"])
            handles = await queue.claim_batch("w", 10)
            assert [h.id for h in handles] == ids
            assert await queue.ack_batch(ids, "w") == 3
            assert (await queue.stats()).ready == 0

    run(body)


def test_retry_release_and_cancel_through_aio(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q")
            job_id = await queue.enqueue("x")
            first = await queue.claim("w")
            assert first is not None
            assert await first.retry("boom", delay=0) is True
            second = await queue.claim("w")
            assert second is not None
            assert (second.id, second.attempts) == (job_id, 2)
            assert await second.release() is True
            job = await queue.get_job(job_id)
            assert job is not None
            # attempts keeps counting claims; the released one is refunded to the budget
            assert (job.state, job.attempts, job.max_attempts) == (
                JobState.PENDING,
                2,
                second.job.max_attempts + 1,
            )
            assert await queue.cancel(job_id) is True
            assert await queue.get_job(job_id) is None

    run(body)


def test_fail_redrive_and_purge_through_aio(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q")
            await queue.enqueue_many(["redriven", "purged"])
            for handle in await queue.claim_batch("w", 2):
                assert await handle.fail("broken") is True
            redriven, purged = [job.id for job in await queue.jobs(JobState.DEAD)]
            [fresh] = await queue.redrive([redriven])
            assert await queue.purge_dead([purged]) == 1
            assert [job.id for job in await queue.jobs()] == [fresh]
            assert await queue.sweep_expired() == SweepResult(0, 0, 0)

    run(body)


def test_pause_and_resume_through_aio(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q", QueueOpts(max_attempts=3))
            await queue.enqueue("x")
            assert await queue.pause() is True
            assert await queue.paused() is True
            assert await queue.claim("w") is None
            assert await queue.resume() is True
            assert await queue.claim("w") is not None
            assert [s.queue for s in await store.stats()] == ["q"]

    run(body)


def test_a_claim_wait_finds_a_job_enqueued_while_it_waits(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q")
            waiting = asyncio.create_task(queue.claim_wait("w", timeout=30))
            await until(lambda: has_waiters(store))
            job_id = await queue.enqueue("late")
            handle = await waiting
            assert handle is not None
            assert handle.id == job_id

    run(body)


def test_a_stream_wait_wakes_for_an_append_from_another_aio_store(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with (
            alkstore.aio.open(pg_dsn, schema=schema, repoll_s=3600) as reader,
            alkstore.aio.open(pg_dsn, schema=schema) as writer,
        ):
            waiting = asyncio.create_task(reader.stream("audit").wait(0, timeout=30))
            await until(lambda: has_waiters(reader) and listener(reader).connections == 1)
            offset = await writer.stream("audit").append({"event": "paid"})
            assert await waiting is True
            [event] = await reader.stream("audit").read(0)
            assert (event.offset, event.payload) == (offset, {"event": "paid"})

    run(body)


def test_locks_through_aio(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            lock = store.lock("leader")
            assert await lock.acquire("a", 30) is True
            assert await lock.acquire("b", 30) is False
            holder = await lock.holder()
            assert holder is not None
            assert holder.owner == "a"
            assert await lock.release("a") is True

    run(body)


def test_pubsub_messages_small_and_stored_arrive_through_the_loop_listener(
    pg_dsn: str, schema: str
) -> None:
    big = "x" * 10_000  # over NOTIFY's limit: stored, read by the listener on the loop

    async def body() -> None:
        async with (
            alkstore.aio.open(pg_dsn, schema=schema) as receiver,
            alkstore.aio.open(pg_dsn, schema=schema) as sender,
            await receiver.subscribe("news") as subscription,
        ):
            await sender.notify("news", "small")
            await sender.notify("news", big)
            assert await subscription.get(timeout=10) == "small"
            assert await subscription.get(timeout=10) == big

    run(body)


# -- transactions and attach -------------------------------------------------------------
async def _order_in_a_transaction(store: AsyncStore, table: sql.Composed, *, fail: bool) -> None:
    """The app's row (on ``tx.connection``, the async connection) and a job, in one
    transaction; ``fail`` raises before the end of the block."""
    async with store.transaction() as tx:
        await tx.connection.execute(sql.SQL("INSERT INTO {} VALUES (1)").format(table))
        await tx.enqueue("emails", {"order": 1})
        if fail:
            raise RuntimeError("the order failed")


def test_a_transaction_commits_the_apps_row_and_the_job_together(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], app_table: sql.Composed
) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            await _order_in_a_transaction(store, app_table, fail=False)

    run(body)
    assert orders(admin, app_table) == [1]
    assert ready_payloads(pg_dsn, schema, "emails") == [{"order": 1}]


def test_a_transaction_that_raises_rolls_back_the_apps_row_and_the_job(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], app_table: sql.Composed
) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            with pytest.raises(RuntimeError, match="the order failed"):
                await _order_in_a_transaction(store, app_table, fail=True)

    run(body)
    assert orders(admin, app_table) == []
    assert ready_payloads(pg_dsn, schema, "emails") == []


def test_tx_execute_runs_on_the_async_connection_and_returns_its_rows(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], app_table: sql.Composed
) -> None:
    async def body() -> None:
        insert = sql.SQL("INSERT INTO {} VALUES (%s)").format(app_table).as_string(admin)
        async with (
            alkstore.aio.open(pg_dsn, schema=schema) as store,
            store.transaction() as tx,
        ):
            assert await tx.execute(insert, (5,)) == []
            await tx.enqueue("emails", {"order": 5})
            assert await tx.execute("SELECT 2 + 3") == [(5,)]

    run(body)
    assert orders(admin, app_table) == [5]
    assert ready_payloads(pg_dsn, schema, "emails") == [{"order": 5}]


async def _enter(block: TransactionBlock) -> None:
    async with block:
        pass


async def _attach_and_enqueue(
    store: AsyncStore, conn: psycopg.AsyncConnection[Any], table: sql.Composed
) -> None:
    await conn.execute(sql.SQL("INSERT INTO {} VALUES (7)").format(table))
    async with store.attach(conn) as tx:
        assert tx.connection is conn
        await tx.enqueue("emails", {"order": 7})


def test_attach_joins_an_async_connection_that_commits(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], app_table: sql.Composed
) -> None:
    async def body() -> None:
        async with (
            alkstore.aio.open(pg_dsn, schema=schema) as store,
            await psycopg.AsyncConnection.connect(pg_dsn) as conn,
        ):
            await _attach_and_enqueue(store, conn, app_table)
            # Joined, not committed: nothing is visible before the app commits.
            assert orders(admin, app_table) == []
            assert ready_payloads(pg_dsn, schema, "emails") == []
            await conn.commit()

    run(body)
    assert orders(admin, app_table) == [7]
    assert ready_payloads(pg_dsn, schema, "emails") == [{"order": 7}]


def test_attach_joins_an_async_connection_that_rolls_back(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], app_table: sql.Composed
) -> None:
    async def body() -> None:
        async with (
            alkstore.aio.open(pg_dsn, schema=schema) as store,
            await psycopg.AsyncConnection.connect(pg_dsn) as conn,
        ):
            await _attach_and_enqueue(store, conn, app_table)
            await conn.rollback()

    run(body)
    assert orders(admin, app_table) == []
    assert ready_payloads(pg_dsn, schema, "emails") == []


def test_attach_refuses_an_autocommit_async_connection_outside_a_transaction(
    pg_dsn: str, schema: str
) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
            async with conn:
                with pytest.raises(InvalidOptions, match="inside a transaction"):
                    await _enter(store.attach(conn))

    run(body)


def test_attach_refuses_an_async_connection_whose_transaction_failed(
    pg_dsn: str, schema: str
) -> None:
    async def body() -> None:
        async with (
            alkstore.aio.open(pg_dsn, schema=schema) as store,
            await psycopg.AsyncConnection.connect(pg_dsn) as conn,
        ):
            with pytest.raises(psycopg.errors.DivisionByZero):
                await conn.execute("SELECT 1/0")
            with pytest.raises(InvalidOptions, match="roll it back"):
                await _enter(store.attach(conn))

    run(body)


def test_aio_attach_refuses_a_sync_connection(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            with psycopg.connect(pg_dsn) as conn, pytest.raises(InvalidOptions, match="Async"):
                await _enter(store.attach(conn))

    run(body)


def test_a_sync_store_refuses_an_async_connection_naming_alkstore_aio(
    pg_dsn: str, schema: str
) -> None:
    async def body() -> None:
        with alkstore.open(pg_dsn, schema=schema) as store:
            async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
                with pytest.raises(InvalidOptions, match=r"alkstore\.aio"), store.attach(conn):
                    pass

    run(body)


# -- cancellation ------------------------------------------------------------------------
def test_a_cancelled_claim_wait_leaves_no_claim_and_no_waiter(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q")
            waiting = asyncio.create_task(queue.claim_wait("w", timeout=30))
            await until(lambda: has_waiters(store))
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert not has_waiters(store)
            job_id = await queue.enqueue("for the next worker")
            handle = await queue.claim("other")
            assert handle is not None
            assert handle.id == job_id
            assert (await queue.stats()).processing == 1

    run(body)


# -- the loop is never blocked -----------------------------------------------------------
def test_the_loop_keeps_ticking_while_enqueues_run(pg_dsn: str, schema: str) -> None:
    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            queue = store.queue("q")
            await queue.enqueue("warm-up")  # the pool's first connection
            stop = asyncio.Event()
            ticking = asyncio.create_task(ticker(stop))
            for n in range(200):
                await queue.enqueue(n)
            stop.set()
            await ticking
            assert (await queue.stats()).ready == 201

    run(body)
    assert len(gaps) >= 20  # the ticker ran all along (200 round trips take longer)
    p99 = statistics.quantiles(gaps, n=100)[98]
    assert p99 < 0.05, f"the loop stalled: p99 gap {p99 * 1000:.1f} ms"


# -- wakes across stores -----------------------------------------------------------------
def test_a_wake_crosses_two_aio_stores_through_listen_on_the_loop(pg_dsn: str, schema: str) -> None:
    delays: list[float] = []

    async def body() -> None:
        # An hour between safety-net re-polls: only LISTEN can wake the worker promptly.
        async with (
            alkstore.aio.open(pg_dsn, schema=schema, repoll_s=3600) as worker,
            alkstore.aio.open(pg_dsn, schema=schema) as producer,
        ):
            for n in range(3):
                waiting = asyncio.create_task(worker.queue("q").claim_wait("w", timeout=30))
                await until(lambda: has_waiters(worker) and listener(worker).connections == 1)
                job_id = await producer.queue("q").enqueue(n)
                enqueued = time.monotonic()
                handle = await waiting
                delays.append(time.monotonic() - enqueued)
                assert handle is not None
                assert handle.id == job_id
                await handle.ack()

    run(body)
    assert statistics.median(delays) < 0.25


# -- misuse ------------------------------------------------------------------------------
def test_calling_the_sync_store_on_the_loop_thread_raises_invalid_options(
    pg_dsn: str, schema: str
) -> None:
    async def body() -> None:
        async with alkstore.aio.open(pg_dsn, schema=schema) as store:
            with pytest.raises(InvalidOptions, match=r"alkstore\.aio"):
                store.sync.queue("q").enqueue("blocked")
            with pytest.raises(InvalidOptions, match=r"alkstore\.aio"), store.sync.transaction():
                pass
            assert await store.queue("q").stats() is not None  # the store is fine

    run(body)


def test_open_on_loop_refuses_to_run_on_the_loops_own_thread(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        with pytest.raises(InvalidOptions, match="thread"):
            ENGINE.open_on_loop(pg_dsn, asyncio.get_running_loop(), schema=schema)

    run(body)


def test_open_on_loop_refuses_a_loop_that_is_not_running(pg_dsn: str, schema: str) -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(InvalidOptions, match="not running"):
            ENGINE.open_on_loop(pg_dsn, loop, schema=schema)
    finally:
        loop.close()


# -- outages -----------------------------------------------------------------------------
def test_calls_raise_engine_unavailable_while_the_server_is_down_then_recover(
    running_pg: LocalPostgres,
) -> None:
    async def body() -> None:
        url = running_pg.dsn
        async with alkstore.aio.open(url, schema=fresh_schema_name(), connect_timeout_s=2) as store:
            queue = store.queue("q")
            await queue.enqueue("before")
            await asyncio.to_thread(running_pg.stop)
            with pytest.raises(EngineUnavailable) as info:
                await queue.enqueue("while down")
            assert isinstance(info.value.__cause__, psycopg.Error)
            await asyncio.to_thread(running_pg.start)
            await queue.enqueue("after")  # the pool replaced its dead connections
            handles = await queue.claim_batch("w", 10)
            assert [h.payload for h in handles] == ["before", "after"]

    run(body)


def test_a_claim_wait_survives_a_server_restart(running_pg: LocalPostgres) -> None:
    schema = fresh_schema_name()

    async def body() -> None:
        # Only the reconnected LISTEN task (its wake-everyone, then the NOTIFY) can
        # bring the job before the hour-long re-poll.
        async with (
            alkstore.aio.open(running_pg.dsn, schema=schema, repoll_s=3600) as worker,
            alkstore.aio.open(running_pg.dsn, schema=schema) as producer,
        ):
            waiting = asyncio.create_task(worker.queue("jobs").claim_wait("w", timeout=50))
            await until(lambda: has_waiters(worker) and listener(worker).connections == 1)
            await asyncio.to_thread(running_pg.restart)
            await until(lambda: listener(worker).connections == 2, within=30)
            job_id = await producer.queue("jobs").enqueue("after the restart")
            handle = await waiting
            assert handle is not None
            assert handle.id == job_id

    run(body)
