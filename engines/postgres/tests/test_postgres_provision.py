"""``provision()``: the conformance kit's only way to get a PostgreSQL store."""

from __future__ import annotations

import multiprocessing
import pickle
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import alkstore
from alkstore import EngineSpec
from alkstore_postgres import ENGINE
from alkstore_postgres.testing.provisioning import dsn_as_url
from alkstore_postgres.testing.server import DSN_ENV


@pytest.fixture
def shared_server(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point provision() at the session's server (as the nox sessions do)."""
    monkeypatch.setenv(DSN_ENV, pg_dsn)
    return pg_dsn


def _schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def test_provision_yields_a_fresh_schema_and_drops_it_afterwards(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    with ENGINE.provision() as spec:
        schema = spec.opts["schema"]
        assert not _schema_exists(admin, schema)
        with alkstore.open(spec.url, **spec.opts) as store:
            store.queue("q").enqueue("work")
        assert _schema_exists(admin, schema)
    assert not _schema_exists(admin, schema)


def test_two_provisioned_stores_are_isolated(shared_server: str) -> None:
    with ENGINE.provision() as first, ENGINE.provision() as second:
        assert first.opts["schema"] != second.opts["schema"]
        with (
            alkstore.open(first.url, **first.opts) as one,
            alkstore.open(second.url, **second.opts) as two,
        ):
            one.queue("q").enqueue("only in the first")
            assert two.queue("q").claim("w") is None


def test_provision_beside_yields_another_schema_of_the_same_database_and_drops_it(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    with ENGINE.provision() as spec, ENGINE.provision_beside(spec) as beside:
        schema = beside.opts["schema"]
        assert beside.url == spec.url
        assert schema != spec.opts["schema"]
        with (
            alkstore.open(spec.url, **spec.opts) as one,
            alkstore.open(beside.url, **beside.opts) as two,
        ):
            job_id = two.queue("q").enqueue("only beside")
            assert one.queue("q").get_job(job_id) is None
        assert _schema_exists(admin, schema)
    assert not _schema_exists(admin, schema)


def _enqueue_from_child(spec: EngineSpec) -> int:
    with alkstore.open(spec.url, **spec.opts) as store:
        return store.queue("q").enqueue("from a child process")


def test_a_child_process_reopens_the_same_store_from_the_spec(shared_server: str) -> None:
    with ENGINE.provision() as spec:
        assert pickle.loads(pickle.dumps(spec)) == spec
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            job_id = pool.apply(_enqueue_from_child, (spec,))
        with alkstore.open(spec.url, **spec.opts) as store:
            handle = store.queue("q").claim("parent")
            assert handle is not None
            assert (handle.id, handle.payload) == (job_id, "from a child process")


@pytest.mark.parametrize(
    "dsn",
    [
        "host=127.0.0.1 port=5433 user=postgres dbname=jobs",
        "host=/tmp/sockets user=app password='p@ss word' dbname=app sslmode=disable",
        "dbname=local",
    ],
)
def test_key_value_dsn_becomes_an_equivalent_url(dsn: str) -> None:
    url = dsn_as_url(dsn)
    assert url.startswith("postgresql://")
    assert conninfo_to_dict(url) == conninfo_to_dict(dsn)


def test_url_dsn_is_kept_as_is() -> None:
    url = "postgresql://postgres@127.0.0.1:5432/postgres"
    assert dsn_as_url(url) == url


def test_native_connection_factory_opens_caller_owned_connections(shared_server: str) -> None:
    with ENGINE.provision() as spec:
        connect = ENGINE.native_connection_factory(spec)
        first, second = connect(), connect()
        try:
            assert isinstance(first, psycopg.Connection)
            assert first is not second
            assert not first.autocommit  # its first statement opens the caller's transaction
        finally:
            first.close()
            second.close()
