"""The transactional seam: the engine's own transaction and the caller's (attach)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy
from pg_helpers import StoreFactory
from psycopg import pq

from alkstore import InvalidOptions
from alkstore_postgres import wake_channel


@pytest.fixture
def orders(admin: psycopg.Connection[Any]) -> Iterator[str]:
    """A business table of the caller's own, outside the engine schema."""
    table = "orders_" + secrets.token_hex(4)
    admin.execute(f"CREATE TABLE public.{table} (id int PRIMARY KEY)")
    yield f"public.{table}"
    admin.execute(f"DROP TABLE public.{table}")


@pytest.fixture
def sqlalchemy_engine(pg_dsn: str) -> Iterator[sqlalchemy.Engine]:
    engine = sqlalchemy.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(pg_dsn)
    )
    yield engine
    engine.dispose()


def _order_ids(admin: psycopg.Connection[Any], table: str) -> list[int]:
    return [row[0] for row in admin.execute(f"SELECT id FROM {table}").fetchall()]


def test_attach_to_sqlalchemy_transaction_commits_business_row_and_job_together(
    open_store: StoreFactory,
    sqlalchemy_engine: sqlalchemy.Engine,
    admin: psycopg.Connection[Any],
    orders: str,
) -> None:
    store = open_store()
    with sqlalchemy_engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"INSERT INTO {orders} (id) VALUES (7)"))
        native = conn.connection.driver_connection
        with store.attach(native) as tx:
            job_id = tx.enqueue("emails", {"order": 7})
            assert tx.get_job_tx("emails", job_id) is not None
        # Not committed yet: invisible from outside.
        assert store.queue("emails").get_job(job_id) is None

    assert _order_ids(admin, orders) == [7]
    handle = store.queue("emails").claim("w")
    assert handle is not None
    assert handle.id == job_id
    assert handle.payload == {"order": 7}


def test_attach_to_sqlalchemy_transaction_rolls_back_business_row_and_job_together(
    open_store: StoreFactory,
    sqlalchemy_engine: sqlalchemy.Engine,
    admin: psycopg.Connection[Any],
    orders: str,
) -> None:
    store = open_store()
    enqueued: list[int] = []

    def place_order_then_fail() -> None:
        with sqlalchemy_engine.begin() as conn:
            conn.execute(sqlalchemy.text(f"INSERT INTO {orders} (id) VALUES (8)"))
            with store.attach(conn.connection.driver_connection) as tx:
                enqueued.append(tx.enqueue("emails", {"order": 8}))
            raise RuntimeError("payment declined")

    with pytest.raises(RuntimeError, match="payment declined"):
        place_order_then_fail()

    (job_id,) = enqueued
    assert _order_ids(admin, orders) == []
    assert store.queue("emails").get_job(job_id) is None
    assert store.queue("emails").claim("w") is None


def test_attach_never_commits_the_callers_connection(open_store: StoreFactory, pg_dsn: str) -> None:
    store = open_store()
    with psycopg.connect(pg_dsn) as conn:
        with store.attach(conn) as tx:
            job_id = tx.enqueue("q", "mine")
        assert conn.info.transaction_status == pq.TransactionStatus.INTRANS
        assert store.queue("q").get_job(job_id) is None
        conn.commit()
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert job.payload == "mine"


def test_attach_joins_an_autocommit_connection_inside_its_transaction_block(
    open_store: StoreFactory, pg_dsn: str
) -> None:
    store = open_store()
    enqueued: list[int] = []

    def enqueue_then_fail(conn: psycopg.Connection[Any]) -> None:
        with conn.transaction(), store.attach(conn) as tx:
            enqueued.append(tx.enqueue("q", "rolled back"))
            raise RuntimeError("rolled back")

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(RuntimeError, match="rolled back"):
            enqueue_then_fail(conn)
        assert conn.info.transaction_status == pq.TransactionStatus.IDLE
    assert store.queue("q").get_job(enqueued[0]) is None


def test_attach_refuses_an_autocommit_connection_outside_a_transaction(
    open_store: StoreFactory, pg_dsn: str
) -> None:
    store = open_store()
    with (
        psycopg.connect(pg_dsn, autocommit=True) as conn,
        pytest.raises(InvalidOptions, match="inside a transaction"),
        store.attach(conn),
    ):
        pass


def test_attach_refuses_something_that_is_not_a_psycopg_connection(
    open_store: StoreFactory,
) -> None:
    with pytest.raises(InvalidOptions, match=r"psycopg\.Connection"), open_store().attach(object()):
        pass


def test_transaction_exposes_its_psycopg_connection_for_business_writes(
    open_store: StoreFactory, admin: psycopg.Connection[Any], orders: str
) -> None:
    store = open_store()
    with store.transaction() as tx:
        assert isinstance(tx.connection, psycopg.Connection)
        tx.execute(f"INSERT INTO {orders} (id) VALUES (%s)", (11,))
        job_id = tx.enqueue("emails", {"order": 11})
    assert _order_ids(admin, orders) == [11]
    assert store.queue("emails").get_job(job_id) is not None


def test_rolled_back_transaction_leaves_no_row_and_announces_nothing(
    open_store: StoreFactory, pg_dsn: str, schema: str, orders: str, admin: psycopg.Connection[Any]
) -> None:
    store = open_store()
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute(f'LISTEN "{wake_channel(schema)}"')

        def order_then_fail() -> None:
            with store.transaction() as tx:
                tx.execute(f"INSERT INTO {orders} (id) VALUES (%s)", (12,))
                tx.enqueue("ghost", {"order": 12})
                raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError, match="rolled back"):
            order_then_fail()
        # A committed marker afterwards: NOTIFYs arrive in commit order, so had the
        # rolled-back enqueue announced anything, it would arrive first.
        store.queue("marker").enqueue("after")

        received = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]

    assert received == ["queue:marker"]
    assert _order_ids(admin, orders) == []
    assert store.queue("ghost").claim("w") is None
