"""``provision()``: the conformance kit's only way to get a PostgreSQL store, and the
reuse of emptied schemas behind it."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

import alkstore
from alkstore import EngineSpec, EnqueueOpts, QueueOpts
from alkstore_postgres import ENGINE
from alkstore_postgres.testing.provisioning import SCHEMA_PREFIX, dsn_as_url
from alkstore_postgres.testing.reuse import LOCK_WAIT
from alkstore_postgres.testing.server import DSN_ENV


@pytest.fixture
def shared_server(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point provision() at the session's server (as the nox sessions do)."""
    monkeypatch.setenv(DSN_ENV, pg_dsn)
    return pg_dsn


def _schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def _rows_outside_migrations(conn: psycopg.Connection[Any], schema: str) -> int:
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace"
            " AND relkind = 'r' AND relname <> 'alkstore_migrations'",
            (schema,),
        )
    ]
    assert len(tables) > 10  # every table the migrations build
    counts = [
        conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, t)))
        for t in tables
    ]
    return sum(row.fetchone()[0] for row in counts)  # type: ignore[index]


def _use_every_kind_of_row(store: alkstore.Store) -> int:
    """Writes through every profile's tables; the first job's id."""
    queue = store.queue("q")
    first = queue.enqueue("work")
    queue.enqueue("unique", EnqueueOpts(unique="k", limit_key="tenant"))
    handle = queue.claim("w")
    assert handle is not None
    handle.ack()
    doomed = store.queue("dead", QueueOpts(max_attempts=1)).enqueue("doomed")
    claimed = store.queue("dead").claim("w")
    assert claimed is not None
    assert claimed.id == doomed
    claimed.fail("on purpose")
    assert store.lock("l").acquire("owner", 60)
    store.schedule("every-minute", "@every 60s", "q", "tick")
    store.stream("s").append({"n": 1})
    store.notify("topic", "hello")
    store.queue("paused").pause()
    return first


def test_provision_unopened_yields_a_schema_that_does_not_exist_yet(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    with ENGINE.provision_unopened() as spec:
        schema = spec.opts["schema"]
        assert not _schema_exists(admin, schema)
        with alkstore.open(spec.url, **spec.opts) as store:
            store.queue("q").enqueue("work")
        assert _schema_exists(admin, schema)


def test_a_finished_provision_empties_its_store_for_the_next_one(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    with ENGINE.provision() as spec, alkstore.open(spec.url, **spec.opts) as store:
        first_id = _use_every_kind_of_row(store)
    assert _rows_outside_migrations(admin, spec.opts["schema"]) == 0
    with ENGINE.provision() as again:
        assert again.opts["schema"] == spec.opts["schema"]
        with alkstore.open(again.url, **again.opts) as store:
            assert store.queue("q").jobs() == []
            assert store.queue("dead").jobs() == []
            assert store.schedules() == []
            assert store.queue("paused").paused() is False
            assert store.lock("l").acquire("someone else", 60)
            assert store.queue("q").enqueue("work") == first_id  # ids start over


def test_a_store_whose_schema_a_test_altered_is_dropped_not_reused(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    with ENGINE.provision() as spec, alkstore.open(spec.url, **spec.opts) as store:
        store.queue("q").enqueue("work")
        schema = spec.opts["schema"]
        admin.execute(
            sql.SQL("ALTER TABLE {} ADD COLUMN extra integer").format(
                sql.Identifier(schema, "alkstore_jobs")
            )
        )
    assert not _schema_exists(admin, schema)
    with ENGINE.provision() as again:
        assert again.opts["schema"] != schema


def test_a_store_claiming_a_migration_this_engine_lacks_is_dropped_not_reused(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    with ENGINE.provision() as spec, alkstore.open(spec.url, **spec.opts):
        schema = spec.opts["schema"]
        admin.execute(
            sql.SQL("INSERT INTO {} (version, description) VALUES (999, 'future')").format(
                sql.Identifier(schema, "alkstore_migrations")
            )
        )
    assert not _schema_exists(admin, schema)


def test_a_store_another_session_still_holds_is_dropped_once_it_lets_go(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    holding = threading.Event()

    def hold(schema: str) -> None:
        with psycopg.connect(shared_server) as conn:
            conn.execute(
                sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(
                    sql.Identifier(schema, "alkstore_jobs")
                )
            )
            holding.set()
            time.sleep(float(LOCK_WAIT.rstrip("s")) + 1)

    with ENGINE.provision() as spec, alkstore.open(spec.url, **spec.opts) as store:
        store.queue("q").enqueue("work")
        schema = spec.opts["schema"]
        holder = threading.Thread(target=hold, args=(schema,))
        holder.start()
        assert holding.wait(10)
    holder.join()
    assert not _schema_exists(admin, schema)


def test_emptied_schemas_are_dropped_when_their_process_exits(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    script = (
        "import alkstore\n"
        "from alkstore_postgres import ENGINE\n"
        "for _ in range(2):\n"
        "    with ENGINE.provision() as spec, alkstore.open(spec.url, **spec.opts) as s:\n"
        "        s.queue('q').enqueue('work')\n"
        "print(spec.opts['schema'])\n"
    )
    env = {**os.environ, DSN_ENV: shared_server}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    schema = done.stdout.strip()
    assert schema.startswith(SCHEMA_PREFIX)
    leftovers = admin.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone()
    assert leftovers == (0,)


def test_a_store_never_opened_leaves_no_schema_behind(
    shared_server: str, admin: psycopg.Connection[Any]
) -> None:
    with ENGINE.provision_unopened() as spec:
        schema = spec.opts["schema"]
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


def test_provision_beside_yields_another_schema_of_the_same_database(
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
