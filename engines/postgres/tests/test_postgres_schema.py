"""The engine-owned schema: layout, migrations, and the claim path's query plan."""

from __future__ import annotations

import re
import threading
from typing import Any

import psycopg
import pytest
from pg_helpers import ENGINE_TABLES, VERSIONS, StoreFactory
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts, Limits, QueueOpts, Unique
from alkstore.core.unique import payload_key
from alkstore.testing import FakeClock
from alkstore_postgres import LATEST_VERSION, SchemaNotMigrated, migrate, migrations
from alkstore_postgres.migrations import DEAD_PAGES_MIGRATION, KEPT_EDGES_MIGRATION
from alkstore_postgres.statements import BURY_FIRST_MIGRATION, Statements

NOW = 1_700_000_000


def _tables(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
    ).fetchall()
    return {row[0] for row in rows}


def _migrate_as_release(
    pg_dsn: str, schema: str, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    """Leave ``schema`` as the release whose last migration was ``version`` left it."""
    with monkeypatch.context() as release:
        release.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:version])
        release.setattr(migrations, "LATEST_VERSION", version)
        assert migrate(pg_dsn, schema=schema) == version


def _migrations(conn: psycopg.Connection[Any], schema: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        f'SELECT version, applied_at FROM "{schema}".alkstore_migrations ORDER BY version'
    ).fetchall()


def test_open_creates_every_table_in_the_engine_schema(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    public_before = _tables(admin, "public")
    open_store()
    assert _tables(admin, schema) == ENGINE_TABLES
    assert _tables(admin, "public") == public_before


def test_reopening_a_current_schema_changes_nothing(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    open_store().close()
    first = _migrations(admin, schema)
    open_store().close()
    assert _migrations(admin, schema) == first
    assert [version for version, _ in first] == VERSIONS


def test_concurrent_opens_migrate_once_without_errors(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    openers = 8
    start = threading.Barrier(openers)
    errors: list[BaseException] = []
    stores: list[alkstore.Store] = []

    def open_one() -> None:
        start.wait()
        try:
            stores.append(alkstore.open(pg_dsn, schema=schema, pool_min_size=0))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()

    assert errors == []
    assert len(stores) == openers
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def test_a_schema_of_the_queue_release_is_upgraded_keeping_its_jobs(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, 1)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', '\"kept\"', 0, 3, 1, 1, 1, 1)"
    )
    with alkstore.open(pg_dsn, schema=schema) as store:
        handle = store.queue("q").claim("w")
        assert handle is not None
        assert handle.payload == "kept"
        assert store.stream("s").append(1) == 1
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS
    assert {"alkstore_schedules", "alkstore_streams", "alkstore_messages"} <= _tables(admin, schema)


def test_a_schema_of_the_snooze_release_keeps_its_schedules_firing_in_utc_replaying_all(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, 4)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_schedules (name, spec, queue, payload, priority,'
        " max_attempts, expires_s, interval_s, next_fire_at)"
        " VALUES ('minutely', '@every 60s', 'q', '{\"n\": 1}', 2, 4, 90, 60, 1700000030)"
    )
    clock = FakeClock(1_700_000_030 + 120)  # three boundaries due
    with alkstore.open(pg_dsn, schema=schema, clock=clock) as store:
        kept = store.get_schedule("minutely")
        assert kept is not None
        assert (kept.spec, kept.interval_s, kept.next_fire_at) == ("@every 60s", 60, 1_700_000_030)
        assert (kept.timezone, kept.catch_up) == ("UTC", "all")
        assert store.tick_schedules("t") == alkstore.TickResult(fired=3, skipped=0)
        fired = store.get_schedule("minutely")
        assert fired is not None
        assert fired.next_fire_at == 1_700_000_030 + 180
        cron = store.schedule(
            "digest", "0 9 * * *", "q", {}, alkstore.ScheduleOpts(timezone="Asia/Tokyo")
        )
        assert (cron.interval_s, cron.timezone) == (None, "Asia/Tokyo")
        assert store.get_schedule("digest") == cron
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def test_a_schema_of_the_operations_release_is_upgraded_with_every_job_snoozed_zero_times(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, 3)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', '\"kept\"', 0, 1, 1, 1, 30, 1)"
    )
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        (job,) = queue.jobs()
        assert (job.payload, job.snoozes) == ("kept", 0)
        handle = queue.claim("w")
        assert handle is not None
        assert handle.snooze(0)
        again = queue.claim("w")
        assert again is not None
        assert again.job.snoozes == 1
        assert again.fail("broken")
        dead = queue.get_job(job.id)
        assert dead is not None
        assert (dead.state, dead.snoozes) == (alkstore.JobState.DEAD, 1)
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def test_a_schema_of_the_snooze_release_is_upgraded_with_no_job_holding_a_key(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, 4)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', '\"kept\"', 0, 1, 1, 1, 30, 1)"
    )
    keeps = alkstore.Unique("k", states=("pending", "processing", "dead"))
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        (job,) = queue.jobs()
        assert (job.payload, job.unique_key) == ("kept", None)
        first = queue.enqueue("unique", alkstore.EnqueueOpts(unique=keeps))
        assert not first.duplicate
        assert queue.enqueue("again", alkstore.EnqueueOpts(unique="k")) == first
        assert queue.cancel(job.id)
        handle = queue.claim("w")
        assert handle is not None
        assert handle.id == first
        assert handle.fail("broken")  # the move to dead keeps the key of a dead-holding job
        again = queue.enqueue("again", alkstore.EnqueueOpts(unique="k"))
        assert (again, again.duplicate) == (first, True)
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS
    assert "alkstore_insert_unique" in {
        name
        for (name,) in admin.execute(
            "SELECT p.proname FROM pg_catalog.pg_proc AS p"
            " JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s",
            (schema,),
        )
    }


def test_a_schema_of_the_unique_release_is_upgraded_with_its_held_keys_still_held(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, 6)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s, unique_key, unique_hold)"
        " VALUES ('q', '\"held\"', 0, 1, 1, 1, 30, 1, 'k', 'k')"
    )
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        (held,) = queue.jobs()
        again = queue.enqueue("again", EnqueueOpts(unique="k"))
        assert (again, again.duplicate) == (held.id, True)
        batch = queue.enqueue_many(["k2", "k3", "k2"], EnqueueOpts(unique=alkstore.Unique()))
        assert [result.duplicate for result in batch] == [False, False, True]
        assert batch[2] == batch[0]
        assert [job.payload for job in queue.jobs()] == ["held", "k2", "k3"]
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS
    functions = {
        name
        for (name,) in admin.execute(
            "SELECT p.proname FROM pg_catalog.pg_proc AS p"
            " JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = %s",
            (schema,),
        )
    }
    # The release's own functions stay (a store of that release may still be open).
    assert {
        "alkstore_insert_unique_one",
        "alkstore_insert_unique",
        "alkstore_enqueue_unique",
        "alkstore_enqueue_unique_many",
    } <= functions


DECLARED_SCHEDULES_VERSION = 8
"""The migration that adds the declaration lease (the periodic profile)."""


def test_a_schema_of_the_previous_version_keeps_its_schedules_undeclared_and_takes_declared_ones(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(DECLARED_SCHEDULES_VERSION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_schedules (name, spec, queue, payload, priority,'
        " max_attempts, expires_s, interval_s, next_fire_at)"
        " VALUES ('minutely', '@every 60s', 'q', '{\"n\": 1}', 2, 4, 90, 60, 1700000030)"
    )
    clock = FakeClock(NOW)
    with alkstore.open(pg_dsn, schema=schema, clock=clock) as store:
        kept = store.get_schedule("minutely")
        assert kept is not None
        assert (kept.next_fire_at, kept.declared_until) == (1_700_000_030, None)
        declared = store.declare_schedule("declared", "@every 60s", "q", {"n": 2})
        assert declared.declared_until == NOW + alkstore.DECLARATION_LEASE_S
        clock.set(NOW + alkstore.DECLARATION_LEASE_S)
        store.tick_schedules("t")  # removes the lapsed declaration, never the old schedule
        assert [s.name for s in store.schedules()] == ["minutely"]


RESULTS_MIGRATION = 10
"""The migration that adds the results profile (the test below starts from the one
before it)."""


def test_a_schema_before_finished_jobs_is_upgraded_with_every_job_acked_as_before(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, RESULTS_MIGRATION - 1)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', '\"old\"', 0, 1, 1, 1, 30, 1)"
    )
    with alkstore.open(pg_dsn, schema=schema) as store:
        plain = store.queue("q")
        (old,) = plain.jobs()
        assert (old.payload, old.completed_retention_s) == ("old", None)
        handle = plain.claim("w")
        assert handle is not None
        assert handle.ack(result={"kept": False})
        assert plain.get_job(old.id) is None  # stamped before retention existed: deleted
        kept = store.queue("q", alkstore.QueueOpts(completed_retention_s=60))
        job_id = kept.enqueue("new")
        again = kept.claim("w")
        assert again is not None
        assert again.id == job_id
        assert again.ack(result=[1, "two"])
        done = kept.get_job(job_id)
        assert done is not None
        assert (done.state, done.result) == (alkstore.JobState.COMPLETED, [1, "two"])
        assert kept.stats().completed == 1
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


DEPENDENCIES_MIGRATION = migrations.V13_DEPENDENCIES.version
"""The migration that adds the dependencies profile (the test below starts from the one
before it)."""


def test_a_schema_before_dependencies_is_upgraded_and_an_old_job_releases_its_dependent(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(DEPENDENCIES_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', '\"old\"', 0, 1, 1, 1, 30, 1)"
    )
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        (old,) = queue.jobs()
        assert queue.stats().waiting == 0
        waiting = queue.enqueue("new", alkstore.EnqueueOpts(after=[old.id]))
        assert waiting > old.id  # the waiting row's id comes from the live table's identity
        assert queue.get_job(waiting).state is alkstore.JobState.WAITING  # type: ignore[union-attr]
        handle = queue.claim("w")
        assert handle is not None
        assert handle.id == old.id
        assert handle.ack()
        released = queue.get_job(waiting)
        assert released is not None
        assert released.state is alkstore.JobState.PENDING
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


KEY_INDEX_MIGRATION = 14
"""The migration that adds the index of pending jobs by limit key (the test below starts
from the one before it)."""


def test_a_schema_before_the_key_index_is_upgraded_and_claims_its_old_jobs_keys_in_turn(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, KEY_INDEX_MIGRATION - 1)
    for key in ("'b'", "'b'", "'a'", "NULL"):
        admin.execute(
            f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts,'
            " created_at, run_at, visibility_timeout_s, backoff_base_s, limit_key)"
            f" VALUES ('q', '\"old\"', 0, 3, 1, 1, 300, 1, {key})"
        )
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        assert queue.set_limits(alkstore.Limits(concurrency_per_key=1))
        claimed = queue.claim_batch("w", 10)
        assert sorted(handle.job.limit_key or "" for handle in claimed) == ["", "a", "b"]
    indexes = admin.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
    ).fetchall()
    assert ("alkstore_jobs_pending_key",) in indexes
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def test_migrate_false_on_an_empty_schema_is_a_clear_error_and_creates_nothing(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with pytest.raises(SchemaNotMigrated) as info:
        alkstore.open(pg_dsn, schema=schema, migrate=False)

    message = str(info.value)
    assert schema in message
    assert "no alkstore tables" in message
    assert "migrate" in message
    assert isinstance(info.value, alkstore.AlkstoreError)
    exists = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    assert exists is None


def test_outdated_schema_error_names_both_versions() -> None:
    message = str(SchemaNotMigrated("jobs", found=1, required=2))
    assert "migration version 1" in message
    assert "needs 2" in message


@pytest.mark.parametrize("migrate_on_open", [True, False])
def test_a_schema_newer_than_this_engine_is_opened_as_is(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], migrate_on_open: bool
) -> None:
    migrate(pg_dsn, schema=schema)
    future = LATEST_VERSION + 1
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_migrations (version, description) VALUES (%s, %s)',
        (future, "from a newer release"),
    )
    with alkstore.open(pg_dsn, schema=schema, migrate=migrate_on_open) as store:
        assert store.queue("q").enqueue(1) >= 1
    assert _migrations(admin, schema)[-1][0] == future


def test_migrate_prepares_a_schema_for_stores_opened_with_migrate_false(
    pg_dsn: str, schema: str
) -> None:
    assert migrate(pg_dsn, schema=schema) == LATEST_VERSION
    with alkstore.open(pg_dsn, schema=schema, migrate=False) as store:
        queue = store.queue("q")
        job_id = queue.enqueue("hello")
        job = queue.get_job(job_id)
        assert job is not None
        assert job.payload == "hello"


def test_schema_created_beforehand_by_an_administrator_is_used(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    admin.execute(f'CREATE SCHEMA "{schema}"')
    with alkstore.open(pg_dsn, schema=schema) as store:
        store.queue("q").enqueue(1)
    assert "alkstore_jobs" in _tables(admin, schema)


def test_dead_rows_move_to_the_dead_table_keeping_their_id(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    queue = open_store().queue("q")
    job_id = queue.enqueue("doomed")
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("bad input")

    live = admin.execute(f'SELECT id FROM "{schema}".alkstore_jobs').fetchall()
    dead = admin.execute(f'SELECT id, last_error FROM "{schema}".alkstore_dead_jobs').fetchall()
    assert live == []
    assert dead == [(job_id, "bad input")]


def _explain(conn: psycopg.Connection[Any], query: bytes, params: dict[str, Any]) -> str:
    rows = conn.execute(b"EXPLAIN " + query, params).fetchall()
    return "\n".join(row[0] for row in rows)


def test_claim_statement_walks_the_partial_indexes(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    clock = alkstore.testing.FakeClock(NOW)
    store = open_store(clock=clock)
    # A realistic table: many queues, due and delayed rows, some claimed.
    for n in range(20):
        queue = store.queue(f"q{n}", QueueOpts(visibility_timeout_s=30))
        queue.enqueue_many(list(range(200)), EnqueueOpts(priority=n % 3))
        queue.enqueue_many(list(range(100)), EnqueueOpts(delay=3600))
        queue.claim_batch("w", 50)
    admin.execute(f'ANALYZE "{schema}".alkstore_jobs')

    statements = Statements.for_schema(schema)
    params = {"queue": "q7", "now": NOW + 60, "worker_id": "w", "limit": 10, "last_error": "x"}
    plan = _explain(admin, statements.claim, params)

    assert "alkstore_jobs_pending_claim" in plan
    assert "alkstore_jobs_processing_deadline" in plan
    assert "Seq Scan" not in plan


def test_ack_batch_looks_rows_up_by_primary_key_however_many_are_in_flight(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    clock = alkstore.testing.FakeClock(NOW)
    queue = open_store(clock=clock).queue("q")
    queue.enqueue_many(list(range(3000)))
    # Statistics from before anything was claimed.
    admin.execute(f'ANALYZE "{schema}".alkstore_jobs')
    handles = queue.claim_batch("w", 2500)

    statements = Statements.for_schema(schema)
    params = {
        "job_ids": [h.id for h in handles[:100]],
        "queue": "q",
        "worker_id": "w",
        "now": NOW,
        "wake_channel": "c",
        "topic": "queue:q",
    }
    plan = _explain(admin, statements.ack_batch, params)

    assert "alkstore_jobs_pkey" in plan
    assert "alkstore_jobs_processing_deadline" not in plan


def test_a_schema_of_the_previous_release_is_upgraded_with_no_queue_limited(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, VERSIONS[-2])
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s)"
        " VALUES ('q', '\"kept\"', 0, 3, 1, 1, 300, 1), ('q', '\"next\"', 0, 3, 1, 1, 300, 1)"
    )
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        assert queue.limits() is None
        first = queue.claim("w")
        assert first is not None
        assert first.payload == "kept"
        assert queue.set_limits(alkstore.Limits(concurrency=1))
        assert queue.claim("w") is None  # the upgraded store counts the claim against it
        assert first.ack()
        second = queue.claim("w")
        assert second is not None
        assert second.payload == "next"
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


KEY_LIMITS_MIGRATION = 11
"""The migration that adds the key_limits profile (the tests below start from the one
before it)."""


def test_a_schema_before_key_limits_is_upgraded_keeping_its_limits_and_no_job_keyed(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, KEY_LIMITS_MIGRATION - 1)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', '\"old\"', 0, 3, 1, 1, 300, 1)"
    )
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_queue_limits (queue, concurrency, rate, per_s)'
        " VALUES ('q', 2, 5, 60)"
    )
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        (old,) = queue.jobs()
        assert (old.payload, old.limit_key) == ("old", None)
        assert queue.limits() == alkstore.Limits(2, rate=5, per=60)
        assert queue.set_limits(alkstore.Limits(2, rate=5, per=60, concurrency_per_key=1))
        assert queue.limits() == alkstore.Limits(2, rate=5, per=60, concurrency_per_key=1)
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def test_an_upgraded_schema_before_key_limits_claims_keys_in_turn_and_keeps_a_dead_jobs_key(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, KEY_LIMITS_MIGRATION - 1)
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("keyed")
        assert queue.set_limits(alkstore.Limits(concurrency_per_key=1))
        assert queue.limits() == alkstore.Limits(concurrency_per_key=1)
        queue.enqueue_many([{"n": 1}, {"n": 2}], EnqueueOpts(limit_key="big"))
        unique = queue.enqueue({"n": 3}, EnqueueOpts(limit_key="small", unique="only"))
        claimed = queue.claim_batch("w", 10)
        assert sorted(handle.job.limit_key or "" for handle in claimed) == ["big", "small"]
        small = next(handle for handle in claimed if handle.job.limit_key == "small")
        assert small.id == unique  # the unique enqueue stamped its key too
        assert small.fail("broken")
        dead = queue.get_job(small.id)
        assert dead is not None
        assert (dead.state, dead.limit_key) == (alkstore.JobState.DEAD, "small")
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def test_an_upgraded_schema_before_key_limits_counts_each_keys_starts_against_its_rate(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, KEY_LIMITS_MIGRATION - 1)
    clock = FakeClock(1400)
    with alkstore.open(pg_dsn, schema=schema, clock=clock) as store:
        queue = store.queue("rated")
        assert queue.set_limits(alkstore.Limits(rate_per_key=1, per=60))
        for key in ("a", "b"):
            queue.enqueue_many([{"n": 1}, {"n": 2}], EnqueueOpts(limit_key=key))
        first = queue.claim_batch("w", 10)
        assert sorted(handle.job.limit_key or "" for handle in first) == ["a", "b"]
        assert queue.claim_batch("w", 10) == []
        clock.advance(60)
        assert len(queue.claim_batch("w", 10)) == 2
    assert "alkstore_key_claim_starts" in _tables(admin, schema)


DASHBOARD_MIGRATION = 12
"""The migration that adds the dashboard's reads (the tests below start from the one
before it)."""


def test_a_schema_before_the_queue_pending_index_pages_its_jobs_by_state_newest_first(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(DASHBOARD_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, VERSIONS.index(before) + 1)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s)"
        " VALUES ('q', '1', 0, 3, 1, 1, 300, 1), ('q', '2', 0, 3, 1, 1, 300, 1)"
    )
    with alkstore.open(pg_dsn, schema=schema, clock=FakeClock(NOW)) as store:
        queue = store.queue("q")
        claimed = queue.claim("w")
        assert claimed is not None
        newest = queue.enqueue(3)
        pending = queue.jobs(alkstore.JobState.PENDING, before_id=10**6, limit=10)
        processing = queue.jobs(alkstore.JobState.PROCESSING, before_id=10**6, limit=10)
        assert [job.payload for job in pending] == [3, 2]
        assert [job.id for job in processing] == [claimed.id]
        assert pending[0].id == newest
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def _paged(store: alkstore.Store, admin: psycopg.Connection[Any], schema: str) -> None:
    """Four queues of 3,000 ready jobs each, 100 of each claimed, statistics gathered."""
    for n in range(4):
        queue = store.queue(f"q{n}", QueueOpts(visibility_timeout_s=300))
        queue.enqueue_many(list(range(3000)))
        queue.claim_batch("w", 100)
    admin.execute(f'ANALYZE "{schema}".alkstore_jobs')


PAGE_PARAMS = {"queue": "q0", "after_id": 0, "before_id": 10**6, "limit": 51}


def test_a_newest_first_page_of_pending_jobs_is_one_range_of_the_queue_pending_index(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    _paged(open_store(clock=FakeClock(NOW)), admin, schema)
    statements = Statements.for_schema(schema)
    plan = _explain(admin, statements.list_pending_jobs_newest, PAGE_PARAMS)
    assert "Index Scan Backward using alkstore_jobs_queue_pending" in plan
    assert "Sort" not in plan


def test_a_page_of_processing_jobs_reads_only_the_claims_in_flight(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    _paged(open_store(clock=FakeClock(NOW)), admin, schema)
    statements = Statements.for_schema(schema)
    plan = _explain(admin, statements.list_processing_jobs_newest, PAGE_PARAMS)
    assert "alkstore_jobs_processing_deadline" in plan
    assert "alkstore_jobs_pending_claim" not in plan
    assert "alkstore_jobs_pkey" not in plan  # no walk of every row in page order
    assert "Seq Scan" not in plan


def test_a_newest_first_page_of_all_jobs_reads_the_pending_rows_off_their_index(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    _paged(open_store(clock=FakeClock(NOW)), admin, schema)
    statements = Statements.for_schema(schema)
    plan = _explain(admin, statements.list_jobs_newest, PAGE_PARAMS)
    assert "Index Scan Backward using alkstore_jobs_queue_pending" in plan
    assert "alkstore_jobs_processing_deadline" in plan
    assert "alkstore_jobs_pending_claim" not in plan
    assert "alkstore_jobs_pkey" not in plan
    assert "Seq Scan" not in plan


def test_a_schema_before_the_worker_registry_registers_and_lists_workers(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, VERSIONS.index(DASHBOARD_MIGRATION))
    assert "alkstore_workers" not in _tables(admin, schema)
    with alkstore.open(pg_dsn, schema=schema, clock=FakeClock(NOW)) as store:
        assert store.workers() == []
        store.register_worker(alkstore.WorkerInfo("w2", "host", 9, ("q", "r"), NOW - 5))
        (listed,) = store.workers()
        assert (listed.id, listed.queues, listed.last_seen) == ("w2", ("q", "r"), NOW)
        assert store.heartbeat_worker("w2", {"q": 3})
        (counted,) = store.throughput()
        assert (counted.queue, counted.total) == ("q", 3)
    assert {"alkstore_workers", "alkstore_throughput"} <= _tables(admin, schema)


def _generic_plan(admin: psycopg.Connection[Any], query: bytes, params: dict[str, Any]) -> str:
    """``query``'s plan as a statement prepared long ago has it: generic, its
    parameters unknown to the planner (what a connection runs after five executions)."""
    text = query.decode()
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", text)
    kinds = ", ".join("text" if name == "queue" else "bigint" for name in names)
    admin.execute("SET plan_cache_mode = force_generic_plan")
    try:
        admin.execute(f"PREPARE generic_page ({kinds}) AS {numbered}")
        values = sql.SQL(", ").join(sql.Literal(params[name]) for name in names)
        rows = admin.execute(sql.SQL("EXPLAIN EXECUTE generic_page ({})").format(values)).fetchall()
        return "\n".join(row[0] for row in rows)
    finally:
        admin.execute("DEALLOCATE ALL")
        admin.execute("RESET plan_cache_mode")


@pytest.mark.parametrize(
    ("statement", "index"),
    [
        ("list_pending_jobs_newest", "alkstore_jobs_queue_pending"),
        ("list_pending_jobs", "alkstore_jobs_queue_pending"),
        ("list_processing_jobs_newest", "alkstore_jobs_processing_deadline"),
        ("list_jobs_newest", "alkstore_jobs_queue_pending"),
    ],
)
def test_a_prepared_page_of_live_jobs_keeps_to_its_index_in_a_generic_plan(
    open_store: StoreFactory,
    admin: psycopg.Connection[Any],
    schema: str,
    statement: str,
    index: str,
) -> None:
    _paged(open_store(clock=FakeClock(NOW)), admin, schema)
    query = getattr(Statements.for_schema(schema), statement)
    plan = _generic_plan(admin, query, PAGE_PARAMS)
    assert index in plan
    assert "alkstore_jobs_pkey" not in plan  # no walk of every row in page order


def _insert_dead(
    admin: psycopg.Connection[Any], schema: str, queue: str, first_id: int, count: int
) -> None:
    """``count`` dead rows of ``queue`` with ids from ``first_id`` (written around the
    store: as many as a test needs, fast)."""
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_dead_jobs (id, queue, payload, priority, attempts,'
        " max_attempts, created_at, run_at, visibility_timeout_s, backoff_base_s, last_error,"
        " died_at) SELECT n, %(queue)s, n::text, 0, 3, 3, 1, 1, 300, 1, 'boom', n"
        " FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n",
        {"queue": queue, "first": first_id, "last": first_id + count - 1},
    )


def test_a_schema_before_the_dead_pages_index_pages_its_dead_jobs_newest_first(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _migrate_as_release(pg_dsn, schema, monkeypatch, VERSIONS.index(DEAD_PAGES_MIGRATION))
    _insert_dead(admin, schema, "q", 10**6, 3)
    _insert_dead(admin, schema, "other", 2 * 10**6, 2)
    with alkstore.open(pg_dsn, schema=schema, clock=FakeClock(NOW)) as store:
        queue = store.queue("q")
        newest = queue.jobs(alkstore.JobState.DEAD, before_id=10**7, limit=2)
        rest = queue.jobs(alkstore.JobState.DEAD, before_id=newest[-1].id, limit=2)
        assert [job.id for job in newest] == [10**6 + 2, 10**6 + 1]
        assert [job.id for job in rest] == [10**6]
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def _dead_paged(admin: psycopg.Connection[Any], schema: str) -> None:
    """Four queues of 5,000 dead jobs each, their ids interleaved, statistics gathered."""
    for n in range(4):
        _insert_dead(admin, schema, f"q{n}", 10**6 + n * 10**5, 5000)
    admin.execute(f'ANALYZE "{schema}".alkstore_dead_jobs')


DEAD_PAGE_PARAMS = {"queue": "q3", "after_id": 0, "before_id": 10**7, "limit": 51}


@pytest.mark.parametrize("statement", ["list_dead_jobs_newest", "list_dead_jobs"])
def test_a_page_of_dead_jobs_is_one_range_of_the_dead_queue_id_index(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str, statement: str
) -> None:
    open_store(clock=FakeClock(NOW))
    _dead_paged(admin, schema)
    query = getattr(Statements.for_schema(schema), statement)
    plan = _explain(admin, query, DEAD_PAGE_PARAMS)
    generic = _generic_plan(admin, query, DEAD_PAGE_PARAMS)
    for found in (plan, generic):
        assert "alkstore_dead_jobs_queue_id" in found
        assert "Sort" not in found
        assert "alkstore_dead_jobs_pkey" not in found  # no walk past other queues' rows


METADATA_MIGRATION = migrations.V16_JOB_METADATA.version
"""The migration that adds the metadata profile (the test below starts from the one
before it)."""


def test_a_schema_before_metadata_is_upgraded_and_a_released_dependent_keeps_its_metadata(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(METADATA_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', '\"old\"', 0, 1, 1, 1, 30, 1)"
    )
    metadata = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        (old,) = queue.jobs()
        assert old.metadata is None
        waiting = queue.enqueue("new", alkstore.EnqueueOpts(after=[old.id], metadata=metadata))
        handle = queue.claim("w")
        assert handle is not None
        assert handle.ack()
        released = queue.get_job(waiting)
        assert released is not None
        assert (released.state, released.metadata) == (alkstore.JobState.PENDING, metadata)
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


LIMITED_CLAIM_MIGRATION = migrations.V17_LIMITED_CLAIM_FUNCTION.version
"""The migration that makes a limited queue's claim one statement (the test below starts
from the one before it)."""


def test_a_schema_before_the_limited_claim_function_keeps_its_window_starts_counted(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(LIMITED_CLAIM_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s)"
        " SELECT 'q', '\"old\"', 0, 3, 1, 1, 300, 1 FROM generate_series(1, 4)"
    )
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_queue_limits (queue, concurrency, rate, per_s)'
        " VALUES ('q', 3, 3, 60)"
    )
    # Two claims of one second, as the previous release recorded them (a row per
    # claim), still in the window at 1,000: made one row of that second.
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_claim_starts (queue, started_at, claims)'
        " VALUES ('q', 990, 1), ('q', 990, 1)"
    )
    clock = FakeClock(1_000)
    with alkstore.open(pg_dsn, schema=schema, clock=clock) as store:
        queue = store.queue("q")
        assert len(queue.claim_batch("w", 10)) == 1  # the old starts count against 3
        assert queue.claim_batch("w", 10) == []
        clock.advance(60)
        assert len(queue.claim_batch("w", 10)) == 2  # the rate and the concurrency bind
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


LIMIT_ROW_RATE_MIGRATION = migrations.V19_LIMIT_ROW_RATE.version
"""The migration that gives each limited queue its claims row (the test below starts
from the one before it)."""


def test_a_schema_before_the_claims_row_keeps_its_limits_and_window_starts_counted(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(LIMIT_ROW_RATE_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s)"
        " SELECT 'q', '\"old\"', 0, 3, 1, 1, 300, 1 FROM generate_series(1, 6)"
    )
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_queue_limits (queue, concurrency, rate, per_s)'
        " VALUES ('q', 10, 4, 60), ('idle', 2, NULL, NULL)"
    )
    # Three starts the previous release recorded, one row per second, in the window at 1,000.
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_claim_starts (queue, started_at, claims)'
        " VALUES ('q', 980, 1), ('q', 990, 2)"
    )
    clock = FakeClock(1_000)
    with alkstore.open(pg_dsn, schema=schema, clock=clock) as store:
        queue = store.queue("q")
        assert queue.limits() == alkstore.Limits(concurrency=10, rate=4, per=60)
        assert len(queue.claim_batch("w", 10)) == 1  # the old starts count against 4
        assert queue.claim_batch("w", 10) == []
        clock.advance(41)  # 1,041: the start at 980 left the window
        assert len(queue.claim_batch("w", 10)) == 1
    claims = admin.execute(
        f'SELECT queue, rate_older_latest FROM "{schema}".alkstore_queue_claims ORDER BY queue'
    ).fetchall()
    assert claims == [("idle", None), ("q", 1_000)]
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


SLOT_WAITED_MIGRATION = migrations.V21_SLOT_WAITED.version
"""The migration that adds the held-back mark (the test below starts from the one
before it)."""


def test_a_schema_before_the_held_back_mark_is_upgraded_and_marks_the_live_claim_of_a_bound_queue(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(SLOT_WAITED_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s)"
        " SELECT 'q', '\"old\"', 0, 3, 1, 1, 300, 1 FROM generate_series(1, 2)"
    )
    admin.execute(
        f"INSERT INTO \"{schema}\".alkstore_queue_limits (queue, concurrency) VALUES ('q', 1)"
    )
    admin.execute(f"INSERT INTO \"{schema}\".alkstore_queue_claims (queue) VALUES ('q')")
    with alkstore.open(pg_dsn, schema=schema, clock=FakeClock(1_000)) as store:
        queue = store.queue("q")
        held = admin.execute(f'SELECT held_back FROM "{schema}".alkstore_jobs').fetchall()
        assert held == [(False,), (False,)]  # the old jobs carry no mark
        assert queue.claim("w") is not None
        assert queue.claim("w") is None  # the limit binds, and marks the live claim
        held = admin.execute(
            f'SELECT state, held_back FROM "{schema}".alkstore_jobs ORDER BY id'
        ).fetchall()
        assert held == [("processing", True), ("pending", False)]
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def test_a_schema_before_bury_first_is_upgraded_and_its_limited_claim_hands_out_a_released_callback(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Migration 22's function buried the exhausted member in the statement of its claim,
    # whose snapshot missed the fan-in callback that made pending (contract §2.7).
    before = VERSIONS[VERSIONS.index(BURY_FIRST_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    clock = FakeClock(1_000)
    with alkstore.open(pg_dsn, schema=schema, clock=clock) as store:
        queue = store.queue("q", QueueOpts(max_attempts=1, visibility_timeout_s=5))
        assert queue.set_limits(Limits(concurrency=5)) is True
        member = int(queue.enqueue("member"))
        callback = int(queue.enqueue("callback", EnqueueOpts(after_finished=[member])))
        claimed = queue.claim("w")
        assert claimed is not None
        assert claimed.id == member
        other = int(queue.enqueue("other"))
        clock.advance(6)  # the member lapses at its budget
        assert [h.id for h in queue.claim_batch("w", 2)] == [callback, other]
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS


def _schema_with_a_dead_dependent(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema of the release before kept edges whose job 2, waiting for job 1, died
    with it (by that release's own cascade trigger, fired by job 1's dead row)."""
    before = VERSIONS[VERSIONS.index(KEPT_EDGES_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    columns = (
        "queue, payload, priority, max_attempts, created_at, run_at, visibility_timeout_s,"
        " backoff_base_s"
    )
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_waiting_jobs (id, {columns}, waiting_on)'
        " VALUES (2, 'q', '\"dependent\"', 0, 1, 1, 1, 30, 1, 1)"
    )
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_job_dependencies (depends_on, job_id) VALUES (1, 2)'
    )
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_dead_jobs (id, {columns}, attempts, has_dependents,'
        " last_error, died_at)"
        " VALUES (1, 'q', '\"root\"', 0, 1, 1, 1, 30, 1, 1, true, 'broken', 5)"
    )
    admin.execute(f"SELECT setval(pg_get_serial_sequence('\"{schema}\".alkstore_jobs', 'id'), 2)")


def test_a_schema_before_kept_edges_is_upgraded_with_its_dead_dependent_kept_dead(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _schema_with_a_dead_dependent(pg_dsn, schema, admin, monkeypatch)
    with alkstore.open(pg_dsn, schema=schema) as store:
        dependent = store.queue("q").get_job(2)
        assert dependent is not None
        assert (dependent.state, dependent.last_error) == (
            alkstore.JobState.DEAD,
            "dependency 1 is dead",
        )
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS
    assert "alkstore_dead_dependencies" in _tables(admin, schema)


def test_an_upgraded_schema_leaves_a_dependent_that_died_before_dead_on_its_dependencys_redrive(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _schema_with_a_dead_dependent(pg_dsn, schema, admin, monkeypatch)
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("q")
        (new_root,) = queue.redrive([1])
        assert queue.dependencies(new_root).waited_by == ()  # it kept no edges
        assert queue.get_job(2).state is alkstore.JobState.DEAD  # type: ignore[union-attr]
        (new_dependent,) = queue.redrive([2])
        assert queue.get_job(new_dependent).state is alkstore.JobState.PENDING  # type: ignore[union-attr]


def test_an_upgraded_schema_brings_back_a_dependent_that_dies_after_the_upgrade(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _schema_with_a_dead_dependent(pg_dsn, schema, admin, monkeypatch)
    with alkstore.open(pg_dsn, schema=schema) as store:
        queue = store.queue("new", QueueOpts(max_attempts=1))
        root = queue.enqueue("root")
        child = queue.enqueue("child", EnqueueOpts(after=[root]))
        handle = queue.claim("w")
        assert handle is not None
        assert handle.fail("broken")  # the cascade function, replaced, keeps its edge
        (new_root,) = queue.redrive([root])
        (revived,) = queue.dependencies(new_root).waited_by
        job = queue.get_job(revived)
        assert job is not None
        assert (job.state, job.redriven_from) == (alkstore.JobState.WAITING, child)


UNIQUE_BATCH_ORDER_MIGRATION = migrations.UNIQUE_BATCH_ORDER_MIGRATION
"""The migration that keeps a unique batch's new ids in payload order (the test below
starts from the one before it)."""


def test_a_schema_before_the_unique_batch_order_fix_makes_a_batchs_ids_in_payload_order(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = VERSIONS[VERSIONS.index(UNIQUE_BATCH_ORDER_MIGRATION) - 1]
    _migrate_as_release(pg_dsn, schema, monkeypatch, before)
    key = payload_key('{"x": 1}')
    # A pending job of the previous release still holding the first payload's key,
    # its hold passed long ago.
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_jobs (queue, payload, priority, max_attempts, created_at,'
        " run_at, visibility_timeout_s, backoff_base_s, unique_key, unique_hold, hold_until)"
        " VALUES ('q', '{\"x\": 1}', 0, 3, 1, 1, 30, 1, %(key)s, %(key)s, 6)",
        {"key": key},
    )
    with alkstore.open(pg_dsn, schema=schema, clock=FakeClock(1_000)) as store:
        queue = store.queue("q")
        ids = queue.enqueue_many([{"x": 1}, {"y": 1}], EnqueueOpts(unique=Unique()))
        assert [i.duplicate for i in ids] == [False, False]
        assert ids[0] < ids[1]
    assert [version for version, _ in _migrations(admin, schema)] == VERSIONS
