"""The engine's tables: named __alkstore_*, versioned, migrated once however many open at once."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest
from sqlite_helpers import StoreFactory, open_and_enqueue

import alkstore
from alkstore import EngineUnavailable
from alkstore_sqlite import LATEST_VERSION
from alkstore_sqlite.migrations import MIGRATIONS


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
    assert _version(db_path) == LATEST_VERSION == 2


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
