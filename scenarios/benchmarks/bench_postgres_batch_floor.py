"""Row 4's floor on PostgreSQL (docs/benchmarks.md, "The floor of row 4 on PostgreSQL"):
``claim_batch(100)`` + ``ack_batch`` from a backlog of ``JOBS``, through bare psycopg on
one autocommit connection (``json.loads`` of each payload, nothing else), the plain
baseline grown one step at a time toward the engine (the lapse index, the engine's table,
its claim, its ack), then the engine through its API. Per job: the client's CPU
(``time.process_time``), the server's (its backends' ``/proc/<pid>/schedstat``) and the
wall clock. Each step on a fresh schema, the steps taking turns (their order turned
every round), ``ROUNDS`` rounds; medians of each step's per-round ratio to plain.

    ALKSTORE_PG_DSN=... python scenarios/benchmarks/bench_postgres_batch_floor.py [ROUNDS]

The server must be on this machine (its backends' CPU is read from ``/proc``), and
otherwise idle: the API step counts every client backend of the database.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import bench_plain_sql as plain_sql
import psycopg
from bench_workloads import payloads
from psycopg import sql as pgsql

import alkstore
from alkstore_postgres import statements as engine_sql
from alkstore_postgres.binding import id_array
from alkstore_postgres.testing import reuse

JOBS = 20_000
BATCH = 100
QUEUE = "bench"
WORKER = "bench-worker"
ROUNDS = 5
FILL = 1_000
"""Jobs per enqueue of the fill (a backlog built the same way for every step)."""

LAPSE_INDEX = "CREATE INDEX ON {schema}.jobs (queue, deadline) WHERE state = 'processing'"
"""What finding lapsed claims needs (as the engine's ``alkstore_jobs_processing_deadline``)."""


def _on_engine_table(statement: str) -> str:
    """A plain statement run against the engine's job table instead of its own."""
    return statement.replace("{schema}.jobs", "{schema}.alkstore_jobs")


@dataclass(frozen=True)
class Drain:
    """One step: how its table is made and which statements drain it."""

    label: str
    engine_table: bool
    claim: str
    ack: str
    engine_ack: bool = False
    lapse_index: bool = False

    @property
    def payload_at(self) -> int:
        """Where a claimed row holds its payload: the engine's claim returns ``Job``'s
        columns, plain's ``id, attempts, payload``."""
        return 1 if self.claim is engine_sql.CLAIM_READY else 2


PLAIN_CLAIM = plain_sql.PG["claim"]
PLAIN_ACK = plain_sql.PG["ack_batch"]
STEPS = (
    Drain("plain psycopg, its own table", False, PLAIN_CLAIM, PLAIN_ACK),
    Drain("+ the lapse index", False, PLAIN_CLAIM, PLAIN_ACK, lapse_index=True),
    Drain(
        "plain's statements on the engine's table",
        True,
        _on_engine_table(PLAIN_CLAIM),
        _on_engine_table(PLAIN_ACK),
    ),
    Drain(
        "the engine's claim, plain's ack", True, engine_sql.CLAIM_READY, _on_engine_table(PLAIN_ACK)
    ),
    Drain(
        "the engine's statements",
        True,
        engine_sql.CLAIM_READY,
        engine_sql.ACK_BATCH,
        engine_ack=True,
    ),
)
API = "the engine through its API"


@dataclass(frozen=True)
class Cost:
    """A drain's cost per job, in microseconds."""

    wall: float
    client: float
    server: float

    @property
    def cpu(self) -> float:
        return self.client + self.server


def _server_ns(pids: list[int]) -> int:
    """Nanoseconds on CPU of these server processes so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
            total += int(stat.read().split()[0])
    return total


def _timed(pids: list[int], drain: Callable[[], int]) -> Cost:
    wall, client, server = time.perf_counter(), time.process_time(), _server_ns(pids)
    done = drain()
    wall, client = time.perf_counter() - wall, time.process_time() - client
    server_s = (_server_ns(pids) - server) / 1e9
    if done != JOBS:
        raise RuntimeError(f"acked {done} of {JOBS} jobs")
    per_job = 1e6 / JOBS
    return Cost(wall * per_job, client * per_job, server_s * per_job)


def _fill(queue: alkstore.Queue) -> None:
    for start in range(0, JOBS, FILL):
        queue.enqueue_many(payloads(min(FILL, JOBS - start)))


@contextmanager
def _plain_schema(conn: psycopg.Connection, step: Drain) -> Iterator[str]:
    schema = reuse.new_schema_name()
    quoted = pgsql.Identifier(schema).as_string(conn)
    conn.execute(f"CREATE SCHEMA {quoted}")
    try:
        for statement in plain_sql.PG_SCHEMA:
            conn.execute(statement.format(schema=quoted))
        if step.lapse_index:
            conn.execute(LAPSE_INDEX.format(schema=quoted))
        now = int(time.time())
        insert = plain_sql.PG["insert_many"].format(schema=quoted)
        for start in range(0, JOBS, FILL):
            texts = [json.dumps(item) for item in payloads(min(FILL, JOBS - start))]
            conn.execute(insert, (QUEUE, now, now, 3, texts))
        yield schema
    finally:
        conn.execute(f"DROP SCHEMA {quoted} CASCADE")


@contextmanager
def _engine_schema(dsn: str) -> Iterator[str]:
    schema = reuse.new_schema_name()
    with alkstore.open(dsn, schema=schema) as store:
        _fill(store.queue(QUEUE))
    try:
        yield schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            reuse.drop_schemas(conn, schema)


def _bare(dsn: str, step: Drain) -> Cost:
    with psycopg.connect(dsn, autocommit=True) as conn:
        made = _engine_schema(dsn) if step.engine_table else _plain_schema(conn, step)
        with made as schema:
            quoted = pgsql.Identifier(schema).as_string(conn)
            conn.execute(f"ANALYZE {quoted}.{'alkstore_jobs' if step.engine_table else 'jobs'}")
            claim = step.claim.replace("{schema}", quoted)
            ack = step.ack.replace("{schema}", quoted)
            return _timed([conn.info.backend_pid], lambda: _drain(conn, step, claim, ack))


def _drain(conn: psycopg.Connection, step: Drain, claim: str, ack: str) -> int:
    now = int(time.time())
    claim_params = {
        "queue": QUEUE,
        "worker": WORKER,
        "worker_id": WORKER,
        "now": now,
        "limit": BATCH,
    }
    done = 0
    while True:
        rows = conn.execute(claim, claim_params, prepare=True).fetchall()
        if not rows:
            return done
        for row in rows:
            json.loads(row[step.payload_at])
        ids = [row[0] for row in rows]
        if step.engine_ack:
            bound = {
                "job_ids": id_array(sorted(ids)),
                "queue": QUEUE,
                "worker_id": WORKER,
                "now": now,
                "wake_channel": "bench",
                "topic": QUEUE,
            }
            done += conn.execute(ack, bound, prepare=True).fetchone()[0]
        else:
            done += conn.execute(ack, (ids, QUEUE, WORKER, now), prepare=True).rowcount


def _api(dsn: str) -> Cost:
    with _engine_schema(dsn) as schema, alkstore.open(dsn, schema=schema) as store:
        queue = store.queue(QUEUE)
        with psycopg.connect(dsn, autocommit=True) as conn:
            pids = [
                pid
                for (pid,) in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                    " AND datname = current_database() AND pid <> pg_backend_pid()"
                )
            ]

        def drain() -> int:
            done = 0
            while handles := queue.claim_batch(WORKER, BATCH):
                for handle in handles:
                    handle.payload  # noqa: B018 - a worker reads its payload
                done += queue.ack_batch([handle.id for handle in handles], WORKER)
            return done

        return _timed(pids, drain)


def _dsn() -> str:
    dsn = os.environ.get("ALKSTORE_PG_DSN")
    if not dsn:
        raise SystemExit("set ALKSTORE_PG_DSN to a PostgreSQL server on this machine")
    return dsn


def main(rounds: int) -> None:
    dsn = _dsn()
    print(f"load average at start {os.getloadavg()}")
    sides: dict[str, Callable[[], Cost]] = {
        step.label: (lambda s=step: _bare(dsn, s)) for step in STEPS
    }
    sides[API] = lambda: _api(dsn)
    costs: dict[str, list[Cost]] = {label: [] for label in sides}
    order = list(sides)
    for number in range(rounds):
        for label in order if number % 2 == 0 else order[::-1]:
            costs[label].append(sides[label]())
    base = costs[STEPS[0].label]
    print(f"claim_batch({BATCH}) + ack_batch, {JOBS:,} jobs, medians of {rounds} rounds, per job:")
    print(f"  {'':44s} {'wall':>7s} {'client':>7s} {'server':>7s}   ratio to plain: wall, cpu")
    for label, values in costs.items():
        wall = statistics.median(b.wall / v.wall for b, v in zip(base, values, strict=True))
        cpu = statistics.median(b.cpu / v.cpu for b, v in zip(base, values, strict=True))
        print(
            f"  {label:44s} {statistics.median(v.wall for v in values):6.2f}us"
            f" {statistics.median(v.client for v in values):6.2f}us"
            f" {statistics.median(v.server for v in values):6.2f}us   {wall:.2f}x, {cpu:.2f}x"
        )
    # Issue 28 §4's other reading of "plain psycopg doing the same statements": the
    # engine's own SQL through bare psycopg, so this ratio is what its Python costs.
    same = costs[STEPS[-1].label]
    api = costs[API]
    wall = statistics.median(s.wall / a.wall for s, a in zip(same, api, strict=True))
    cpu = statistics.median(s.cpu / a.cpu for s, a in zip(same, api, strict=True))
    print(
        f"  the API against the engine's statements through bare psycopg: {wall:.2f}x, {cpu:.2f}x"
    )
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else ROUNDS)
