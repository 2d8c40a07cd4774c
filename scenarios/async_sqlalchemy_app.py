"""An async SQLAlchemy app that enqueues in its own transaction (contract §3, §13).

``python scenarios/async_sqlalchemy_app.py postgresql+psycopg://user@host/db``

Placing an order inserts the app's row and enqueues its confirmation email in
ONE transaction: SQLAlchemy's (``engine.begin()``), which the store joins with
``attach`` through the raw psycopg ``AsyncConnection`` underneath. Both commit
together, or -- when the order fails inside the block -- neither exists. One
URL serves both: the store reads ``postgresql+psycopg://`` as ``postgresql://``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

import alkstore.aio
from alkstore.aio import AsyncStore

EMAILS = "order-emails"


class PaymentDeclined(Exception):
    """The order failed after its row and its job were written: both must vanish."""

    def __init__(self, order_id: int) -> None:
        super().__init__(f"payment declined for order {order_id}")
        self.order_id = order_id


def orders_table(schema: str | None = None) -> Table:
    """The app's own table (in ``schema``, else the connection's default)."""
    return Table(
        "demo_orders",
        MetaData(schema=schema),
        Column("id", Integer, primary_key=True),
        Column("customer", String(200), nullable=False),
    )


async def place_order(
    engine: AsyncEngine,
    store: AsyncStore,
    orders: Table,
    customer: str,
    *,
    payment_ok: bool = True,
) -> tuple[int, int]:
    """Insert the order and enqueue its email, atomically; returns the order's id and
    the job's.

    Raises:
        PaymentDeclined: ``payment_ok`` is false; nothing was committed.
    """
    async with engine.begin() as conn:  # commits at the end, rolls back on an exception
        inserted = await conn.execute(
            insert(orders).values(customer=customer).returning(orders.c.id)
        )
        order_id = inserted.scalar_one()
        raw = await conn.get_raw_connection()
        # The psycopg AsyncConnection carrying SQLAlchemy's transaction: the job
        # is written in it and never committed or rolled back by the store.
        async with store.attach(raw.driver_connection) as tx:
            job_id = await tx.enqueue(EMAILS, {"order": order_id, "to": customer})
        if not payment_ok:
            raise PaymentDeclined(order_id)
    return order_id, job_id


async def send_emails(store: AsyncStore) -> list[dict[str, Any]]:
    """The worker's side: handle every queued email (here: collect it), ack it."""
    sent: list[dict[str, Any]] = []
    queue = store.queue(EMAILS)
    while (job := await queue.claim_wait("mailer", timeout=0.5)) is not None:
        sent.append(job.payload)
        await job.ack()
    return sent


async def order_ids(engine: AsyncEngine, orders: Table) -> list[int]:
    async with engine.connect() as conn:
        return list((await conn.execute(select(orders.c.id).order_by(orders.c.id))).scalars())


async def main(url: str, **opts: Any) -> tuple[list[int], list[dict[str, Any]]]:
    """One paid order, one declined; returns which of the two orders were kept and the
    emails sent."""
    engine = create_async_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        async with alkstore.aio.open(url, **opts) as store:  # creates its schema if needed
            orders = orders_table(opts.get("schema"))
            async with engine.begin() as conn:
                await conn.run_sync(orders.metadata.create_all)
            placed = [(await place_order(engine, store, orders, "ada@example.com"))[0]]
            try:
                await place_order(engine, store, orders, "bob@example.com", payment_ok=False)
            except PaymentDeclined as declined:
                placed.append(declined.order_id)
            kept = [order for order in await order_ids(engine, orders) if order in placed]
            return kept, await send_emails(store)
    finally:
        await engine.dispose()


if __name__ == "__main__":
    kept, sent = asyncio.run(main(*sys.argv[1:2]))
    print("orders kept:", kept)
    for email in sent:
        print("email sent:", email)
