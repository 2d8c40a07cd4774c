"""The engine's tables: named __alkstore_*, versioned, migrated once however many open at once."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import StoreFactory, open_and_enqueue

import alkstore
from alkstore import EngineUnavailable, EnqueueOpts, QueueOpts, Unique
from alkstore.testing import FakeClock
from alkstore_sqlite import LATEST_VERSION
from alkstore_sqlite.migrations import (
    COMPLETE_RELEASE_TRIGGER,
    COMPLETED_IN_PLACE_VERSION,
    EXPIRY_INDEX,
    KEPT_EDGES_VERSION,
    KEY_INDEX,
    METADATA_VERSION,
    MIGRATIONS,
    RATE_BUCKETS_VERSION,
    RELEASE_ON_ACK_VERSION,
)


def _tables(db_path: Path) -> set[str]:
    conn = sqlite3.connect(str(db_path))
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")
        return {name for (name,) in rows if not name.startswith("sqlite_")}
    finally:
        conn.close()


def _version(db_path: Path) -> int:
    conn = sqlite3.connect(str(db_path))
    try:
        query = "SELECT value FROM __alkstore_meta WHERE key = 'schema_version'"
        return int(conn.execute(query).fetchone()[0])
    finally:
        conn.close()


def test_every_engine_table_and_index_is_under_the_reserved_prefix(
    open_store: StoreFactory, db_path: Path
) -> None:
    open_store()
    names = _tables(db_path)
    assert {
        "__alkstore_jobs",
        "__alkstore_dead",
        "__alkstore_locks",
        "__alkstore_meta",
        "__alkstore_schedules",
        "__alkstore_streams",
        "__alkstore_stream_events",
        "__alkstore_stream_offsets",
        "__alkstore_notifications",
        "__alkstore_paused",
    } <= names
    assert all(name.startswith("__alkstore_") for name in names), names


def test_the_schema_version_is_recorded(open_store: StoreFactory, db_path: Path) -> None:
    open_store()
    assert _version(db_path) == LATEST_VERSION


def test_the_callers_own_tables_are_left_alone(open_store: StoreFactory, db_path: Path) -> None:
    conn = sqlite3.connect(str(db_path))
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO orders VALUES (7)")
    conn.commit()
    conn.close()
    open_store().queue("q").enqueue({"n": 1})
    conn = sqlite3.connect(str(db_path))
    try:
        assert conn.execute("SELECT id FROM orders").fetchall() == [(7,)]
    finally:
        conn.close()


def test_reopening_keeps_the_data_and_the_version(open_store: StoreFactory, db_path: Path) -> None:
    job_id = open_store().queue("q").enqueue({"n": 1})
    reopened = open_store()
    assert reopened.queue("q").get_job(job_id) is not None
    assert _version(db_path) == LATEST_VERSION


def test_a_version_1_file_is_migrated_to_the_latest_keeping_its_jobs(
    db_path: Path, url: str
) -> None:
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', 1)")
    conn.execute(
        "INSERT INTO __alkstore_jobs (queue, state, payload, priority, max_attempts, created_at,"
        " run_at, visibility_timeout_s, backoff_base_s) VALUES ('q', 'pending', '7', 0, 3, 1, 1,"
        " 300, 5)"
    )
    conn.close()
    with alkstore.open(url) as store:
        handle = store.queue("q").claim("w")
        assert handle is not None
        assert handle.payload == 7
        assert store.stream("s").append("works") == 1
    assert _version(db_path) == LATEST_VERSION


def test_a_schema_newer_than_the_engine_is_refused(
    open_store: StoreFactory, db_path: Path, url: str
) -> None:
    open_store().close()
    conn = sqlite3.connect(str(db_path))
    conn.execute("UPDATE __alkstore_meta SET value = ? WHERE key = 'schema_version'", (99,))
    conn.commit()
    conn.close()
    with pytest.raises(EngineUnavailable, match="newer"):
        alkstore.open(url)


def test_processes_opening_a_new_file_at_once_migrate_it_once(url: str) -> None:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=open_and_enqueue, args=(url, results)) for _ in range(4)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert sorted(outcomes) == [1, 2, 3, 4], outcomes  # every open worked, ids distinct


# -- version 2 (the previous release) to version 3 ---------------------------------

# The schema exactly as the previous release (version 2) created it, kept here rather
# than taken from MIGRATIONS so the test keeps describing the files that exist.
V2_SCHEMA = """
CREATE TABLE __alkstore_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE __alkstore_jobs (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    queue                   TEXT    NOT NULL,
    state                   TEXT    NOT NULL
        CHECK (state = 'pending' OR state = 'processing' OR state = 'dead'),
    payload                 TEXT    NOT NULL,
    priority                INTEGER NOT NULL,
    attempts                INTEGER NOT NULL DEFAULT 0,
    max_attempts            INTEGER NOT NULL,
    created_at              INTEGER NOT NULL,
    run_at                  INTEGER NOT NULL,
    claimed_at              INTEGER,
    deadline                INTEGER,
    expires_at              INTEGER,
    worker_id               TEXT,
    visibility_timeout_s    INTEGER NOT NULL,
    backoff_base_s          INTEGER NOT NULL,
    dead_letter_retention_s INTEGER,
    last_error              TEXT,
    died_at                 INTEGER
);
CREATE INDEX __alkstore_jobs_claim
    ON __alkstore_jobs (queue, priority DESC, run_at) WHERE state = 'pending';
CREATE INDEX __alkstore_jobs_lapse
    ON __alkstore_jobs (queue, deadline) WHERE state = 'processing';
CREATE INDEX __alkstore_jobs_expiry
    ON __alkstore_jobs (queue, expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE __alkstore_dead (
    id                      INTEGER PRIMARY KEY,
    queue                   TEXT    NOT NULL,
    payload                 TEXT    NOT NULL,
    priority                INTEGER NOT NULL,
    attempts                INTEGER NOT NULL,
    max_attempts            INTEGER NOT NULL,
    created_at              INTEGER NOT NULL,
    run_at                  INTEGER NOT NULL,
    claimed_at              INTEGER,
    expires_at              INTEGER,
    worker_id               TEXT,
    visibility_timeout_s    INTEGER NOT NULL,
    backoff_base_s          INTEGER NOT NULL,
    dead_letter_retention_s INTEGER,
    last_error              TEXT    NOT NULL,
    died_at                 INTEGER NOT NULL
);
CREATE INDEX __alkstore_dead_purge
    ON __alkstore_dead (queue, died_at + dead_letter_retention_s)
    WHERE dead_letter_retention_s IS NOT NULL;
CREATE TRIGGER __alkstore_jobs_move_to_dead
AFTER UPDATE OF state ON __alkstore_jobs WHEN NEW.state = 'dead'
BEGIN
    INSERT INTO __alkstore_dead (
        id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
        claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
        dead_letter_retention_s, last_error, died_at
    ) VALUES (
        NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
        NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
        NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
        NEW.last_error, NEW.died_at
    );
    DELETE FROM __alkstore_jobs WHERE id = NEW.id;
END;
CREATE TABLE __alkstore_locks (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE __alkstore_schedules (
    name TEXT PRIMARY KEY, spec TEXT NOT NULL, queue TEXT NOT NULL, payload TEXT NOT NULL,
    priority INTEGER NOT NULL, max_attempts INTEGER, expires_s INTEGER,
    interval_s INTEGER NOT NULL, next_fire_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX __alkstore_schedules_due ON __alkstore_schedules (next_fire_at);
CREATE TABLE __alkstore_streams (
    stream TEXT PRIMARY KEY, last_offset INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE __alkstore_stream_events (
    stream TEXT NOT NULL, offset INTEGER NOT NULL, payload TEXT NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (stream, offset)
) WITHOUT ROWID;
CREATE TABLE __alkstore_stream_offsets (
    stream TEXT NOT NULL, consumer TEXT NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (stream, consumer)
) WITHOUT ROWID;
CREATE TABLE __alkstore_notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, payload TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', 2);
"""

# A version-2 file's jobs: 1 pending, 2 processing (claimed), 3 dead (it expired
# after a failed attempt), written as the previous release wrote them.
V2_JOBS = """
INSERT INTO __alkstore_jobs (queue, state, payload, priority, max_attempts, created_at,
    run_at, expires_at, visibility_timeout_s, backoff_base_s)
VALUES ('q', 'pending', '{"n": 1}', 0, 3, 1000, 1000, NULL, 300, 5);
INSERT INTO __alkstore_jobs (queue, state, payload, priority, attempts, max_attempts,
    created_at, run_at, claimed_at, deadline, worker_id, visibility_timeout_s,
    backoff_base_s)
VALUES ('q', 'processing', '{"n": 2}', 0, 1, 3, 1000, 1000, 1000, 1300, 'w', 300, 5);
INSERT INTO __alkstore_jobs (queue, state, payload, priority, attempts, max_attempts,
    created_at, run_at, expires_at, visibility_timeout_s, backoff_base_s)
VALUES ('q', 'pending', '{"n": 3}', 7, 1, 3, 1000, 1000, 1600, 300, 5);
UPDATE __alkstore_jobs SET state = 'dead', last_error = 'expired', died_at = 1100
 WHERE id = 3;
"""


def _make_v2_file(db_path: Path) -> None:
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(V2_SCHEMA + V2_JOBS)
    finally:
        conn.close()


def _columns(db_path: Path, table: str) -> list[str]:
    conn = sqlite3.connect(str(db_path))
    try:
        return [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
    finally:
        conn.close()


def _job_fields(job: Any) -> tuple[Any, ...]:
    return (job.state.value, job.payload, job.priority, job.attempts, job.last_error)


def test_a_version_2_file_is_upgraded_in_place_keeping_its_jobs(db_path: Path, url: str) -> None:
    _make_v2_file(db_path)
    with alkstore.open(url, clock=FakeClock(1200)) as store:
        queue = store.queue("q")
        jobs = {job.id: job for job in queue.jobs()}
        assert {n: _job_fields(job) for n, job in jobs.items()} == {
            1: ("pending", {"n": 1}, 0, 0, None),
            2: ("processing", {"n": 2}, 0, 1, None),
            3: ("dead", {"n": 3}, 7, 1, "expired"),
        }
        assert all(job.errors == () and job.redriven_from is None for job in jobs.values())
        assert queue.stats().dead == 1
    assert _version(db_path) == LATEST_VERSION
    added = [
        "errors",
        "redriven_from",
        "snoozes",
        *UNIQUE_COLUMNS,
        "completed_retention_s",
        "limit_key",
        "has_dependents",
        "metadata",
    ]
    completed = ["completed_at", "result"]  # the live table's completed rows' (in place)
    assert _columns(db_path, "__alkstore_jobs")[-len(added) - 2 :] == added + completed
    assert _columns(db_path, "__alkstore_dead")[-len(added) :] == added


def test_an_upgraded_version_2_file_takes_every_operation(db_path: Path, url: str) -> None:
    _make_v2_file(db_path)
    with alkstore.open(url, clock=FakeClock(1200)) as store:
        queue = store.queue("q")
        (new_id,) = queue.redrive()
        redriven = queue.get_job(new_id)
        assert redriven is not None
        assert (redriven.payload, redriven.redriven_from) == ({"n": 3}, 3)
        assert redriven.expires_at == 1200 + (1600 - 1000)  # now + its old lifetime
        handle = queue.claim("w")
        assert handle is not None
        assert handle.id == new_id  # priority 7 goes first
        assert handle.fail("broken")
        dead = queue.get_job(new_id)
        assert dead is not None
        assert [e.error for e in dead.errors] == ["broken"]
        assert dead.redriven_from == 3  # the move to dead carries the new columns
        assert queue.pause()
        assert queue.claim("w") is None


def test_processes_opening_a_version_2_file_at_once_upgrade_it_once(
    db_path: Path, url: str
) -> None:
    _make_v2_file(db_path)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=open_and_enqueue, args=(url, results)) for _ in range(4)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    # A second run of the ALTER TABLEs would fail its opener: every open worked.
    assert sorted(outcomes) == [4, 5, 6, 7], outcomes
    assert _version(db_path) == LATEST_VERSION
    with alkstore.open(url) as store:
        assert [job.id for job in store.queue("q").jobs(after_id=0, limit=3)] == [1, 2, 3]


# -- version 3 to version 4: one index of live rows ---------------------------------

# A version-3 file's live jobs at clock 1400: 1 pending, 2 claimed and lapsed,
# 3 pending with a deadline left on it (no release wrote one; version 4 must not
# lose such a row all the same), 4 claimed and not lapsed.
V3_JOBS = """
INSERT INTO __alkstore_jobs (queue, state, payload, priority, attempts, max_attempts,
    created_at, run_at, claimed_at, deadline, worker_id, visibility_timeout_s, backoff_base_s)
VALUES ('q', 'pending', '1', 0, 0, 3, 1000, 1000, NULL, NULL, NULL, 300, 5),
       ('q', 'processing', '2', 0, 1, 3, 1000, 1000, 1000, 1300, 'w', 300, 5),
       ('q', 'pending', '3', 0, 1, 3, 1000, 1000, NULL, 1300, NULL, 300, 5),
       ('q', 'processing', '4', 0, 1, 3, 1000, 1000, 1100, 2000, 'w', 300, 5)
"""


def _make_v3_file(db_path: Path) -> None:
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        for statements in MIGRATIONS[:3]:
            for statement in statements:
                conn.execute(statement)
        conn.execute("INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', 3)")
        conn.execute(V3_JOBS)
    finally:
        conn.close()


def test_version_4_replaces_the_claim_and_lapse_indexes_with_one_live_index(
    db_path: Path, url: str
) -> None:
    _make_v3_file(db_path)
    alkstore.open(url, clock=FakeClock(1400)).close()
    names = _tables(db_path)
    assert "__alkstore_jobs_live" in names
    assert not {"__alkstore_jobs_claim", "__alkstore_jobs_lapse"} & names
    assert _version(db_path) == LATEST_VERSION


def test_an_upgraded_version_3_file_claims_its_pending_and_lapsed_jobs_in_claim_order(
    db_path: Path, url: str
) -> None:
    _make_v3_file(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        stats = queue.stats()
        assert (stats.ready, stats.processing, stats.lapsed) == (2, 1, 1)
        handles = queue.claim_batch("w2", 10)
        assert [h.id for h in handles] == [1, 2, 3]  # 4's claim has not lapsed
        assert all(h.ack() for h in handles)
        assert [job.id for job in queue.jobs()] == [4]


def test_every_way_a_job_becomes_pending_leaves_its_deadline_empty(
    open_store: StoreFactory, db_path: Path
) -> None:
    # The live index finds pending rows at `deadline IS NULL`: a pending row with a
    # deadline would never be claimed again.
    clock = FakeClock(1_700_000_000)
    store = open_store(clock=clock)
    queue = store.queue("q", QueueOpts(visibility_timeout_s=30, max_attempts=3))
    queue.enqueue(1)
    queue.enqueue_many([2, 3, 4])
    with store.transaction() as tx:
        tx.enqueue("q", 5)
    retried, released, failed = queue.claim_batch("w", 3)
    assert retried.retry("again", delay=0)
    assert released.release()
    assert failed.fail("broken")
    assert len(queue.redrive()) == 1
    conn = sqlite3.connect(str(db_path))
    try:
        pending, with_deadline = conn.execute(
            "SELECT count(*), count(deadline) FROM __alkstore_jobs WHERE state = 'pending'"
        ).fetchone()
    finally:
        conn.close()
    assert (pending, with_deadline) == (5, 0)
    assert len(queue.claim_batch("w", 10)) == 5  # and every one of them is claimable


# -- version 4 (the previous release) to version 5: the snooze count ------------------

# A version-4 file at clock 1400: 1 pending, 2 claimed by 'w' (deadline 2000), 3 dead.
V4_JOBS = """
INSERT INTO __alkstore_jobs (queue, state, payload, priority, attempts, max_attempts,
    created_at, run_at, claimed_at, deadline, worker_id, visibility_timeout_s, backoff_base_s)
VALUES ('q', 'pending', '1', 0, 0, 3, 1000, 1000, NULL, NULL, NULL, 300, 5),
       ('q', 'processing', '2', 0, 1, 3, 1000, 1000, 1100, 2000, 'w', 300, 5)
"""
V4_DEAD = """
INSERT INTO __alkstore_dead (id, queue, payload, priority, attempts, max_attempts,
    created_at, run_at, visibility_timeout_s, backoff_base_s, last_error, died_at)
VALUES (3, 'q', '3', 0, 1, 1, 1000, 1000, 300, 5, 'broken', 1200)
"""


def _make_v4_file(db_path: Path, version: int = 4) -> None:
    """A file at ``version`` (4 or a later one without new job columns of its own)
    holding the version-4 jobs."""
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        for statements in MIGRATIONS[:version]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', ?)", (version,)
        )
        conn.execute(V4_JOBS)
        conn.execute(V4_DEAD)
    finally:
        conn.close()


def test_a_version_4_file_is_upgraded_in_place_with_every_job_snoozed_zero_times(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        jobs = store.queue("q").jobs()
        assert [(job.id, job.snoozes) for job in jobs] == [(1, 0), (2, 0), (3, 0)]
    assert _version(db_path) == LATEST_VERSION


def test_an_upgraded_version_4_file_carries_the_snooze_count_to_the_dead_table(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        (handle,) = queue.claim_batch("w2", 1)  # job 1: 2's claim has not lapsed
        assert handle.snooze(0)
        (again,) = queue.claim_batch("w2", 1)
        assert again.id == 1
        assert again.fail("broken")
        dead = queue.get_job(1)
        assert dead is not None
        assert (dead.state, dead.snoozes) == (alkstore.JobState.DEAD, 1)


# -- version 5 (the previous release) to version 6: cron schedules -------------------

# A version-5 file at clock 1_700_000_000 with two schedules, as the previous release
# wrote them: every 60 s from 1_700_000_030, and every day from 1_700_050_000.
V5_SCHEDULES = """
INSERT INTO __alkstore_schedules (name, spec, queue, payload, priority, max_attempts,
    expires_s, interval_s, next_fire_at)
VALUES ('minutely', '@every 60s', 'q', '{"n": 1}', 2, 4, 90, 60, 1700000030),
       ('daily', '@every 1d', 'q', '{"n": 2}', 0, NULL, NULL, 86400, 1700050000)
"""


def _make_v5_file(db_path: Path) -> None:
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        for statements in MIGRATIONS[:5]:
            for statement in statements:
                conn.execute(statement)
        conn.execute("INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', 5)")
        conn.execute(V5_SCHEDULES)
    finally:
        conn.close()


def test_a_version_5_file_keeps_its_schedules_in_utc_with_every_boundary_replayed(
    db_path: Path, url: str
) -> None:
    _make_v5_file(db_path)
    with alkstore.open(url, clock=FakeClock(1_700_000_000)) as store:
        minutely = store.get_schedule("minutely")
        assert minutely is not None
        assert (minutely.spec, minutely.interval_s, minutely.next_fire_at) == (
            "@every 60s",
            60,
            1_700_000_030,
        )
        assert (minutely.timezone, minutely.catch_up) == ("UTC", "all")
        assert minutely.opts == alkstore.ScheduleOpts(priority=2, max_attempts=4, expires=90)
        assert [s.name for s in store.schedules()] == ["daily", "minutely"]
    assert _version(db_path) == LATEST_VERSION
    columns = _columns(db_path, "__alkstore_schedules")
    assert columns[columns.index("next_fire_at") + 1 :][:2] == ["timezone", "catch_up"]


def test_an_upgraded_version_5_file_keeps_firing_and_takes_cron_schedules(
    db_path: Path, url: str
) -> None:
    _make_v5_file(db_path)
    clock = FakeClock(1_700_000_030 + 120)  # three boundaries of 'minutely' due
    with alkstore.open(url, clock=clock) as store:
        assert store.tick_schedules("t") == alkstore.TickResult(fired=3, skipped=0)
        minutely = store.get_schedule("minutely")
        assert minutely is not None
        assert minutely.next_fire_at == 1_700_000_030 + 180
        cron = store.schedule(
            "digest", "0 9 * * *", "q", {}, alkstore.ScheduleOpts(timezone="Asia/Tokyo")
        )
        assert (cron.interval_s, cron.timezone) == (None, "Asia/Tokyo")
        assert store.get_schedule("digest") == cron


# -- version 5 (the previous release) or 6 (cron schedules) to 7: unique jobs ------------

UNIQUE_COLUMNS = ["unique_key", "unique_hold", "hold_until", "hold_dead"]


@pytest.mark.parametrize("version", [5, 6])
def test_a_version_5_file_is_upgraded_in_place_with_no_job_holding_a_key(
    db_path: Path, url: str, version: int
) -> None:
    _make_v4_file(db_path, version)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        jobs = store.queue("q").jobs()
        assert [(job.id, job.state.value, job.unique_key) for job in jobs] == [
            (1, "pending", None),
            (2, "processing", None),
            (3, "dead", None),
        ]
    assert _version(db_path) == LATEST_VERSION
    for table in ("__alkstore_jobs", "__alkstore_dead"):
        columns = _columns(db_path, table)
        first = columns.index(UNIQUE_COLUMNS[0])
        assert columns[first : first + len(UNIQUE_COLUMNS)] == UNIQUE_COLUMNS


def test_an_upgraded_version_5_file_takes_unique_jobs_and_moves_their_hold_to_dead(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, 5)
    # The fixture wrote dead job 3 straight into the dead table: the id sequence must
    # know it, as it would have had the job been enqueued.
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE sqlite_sequence SET seq = 3 WHERE name = '__alkstore_jobs'")
    conn.close()
    keeps = Unique("k", states=("pending", "processing", "dead"))
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        first = queue.enqueue({"n": 4}, EnqueueOpts(unique=keeps))
        assert not first.duplicate
        assert queue.enqueue({"n": 5}, EnqueueOpts(unique="k")) == first
        assert queue.cancel(1)
        (handle,) = queue.claim_batch("w2", 1)  # the unique job: 2's claim has not lapsed
        assert handle.id == first
        assert handle.fail("broken")  # the new trigger moves its hold to the dead table
        again = queue.enqueue({"n": 6}, EnqueueOpts(unique="k"))
        assert (again, again.duplicate) == (first, True)
        dead = queue.get_job(first)
        assert dead is not None
        assert (dead.state, dead.unique_key) == (alkstore.JobState.DEAD, "k")


# -- the previous version to the latest: declared schedules (the periodic profile) -------

PERIODIC_VERSION = 8
"""The version that adds the declaration lease."""


def _make_previous_file(db_path: Path) -> None:
    """A file at the version before the declaration lease, holding a schedule written by
    that version: every 60 s from 1_700_000_030."""
    previous = PERIODIC_VERSION - 1
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        for statements in MIGRATIONS[:previous]:
            for statement in statements:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', ?)", (previous,)
        )
        conn.execute(V5_SCHEDULES)
    finally:
        conn.close()


def test_a_previous_version_file_keeps_its_schedules_undeclared(db_path: Path, url: str) -> None:
    _make_previous_file(db_path)
    with alkstore.open(url, clock=FakeClock(1_700_000_000)) as store:
        minutely = store.get_schedule("minutely")
        assert minutely is not None
        assert (minutely.next_fire_at, minutely.declared_until) == (1_700_000_030, None)
    assert _version(db_path) == LATEST_VERSION
    assert _columns(db_path, "__alkstore_schedules")[-1] == "declared_until"
    assert "__alkstore_schedules_declared" in _tables(db_path)


def test_an_upgraded_previous_version_file_never_lapses_its_schedules_and_takes_declared_ones(
    db_path: Path, url: str
) -> None:
    _make_previous_file(db_path)
    clock = FakeClock(1_700_000_000)
    with alkstore.open(url, clock=clock) as store:
        declared = store.declare_schedule("declared", "@every 60s", "q", {"n": 3})
        assert declared.declared_until == 1_700_000_000 + alkstore.DECLARATION_LEASE_S
        clock.set(1_700_000_000 + alkstore.DECLARATION_LEASE_S)
        store.tick_schedules("t")
        assert [s.name for s in store.schedules()] == ["daily", "minutely"]


# -- the version before queue limits to the latest ---------------------------------------

LIMITS_VERSION = 9
"""The version that adds the limits profile's tables."""


def test_the_previous_version_is_upgraded_in_place_with_no_queue_limited(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, LIMITS_VERSION - 1)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        assert queue.limits() is None
        assert queue.stats().concurrency_limit is None
        assert [job.id for job in queue.jobs()] == [1, 2, 3]
    assert _version(db_path) == LATEST_VERSION
    assert "__alkstore_queue_limits" in _tables(db_path)


def test_an_upgraded_previous_version_file_counts_its_claims_against_a_new_limit(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, LIMITS_VERSION - 1)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        assert queue.set_limits(alkstore.Limits(concurrency=1))
        assert queue.claim("w2") is None  # job 2's claim, made before the upgrade, holds it
        assert queue.clear_limits()
        handle = queue.claim("w2")
        assert handle is not None
        assert handle.id == 1


# -- the version before finished jobs to the latest: completed jobs -------------------

RESULTS_VERSION = 10
"""The version that adds the results profile's stamp and completed table (the tests
below start from the version before it)."""


def test_a_file_before_finished_jobs_is_upgraded_with_every_job_acked_as_before(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, RESULTS_VERSION - 1)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        jobs = queue.jobs()
        assert [(job.id, job.completed_retention_s) for job in jobs] == [
            (1, None),
            (2, None),
            (3, None),
        ]
        (handle,) = queue.claim_batch("w2", 1)  # job 1: 2's claim has not lapsed
        assert handle.ack(result={"kept": False})
        assert queue.get_job(1) is None  # stamped before retention existed: deleted
    assert _version(db_path) == LATEST_VERSION
    assert "completed_retention_s" in _columns(db_path, "__alkstore_jobs")
    assert "completed_retention_s" in _columns(db_path, "__alkstore_dead")


def test_an_upgraded_file_before_finished_jobs_keeps_the_jobs_of_a_queue_with_retention(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, RESULTS_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE sqlite_sequence SET seq = 3 WHERE name = '__alkstore_jobs'")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q", QueueOpts(completed_retention_s=60))
        job_id = queue.enqueue({"n": 4}, EnqueueOpts(priority=9))
        (handle,) = queue.claim_batch("w2", 1)
        assert handle.id == job_id
        assert handle.ack(result=[1, "two"])
        done = queue.get_job(job_id)
        assert done is not None
        assert (done.state, done.completed_at, done.result) == (
            alkstore.JobState.COMPLETED,
            1400,
            [1, "two"],
        )
        failing = queue.enqueue({"n": 5}, EnqueueOpts(priority=9))
        (handle,) = queue.claim_batch("w2", 1)
        assert handle.id == failing
        assert handle.fail("broken")  # the new trigger carries the stamp to dead
        dead = queue.get_job(failing)
        assert dead is not None
        assert (dead.state, dead.completed_retention_s) == (alkstore.JobState.DEAD, 60)


# -- the version before per-key limits to the latest -----------------------------------

KEY_LIMITS_VERSION = 11
"""The version that adds the key_limits profile's job column and per-key limit (the
tests below start from the version before it)."""


def _make_file_before_key_limits(db_path: Path) -> None:
    """A file at the version before per-key limits, holding the version-4 jobs and a
    queue limited by concurrency and rate."""
    _make_v4_file(db_path, KEY_LIMITS_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO __alkstore_queue_limits (queue, concurrency, rate, per_s) "
            "VALUES ('limited', 2, 1, 60)"
        )
    finally:
        conn.close()


def test_a_file_before_key_limits_is_upgraded_keeping_its_limits_and_no_job_keyed(
    db_path: Path, url: str
) -> None:
    _make_file_before_key_limits(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        assert [job.limit_key for job in store.queue("q").jobs()] == [None, None, None]
        limited = store.queue("limited")
        assert limited.limits() == alkstore.Limits(2, rate=1, per=60)
        limited.enqueue_many([{"n": 1}, {"n": 2}])
        assert limited.claim("w") is not None
        assert limited.claim("w") is None  # the rate's trigger, made again, counted it
    assert _version(db_path) == LATEST_VERSION
    assert "limit_key" in _columns(db_path, "__alkstore_jobs")
    assert "limit_key" in _columns(db_path, "__alkstore_dead")
    assert "__alkstore_queue_limits_v11" not in _tables(db_path)


def test_an_upgraded_file_before_key_limits_claims_keys_in_turn_and_keeps_a_dead_jobs_key(
    db_path: Path, url: str
) -> None:
    _make_file_before_key_limits(db_path)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE sqlite_sequence SET seq = 3 WHERE name = '__alkstore_jobs'")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("keyed")
        assert queue.set_limits(alkstore.Limits(concurrency_per_key=1))
        queue.enqueue_many([{"n": 1}, {"n": 2}], EnqueueOpts(limit_key="big"))
        queue.enqueue({"n": 3}, EnqueueOpts(limit_key="small"))
        claimed = queue.claim_batch("w", 10)
        assert sorted(handle.job.limit_key or "" for handle in claimed) == ["big", "small"]
        small = next(handle for handle in claimed if handle.job.limit_key == "small")
        assert small.fail("broken")  # the new trigger carries the key to dead
        dead = queue.get_job(small.id)
        assert dead is not None
        assert (dead.state, dead.limit_key) == (alkstore.JobState.DEAD, "small")


def test_an_upgraded_file_before_key_limits_counts_each_keys_starts_against_its_rate(
    db_path: Path, url: str
) -> None:
    _make_file_before_key_limits(db_path)
    clock = FakeClock(1400)
    with alkstore.open(url, clock=clock) as store:
        queue = store.queue("rated")
        assert queue.set_limits(alkstore.Limits(rate_per_key=1, per=60))
        for key in ("a", "b"):
            queue.enqueue_many([{"n": 1}, {"n": 2}], EnqueueOpts(limit_key=key))
        first = queue.claim_batch("w", 10)
        assert sorted(handle.job.limit_key or "" for handle in first) == ["a", "b"]
        assert queue.claim_batch("w", 10) == []
        clock.advance(60)
        assert len(queue.claim_batch("w", 10)) == 2
    assert "__alkstore_key_claim_starts" in _tables(db_path)


# -- the version before the dashboard's reads to the latest: the queue index ----------

DASHBOARD_VERSION = 12
"""The version that adds the queue index of a page of live jobs (the tests below start
from the version before it)."""


def test_an_upgraded_file_before_the_queue_index_pages_its_jobs_by_state_newest_first(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, DASHBOARD_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE sqlite_sequence SET seq = 3 WHERE name = '__alkstore_jobs'")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        queue.enqueue({"n": 4})
        pending = queue.jobs(alkstore.JobState.PENDING, before_id=100, limit=10)
        processing = queue.jobs(alkstore.JobState.PROCESSING, before_id=100, limit=10)
        assert [job.id for job in pending] == [4, 1]
        assert [job.id for job in processing] == [2]
    assert _version(db_path) == LATEST_VERSION
    assert "__alkstore_jobs_queue" in _tables(db_path)


def test_an_upgraded_file_before_the_worker_registry_registers_and_lists_workers(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, DASHBOARD_VERSION - 1)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        assert store.workers() == []
        store.register_worker(alkstore.WorkerInfo("w2", "host", 9, ("q",), 1300))
        (listed,) = store.workers()
        assert (listed.id, listed.queues, listed.last_seen) == ("w2", ("q",), 1400)
        (handle,) = store.queue("q").claim_batch("w2", 1)  # its jobs: claims carry its id
        assert handle.job.worker_id == listed.id
        assert store.heartbeat_worker("w2", {"q": 3})
        (counted,) = store.throughput()
        assert (counted.queue, counted.total) == ("q", 3)
    assert {"__alkstore_workers", "__alkstore_throughput"} <= _tables(db_path)


# -- the version before job dependencies to the latest ----------------------------------

DEPENDENCIES_VERSION = 13
"""The version that adds the dependencies profile's waiting table, edges and triggers
(the tests below start from the version before it)."""


def test_a_file_before_dependencies_is_upgraded_with_no_job_waiting(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, DEPENDENCIES_VERSION - 1)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        assert [job.state for job in queue.jobs()] == [
            alkstore.JobState.PENDING,
            alkstore.JobState.PROCESSING,
            alkstore.JobState.DEAD,
        ]
        assert queue.stats().waiting == 0
    assert _version(db_path) == LATEST_VERSION
    assert {"__alkstore_waiting", "__alkstore_dependencies"} <= set(_tables(db_path))
    assert "has_dependents" in _columns(db_path, "__alkstore_dead")


def test_an_upgraded_file_before_dependencies_releases_a_job_waiting_on_an_old_one(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, DEPENDENCIES_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE sqlite_sequence SET seq = 3 WHERE name = '__alkstore_jobs'")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        waiting = queue.enqueue({"n": 4}, EnqueueOpts(after=[1]))  # job 1, written before
        assert waiting == 4
        assert queue.get_job(waiting).state is alkstore.JobState.WAITING  # type: ignore[union-attr]
        (handle,) = queue.claim_batch("w2", 1)
        assert handle.id == 1
        assert handle.ack()
        released = queue.get_job(waiting)
        assert released is not None
        assert released.state is alkstore.JobState.PENDING


# -- the version before the key index to the latest -------------------------------------

KEY_INDEX_VERSION = 14
"""The version that adds the index of pending rows by limit key (the tests below start
from the version before it)."""


def test_a_file_before_the_key_index_is_upgraded_with_the_key_index(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, KEY_INDEX_VERSION - 1)
    assert "__alkstore_jobs_key" not in _tables(db_path)
    with alkstore.open(url, clock=FakeClock(1400)):
        pass
    assert _version(db_path) == LATEST_VERSION
    assert "__alkstore_jobs_key" in _tables(db_path)


def test_an_upgraded_file_before_the_key_index_claims_its_old_jobs_keys_in_turn(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, KEY_INDEX_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE sqlite_sequence SET seq = 3 WHERE name = '__alkstore_jobs'")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        old = store.queue("q")
        assert old.set_limits(alkstore.Limits(concurrency_per_key=2))
        # the old jobs share the key "": its live claim holds one of its two slots
        (handle,) = old.claim_batch("w2", 10)
        assert (handle.id, handle.job.limit_key) == (1, None)
        queue = store.queue("keyed")
        assert queue.set_limits(alkstore.Limits(concurrency_per_key=1))
        queue.enqueue_many([{"n": 1}, {"n": 2}], EnqueueOpts(limit_key="big"))
        queue.enqueue({"n": 3}, EnqueueOpts(limit_key="small"))
        claimed = queue.claim_batch("w", 10)
        assert [claim.job.limit_key for claim in claimed] == ["big", "small"]


# -- the version before the kept queues to the latest ------------------------------------

KEPT_QUEUES_VERSION = 15
"""The version that adds the queues keeping completed jobs, read by ack_batch (the
tests below start from the version before it)."""


def test_an_upgraded_file_keeps_an_ack_batch_of_a_job_stamped_with_a_retention_before(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, KEPT_QUEUES_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE __alkstore_jobs SET completed_retention_s = 60 WHERE id = 2")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        assert queue.ack_batch([2], "w") == 1  # job 2, claimed by w before the upgrade
        done = queue.get_job(2)
        assert done is not None
        assert (done.state, done.completed_at) == (alkstore.JobState.COMPLETED, 1400)
    assert _version(db_path) == LATEST_VERSION


def test_an_upgraded_file_deletes_on_an_ack_batch_of_a_queue_that_never_kept_a_job(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, KEPT_QUEUES_VERSION - 1)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        assert queue.ack_batch([2], "w") == 1
        assert queue.get_job(2) is None
    conn = sqlite3.connect(str(db_path))
    try:
        assert conn.execute("SELECT count(*) FROM __alkstore_kept_queues").fetchone() == (0,)
        completed = "SELECT count(*) FROM __alkstore_jobs WHERE state = 'completed'"
        assert conn.execute(completed).fetchone() == (0,)
    finally:
        conn.close()


def test_a_file_before_metadata_is_upgraded_with_no_job_carrying_any(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, METADATA_VERSION - 1)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        assert [job.metadata for job in store.queue("q").jobs()] == [None, None, None]
    assert _version(db_path) == LATEST_VERSION
    for table in ("__alkstore_jobs", "__alkstore_dead", "__alkstore_waiting"):
        assert "metadata" in _columns(db_path, table)


def test_an_upgraded_file_before_metadata_keeps_a_jobs_metadata_released_and_dead(
    db_path: Path, url: str
) -> None:
    _make_v4_file(db_path, METADATA_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE sqlite_sequence SET seq = 3 WHERE name = '__alkstore_jobs'")
    conn.close()
    metadata = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("meta", QueueOpts(max_attempts=1))
        first = queue.enqueue({"n": 1})
        waiting = queue.enqueue({"n": 2}, EnqueueOpts(after=[first], metadata=metadata))
        (handle,) = queue.claim_batch("w", 1)
        assert handle.ack()  # the release trigger, made again, moves the metadata
        (released,) = queue.claim_batch("w", 1)
        assert (released.id, released.job.metadata) == (waiting, metadata)
        assert released.fail("no")  # the move to dead, made again, keeps it
        dead = queue.get_job(waiting)
        assert dead is not None
        assert (dead.state, dead.metadata) == (alkstore.JobState.DEAD, metadata)


def _make_file_before_rate_buckets(db_path: Path) -> sqlite3.Connection:
    _make_v4_file(db_path, RATE_BUCKETS_VERSION - 1)
    return sqlite3.connect(str(db_path), isolation_level=None)


def test_a_file_before_rate_buckets_keeps_each_window_start_counted_against_the_rate(
    db_path: Path, url: str
) -> None:
    conn = _make_file_before_rate_buckets(db_path)
    conn.execute("DELETE FROM __alkstore_jobs")
    conn.execute("INSERT INTO __alkstore_queue_limits (queue, rate, per_s) VALUES ('r', 3, 60)")
    # Two starts of one second and one older, as the previous version kept them (a row
    # per claimed row): all three in the window (1,340, 1,400].
    conn.executemany(
        "INSERT INTO __alkstore_claim_starts (queue, started_at) VALUES ('r', ?)",
        [(1390,), (1390,), (1345,)],
    )
    conn.close()
    clock = FakeClock(1400)
    with alkstore.open(url, clock=clock) as store:
        queue = store.queue("r")
        queue.enqueue_many(list(range(10)))
        assert queue.claim("w") is None  # the rate's three starts are still counted
        clock.advance(5)  # 1,345 has left the window (1,345, 1,405]: one slot
        assert len(queue.claim_batch("w", 10)) == 1
        clock.advance(45)  # and the two of 1,390 too, not the one of 1,405: two more
        assert len(queue.claim_batch("w", 10)) == 2
    assert _version(db_path) == LATEST_VERSION


def test_a_file_before_rate_buckets_keeps_each_keys_window_starts(db_path: Path, url: str) -> None:
    conn = _make_file_before_rate_buckets(db_path)
    conn.execute("DELETE FROM __alkstore_jobs")
    conn.execute(
        "INSERT INTO __alkstore_queue_limits (queue, rate_per_key, per_s) VALUES ('k', 2, 60)"
    )
    conn.executemany(
        "INSERT INTO __alkstore_key_claim_starts (queue, limit_key, started_at)"
        " VALUES ('k', ?, 1390)",
        [("a",), ("a",), ("b",)],
    )
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("k")
        for key in ("a", "b", "b"):
            queue.enqueue(key, EnqueueOpts(limit_key=key))
        # "a" is at its rate of 2; "b" has one start left.
        assert [h.job.limit_key for h in queue.claim_batch("w", 10)] == ["b"]
    assert _version(db_path) == LATEST_VERSION


# -- the version before completed jobs kept in place to the latest ---------------------

# A job the previous version kept in its completed table: completed at 1300, kept 600 s.
PREVIOUS_COMPLETED = """
INSERT INTO __alkstore_completed (id, queue, payload, priority, attempts, max_attempts,
    created_at, run_at, claimed_at, worker_id, visibility_timeout_s, backoff_base_s,
    completed_retention_s, completed_at, result, metadata)
VALUES (7, 'q', '7', 0, 1, 3, 1000, 1000, 1200, 'w', 300, 5, 600, 1300, '{"ok": true}',
        '{"k": "v"}')
"""


def _make_previous_completed_file(db_path: Path) -> None:
    """A file at the version before completed jobs were kept in place: the version-4
    jobs, job 7 completed in the completed table, ids handed out up to 9."""
    _make_v4_file(db_path, COMPLETED_IN_PLACE_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute(PREVIOUS_COMPLETED)
        conn.execute("UPDATE sqlite_sequence SET seq = 9 WHERE name = '__alkstore_jobs'")
    finally:
        conn.close()


def _live_table_objects(db_path: Path) -> dict[tuple[str, str], str]:
    """Every index and trigger of the live table, and of the tables whose triggers name
    it: ``(type, name) -> sql``."""
    conn = sqlite3.connect(str(db_path))
    try:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master"
            " WHERE type IN ('index', 'trigger') AND sql IS NOT NULL"
            " AND (tbl_name = '__alkstore_jobs' OR sql LIKE '%__alkstore_jobs%')"
        )
        return {(kind, name): sql for kind, name, sql in rows}
    finally:
        conn.close()


def test_an_upgraded_file_shows_a_completed_job_of_before_with_its_result(
    db_path: Path, url: str
) -> None:
    _make_previous_completed_file(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        done = queue.get_job(7)
        assert done is not None
        assert (done.state, done.completed_at, done.result, done.metadata) == (
            alkstore.JobState.COMPLETED,
            1300,
            {"ok": True},
            {"k": "v"},
        )
        assert [job.id for job in queue.jobs(state=alkstore.JobState.COMPLETED)] == [7]
        stats = queue.stats()
        assert (stats.completed, stats.processing, stats.ready) == (1, 1, 1)
    assert _version(db_path) == LATEST_VERSION
    assert "__alkstore_completed" not in _tables(db_path)


def test_an_upgraded_file_purges_a_completed_job_of_before_after_its_retention(
    db_path: Path, url: str
) -> None:
    _make_previous_completed_file(db_path)
    clock = FakeClock(1400)
    with alkstore.open(url, clock=clock) as store:
        queue = store.queue("q")
        assert queue.sweep_expired().purged_completed == 0  # kept until 1900
        clock.set(1901)
        assert queue.sweep_expired().purged_completed == 1
        assert queue.get_job(7) is None


def test_an_upgraded_file_hands_out_no_id_again(db_path: Path, url: str) -> None:
    _make_previous_completed_file(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        assert store.queue("q").enqueue({"n": 10}) == 10


def test_an_upgraded_file_keeps_every_index_and_trigger_of_the_live_table(
    db_path: Path, url: str
) -> None:
    _make_previous_completed_file(db_path)
    before = _live_table_objects(db_path)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:  # this version's step alone: a later one may change a trigger on purpose
        for statement in MIGRATIONS[COMPLETED_IN_PLACE_VERSION - 1]:
            conn.execute(statement)
    finally:
        conn.close()
    after = _live_table_objects(db_path)
    assert set(after) == set(before) | {("trigger", COMPLETE_RELEASE_TRIGGER)}
    # Made again as they were (a trigger a migration before this one changed stays
    # changed), but for the two indexes that now leave completed rows out.
    changed = {("index", EXPIRY_INDEX), ("index", KEY_INDEX)}
    assert {key: after[key] for key in before if key not in changed} == {
        key: sql for key, sql in before.items() if key not in changed
    }
    assert all("completed_at IS NULL" in after[key] for key in changed)


def test_an_upgraded_file_completes_a_job_stamped_before_in_place(db_path: Path, url: str) -> None:
    _make_previous_completed_file(db_path)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE __alkstore_jobs SET completed_retention_s = 60 WHERE id = 2")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        (handle,) = queue.claim_batch("w2", 1)  # job 1 (2's claim has not lapsed)
        assert handle.ack()  # deleted: not stamped
        assert queue.ack_batch([2], "w") == 1  # job 2, claimed by w before the upgrade
        done = queue.get_job(2)
        assert done is not None
        assert (done.state, done.completed_at) == (alkstore.JobState.COMPLETED, 1400)
        assert queue.get_job(1) is None
        assert queue.stats().completed == 2


# -- the version before kept edges (contract 1.2 §18.4) to the latest ----------------------


def _make_file_with_a_dead_dependent(db_path: Path) -> None:
    """A file at the version before kept edges whose job 4, waiting for job 1, died with
    it (job 1 failed), by that version's own cascade trigger."""
    _make_v4_file(db_path, KEPT_EDGES_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("UPDATE sqlite_sequence SET seq = 4 WHERE name = '__alkstore_jobs'")
        conn.execute(
            """INSERT INTO __alkstore_waiting (id, queue, payload, priority, attempts,
            max_attempts, created_at, run_at, visibility_timeout_s, backoff_base_s,
            waiting_on) VALUES (4, 'q', '4', 0, 0, 3, 1000, 1000, 300, 5, 1)"""
        )
        conn.execute("INSERT INTO __alkstore_dependencies (depends_on, job_id) VALUES (1, 4)")
        conn.execute("UPDATE __alkstore_jobs SET has_dependents = 1 WHERE id = 1")
        conn.execute(
            """UPDATE __alkstore_jobs SET state = 'dead', last_error = 'broken', died_at = 1300
            WHERE id = 1"""
        )
    finally:
        conn.close()


def test_a_file_before_kept_edges_is_upgraded_with_its_dead_dependent_kept_dead(
    db_path: Path, url: str
) -> None:
    _make_file_with_a_dead_dependent(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        dependent = store.queue("q").get_job(4)
        assert dependent is not None
        assert (dependent.state, dependent.last_error) == (
            alkstore.JobState.DEAD,
            "dependency 1 is dead",
        )
    assert _version(db_path) == LATEST_VERSION
    assert "__alkstore_dead_dependencies" in _tables(db_path)


def test_an_upgraded_file_leaves_a_dependent_that_died_before_dead_on_its_dependencys_redrive(
    db_path: Path, url: str
) -> None:
    _make_file_with_a_dead_dependent(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        (new_root,) = queue.redrive([1])
        assert queue.dependencies(new_root).waited_by == ()  # it kept no edges
        assert queue.get_job(4).state is alkstore.JobState.DEAD  # type: ignore[union-attr]
        (new_dependent,) = queue.redrive([4])
        assert queue.get_job(new_dependent).state is alkstore.JobState.PENDING  # type: ignore[union-attr]


def test_an_upgraded_file_brings_back_a_dependent_that_dies_after_the_upgrade(
    db_path: Path, url: str
) -> None:
    _make_file_with_a_dead_dependent(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("new", QueueOpts(max_attempts=1))
        root = queue.enqueue({"n": 5})
        child = queue.enqueue({"n": 6}, EnqueueOpts(after=[root]))
        (handle,) = queue.claim_batch("w", 1)
        assert handle.fail("broken")  # the cascade trigger, made again, keeps its edge
        (new_root,) = queue.redrive([root])
        (revived,) = queue.dependencies(new_root).waited_by
        job = queue.get_job(revived)
        assert job is not None
        assert (job.state, job.redriven_from) == (alkstore.JobState.WAITING, child)


# -- the version before the release on ack to the latest -------------------------------


def _make_file_with_a_waiting_dependent(db_path: Path) -> None:
    """A file at the version before the release on ack whose job 4 waits for job 1
    (pending) and job 5 for job 2 (claimed by ``w``), each edge written by that version."""
    _make_v4_file(db_path, RELEASE_ON_ACK_VERSION - 1)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("UPDATE sqlite_sequence SET seq = 5 WHERE name = '__alkstore_jobs'")
        for job_id, dependency in ((4, 1), (5, 2)):
            conn.execute(
                """INSERT INTO __alkstore_waiting (id, queue, payload, priority, attempts,
                max_attempts, created_at, run_at, visibility_timeout_s, backoff_base_s,
                waiting_on) VALUES (?, 'q', ?, 0, 0, 3, 1000, 1000, 300, 5, 1)""",
                (job_id, str(job_id)),
            )
            conn.execute(
                "INSERT INTO __alkstore_dependencies (depends_on, job_id) VALUES (?, ?)",
                (dependency, job_id),
            )
        conn.execute("UPDATE __alkstore_jobs SET has_dependents = 1 WHERE id IN (1, 2)")
    finally:
        conn.close()


def test_a_file_before_the_release_on_ack_is_upgraded_with_its_jobs_and_edges_intact(
    db_path: Path, url: str
) -> None:
    _make_file_with_a_waiting_dependent(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        states = {job_id: queue.get_job(job_id).state for job_id in (1, 2, 3, 4, 5)}  # type: ignore[union-attr]
        assert queue.dependencies(4).waits_for == (1,)
    assert states == {
        1: alkstore.JobState.PENDING,
        2: alkstore.JobState.PROCESSING,
        3: alkstore.JobState.DEAD,
        4: alkstore.JobState.WAITING,
        5: alkstore.JobState.WAITING,
    }
    assert _version(db_path) == LATEST_VERSION


def test_an_upgraded_file_releases_a_dependent_from_before_on_its_dependencys_ack(
    db_path: Path, url: str
) -> None:
    _make_file_with_a_waiting_dependent(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        handle = queue.claim("w2")
        assert handle is not None
        assert handle.id == 1
        assert handle.ack()
        assert queue.get_job(4).state is alkstore.JobState.PENDING  # type: ignore[union-attr]
        assert queue.get_job(5).state is alkstore.JobState.WAITING  # type: ignore[union-attr]


def test_an_upgraded_file_releases_a_dependent_from_before_on_an_ack_batch_of_a_claim_from_before(
    db_path: Path, url: str
) -> None:
    _make_file_with_a_waiting_dependent(db_path)
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        assert queue.ack_batch([2], "w") == 1  # claimed by w before the upgrade
        assert queue.get_job(5).state is alkstore.JobState.PENDING  # type: ignore[union-attr]
        assert queue.get_job(4).state is alkstore.JobState.WAITING  # type: ignore[union-attr]


def test_an_upgraded_file_moves_a_claim_from_before_to_dead_when_it_fails(
    db_path: Path, url: str
) -> None:
    _make_file_with_a_waiting_dependent(db_path)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("UPDATE __alkstore_jobs SET max_attempts = 1 WHERE id = 1")
    conn.close()
    with alkstore.open(url, clock=FakeClock(1400)) as store:
        queue = store.queue("q")
        handle = queue.claim("w2")
        assert handle is not None
        assert handle.fail("broken")  # the move to dead, made again, fires OF died_at
        dead = queue.get_job(handle.id)
        assert dead is not None
        assert (dead.state, dead.last_error) == (alkstore.JobState.DEAD, "broken")
        dependent = queue.get_job(4)
        assert dependent is not None
        assert (dependent.state, dependent.last_error) == (
            alkstore.JobState.DEAD,
            "dependency 1 is dead",
        )
