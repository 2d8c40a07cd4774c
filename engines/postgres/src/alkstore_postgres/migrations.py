"""Versioned, idempotent schema migrations, safe when many processes open at once.

Every table and index the engine creates is named ``alkstore_...``, so the
schema may be shared with an application's own tables (``public``). The schema
records the versions applied in ``<schema>.alkstore_migrations`` -- the only
table the version reader reads. Opening a store reads that version (cheap, no
lock) and returns at once when it is current. Otherwise the upgrade runs in ONE transaction under a
transaction-scoped advisory lock keyed by the schema name: concurrent openers
queue on the lock, and each re-reads the version once it holds it (from the
catalogs as of that moment, not from its caches), so exactly one of them
applies each migration and the rest find nothing left to do. DDL is
transactional in PostgreSQL, so a failed upgrade leaves no half-built schema.

Migrations are append-only and additive: a released migration is never edited
(beyond the prefix of its names, which the upgrade from alkstore 0.1.0 in
``legacy`` applies to existing schemas), and a schema newer than this code
knows is accepted (rolling deploys keep working). New tables arrive as new
versions at the end of ``MIGRATIONS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import sql as pgsql

from .errors import SchemaNotMigrated
from .legacy import legacy_version, rename_legacy_layout
from .statements import (
    BURY_FIRST_MIGRATION,
    CLAIM_LIMITED_FUNCTION,
    CLAIM_LIMITED_FUNCTION_V19,
    CLAIM_LIMITED_FUNCTION_V21,
    CLAIM_LIMITED_FUNCTION_V22,
    LIMIT_ROW_RATE_MIGRATION,
    SLOT_WAITED_MIGRATION,
    render,
)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]
    """Templates naming the schema as ``{schema}``, run in order."""


# Names (queues, workers, locks) are compared for equality only: COLLATE "C" keeps
# their index comparisons byte-wise, whatever the database's locale.
V1_QUEUES_AND_LOCKS = Migration(
    1,
    "queues (live and dead jobs) and locks",
    (
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
        # The claim path, one partial index per claimable state, each in claim order.
        """
        CREATE INDEX alkstore_jobs_pending_claim
            ON {schema}.alkstore_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending'
        """,
        """
        CREATE INDEX alkstore_jobs_processing_deadline
            ON {schema}.alkstore_jobs (queue, deadline) WHERE state = 'processing'
        """,
        # sweep_expired: only rows that can expire are indexed.
        """
        CREATE INDEX alkstore_jobs_expiring
            ON {schema}.alkstore_jobs (queue, expires_at) WHERE expires_at IS NOT NULL
        """,
        # Dead rows keep their live id; the claim path never reads this table.
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
        # purge_dead: the retention deadline itself, for rows that have one.
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
    ),
)

V2_SCHEDULES_STREAMS_MESSAGES = Migration(
    2,
    "schedules, streams with consumer offsets, stored pub/sub messages",
    (
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
        # The tick's due scan and the leader's next boundary, both in index order.
        """
        CREATE INDEX alkstore_schedules_due ON {schema}.alkstore_schedules (next_fire_at, name)
        """,
        # One counter row per stream: offsets are allocated by updating it (its row
        # lock orders appenders until commit), and it outlives trimmed events, so an
        # offset is never handed out twice.
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
        # Pub/sub messages too large for a NOTIFY payload; the NOTIFY names the id.
        """
        CREATE TABLE {schema}.alkstore_messages (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            channel text NOT NULL,
            payload text NOT NULL,
            created_at bigint NOT NULL
        )
        """,
    ),
)

V3_OPERATIONS = Migration(
    3,
    "operations: error history, redrive origin, paused queues, dead rows by age",
    (
        # Nullable columns without a default: catalog-only changes, no table rewrite,
        # so an upgrade does not lock a large queue table for long. The history is one
        # JSON text per entry (``[attempt, at, error]``): appending and keeping the
        # latest entries is array slicing, never a parse of the whole history, and a
        # JSON-escaped error is safe in text (``jsonb`` would refuse ``\u0000``).
        """
        ALTER TABLE {schema}.alkstore_jobs
            ADD COLUMN errors text[],
            ADD COLUMN redriven_from bigint
        """,
        """
        ALTER TABLE {schema}.alkstore_dead_jobs
            ADD COLUMN errors text[],
            ADD COLUMN redriven_from bigint
        """,
        # A row per paused queue, read by every claim (one primary-key probe).
        """
        CREATE TABLE {schema}.alkstore_paused_queues (
            queue text COLLATE "C" PRIMARY KEY
        )
        """,
        # Dead rows by queue and age: redrive's oldest first, purges by age, the dead
        # count of stats and the list of queues, none of them reading the rows.
        """
        CREATE INDEX alkstore_dead_jobs_died
            ON {schema}.alkstore_dead_jobs (queue, died_at, id)
        """,
    ),
)

V4_SNOOZES = Migration(
    4,
    "snooze: how many times each job was snoozed",
    (
        # A constant default is catalog-only since PostgreSQL 11: no table rewrite.
        # Every row written before, and every insert that leaves it out (enqueue,
        # redrive), counts 0; a move to dead copies it with the row (columns.MOVED).
        """
        ALTER TABLE {schema}.alkstore_jobs
            ADD COLUMN snoozes integer NOT NULL DEFAULT 0
        """,
        """
        ALTER TABLE {schema}.alkstore_dead_jobs
            ADD COLUMN snoozes integer NOT NULL DEFAULT 0
        """,
    ),
)

V5_CRON_SCHEDULES = Migration(
    5,
    "cron schedules: each schedule's time zone and catch-up policy",
    (
        # Constant defaults and a dropped NOT NULL are catalog-only changes: every
        # schedule written before reads 'UTC' and 'all' (what it always was), and a
        # cron schedule has no interval.
        """
        ALTER TABLE {schema}.alkstore_schedules
            ADD COLUMN timezone text NOT NULL DEFAULT 'UTC',
            ADD COLUMN catch_up text NOT NULL DEFAULT 'all',
            ALTER COLUMN interval_s DROP NOT NULL
        """,
    ),
)

V6_UNIQUE_JOBS = Migration(
    6,
    "unique jobs: each job's unique key and its hold, one unique index over live holds",
    (
        # unique_key: the key a job was enqueued with, shown for its whole life;
        # unique_hold: that key while the job holds it (NULL once its hold passed, or
        # on a dead row that does not keep it); hold_until: when the hold ends
        # (created_at + period; NULL: never while the job lives); hold_dead: whether
        # a dead job keeps it. Nullable columns and a constant default: catalog-only
        # changes, no table rewrite.
        """
        ALTER TABLE {schema}.alkstore_jobs
            ADD COLUMN unique_key text COLLATE "C",
            ADD COLUMN unique_hold text COLLATE "C",
            ADD COLUMN hold_until bigint,
            ADD COLUMN hold_dead boolean NOT NULL DEFAULT false
        """,
        """
        ALTER TABLE {schema}.alkstore_dead_jobs
            ADD COLUMN unique_key text COLLATE "C",
            ADD COLUMN unique_hold text COLLATE "C",
            ADD COLUMN hold_until bigint,
            ADD COLUMN hold_dead boolean NOT NULL DEFAULT false
        """,
        # The arbiter: at most one live row of a queue holds a key. Partial, so a
        # plain job is no entry and a statement leaving unique_hold alone (a claim,
        # a heartbeat, a retry) never touches it (HOT updates stay possible).
        """
        CREATE UNIQUE INDEX alkstore_jobs_unique
            ON {schema}.alkstore_jobs (queue, unique_hold) WHERE unique_hold IS NOT NULL
        """,
        # Dead rows keeping their key. Not unique: a dead hold that passed is only
        # ignored, never cleared, so a later holder may die holding the key too.
        """
        CREATE INDEX alkstore_dead_jobs_unique
            ON {schema}.alkstore_dead_jobs (queue, unique_hold) WHERE unique_hold IS NOT NULL
        """,
        # The unique enqueue of one key, one call (one round trip, one statement to
        # retry; alkstore_insert_unique below runs it per key of a batch). It is a
        # function because it needs what one SQL statement cannot have: a
        # fresh look at the dead table *after* its insert. A holder whose move to
        # the dead table (keeping its key) committed while the insert waited on its
        # live row is invisible to the insert's own snapshot; in READ COMMITTED
        # each statement of a VOLATILE function takes a new snapshot, so the check
        # that follows the insert sees it, and the new row is taken back. Every
        # other holder is found by the unique index itself (ON CONFLICT), never by
        # a read followed by a write.
        """
        CREATE FUNCTION {schema}.alkstore_insert_unique_one(
            p_queue text, p_priority integer, p_created_at bigint, p_run_at bigint,
            p_expires_at bigint, p_max_attempts integer, p_visibility_timeout_s bigint,
            p_backoff_base_s bigint, p_dead_letter_retention_s bigint,
            p_hold_until bigint, p_hold_dead boolean, p_payload text, p_key text,
            OUT job_id bigint, OUT duplicate boolean)
        LANGUAGE plpgsql VOLATILE
        AS $alkstore$
        DECLARE
            round integer;
            inserted bigint;
            holder bigint;
            held_until bigint;
        BEGIN
            FOR round IN 1 .. 10 LOOP
                INSERT INTO {schema}.alkstore_jobs AS job (
                    payload, queue, priority, created_at, run_at, expires_at,
                    max_attempts, visibility_timeout_s, backoff_base_s,
                    dead_letter_retention_s, unique_key, unique_hold, hold_until, hold_dead)
                VALUES (
                    p_payload, p_queue, p_priority, p_created_at, p_run_at, p_expires_at,
                    p_max_attempts, p_visibility_timeout_s, p_backoff_base_s,
                    p_dead_letter_retention_s, p_key, p_key, p_hold_until, p_hold_dead)
                ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
                RETURNING job.id INTO inserted;
                IF inserted IS NOT NULL THEN
                    SELECT dead.id INTO holder FROM {schema}.alkstore_dead_jobs AS dead
                    WHERE dead.queue = p_queue AND dead.unique_hold = p_key
                      AND (dead.hold_until IS NULL OR dead.hold_until > p_created_at)
                    LIMIT 1;
                    IF holder IS NULL THEN
                        job_id := inserted;
                        duplicate := false;
                    ELSE
                        DELETE FROM {schema}.alkstore_jobs WHERE id = inserted;
                        job_id := holder;
                        duplicate := true;
                    END IF;
                    RETURN;
                END IF;
                SELECT live.id, live.hold_until INTO holder, held_until
                FROM {schema}.alkstore_jobs AS live
                WHERE live.queue = p_queue AND live.unique_hold = p_key;
                IF holder IS NOT NULL THEN
                    IF held_until IS NULL OR held_until > p_created_at THEN
                        job_id := holder;
                        duplicate := true;
                        RETURN;
                    END IF;
                    -- Its hold passed: it gives the key up (keeping unique_key), and
                    -- the insert is tried again.
                    UPDATE {schema}.alkstore_jobs SET unique_hold = NULL
                    WHERE id = holder AND unique_hold = p_key;
                ELSE
                    -- The live holder went meanwhile: to the dead table, keeping the key?
                    SELECT dead.id INTO holder FROM {schema}.alkstore_dead_jobs AS dead
                    WHERE dead.queue = p_queue AND dead.unique_hold = p_key
                      AND (dead.hold_until IS NULL OR dead.hold_until > p_created_at)
                    LIMIT 1;
                    IF holder IS NOT NULL THEN
                        job_id := holder;
                        duplicate := true;
                        RETURN;
                    END IF;
                END IF;
            END LOOP;
            RAISE EXCEPTION 'alkstore: unique key % of queue % kept changing hands',
                p_key, p_queue USING ERRCODE = 'serialization_failure';
        END
        $alkstore$
        """,
        # Many keys of one enqueue_many, each as one key's call, in payload order.
        """
        CREATE FUNCTION {schema}.alkstore_insert_unique(
            p_queue text, p_priority integer, p_created_at bigint, p_run_at bigint,
            p_expires_at bigint, p_max_attempts integer, p_visibility_timeout_s bigint,
            p_backoff_base_s bigint, p_dead_letter_retention_s bigint,
            p_hold_until bigint, p_hold_dead boolean, p_payloads text[], p_keys text[])
        RETURNS TABLE (job_id bigint, duplicate boolean)
        LANGUAGE plpgsql VOLATILE
        AS $alkstore$
        BEGIN
            FOR item IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
                SELECT made.job_id, made.duplicate INTO job_id, duplicate
                FROM {schema}.alkstore_insert_unique_one(
                    p_queue, p_priority, p_created_at, p_run_at, p_expires_at,
                    p_max_attempts, p_visibility_timeout_s, p_backoff_base_s,
                    p_dead_letter_retention_s, p_hold_until, p_hold_dead,
                    p_payloads[item], p_keys[item]) AS made;
                RETURN NEXT;
            END LOOP;
        END
        $alkstore$
        """,
    ),
)

_ENQUEUE_UNIQUE_PARAMS = """
            p_queue text, p_priority integer, p_created_at bigint, p_run_at bigint,
            p_expires_at bigint, p_max_attempts integer, p_visibility_timeout_s bigint,
            p_backoff_base_s bigint, p_dead_letter_retention_s bigint,
            p_hold_until bigint, p_hold_dead boolean"""
"""The stamps and the hold of a unique enqueue, as migration 6's functions take them."""

V7_UNIQUE_ENQUEUE_FAST_PATH = Migration(
    7,
    "unique enqueue: the free key's insert without a record to build, a batch set-based",
    (
        # The lone unique enqueue as one scalar: the new job's id, or minus the id of
        # the job holding the key (ids are positive). Measured against migration 6's
        # alkstore_insert_unique_one called with its record and a lateral NOTIFY, this
        # spares the function scan and the join of every call. The free key, the
        # common case, is inlined: the insert (ON CONFLICT: the unique index decides),
        # then, in a new statement and so a new snapshot, the look at the dead table
        # that catches a holder whose move there committed while the insert waited.
        # A held key goes to alkstore_insert_unique_one, whose loop settles it.
        """
        CREATE FUNCTION {schema}.alkstore_enqueue_unique("""
        + _ENQUEUE_UNIQUE_PARAMS
        + """,
            p_payload text, p_key text, p_wake_channel text, p_topic text)
        RETURNS bigint
        LANGUAGE plpgsql VOLATILE
        AS $alkstore$
        DECLARE
            inserted bigint;
            holder bigint;
            made record;
        BEGIN
            INSERT INTO {schema}.alkstore_jobs AS job (
                payload, queue, priority, created_at, run_at, expires_at,
                max_attempts, visibility_timeout_s, backoff_base_s,
                dead_letter_retention_s, unique_key, unique_hold, hold_until, hold_dead)
            VALUES (
                p_payload, p_queue, p_priority, p_created_at, p_run_at, p_expires_at,
                p_max_attempts, p_visibility_timeout_s, p_backoff_base_s,
                p_dead_letter_retention_s, p_key, p_key, p_hold_until, p_hold_dead)
            ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
            RETURNING job.id INTO inserted;
            IF inserted IS NOT NULL THEN
                SELECT dead.id INTO holder FROM {schema}.alkstore_dead_jobs AS dead
                WHERE dead.queue = p_queue AND dead.unique_hold = p_key
                  AND (dead.hold_until IS NULL OR dead.hold_until > p_created_at)
                LIMIT 1;
                IF holder IS NOT NULL THEN
                    DELETE FROM {schema}.alkstore_jobs WHERE id = inserted;
                    RETURN -holder;
                END IF;
            ELSE
                SELECT * INTO made FROM {schema}.alkstore_insert_unique_one(
                    p_queue, p_priority, p_created_at, p_run_at, p_expires_at,
                    p_max_attempts, p_visibility_timeout_s, p_backoff_base_s,
                    p_dead_letter_retention_s, p_hold_until, p_hold_dead, p_payload, p_key);
                IF made.duplicate THEN
                    RETURN -made.job_id;
                END IF;
                inserted := made.job_id;
            END IF;
            IF p_topic IS NOT NULL THEN
                PERFORM pg_notify(p_wake_channel, p_topic);
            END IF;
            RETURN inserted;
        END
        $alkstore$
        """,
        # The keys of one enqueue_many (distinct), set-based: one insert of every row
        # (the held keys skipped by ON CONFLICT), then one look at the dead table for
        # the rows that went in (a new statement: a new snapshot, as above), then
        # alkstore_insert_unique_one for each key found held, the rare case. One
        # signed id per key, in key order, as alkstore_enqueue_unique gives it.
        """
        CREATE FUNCTION {schema}.alkstore_enqueue_unique_many("""
        + _ENQUEUE_UNIQUE_PARAMS
        + """,
            p_payloads text[], p_keys text[], p_wake_channel text, p_topic text)
        RETURNS SETOF bigint
        LANGUAGE plpgsql VOLATILE
        AS $alkstore$
        DECLARE
            made bigint[] := array_fill(NULL::bigint, ARRAY[coalesce(cardinality(p_keys), 0)]);
            hit record;
            fresh boolean := false;
        BEGIN
            FOR hit IN
                WITH inserted AS (
                    INSERT INTO {schema}.alkstore_jobs AS job (
                        payload, queue, priority, created_at, run_at, expires_at,
                        max_attempts, visibility_timeout_s, backoff_base_s,
                        dead_letter_retention_s, unique_key, unique_hold, hold_until,
                        hold_dead)
                    SELECT item.payload, p_queue, p_priority, p_created_at, p_run_at,
                        p_expires_at, p_max_attempts, p_visibility_timeout_s,
                        p_backoff_base_s, p_dead_letter_retention_s, item.key, item.key,
                        p_hold_until, p_hold_dead
                    FROM unnest(p_payloads, p_keys) WITH ORDINALITY
                        AS item (payload, key, position)
                    ORDER BY item.position
                    ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
                    RETURNING job.id, job.unique_hold
                )
                SELECT inserted.id, item.position
                FROM inserted
                JOIN unnest(p_keys) WITH ORDINALITY AS item (key, position)
                  ON item.key = inserted.unique_hold
            LOOP
                made[hit.position] := hit.id;
            END LOOP;
            FOR hit IN
                SELECT item.position, holder.id AS holder
                FROM unnest(p_keys) WITH ORDINALITY AS item (key, position)
                CROSS JOIN LATERAL (
                    SELECT dead.id FROM {schema}.alkstore_dead_jobs AS dead
                    WHERE dead.queue = p_queue AND dead.unique_hold = item.key
                      AND (dead.hold_until IS NULL OR dead.hold_until > p_created_at)
                    LIMIT 1
                ) AS holder
                WHERE made[item.position] IS NOT NULL
            LOOP
                DELETE FROM {schema}.alkstore_jobs WHERE id = made[hit.position];
                made[hit.position] := -hit.holder;
            END LOOP;
            FOR item IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
                IF made[item] IS NULL THEN
                    SELECT * INTO hit FROM {schema}.alkstore_insert_unique_one(
                        p_queue, p_priority, p_created_at, p_run_at, p_expires_at,
                        p_max_attempts, p_visibility_timeout_s, p_backoff_base_s,
                        p_dead_letter_retention_s, p_hold_until, p_hold_dead,
                        p_payloads[item], p_keys[item]);
                    made[item] := CASE WHEN hit.duplicate THEN -hit.job_id ELSE hit.job_id END;
                END IF;
                fresh := fresh OR made[item] > 0;
            END LOOP;
            IF fresh AND p_topic IS NOT NULL THEN
                PERFORM pg_notify(p_wake_channel, p_topic);
            END IF;
            RETURN QUERY SELECT id FROM unnest(made) AS id;
        END
        $alkstore$
        """,
    ),
)

V8_DECLARED_SCHEDULES = Migration(
    8,
    "declared schedules: the lease of each schedule a worker declares",
    (
        # NULL on every schedule written before and on every one store.schedule
        # writes (which never lapses): a nullable column, a catalog-only change. The
        # partial index is what a tick's removal of lapsed declarations reads; an
        # undeclared schedule is no entry.
        """
        ALTER TABLE {schema}.alkstore_schedules ADD COLUMN declared_until bigint
        """,
        """
        CREATE INDEX alkstore_schedules_declared
            ON {schema}.alkstore_schedules (declared_until)
            WHERE declared_until IS NOT NULL
        """,
    ),
)


V9_QUEUE_LIMITS = Migration(
    9,
    "queue limits: each limited queue's limits, the claim starts of rate-limited ones",
    (
        # A row per limited queue, beside the paused queues. Every claim probes it
        # (one primary-key probe); a claim of a limited queue locks its row FOR UPDATE
        # first, so claims of that queue serialise and never share a free slot.
        """
        CREATE TABLE {schema}.alkstore_queue_limits (
            queue text COLLATE "C" PRIMARY KEY,
            concurrency integer CHECK (concurrency >= 1),
            rate integer CHECK (rate >= 1),
            per_s integer CHECK (per_s >= 1),
            CHECK ((rate IS NULL) = (per_s IS NULL)),
            CHECK (concurrency IS NOT NULL OR rate IS NOT NULL)
        )
        """,
        # A rate-limited queue's claim starts: how many rows a claim took at its now.
        # Written by that claim, under the limit row's lock; older than the window,
        # deleted by the next claim.
        """
        CREATE TABLE {schema}.alkstore_claim_starts (
            queue text COLLATE "C" NOT NULL,
            started_at bigint NOT NULL,
            claims integer NOT NULL
        )
        """,
        """
        CREATE INDEX alkstore_claim_starts_window
            ON {schema}.alkstore_claim_starts (queue, started_at)
        """,
    ),
)


V10_FINISHED_JOBS = Migration(
    10,
    "finished jobs: each job's completed retention and the completed table",
    (
        # The stamp (NULL: an ack deletes the job, as before), on live rows and, so a
        # redrive keeps it, on dead ones. Nullable without a default: catalog-only.
        "ALTER TABLE {schema}.alkstore_jobs ADD COLUMN completed_retention_s bigint",
        "ALTER TABLE {schema}.alkstore_dead_jobs ADD COLUMN completed_retention_s bigint",
        # Acked jobs their queue keeps, same id; the claim path never reads this table,
        # so the live table and its claim indexes are as they were. No hold columns: a
        # completed job holds no unique key.
        """
        CREATE TABLE {schema}.alkstore_completed_jobs (
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
            errors text[],
            redriven_from bigint,
            snoozes integer NOT NULL DEFAULT 0,
            unique_key text COLLATE "C",
            completed_retention_s bigint NOT NULL,
            completed_at bigint NOT NULL,
            result text
        )
        """,
        # The sweep's purge: the retention deadline itself.
        """
        CREATE INDEX alkstore_completed_jobs_retention
            ON {schema}.alkstore_completed_jobs (queue, (completed_at + completed_retention_s))
        """,
        # A queue's completed rows in id order: pages, counts, the list of queues.
        """
        CREATE INDEX alkstore_completed_jobs_queue
            ON {schema}.alkstore_completed_jobs (queue, id)
        """,
    ),
)


V11_KEY_LIMITS = Migration(
    11,
    "per-key limits: each job's limit key, a queue's per-key limit and its turn's cursor",
    (
        # The key a per-key limit counts a job under (NULL: the key every job without
        # one shares), on live rows and, so a job keeps it for its whole life, on dead
        # and completed ones. Nullable without a default: catalog-only.
        'ALTER TABLE {schema}.alkstore_jobs ADD COLUMN limit_key text COLLATE "C"',
        'ALTER TABLE {schema}.alkstore_dead_jobs ADD COLUMN limit_key text COLLATE "C"',
        'ALTER TABLE {schema}.alkstore_completed_jobs ADD COLUMN limit_key text COLLATE "C"',
        # The limits row gains the per-key limit, the per-key rate (sharing per_s with
        # the queue's rate) and the key the queue's last claim served (where the next
        # claim's turn starts, read and written under the row's lock); a row may now
        # hold only per-key limits (migration 9's two table CHECKs, named by
        # PostgreSQL, are replaced).
        """
        ALTER TABLE {schema}.alkstore_queue_limits
            ADD COLUMN concurrency_per_key integer CHECK (concurrency_per_key >= 1),
            ADD COLUMN rate_per_key integer CHECK (rate_per_key >= 1),
            ADD COLUMN key_cursor text COLLATE "C",
            DROP CONSTRAINT alkstore_queue_limits_check,
            DROP CONSTRAINT alkstore_queue_limits_check1,
            ADD CONSTRAINT alkstore_queue_limits_window CHECK (
                (rate IS NULL AND rate_per_key IS NULL) = (per_s IS NULL)),
            ADD CONSTRAINT alkstore_queue_limits_some_limit CHECK (
                concurrency IS NOT NULL OR rate IS NOT NULL OR concurrency_per_key IS NOT NULL
                OR rate_per_key IS NOT NULL)
        """,
        # A per-key rate's claim starts: how many rows of a key ('' for the jobs without
        # one) a claim took at its now. Written by that claim, under the limit row's
        # lock; older than the window, deleted by the next one.
        """
        CREATE TABLE {schema}.alkstore_key_claim_starts (
            queue text COLLATE "C" NOT NULL,
            limit_key text COLLATE "C" NOT NULL,
            started_at bigint NOT NULL,
            claims integer NOT NULL
        )
        """,
        """
        CREATE INDEX alkstore_key_claim_starts_window
            ON {schema}.alkstore_key_claim_starts (queue, started_at)
        """,
    ),
)


V12_DASHBOARD_READS = Migration(
    12,
    "the dashboard's reads: a queue's pending rows in id order, the worker registry "
    "and its throughput counts",
    (
        # A queue page (q.jobs(PENDING, before_id=...)) was a walk of every pending
        # row of the queue through the claim index, then a sort: its cost grew with
        # the queue. Partial, so a claim (pending -> processing) and a heartbeat add
        # no entry to it: only an enqueue and a retry do. Built under the migration's
        # lock: on a large table the upgrade holds writes for the build.
        """
        CREATE INDEX alkstore_jobs_queue_pending
            ON {schema}.alkstore_jobs (queue, id) WHERE state = 'pending'
        """,
        # The worker registry (the workers profile): one row per worker id, read
        # whole (a fleet is small), its queues in the worker's order.
        """
        CREATE TABLE {schema}.alkstore_workers (
            id text COLLATE "C" PRIMARY KEY,
            host text NOT NULL,
            pid bigint NOT NULL,
            queues text[] NOT NULL,
            started_at bigint NOT NULL,
            last_seen bigint NOT NULL,
            lease_until bigint NOT NULL
        )
        """,
        # Jobs finished per queue and minute, added by workers' heartbeats (the ack
        # path writes nothing here); at most an hour of minutes is kept.
        """
        CREATE TABLE {schema}.alkstore_throughput (
            queue text COLLATE "C" NOT NULL,
            minute bigint NOT NULL,
            count bigint NOT NULL,
            PRIMARY KEY (queue, minute)
        )
        """,
    ),
)


# The columns a row keeps as it moves between the live, waiting and dead tables (as
# columns.MOVED, written out: a released migration never changes).
_V13_MOVED = """id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, redriven_from, snoozes, unique_key,
            completed_retention_s, limit_key, errors, has_dependents"""

V13_DEPENDENCIES = Migration(
    13,
    "job dependencies: the waiting table, its edges, and the release and cascade triggers",
    (
        # Whether some job waits for this one. A constant default: catalog-only.
        """ALTER TABLE {schema}.alkstore_jobs
            ADD COLUMN has_dependents boolean NOT NULL DEFAULT false""",
        """ALTER TABLE {schema}.alkstore_dead_jobs
            ADD COLUMN has_dependents boolean NOT NULL DEFAULT false""",
        # Jobs waiting for others, ids from the live table's identity; the claim path
        # and its indexes never read this table.
        """
        CREATE TABLE {schema}.alkstore_waiting_jobs (
            id bigint PRIMARY KEY,
            queue text COLLATE "C" NOT NULL,
            payload text NOT NULL,
            priority integer NOT NULL,
            attempts integer NOT NULL DEFAULT 0,
            max_attempts integer NOT NULL,
            created_at bigint NOT NULL,
            run_at bigint NOT NULL,
            claimed_at bigint,
            expires_at bigint,
            worker_id text COLLATE "C",
            visibility_timeout_s bigint NOT NULL,
            backoff_base_s bigint NOT NULL,
            dead_letter_retention_s bigint,
            errors text[],
            redriven_from bigint,
            snoozes integer NOT NULL DEFAULT 0,
            unique_key text COLLATE "C",
            completed_retention_s bigint,
            limit_key text COLLATE "C",
            has_dependents boolean NOT NULL DEFAULT false,
            finishes boolean NOT NULL DEFAULT false,
            waiting_on integer NOT NULL CHECK (waiting_on > 0)
        )
        """,
        "CREATE INDEX alkstore_waiting_jobs_queue ON {schema}.alkstore_waiting_jobs (queue, id)",
        """CREATE INDEX alkstore_waiting_jobs_expiry
            ON {schema}.alkstore_waiting_jobs (queue, expires_at) WHERE expires_at IS NOT NULL""",
        # One edge per job a waiting job still waits for.
        """
        CREATE TABLE {schema}.alkstore_job_dependencies (
            depends_on bigint NOT NULL,
            job_id bigint NOT NULL,
            PRIMARY KEY (depends_on, job_id)
        )
        """,
        """CREATE INDEX alkstore_job_dependencies_dependent
            ON {schema}.alkstore_job_dependencies (job_id)""",
        # `dependency` will never complete. The fan-ins waiting for it (finishes) count
        # it finished, as a completion does (below). The other waiting jobs with an
        # edge to it go to dead with `error`: their rows and edges in one statement,
        # whose inserts into the dead table fire the trigger below for the next level.
        f"""
        CREATE FUNCTION {{schema}}.alkstore_bury_dependents(
            dependency bigint, error text, at bigint) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM {{schema}}.alkstore_count_finished(dependency, true);
            WITH gone AS (
                DELETE FROM {{schema}}.alkstore_waiting_jobs
                WHERE NOT finishes
                  AND id IN (SELECT job_id FROM {{schema}}.alkstore_job_dependencies
                             WHERE depends_on = dependency)
                RETURNING *
            ), edges AS (
                DELETE FROM {{schema}}.alkstore_job_dependencies
                WHERE job_id IN (SELECT id FROM gone)
            )
            -- In id order: each one's trigger buries its own in turn, level by level.
            INSERT INTO {{schema}}.alkstore_dead_jobs ({_V13_MOVED}, last_error, died_at)
            SELECT {_V13_MOVED}, error, at FROM gone ORDER BY id;
        END
        $$
        """,
        """
        CREATE FUNCTION {schema}.alkstore_dead_bury_dependents() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM {schema}.alkstore_bury_dependents(
                NEW.id, 'dependency ' || NEW.id || ' is dead', NEW.died_at);
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER alkstore_dead_bury_dependents
        AFTER INSERT ON {schema}.alkstore_dead_jobs
        FOR EACH ROW WHEN (NEW.has_dependents)
        EXECUTE FUNCTION {schema}.alkstore_dead_bury_dependents()
        """,
        # A live row with dependents left the live table: to dead (the trigger above
        # does the rest), cancelled (the cancel statement says so, its id and instant
        # in alkstore.cancel), or completed: each waiting job counts one job less
        # (an UPDATE: two completions at once serialise on the waiting row's lock, and
        # the second counts from the first's result), those at 0 become pending.
        f"""
        CREATE FUNCTION {{schema}}.alkstore_count_finished(dependency bigint, fan_ins_only boolean)
        RETURNS void
        LANGUAGE plpgsql AS $$
        DECLARE
            released bigint[];
        BEGIN
            -- Each waiting job with an edge to `dependency` (only the fan-ins when it
            -- died) waits for one job less: an UPDATE, so two at once serialise on the
            -- waiting row's lock and the second counts from the first's result; those
            -- at 0 become pending, same id, and their queues are woken.
            WITH edges AS (
                DELETE FROM {{schema}}.alkstore_job_dependencies AS edge
                WHERE edge.depends_on = dependency
                  AND (NOT fan_ins_only OR EXISTS (
                      SELECT FROM {{schema}}.alkstore_waiting_jobs AS w
                      WHERE w.id = edge.job_id AND w.finishes))
                RETURNING job_id
            ), counted AS (
                UPDATE {{schema}}.alkstore_waiting_jobs SET waiting_on = waiting_on - 1
                WHERE id IN (SELECT job_id FROM edges) AND waiting_on > 1
                RETURNING id
            )
            SELECT coalesce(array_agg(job_id), ARRAY[]::bigint[]) INTO released
            FROM edges WHERE job_id NOT IN (SELECT id FROM counted);
            IF cardinality(released) = 0 THEN
                RETURN;
            END IF;
            WITH moved AS (
                DELETE FROM {{schema}}.alkstore_waiting_jobs WHERE id = ANY(released)
                RETURNING *
            ), woken AS (
                SELECT pg_notify({{wake_channel}}, 'queue:' || queue)
                FROM (SELECT DISTINCT queue FROM moved) AS queues
            )
            INSERT INTO {{schema}}.alkstore_jobs ({_V13_MOVED}, state)
            OVERRIDING SYSTEM VALUE
            SELECT {_V13_MOVED}, 'pending' FROM moved;
        END
        $$
        """,
        """
        CREATE FUNCTION {schema}.alkstore_release_dependents() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE
            cancel text := current_setting('alkstore.cancel', true);
        BEGIN
            IF split_part(cancel, ' ', 1) = OLD.id::text THEN
                PERFORM {schema}.alkstore_bury_dependents(
                    OLD.id, 'dependency ' || OLD.id || ' was cancelled',
                    split_part(cancel, ' ', 2)::bigint);
                RETURN NULL;
            END IF;
            IF EXISTS (SELECT FROM {schema}.alkstore_dead_jobs WHERE id = OLD.id) THEN
                RETURN NULL;
            END IF;
            PERFORM {schema}.alkstore_count_finished(OLD.id, false);
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER alkstore_release_dependents
        AFTER DELETE ON {schema}.alkstore_jobs
        FOR EACH ROW WHEN (OLD.has_dependents)
        EXECUTE FUNCTION {schema}.alkstore_release_dependents()
        """,
    ),
)

V14_KEY_INDEX = Migration(
    14,
    "the pending jobs by queue and limit key: a claim under a per-key limit walks the keys",
    (
        # A claim under a per-key limit (the key_limits profile) reads only what it
        # takes: the queue's distinct keys one probe each from the key cursor on, and
        # each key's first rows in claim order (statements.CLAIM_IN_TURN). Partial on
        # the pending rows; the lapsed claims are few and read through
        # alkstore_jobs_processing_deadline. On the pair (queue, key) as one array, so
        # that only the claim's statements, which compare that pair, can use it (the
        # counts and pages of a queue stay on the narrower claim index), and those
        # statements no other index (see statements._PAIR). No index is made redundant
        # by it: the claim index still serves every other claim. Built under the
        # migration's lock: on a large table the upgrade holds writes for the build.
        """
        CREATE INDEX alkstore_jobs_pending_key
            ON {schema}.alkstore_jobs
            ((ARRAY[queue, coalesce(limit_key, '')]), priority DESC, run_at, id)
            WHERE state = 'pending'
        """,
    ),
)


DEAD_PAGES_MIGRATION: Final = 15
"""The one place this migration's number is written (the lead renumbers on merge)."""

V15_DEAD_PAGES = Migration(
    DEAD_PAGES_MIGRATION,
    "the dashboard's dead pages: a queue's dead rows in id order",
    (
        # A dead page (q.jobs(DEAD, before_id=...), newest first) had no (queue, id)
        # order to range over: it walked the primary key backwards past every other
        # queue's dead rows, or read the queue's whole slice of (queue, died_at, id)
        # and sorted it; at a million dead jobs that is the page's whole cost. A row
        # reaches the dead table once and never changes in it: the index costs an
        # entry per death, nothing on the claim path. Built under the migration's
        # lock: on a large dead table the upgrade holds writes for the build.
        """
        CREATE INDEX alkstore_dead_jobs_queue_id
            ON {schema}.alkstore_dead_jobs (queue, id)
        """,
    ),
)


# Version 14 moves the metadata column too (the metadata profile).
_V14_MOVED = f"{_V13_MOVED}, metadata"

V16_JOB_METADATA = Migration(
    16,
    "job metadata: a small string map on every job table, moved with its row",
    (
        # NULL (no metadata) on every row written before: catalog-only.
        "ALTER TABLE {schema}.alkstore_jobs ADD COLUMN metadata text",
        "ALTER TABLE {schema}.alkstore_dead_jobs ADD COLUMN metadata text",
        "ALTER TABLE {schema}.alkstore_completed_jobs ADD COLUMN metadata text",
        "ALTER TABLE {schema}.alkstore_waiting_jobs ADD COLUMN metadata text",
        # The functions that move a waiting row name their columns: made again.
        *(
            statement.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION").replace(
                _V13_MOVED, _V14_MOVED
            )
            for statement in V13_DEPENDENCIES.statements
            if _V13_MOVED in statement
        ),
    ),
)


V17_LIMITED_CLAIM_FUNCTION = Migration(
    17,
    "a limited queue's claim in one statement (the function that locks, claims and records"
    " its starts), a rate's starts one row per second",
    (
        # A rate's starts, one row per (queue, second) with their count (a per-key
        # rate's per (queue, second, key)), not one row per claim: the sum of a
        # window's starts reads at most per_s rows however many claims started in
        # it. The store's clock is whole seconds, so the window counts the same.
        """
        WITH gone AS (DELETE FROM {schema}.alkstore_claim_starts RETURNING *)
        INSERT INTO {schema}.alkstore_claim_starts (queue, started_at, claims)
        SELECT queue, started_at, sum(claims) FROM gone GROUP BY queue, started_at
        """,
        "DROP INDEX {schema}.alkstore_claim_starts_window",
        "ALTER TABLE {schema}.alkstore_claim_starts ADD PRIMARY KEY (queue, started_at)",
        """
        WITH gone AS (DELETE FROM {schema}.alkstore_key_claim_starts RETURNING *)
        INSERT INTO {schema}.alkstore_key_claim_starts (queue, limit_key, started_at, claims)
        SELECT queue, limit_key, started_at, sum(claims) FROM gone
        GROUP BY queue, limit_key, started_at
        """,
        "DROP INDEX {schema}.alkstore_key_claim_starts_window",
        """
        ALTER TABLE {schema}.alkstore_key_claim_starts
            ADD PRIMARY KEY (queue, started_at, limit_key)
        """,
        # Locks the queue's limit row, claims under it with a snapshot of its own and
        # records the claim's starts (statements.CLAIM_LIMITED_FUNCTION): a claim of a
        # limited queue is one round trip instead of a transaction of four statements.
        CLAIM_LIMITED_FUNCTION_V19,
    ),
)


KEPT_EDGES_MIGRATION: Final = 18
"""The one place this migration's number is written."""

V18_KEPT_EDGES = Migration(
    KEPT_EDGES_MIGRATION,
    "a dead dependent keeps its edges, so a redrive of its dependency brings it back",
    (
        # Contract 1.2 §18.4: a job that dies waiting because a dependency will never
        # complete keeps its edges as they stood. By dependent (its own redrive, a
        # purge or sweep of its dead row), and by dependency (a completion satisfies
        # it; a redrive moves the edges to the new job). Rows that died before this
        # version have none.
        """
        CREATE TABLE {schema}.alkstore_dead_dependencies (
            job_id bigint NOT NULL,
            depends_on bigint NOT NULL,
            PRIMARY KEY (job_id, depends_on)
        )
        """,
        """CREATE INDEX alkstore_dead_dependencies_dependency
            ON {schema}.alkstore_dead_dependencies (depends_on)""",
        # The cascade keeps the edges of the jobs it buries, in its one statement.
        f"""
        CREATE OR REPLACE FUNCTION {{schema}}.alkstore_bury_dependents(
            dependency bigint, error text, at bigint) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM {{schema}}.alkstore_count_finished(dependency, true);
            WITH gone AS (
                DELETE FROM {{schema}}.alkstore_waiting_jobs
                WHERE NOT finishes
                  AND id IN (SELECT job_id FROM {{schema}}.alkstore_job_dependencies
                             WHERE depends_on = dependency)
                RETURNING *
            ), edges AS (
                DELETE FROM {{schema}}.alkstore_job_dependencies
                WHERE job_id IN (SELECT id FROM gone)
                RETURNING job_id, depends_on
            ), kept AS (
                INSERT INTO {{schema}}.alkstore_dead_dependencies (job_id, depends_on)
                SELECT job_id, depends_on FROM edges
            )
            -- In id order: each one's trigger buries its own in turn, level by level.
            INSERT INTO {{schema}}.alkstore_dead_jobs ({_V14_MOVED}, last_error, died_at)
            SELECT {_V14_MOVED}, error, at FROM gone ORDER BY id;
        END
        $$
        """,
        # A completion satisfies the kept edges to it (a redrive of the dead job that
        # killed their dependents will not wait for it again).
        """
        CREATE OR REPLACE FUNCTION {schema}.alkstore_release_dependents() RETURNS trigger
        LANGUAGE plpgsql AS $$
        DECLARE
            cancel text := current_setting('alkstore.cancel', true);
        BEGIN
            IF split_part(cancel, ' ', 1) = OLD.id::text THEN
                PERFORM {schema}.alkstore_bury_dependents(
                    OLD.id, 'dependency ' || OLD.id || ' was cancelled',
                    split_part(cancel, ' ', 2)::bigint);
                RETURN NULL;
            END IF;
            IF EXISTS (SELECT FROM {schema}.alkstore_dead_jobs WHERE id = OLD.id) THEN
                RETURN NULL;
            END IF;
            DELETE FROM {schema}.alkstore_dead_dependencies WHERE depends_on = OLD.id;
            PERFORM {schema}.alkstore_count_finished(OLD.id, false);
            RETURN NULL;
        END
        $$
        """,
    ),
)

V19_LIMIT_ROW_RATE = Migration(
    LIMIT_ROW_RATE_MIGRATION,
    "a limited queue's claims row: the claim's lock and a rate's count of the current second",
    (
        # One row per limited queue (made and dropped with its limit), the row a limited
        # claim locks: the second the queue's latest claim started in and how many it
        # started then (NULL, 0: none), and the latest second of the queue's rows in
        # alkstore_claim_starts (NULL: none). The claim reads this second's count there
        # and writes it there (one tuple, no CHECK to evaluate), moving it to the starts
        # table when a claim of a later second comes, so the starts table is read only
        # while it holds some of the window.
        """
        CREATE TABLE {schema}.alkstore_queue_claims (
            queue text COLLATE "C" PRIMARY KEY,
            rate_second bigint,
            rate_second_claims integer NOT NULL DEFAULT 0,
            rate_older_latest bigint
        )
        """,
        # Every limited queue's, its starts recorded before all in the starts table.
        """
        INSERT INTO {schema}.alkstore_queue_claims (queue, rate_older_latest)
        SELECT limits.queue, (SELECT max(started_at) FROM {schema}.alkstore_claim_starts
                              WHERE queue = limits.queue)
        FROM {schema}.alkstore_queue_limits AS limits
        """,
        # The claim that locks, reads and writes it (statements.CLAIM_LIMITED_FUNCTION).
        CLAIM_LIMITED_FUNCTION_V19,
    ),
)

V21_SLOT_WAITED = Migration(
    SLOT_WAITED_MIGRATION,
    "a claim's held-back mark: an ack announces a freed slot only when a claim waits for one",
    (
        # Set on a limited queue's live claims by a claim their concurrency limit held
        # back (contract §16.4); an ack of a marked claim announces its queue. A
        # constant default: no table rewrite.
        """
        ALTER TABLE {schema}.alkstore_jobs ADD COLUMN held_back boolean NOT NULL DEFAULT false
        """,
        # The claim that sets the mark (statements.CLAIM_LIMITED_FUNCTION).
        CLAIM_LIMITED_FUNCTION_V21,
    ),
)

V22_BURIED_DEPENDENTS = Migration(
    22,
    "a limited claim in turn buries an exhausted row with its dependents' flag",
    (
        # The claim in turn (a per-key limit or rate) moved its exhausted lapsed rows
        # to the dead table without has_dependents, so the dead table's trigger never
        # settled their dependents: a job waiting on a buried row stayed waiting. The
        # function made again with the flag carried.
        CLAIM_LIMITED_FUNCTION_V22,
    ),
)

V23_BURY_FIRST = Migration(
    BURY_FIRST_MIGRATION,
    "a limited claim buries the exhausted claims before it claims",
    (
        # The function buried a queue's exhausted claims in the statement of its claim,
        # whose snapshot could not see a fan-in callback that move made pending: the
        # claim left it (contract §2.7). It buries in a statement of its own first
        # (statements.CLAIM_LIMITED_FUNCTION).
        CLAIM_LIMITED_FUNCTION,
    ),
)

UNIQUE_BATCH_ORDER_MIGRATION: Final = 20
"""The migration that keeps a unique batch's new ids in payload order (its number in
one place: the lead renumbers on merge)."""

V20_UNIQUE_BATCH_ORDER = Migration(
    UNIQUE_BATCH_ORDER_MIGRATION,
    "unique enqueue_many: passed holds given up before the insert, ids in payload order",
    (
        # Migration 7's batch left a key whose live holder's hold had passed to the
        # per-key loop after the set-based insert: that key's new job took an id
        # after the later payloads' (§15.6: the new jobs' ids increase in payload
        # order). The live rows holding the batch's keys past their hold now give
        # them up first (keeping unique_key, as alkstore_insert_unique_one does), so
        # the one insert makes every new row, in position order; the loop is left to
        # keys a concurrent writer took or freed meanwhile.
        """
        CREATE OR REPLACE FUNCTION {schema}.alkstore_enqueue_unique_many("""
        + _ENQUEUE_UNIQUE_PARAMS
        + """,
            p_payloads text[], p_keys text[], p_wake_channel text, p_topic text)
        RETURNS SETOF bigint
        LANGUAGE plpgsql VOLATILE
        AS $alkstore$
        DECLARE
            made bigint[] := array_fill(NULL::bigint, ARRAY[coalesce(cardinality(p_keys), 0)]);
            hit record;
            fresh boolean := false;
        BEGIN
            UPDATE {schema}.alkstore_jobs SET unique_hold = NULL
            WHERE queue = p_queue AND unique_hold = ANY(p_keys)
              AND hold_until <= p_created_at;
            FOR hit IN
                WITH inserted AS (
                    INSERT INTO {schema}.alkstore_jobs AS job (
                        payload, queue, priority, created_at, run_at, expires_at,
                        max_attempts, visibility_timeout_s, backoff_base_s,
                        dead_letter_retention_s, unique_key, unique_hold, hold_until,
                        hold_dead)
                    SELECT item.payload, p_queue, p_priority, p_created_at, p_run_at,
                        p_expires_at, p_max_attempts, p_visibility_timeout_s,
                        p_backoff_base_s, p_dead_letter_retention_s, item.key, item.key,
                        p_hold_until, p_hold_dead
                    FROM unnest(p_payloads, p_keys) WITH ORDINALITY
                        AS item (payload, key, position)
                    ORDER BY item.position
                    ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
                    RETURNING job.id, job.unique_hold
                )
                SELECT inserted.id, item.position
                FROM inserted
                JOIN unnest(p_keys) WITH ORDINALITY AS item (key, position)
                  ON item.key = inserted.unique_hold
            LOOP
                made[hit.position] := hit.id;
            END LOOP;
            FOR hit IN
                SELECT item.position, holder.id AS holder
                FROM unnest(p_keys) WITH ORDINALITY AS item (key, position)
                CROSS JOIN LATERAL (
                    SELECT dead.id FROM {schema}.alkstore_dead_jobs AS dead
                    WHERE dead.queue = p_queue AND dead.unique_hold = item.key
                      AND (dead.hold_until IS NULL OR dead.hold_until > p_created_at)
                    LIMIT 1
                ) AS holder
                WHERE made[item.position] IS NOT NULL
            LOOP
                DELETE FROM {schema}.alkstore_jobs WHERE id = made[hit.position];
                made[hit.position] := -hit.holder;
            END LOOP;
            FOR item IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
                IF made[item] IS NULL THEN
                    SELECT * INTO hit FROM {schema}.alkstore_insert_unique_one(
                        p_queue, p_priority, p_created_at, p_run_at, p_expires_at,
                        p_max_attempts, p_visibility_timeout_s, p_backoff_base_s,
                        p_dead_letter_retention_s, p_hold_until, p_hold_dead,
                        p_payloads[item], p_keys[item]);
                    made[item] := CASE WHEN hit.duplicate THEN -hit.job_id ELSE hit.job_id END;
                END IF;
                fresh := fresh OR made[item] > 0;
            END LOOP;
            IF fresh AND p_topic IS NOT NULL THEN
                PERFORM pg_notify(p_wake_channel, p_topic);
            END IF;
            RETURN QUERY SELECT id FROM unnest(made) AS id;
        END
        $alkstore$
        """,
    ),
)

MIGRATIONS: Final[tuple[Migration, ...]] = (
    V1_QUEUES_AND_LOCKS,
    V2_SCHEDULES_STREAMS_MESSAGES,
    V3_OPERATIONS,
    V4_SNOOZES,
    V5_CRON_SCHEDULES,
    V6_UNIQUE_JOBS,
    V7_UNIQUE_ENQUEUE_FAST_PATH,
    V8_DECLARED_SCHEDULES,
    V9_QUEUE_LIMITS,
    V10_FINISHED_JOBS,
    V11_KEY_LIMITS,
    V12_DASHBOARD_READS,
    V13_DEPENDENCIES,
    V14_KEY_INDEX,
    V15_DEAD_PAGES,
    V16_JOB_METADATA,
    V17_LIMITED_CLAIM_FUNCTION,
    V18_KEPT_EDGES,
    V19_LIMIT_ROW_RATE,
    V20_UNIQUE_BATCH_ORDER,
    V21_SLOT_WAITED,
    V22_BURIED_DEPENDENTS,
    V23_BURY_FIRST,
)
LATEST_VERSION: Final = MIGRATIONS[-1].version

# -- bookkeeping statements --------------------------------------------------------

SCHEMA_EXISTS: Final = """
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s)
"""

MIGRATIONS_TABLE_EXISTS: Final = """
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_class AS c
    JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = %(schema)s AND c.relname = 'alkstore_migrations'
)
"""
"""Read with the statement's own snapshot, not the backend's catalog caches: after
waiting for the migration lock, it sees tables another opener just committed."""

APPLIED_VERSION: Final = """
SELECT coalesce(max(version), 0) FROM {schema}.alkstore_migrations
"""

LOCK_SCHEMA_FOR_MIGRATION: Final = """
SELECT pg_advisory_xact_lock(hashtextextended('alkstore.migrate:' || %(schema)s, 0))
"""
"""Held until the migrating transaction ends (so it is safe behind a transaction-mode
pooler, too); keyed by schema so stores in different schemas never wait on each other."""

CREATE_SCHEMA: Final = "CREATE SCHEMA {schema}"

CREATE_MIGRATIONS_TABLE: Final = """
CREATE TABLE IF NOT EXISTS {schema}.alkstore_migrations (
    version integer PRIMARY KEY,
    description text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""

RECORD_VERSION: Final = """
INSERT INTO {schema}.alkstore_migrations (version, description)
VALUES (%(version)s, %(description)s)
"""


def _scalar(conn: psycopg.Connection[Any], query: bytes | str, params: dict[str, Any]) -> Any:
    [(value,)] = conn.execute(query.encode() if isinstance(query, str) else query, params)
    return value


def applied_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The schema's migration version; 0 when it has no ``alkstore_migrations`` table
    (or is absent)."""
    if not _scalar(conn, MIGRATIONS_TABLE_EXISTS, {"schema": schema}):
        return 0
    version: int = _scalar(conn, render(APPLIED_VERSION, schema), {})
    return version


def ensure_schema(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    migrate: bool,
    begun: Callable[[psycopg.Connection[Any]], None] | None = None,
) -> int:
    """Bring ``schema`` to ``LATEST_VERSION`` (or only check it, with ``migrate=False``).

    ``conn`` must be in autocommit mode; returns the version found or reached.
    ``begun`` runs first inside the migrating transaction (behind a transaction
    pooler: its ``SET LOCAL lock_timeout``).
    """
    version = applied_version(conn, schema)
    if version >= LATEST_VERSION:
        return version
    if not migrate:
        legacy = legacy_version(conn, schema) if version == 0 else None
        if legacy is not None:
            raise SchemaNotMigrated(schema, legacy, LATEST_VERSION, legacy_layout=True)
        raise SchemaNotMigrated(schema, version, LATEST_VERSION)
    with conn.transaction():
        if begun is not None:
            begun(conn)
        conn.execute(LOCK_SCHEMA_FOR_MIGRATION.encode(), {"schema": schema})
        return _upgrade(conn, schema)


def _render_migration(template: str, schema: str) -> bytes:
    """``render`` of a migration's template, which may also name the store's wake
    channel as ``{wake_channel}`` (a trigger that NOTIFYs, migration 13)."""
    if "{wake_channel}" not in template:
        return render(template, schema)
    from .driver import wake_channel  # the driver imports this module

    rendered = pgsql.SQL(template).format(
        schema=pgsql.Identifier(schema), wake_channel=pgsql.Literal(wake_channel(schema))
    )
    return rendered.as_bytes(None)


def _upgrade(conn: psycopg.Connection[Any], schema: str) -> int:
    """Inside the migrating transaction, under the schema's lock."""
    version = applied_version(conn, schema)  # another opener may have finished first
    if version == 0 and legacy_version(conn, schema) is not None:
        rename_legacy_layout(conn, schema)
        version = applied_version(conn, schema)
    if version >= LATEST_VERSION:
        return version
    # CREATE SCHEMA needs CREATE on the database; a schema a DBA created
    # beforehand (and granted to us) must work without it.
    if not _scalar(conn, SCHEMA_EXISTS, {"schema": schema}):
        conn.execute(render(CREATE_SCHEMA, schema))
    conn.execute(render(CREATE_MIGRATIONS_TABLE, schema))
    for migration in MIGRATIONS:
        if migration.version <= version:
            continue
        for template in migration.statements:
            conn.execute(_render_migration(template, schema))
        conn.execute(
            render(RECORD_VERSION, schema),
            {"version": migration.version, "description": migration.description},
        )
    return LATEST_VERSION
