"""The engine's tables share a schema with anyone's: every name is ``alkstore_...``,
system schemas are refused, and a store of alkstore 0.1.0 (unprefixed names) is
renamed in place when it opens."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pg_helpers import ENGINE_TABLES, VERSIONS

import alkstore
from alkstore import InvalidOptions
from alkstore_postgres import SchemaNotMigrated
from alkstore_postgres.testing.server import LocalPostgres

PREFIXED_TABLES = ENGINE_TABLES

# -- alkstore 0.1.0's layout, as its migrations 1 and 2 created it (a copy: the
# package no longer has these names anywhere) ---------------------------------------

V010_MIGRATIONS_TABLE = """
CREATE TABLE {schema}.migrations (
    version integer PRIMARY KEY,
    description text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

V010_MIGRATION_1 = """
CREATE TABLE {schema}.jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue text COLLATE "C" NOT NULL,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'processing')),
    payload text NOT NULL,
    priority integer NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    created_at bigint NOT NULL,
    run_at bigint NOT NULL,
    claimed_at bigint,
    deadline bigint,
    expires_at bigint,
    worker_id text COLLATE "C",
    visibility_timeout_s bigint NOT NULL,
    backoff_base_s bigint NOT NULL,
    dead_letter_retention_s bigint,
    CHECK ((state = 'processing') = (deadline IS NOT NULL))
);
CREATE INDEX jobs_pending_claim
    ON {schema}.jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX jobs_processing_deadline
    ON {schema}.jobs (queue, deadline) WHERE state = 'processing';
CREATE INDEX jobs_expiring
    ON {schema}.jobs (queue, expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE {schema}.dead_jobs (
    id bigint PRIMARY KEY,
    queue text COLLATE "C" NOT NULL,
    payload text NOT NULL,
    priority integer NOT NULL,
    attempts integer NOT NULL,
    max_attempts integer NOT NULL,
    created_at bigint NOT NULL,
    run_at bigint NOT NULL,
    claimed_at bigint,
    expires_at bigint,
    worker_id text COLLATE "C",
    visibility_timeout_s bigint NOT NULL,
    backoff_base_s bigint NOT NULL,
    dead_letter_retention_s bigint,
    last_error text NOT NULL,
    died_at bigint NOT NULL
);
CREATE INDEX dead_jobs_retention
    ON {schema}.dead_jobs (queue, (died_at + dead_letter_retention_s))
    WHERE dead_letter_retention_s IS NOT NULL;
CREATE TABLE {schema}.locks (
    name text COLLATE "C" PRIMARY KEY,
    owner text COLLATE "C" NOT NULL,
    expires_at bigint NOT NULL
);
INSERT INTO {schema}.migrations (version, description)
    VALUES (1, 'queues (live and dead jobs) and locks');
"""

V010_MIGRATION_2 = """
CREATE TABLE {schema}.schedules (
    name text COLLATE "C" PRIMARY KEY,
    spec text NOT NULL,
    queue text COLLATE "C" NOT NULL,
    payload text NOT NULL,
    priority integer NOT NULL,
    max_attempts integer,
    expires_s bigint,
    interval_s bigint NOT NULL,
    next_fire_at bigint NOT NULL
);
CREATE INDEX schedules_due ON {schema}.schedules (next_fire_at, name);
CREATE TABLE {schema}.streams (
    stream text COLLATE "C" PRIMARY KEY,
    last_offset bigint NOT NULL
);
CREATE TABLE {schema}.stream_events (
    stream text COLLATE "C" NOT NULL,
    event_offset bigint NOT NULL,
    payload text NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (stream, event_offset)
);
CREATE TABLE {schema}.stream_consumers (
    stream text COLLATE "C" NOT NULL,
    consumer text COLLATE "C" NOT NULL,
    committed_offset bigint NOT NULL,
    PRIMARY KEY (stream, consumer)
);
CREATE TABLE {schema}.messages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel text NOT NULL,
    payload text NOT NULL,
    created_at bigint NOT NULL
);
INSERT INTO {schema}.migrations (version, description)
    VALUES (2, 'schedules, streams with consumer offsets, stored pub/sub messages');
"""

V010_JOB = """
INSERT INTO {schema}.jobs (queue, payload, priority, max_attempts, created_at, run_at,
                           visibility_timeout_s, backoff_base_s)
VALUES ('q', '"from 0.1.0"', 0, 3, 1, 1, 30, 1)
"""

# -- an application's own tables: a Laravel-style migrations table and a jobs table --

LARAVEL_MIGRATIONS = """
CREATE TABLE {schema}.migrations (
    id serial PRIMARY KEY, migration varchar(255) NOT NULL, batch integer NOT NULL
);
INSERT INTO {schema}.migrations (migration, batch)
    VALUES ('2014_10_12_000000_create_users_table', 1);
"""

APP_TABLES = (
    """
CREATE TABLE {schema}.jobs (id serial PRIMARY KEY, title text NOT NULL);
INSERT INTO {schema}.jobs (title) VALUES ('plumber');
"""
    + LARAVEL_MIGRATIONS
)


def _run(conn: psycopg.Connection[Any], script: str, schema: str) -> None:
    conn.execute(script.format(schema=f'"{schema}"').encode())


def _build_v010(conn: psycopg.Connection[Any], schema: str, *, version: int = 2) -> None:
    conn.execute(f'CREATE SCHEMA "{schema}"'.encode())
    _run(conn, V010_MIGRATIONS_TABLE, schema)
    _run(conn, V010_MIGRATION_1, schema)
    if version >= 2:
        _run(conn, V010_MIGRATION_2, schema)
    _run(conn, V010_JOB, schema)


def _tables(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
    ).fetchall()
    return {row[0] for row in rows}


def _layout(conn: psycopg.Connection[Any], schema: str) -> set[tuple[str, ...]]:
    """Every relation (table, index, sequence) and constraint of ``schema``, by name."""
    relations = conn.execute(
        "SELECT relname, relkind::text FROM pg_class"
        " WHERE relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = %s)",
        (schema,),
    ).fetchall()
    constraints = conn.execute(
        "SELECT con.conname, rel.relname"
        " FROM pg_constraint AS con JOIN pg_class AS rel ON rel.oid = con.conrelid"
        " WHERE con.connamespace = (SELECT oid FROM pg_namespace WHERE nspname = %s)",
        (schema,),
    ).fetchall()
    return {("relation", *row) for row in relations} | {("constraint", *row) for row in constraints}


def _app_rows(conn: psycopg.Connection[Any], schema: str) -> list[tuple[Any, ...]]:
    return [
        *conn.execute(f'SELECT id, title FROM "{schema}".jobs ORDER BY id').fetchall(),
        *conn.execute(f'SELECT * FROM "{schema}".migrations ORDER BY id').fetchall(),
    ]


@pytest.mark.parametrize("schema", ["information_schema", "pg_catalog", "pg_toast"])
def test_a_system_schema_is_refused(pg_dsn: str, schema: str) -> None:
    with pytest.raises(InvalidOptions, match="system schema"):
        alkstore.open(pg_dsn, schema=schema)


def test_the_public_schema_is_shared_with_the_applications_own_tables(
    private_pg: LocalPostgres,
) -> None:
    # A private server: the test fills its public schema.
    with psycopg.connect(private_pg.dsn, autocommit=True) as app:
        _run(app, APP_TABLES, "public")
        before = _app_rows(app, "public")
        with alkstore.open(private_pg.dsn, schema="public") as store:
            queue = store.queue("q")
            job_id = queue.enqueue("work")
            handle = queue.claim("w")
            assert handle is not None
            assert handle.id == job_id
            assert handle.ack()
        with alkstore.open(private_pg.dsn, schema="public") as reopened:
            assert reopened.queue("q").enqueue("more") > job_id
        assert _app_rows(app, "public") == before
        assert _tables(app, "public") == PREFIXED_TABLES | {"jobs", "migrations"}


def test_a_store_of_alkstore_0_1_0_is_renamed_in_place_keeping_its_jobs(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    _build_v010(admin, schema)
    with alkstore.open(pg_dsn, schema=schema) as store:
        handle = store.queue("q").claim("w")
        assert handle is not None
        assert handle.payload == "from 0.1.0"
        assert store.queue("q").enqueue("next") > handle.id  # the id sequence came along
    assert _tables(admin, schema) == PREFIXED_TABLES


def test_a_renamed_store_has_exactly_the_layout_of_a_new_one(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    _build_v010(admin, schema)
    alkstore.open(pg_dsn, schema=schema).close()
    new_schema = schema + "_new"
    try:
        alkstore.open(pg_dsn, schema=new_schema).close()
        assert _layout(admin, schema) == _layout(admin, new_schema)
    finally:
        admin.execute(f'DROP SCHEMA IF EXISTS "{new_schema}" CASCADE'.encode())


def test_a_store_of_the_first_release_is_renamed_then_migrated(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    _build_v010(admin, schema, version=1)
    with alkstore.open(pg_dsn, schema=schema) as store:
        handle = store.queue("q").claim("w")
        assert handle is not None
        assert handle.payload == "from 0.1.0"
        assert store.stream("s").append(1) == 1
    assert _tables(admin, schema) == PREFIXED_TABLES
    versions = admin.execute(
        f'SELECT version FROM "{schema}".alkstore_migrations ORDER BY version'
    ).fetchall()
    assert [v for (v,) in versions] == VERSIONS  # every migration since, in order


def test_migrate_false_on_a_store_of_alkstore_0_1_0_says_so_and_renames_nothing(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    _build_v010(admin, schema)
    before = _tables(admin, schema)
    with pytest.raises(SchemaNotMigrated, match=r"unprefixed tables of alkstore 0\.1\.0") as info:
        alkstore.open(pg_dsn, schema=schema, migrate=False)
    assert info.value.legacy_layout
    assert _tables(admin, schema) == before


def test_tables_beside_a_migrations_table_that_is_not_alkstores_are_never_renamed(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    # A jobs table exactly like 0.1.0's, but the migrations table is a framework's.
    admin.execute(f'CREATE SCHEMA "{schema}"'.encode())
    _run(admin, LARAVEL_MIGRATIONS, schema)
    _run(admin, V010_MIGRATION_1.split("INSERT INTO")[0], schema)
    with alkstore.open(pg_dsn, schema=schema) as store:
        assert store.queue("q").enqueue("fresh") == 1  # a new alkstore_jobs, not theirs
    assert _tables(admin, schema) == PREFIXED_TABLES | {"jobs", "dead_jobs", "locks", "migrations"}
    laravel = admin.execute(f'SELECT migration FROM "{schema}".migrations').fetchall()
    assert laravel == [("2014_10_12_000000_create_users_table",)]
