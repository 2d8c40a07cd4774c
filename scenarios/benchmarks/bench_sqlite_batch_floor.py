"""Row 4's floor on SQLite (docs/benchmarks.md, "SQLite `claim_batch` against the fair
baseline"): ``claim_batch(100)`` + ``ack_batch`` through plain ``sqlite3``, statements
and ``json.loads`` of each payload only, CPU time. The fair baseline (plain + lapse
index) grown one step at a time toward what the contract's features need (the job
columns they store, the queue and per-key indexes, the values a ``Job`` needs back),
beside the SQLite engine's own statements on a file it provisioned. Each step on a fresh
file, the steps alternating, ``ROUNDS`` rounds, medians.

    python scenarios/benchmarks/bench_sqlite_batch_floor.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import bench_plain_sql as plain_sql
from bench_workloads import payloads

import alkstore
from alkstore_sqlite import statements as sql

JOBS = 20_000
BATCH = 100
QUEUE = "bench"
WORKER = "w"
ROUNDS = 5

EXTRA_COLUMNS = """,
    expires_at INTEGER, backoff_base_s INTEGER NOT NULL DEFAULT 5,
    dead_letter_retention_s INTEGER, last_error TEXT, died_at INTEGER, errors TEXT,
    redriven_from INTEGER, snoozes INTEGER NOT NULL DEFAULT 0, unique_key TEXT,
    unique_hold TEXT, hold_until INTEGER, hold_dead INTEGER NOT NULL DEFAULT 0,
    completed_retention_s INTEGER, limit_key TEXT, has_dependents INTEGER NOT NULL DEFAULT 0,
    metadata TEXT, completed_at INTEGER, result TEXT
)"""
"""The engine's job columns the plain table lacks (31 columns in all, where it has 13)."""
FEATURE_INDEXES = (
    "CREATE INDEX jobs_queue ON jobs (queue)",
    "CREATE INDEX jobs_key ON jobs (queue, coalesce(limit_key, ''), priority DESC, run_at, id)"
    " WHERE completed_at IS NULL",
)
"""The engine's queue index (a queue's page of jobs) and per-key index (key_limits)."""
_PACKED = (
    f"CASE WHEN {' AND '.join(sql.RARE_CLAIMED.values())} THEN NULL "
    f"ELSE json_array({', '.join(sql.RARE_CLAIMED)}) END"
)
RETURNED = f"RETURNING {', '.join(sql.CLAIMED_COMMON)}, {_PACKED}"
"""What the engine's claim returns: the values a ``Job`` needs, the rare ones as one."""


@dataclass(frozen=True)
class Step:
    label: str
    columns: bool = False
    indexes: bool = False
    returned: bool = False


STEPS = (
    Step("plain + lapse index"),
    Step("+ the job columns the features store", columns=True),
    Step("+ the queue and per-key indexes", columns=True, indexes=True),
    Step("+ the values a Job needs back", columns=True, indexes=True, returned=True),
)
ENGINE = "the engine's own statements"


def _plain_file(path: str, step: Step) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in plain_sql.SQLITE_PRAGMAS:
        conn.execute(pragma)
    schema = plain_sql.SQLITE_SCHEMA
    if step.columns:
        plain_end = "visibility_timeout_s INTEGER NOT NULL\n)"
        if plain_end not in schema:
            raise RuntimeError("the plain schema changed: update EXTRA_COLUMNS' place")
        schema = schema.replace(plain_end, "visibility_timeout_s INTEGER NOT NULL" + EXTRA_COLUMNS)
    conn.executescript(schema)
    conn.execute(plain_sql.SQLITE_LAPSE_INDEX)
    for index in FEATURE_INDEXES if step.indexes else ():
        conn.execute(index)
    now = int(time.time())
    rows = [(QUEUE, json.dumps(item), now, now, 3, 30) for item in payloads(JOBS)]
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(plain_sql.SQLITE_INSERT_MANY, rows)
    conn.execute("COMMIT")
    return conn


def _plain_rate(path: str, step: Step) -> float:
    conn = _plain_file(path, step)
    claim = plain_sql.SQLITE_CLAIM
    if step.returned:
        claim = claim.replace("RETURNING id, attempts, payload", RETURNED)
    payload_at = 1 if step.returned else 2
    now = int(time.time())
    params = {"queue": QUEUE, "worker": WORKER, "now": now, "limit": BATCH}
    started, done = time.process_time(), 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(claim, params).fetchall()
        conn.execute("COMMIT")
        if not rows:
            break
        for row in rows:
            json.loads(row[payload_at])
        ids = [row[0] for row in rows]
        conn.execute("BEGIN IMMEDIATE")
        ack = plain_sql.sqlite_ack_batch(len(ids))
        done += conn.execute(ack, (*ids, QUEUE, WORKER, now)).rowcount
        conn.execute("COMMIT")
    cpu = time.process_time() - started
    conn.close()
    return _checked(done, cpu)


def _engine_rate(where: str) -> float:
    """The engine's claim and ack_batch statements, as its driver runs them (the claim in
    autocommit, the ack_batch in one transaction with its probes)."""
    url = "sqlite:///" + os.path.join(where, "engine.db")
    with alkstore.open(url) as store:
        queue = store.queue(QUEUE)
        for start in range(0, JOBS, 1000):
            queue.enqueue_many(payloads(min(1000, JOBS - start)))
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    for pragma in (sql.SYNCHRONOUS["NORMAL"], sql.TEMP_STORE_MEMORY, sql.RECURSIVE_TRIGGERS):
        conn.execute(pragma)
    now = int(time.time())
    named = {"queue": QUEUE, "worker_id": WORKER, "now": now, "limit": BATCH}
    size = next(size for size in sql.ACK_SIZES if size >= BATCH)
    started, done = time.process_time(), 0
    while True:
        rows = conn.execute(sql.CLAIM_READY, named).fetchall()
        if not rows:
            break
        for row in rows:
            json.loads(row[1])
        ids = [row[0] for row in rows]
        ids += [ids[-1]] * (size - len(ids))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql.ACK_BATCH_PROBES, (QUEUE,)).fetchone()
        done += conn.execute(sql.ACK_FOR_WORKER[size], [*ids, QUEUE, WORKER, now]).rowcount
        conn.execute("COMMIT")
    cpu = time.process_time() - started
    conn.close()
    return _checked(done, cpu)


def _checked(done: int, cpu: float) -> float:
    if done != JOBS:
        raise RuntimeError(f"acked {done} of {JOBS} jobs")
    return JOBS / cpu


def _plain_in(where: str, *, step: Step) -> float:
    return _plain_rate(os.path.join(where, "plain.db"), step)


def _in_fresh_dir(measure: Callable[[str], float]) -> float:
    with tempfile.TemporaryDirectory(prefix="alkstore-floor-") as where:
        return measure(where)


def main(rounds: int) -> None:
    print(f"load average at start {os.getloadavg()}")
    rates: dict[str, list[float]] = {step.label: [] for step in STEPS}
    rates[ENGINE] = []
    for _ in range(rounds):
        for step in STEPS:
            rates[step.label].append(_in_fresh_dir(partial(_plain_in, step=step)))
        rates[ENGINE].append(_in_fresh_dir(_engine_rate))
    base = statistics.median(rates[STEPS[0].label])
    print(f"claim_batch({BATCH}) + ack_batch, {JOBS:,} jobs, CPU, median of {rounds} rounds:")
    for label, values in rates.items():
        rate = statistics.median(values)
        print(f"  {label:40s} {rate / 1000:6.1f}k/s  {rate / base:.2f}x of plain + lapse index")
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS)
