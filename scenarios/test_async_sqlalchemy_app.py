"""The async SQLAlchemy story on a real PostgreSQL: the app's row and its job commit
together and roll back together (the engine's ``provision()``: ``$ALKSTORE_PG_DSN``,
else a throwaway server; a schema of its own, emptied or dropped afterwards)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import async_sqlalchemy_app as app
import pytest
from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import alkstore
import alkstore.aio
from alkstore import EngineSpec, JobState
from alkstore.aio import AsyncStore

T = TypeVar("T")
SAFETY_NET_S = 60.0


@pytest.fixture
def pg_spec() -> Iterator[EngineSpec]:
    with alkstore.load_engine("postgresql").provision() as spec:
        yield spec


def run(test: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), SAFETY_NET_S))


async def with_app(
    spec: EngineSpec, story: Callable[[AsyncEngine, AsyncStore, Table], Coroutine[Any, Any, T]]
) -> T:
    """Run ``story`` with the app's engine, an aio store and the created orders table."""
    engine = create_async_engine(spec.url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        async with alkstore.aio.open(spec.url, **spec.opts) as store:
            orders = app.orders_table(spec.opts["schema"])
            async with engine.begin() as conn:
                await conn.run_sync(orders.metadata.create_all)
            return await story(engine, store, orders)
    finally:
        await engine.dispose()


async def pending_emails(store: AsyncStore) -> list[Any]:
    return [job.payload for job in await store.queue(app.EMAILS).jobs(JobState.PENDING)]


def test_an_order_and_its_email_job_commit_together(pg_spec: EngineSpec) -> None:
    async def story(engine: AsyncEngine, store: AsyncStore, orders: Table) -> None:
        order_id, job_id = await app.place_order(engine, store, orders, "ada@example.com")
        assert await app.order_ids(engine, orders) == [order_id]
        job = await store.queue(app.EMAILS).get_job(job_id)
        assert job is not None
        assert job.payload == {"order": order_id, "to": "ada@example.com"}

    run(lambda: with_app(pg_spec, story))


def test_a_declined_order_rolls_back_its_row_and_its_email_job(pg_spec: EngineSpec) -> None:
    async def story(engine: AsyncEngine, store: AsyncStore, orders: Table) -> None:
        with pytest.raises(app.PaymentDeclined):
            await app.place_order(engine, store, orders, "bob@example.com", payment_ok=False)
        assert await app.order_ids(engine, orders) == []
        assert await pending_emails(store) == []

    run(lambda: with_app(pg_spec, story))


def test_the_story_keeps_the_paid_order_and_sends_only_its_email(pg_spec: EngineSpec) -> None:
    kept, sent = run(lambda: app.main(pg_spec.url, **pg_spec.opts))
    assert kept == [1]  # the first order of a fresh table; the declined one is gone
    assert sent == [{"order": 1, "to": "ada@example.com"}]
