"""Fixtures for the PostgreSQL engine's own tests.

One server for the whole session (``provision_server()``: ``$ALKSTORE_PG_DSN``,
else Docker, else a throwaway local cluster); every test that opens a store
gets a fresh, randomly named schema that is dropped (CASCADE) afterwards.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from pg_helpers import StoreFactory, fresh_schema_name
from psycopg import sql

import alkstore
from alkstore.core import CoreStore
from alkstore_postgres.testing.pgbouncer import LocalPgBouncer
from alkstore_postgres.testing.provisioning import drop_schema
from alkstore_postgres.testing.server import LocalPostgres, provision_server


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kept_plans: checks plans a session keeps, so runs with no other test on the server",
    )


@pytest.fixture(scope="session")
def pg_dsn(worker_id: str) -> Iterator[str]:
    """The session's server; under xdist, a database of this worker's own on it, so
    that catalog-wide looks (every schema, every plan's statistics) see only its
    own tests' objects."""
    with provision_server() as server:
        if worker_id == "master":
            yield server.dsn
            return
        with _database_of_its_own(server.dsn, f"alkstore_tests_{worker_id}") as dsn:
            yield dsn


@contextmanager
def _database_of_its_own(dsn: str, name: str) -> Iterator[str]:
    database = sql.Identifier(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(database))
    try:
        yield urlsplit(dsn)._replace(path=f"/{name}").geturl()  # a URL, as alkstore.open takes
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database))


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    name = fresh_schema_name()
    yield name
    drop_schema(pg_dsn, name)


@pytest.fixture
def open_store(pg_dsn: str, schema: str) -> Iterator[StoreFactory]:
    """Open stores on the test's schema (options override); all closed afterwards."""
    stores: list[CoreStore] = []

    def build(**opts: Any) -> CoreStore:
        opts.setdefault("schema", schema)
        store = alkstore.open(pg_dsn, **opts)
        assert isinstance(store, CoreStore)
        stores.append(store)
        return store

    yield build
    for store in stores:
        store.close()


@pytest.fixture
def admin(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A separate autocommit connection for looking at the database from outside."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def private_pg() -> Iterator[LocalPostgres]:
    """A throwaway server of the test module's own, for tests that stop it or change
    its configuration (never the session's shared server)."""
    with LocalPostgres() as pg:
        yield pg


@pytest.fixture
def running_pg(private_pg: LocalPostgres) -> Iterator[LocalPostgres]:
    """The module's private server, up at the start and the end of each test."""
    private_pg.start()
    yield private_pg
    private_pg.start()


@pytest.fixture(scope="module")
def pgbouncer(private_pg: LocalPostgres) -> Iterator[LocalPgBouncer]:
    """A real PgBouncer (``pool_mode = transaction``) on loopback in front of the module's
    private server; stopped after the module."""
    with LocalPgBouncer(private_pg.dsn, pool_mode="transaction") as bouncer:
        yield bouncer


@pytest.fixture(autouse=True)
def _no_child_outlives_its_test() -> Iterator[None]:
    """A failing assert must not leave spawned workers behind (or hang the run)."""
    yield
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(5)
