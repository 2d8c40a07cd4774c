"""The pgqueuer rows (P1, P3): a peer measured in the same run, on the same server.

pgqueuer (on asyncpg) is the asyncio PostgreSQL queue the async surface is read
against, so these rows sit beside A1 and A3 and run on the PostgreSQL server
the harness provisioned for the row, in a database of their own (created for
the row, its schema installed with ``Queries.install()``, dropped afterwards
with everything in it): pgqueuer's tables, trigger and NOTIFY channel never
meet alkstore's.

- **P1 pgqueuer enqueue**: ``await queries.enqueue(entrypoint, payload)``, one
  job per call (one transaction each), one at a time, like A1.
- **P3 pgqueuer drain**: a ``QueueManager`` with a no-op entrypoint, in drain
  mode at its defaults (dequeues of 10, completions logged in batches),
  draining a backlog of N committed beforehand, like A3's claim + ack; timed
  from ``run()`` until it returns with the queue empty.

Both rows skip, with the reason printed, where pgqueuer or asyncpg is not
installed (``nox -s bench`` installs them; the unit-test venv does not).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import cache
from typing import Any, TypeVar

import psycopg
from bench_report import Measurement
from bench_workloads import ENQUEUE_MANY_BATCH, Bench, payloads
from psycopg import sql

T = TypeVar("T")

ENTRYPOINT = "bench"
DATABASE_PREFIX = "alkstore_bench_pgq_"
"""Databases these rows create; each is dropped when its row ends."""


@cache
def missing() -> str | None:
    """Why the pgqueuer rows cannot run here, or ``None`` when they can."""
    try:
        import asyncpg  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: F401
        import pgqueuer  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or 'pgqueuer'} not installed (nox -s bench installs pgqueuer[asyncpg])"
    return None


def pgqueuer_version() -> str:
    return importlib.metadata.version("pgqueuer")


def _skipped(bench: Bench) -> Measurement | None:
    if bench.engine != "postgresql":
        return Measurement(skipped="pgqueuer runs on PostgreSQL only")
    why = missing()
    if why is None:
        return None
    print(f"  pgqueuer rows skipped: {why}", file=sys.stderr, flush=True)
    return Measurement(skipped=why)


@asynccontextmanager
async def own_database(bench: Bench) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    """A fresh database on the row's server with pgqueuer's schema installed; yields a
    function opening asyncpg connections to it (all closed, and the database
    dropped, on the way out)."""
    import asyncpg  # type: ignore[import-not-found,import-untyped,unused-ignore]
    from pgqueuer import Queries  # type: ignore[import-not-found,unused-ignore]

    url = bench.spec.url
    name = DATABASE_PREFIX + secrets.token_hex(6)
    # CREATE/DROP DATABASE cannot run in a transaction: an autocommit connection.
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    opened: list[Any] = []

    async def connect() -> Any:
        connection = await asyncpg.connect(url, database=name)
        opened.append(connection)
        return connection

    try:
        await Queries.from_asyncpg_connection(await connect()).install()
        yield connect
    finally:
        for connection in opened:
            await connection.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def run_in_own_database(
    bench: Bench, body: Callable[[Callable[[], Awaitable[Any]]], Awaitable[T]]
) -> T:
    async def main() -> T:
        async with own_database(bench) as connect:
            return await body(connect)

    return asyncio.run(main())


def _encoded(item: dict[str, Any]) -> bytes:
    """The payload as pgqueuer takes it: bytes (the same ~100-byte JSON as every row)."""
    return json.dumps(item, separators=(",", ":")).encode()


def pgqueuer_enqueue(bench: Bench) -> Measurement:
    """P1. ``await queries.enqueue(...)`` one job per call, one at a time (beside A1)."""
    skipped = _skipped(bench)
    if skipped is not None:
        return skipped
    from pgqueuer import Queries

    items, deadline = payloads(bench.jobs), bench.deadline()

    async def body(connect: Callable[[], Awaitable[Any]]) -> tuple[int, float]:
        queries = Queries.from_asyncpg_connection(await connect())
        done = 0
        started = time.perf_counter()
        for item in items:
            if time.perf_counter() > deadline:
                break
            # Encoded inside the loop: alkstore's enqueue encodes its JSON too.
            await queries.enqueue(ENTRYPOINT, _encoded(item))
            done += 1
        return done, time.perf_counter() - started

    done, seconds = run_in_own_database(bench, body)
    m = Measurement(jobs=done, seconds=seconds, capped=done < bench.jobs)
    m.notes.append(f"pgqueuer {pgqueuer_version()} on asyncpg, its own database")
    return m


def pgqueuer_drain(bench: Bench) -> Measurement:
    """P3. One ``QueueManager`` (no-op entrypoint, drain mode, its defaults) empties a
    backlog of N (beside A3)."""
    skipped = _skipped(bench)
    if skipped is not None:
        return skipped
    from pgqueuer import Job, Queries, QueueManager
    from pgqueuer.domain.types import (  # type: ignore[import-not-found,unused-ignore]
        QueueExecutionMode,
    )

    items = payloads(bench.jobs)

    async def body(connect: Callable[[], Awaitable[Any]]) -> tuple[int, int, float, bool]:
        producer = Queries.from_asyncpg_connection(await connect())
        for start in range(0, len(items), ENQUEUE_MANY_BATCH):
            batch: list[bytes | None] = [
                _encoded(item) for item in items[start : start + ENQUEUE_MANY_BATCH]
            ]
            await producer.enqueue([ENTRYPOINT] * len(batch), batch, [0] * len(batch))

        manager = QueueManager(Queries.from_asyncpg_connection(await connect()))
        handled = 0

        async def noop(job: Job) -> None:
            """Does nothing but count: only pgqueuer's own cost is left."""
            nonlocal handled
            handled += 1

        manager.entrypoint(ENTRYPOINT, accepts_context=False)(noop)

        started = time.perf_counter()
        run = asyncio.create_task(manager.run(mode=QueueExecutionMode.drain))
        done, _ = await asyncio.wait({run}, timeout=bench.budget_s)
        capped = not done
        if capped:
            manager.shutdown.set()  # its own graceful stop: in-flight completions are logged
        await run
        seconds = time.perf_counter() - started
        left = sum(s.count for s in await producer.queue_size())
        return handled, left, seconds, capped

    handled, left, seconds, capped = run_in_own_database(bench, body)
    m = Measurement(jobs=bench.jobs - left, seconds=seconds, capped=capped)
    m.notes.append(
        f"pgqueuer {pgqueuer_version()} on asyncpg, its own database; one QueueManager, "
        f"drain mode, default batch; {handled:,} handler calls, {left:,} jobs left"
    )
    if left and not capped:
        m.errors = left
    return m
