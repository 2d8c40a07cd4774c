"""Upgrading a store made by the previous release (migrations 1 and 2) in place: its
live and dead jobs gain an empty error history and stay usable under the ops profile.

The previous release's DDL is copied here as it shipped, so this test keeps
checking the upgrade of real v2 schemas whatever later edits do to ``migrations``."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from pg_helpers import VERSIONS, StoreFactory

from alkstore.values import JobState
from alkstore_postgres.statements import render

RELEASED_V2_SCHEMA = (
    """
    CREATE TABLE {schema}.alkstore_jobs (
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
    )
    """,
    """
    CREATE INDEX alkstore_jobs_pending_claim
        ON {schema}.alkstore_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending'
    """,
    """
    CREATE INDEX alkstore_jobs_processing_deadline
        ON {schema}.alkstore_jobs (queue, deadline) WHERE state = 'processing'
    """,
    """
    CREATE INDEX alkstore_jobs_expiring
        ON {schema}.alkstore_jobs (queue, expires_at) WHERE expires_at IS NOT NULL
    """,
    """
    CREATE TABLE {schema}.alkstore_dead_jobs (
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
    )
    """,
    """
    CREATE INDEX alkstore_dead_jobs_retention
        ON {schema}.alkstore_dead_jobs (queue, (died_at + dead_letter_retention_s))
        WHERE dead_letter_retention_s IS NOT NULL
    """,
    """
    CREATE TABLE {schema}.alkstore_locks (
        name text COLLATE "C" PRIMARY KEY,
        owner text COLLATE "C" NOT NULL,
        expires_at bigint NOT NULL
    )
    """,
    """
    CREATE TABLE {schema}.alkstore_schedules (
        name text COLLATE "C" PRIMARY KEY,
        spec text NOT NULL,
        queue text COLLATE "C" NOT NULL,
        payload text NOT NULL,
        priority integer NOT NULL,
        max_attempts integer,
        expires_s bigint,
        interval_s bigint NOT NULL,
        next_fire_at bigint NOT NULL
    )
    """,
    """
    CREATE INDEX alkstore_schedules_due ON {schema}.alkstore_schedules (next_fire_at, name)
    """,
    """
    CREATE TABLE {schema}.alkstore_streams (
        stream text COLLATE "C" PRIMARY KEY,
        last_offset bigint NOT NULL
    )
    """,
    """
    CREATE TABLE {schema}.alkstore_stream_events (
        stream text COLLATE "C" NOT NULL,
        event_offset bigint NOT NULL,
        payload text NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY (stream, event_offset)
    )
    """,
    """
    CREATE TABLE {schema}.alkstore_stream_consumers (
        stream text COLLATE "C" NOT NULL,
        consumer text COLLATE "C" NOT NULL,
        committed_offset bigint NOT NULL,
        PRIMARY KEY (stream, consumer)
    )
    """,
    """
    CREATE TABLE {schema}.alkstore_messages (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel text NOT NULL,
        payload text NOT NULL,
        created_at bigint NOT NULL
    )
    """,
    """
    CREATE TABLE {schema}.alkstore_migrations (
        version integer PRIMARY KEY,
        description text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )
    """,
)
"""Every table of a v2 schema, as the previous release created it (``{schema}``
the quoted schema), then its migrations table."""

RECORD_V1_AND_V2 = """
INSERT INTO {schema}.alkstore_migrations (version, description)
VALUES (1, 'queues (live and dead jobs) and locks'),
       (2, 'schedules, streams with consumer offsets, stored pub/sub messages')
"""

INSERT_PENDING = """
INSERT INTO {schema}.alkstore_jobs (
    queue, payload, priority, max_attempts, created_at, run_at, visibility_timeout_s,
    backoff_base_s
)
VALUES ('q', '"pending"', 0, 3, 1, 1, 30, 1)
RETURNING id
"""

INSERT_DEAD = """
INSERT INTO {schema}.alkstore_dead_jobs (
    id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
    visibility_timeout_s, backoff_base_s, last_error, died_at
)
VALUES (%(id)s, 'q', '"dead"', 5, 3, 3, 1, 1, 30, 1, 'max attempts exceeded', 2)
"""
DEAD_ID = 1000


@pytest.fixture
def v2_schema(admin: psycopg.Connection[Any], schema: str) -> tuple[int, int]:
    """A v2 schema holding a pending job and a dead one: their ids."""
    admin.execute(f'CREATE SCHEMA "{schema}"')
    with admin.transaction():
        for template in (*RELEASED_V2_SCHEMA, RECORD_V1_AND_V2):
            admin.execute(render(template, schema))
        inserted = admin.execute(render(INSERT_PENDING, schema)).fetchone()
        admin.execute(render(INSERT_DEAD, schema), {"id": DEAD_ID})
    assert inserted is not None
    return inserted[0], DEAD_ID


def test_a_v2_schema_is_upgraded_in_place_keeping_its_jobs(
    open_store: StoreFactory,
    admin: psycopg.Connection[Any],
    schema: str,
    v2_schema: tuple[int, int],
) -> None:
    pending_id, dead_id = v2_schema
    queue = open_store().queue("q")

    versions = admin.execute(
        f'SELECT version FROM "{schema}".alkstore_migrations ORDER BY version'
    ).fetchall()
    assert [v for (v,) in versions] == VERSIONS
    pending, dead = queue.get_job(pending_id), queue.get_job(dead_id)
    assert pending is not None
    assert dead is not None
    assert (pending.payload, pending.errors, pending.redriven_from) == ("pending", (), None)
    assert (dead.state, dead.payload, dead.errors) == (JobState.DEAD, "dead", ())


def test_an_upgraded_schema_takes_every_operation(
    open_store: StoreFactory, v2_schema: tuple[int, int]
) -> None:
    pending_id, dead_id = v2_schema
    queue = open_store().queue("q")

    stats = queue.stats()
    assert (stats.ready, stats.dead) == (1, 1)
    handle = queue.claim("w")
    assert handle is not None
    assert handle.id == pending_id
    assert handle.retry("boom", delay=0)
    retried = queue.get_job(pending_id)
    assert retried is not None
    assert [e.error for e in retried.errors] == ["boom"]
    (new_id,) = queue.redrive()
    redriven = queue.get_job(new_id)
    assert redriven is not None
    assert (redriven.payload, redriven.priority, redriven.redriven_from) == ("dead", 5, dead_id)
    assert queue.pause()
    assert queue.claim("w") is None
