"""The two sides of every workload: an engine through the public API, or a plain driver.

A workload is written once against ``Side`` and runs on both. The plain sides
are what an application would write by hand with the bare driver: the same
table shape, indexes and statements as the engine (claim by ``UPDATE …
RETURNING`` off a partial index of pending rows, ack by a guarded ``DELETE``,
each write its own transaction), but no validation, no options, no dead-letter
or lapse checks, no wake machinery. The ratio engine / plain is then what
those layers cost.

Children of the multi-process workloads reopen their side from a picklable
``SideSpec``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import bench_plain_sql as plain_sql

import alkstore

PLAIN = "plain"
"""Column suffix of the baselines: ``sqlite:plain``, ``postgresql:plain``."""

LAPSE = "plain+lapse"
"""Column suffix of the fair baseline: the plain one plus the one index that finding
lapsed claims needs (``bench_plain_sql.SQLITE_LAPSE_INDEX``), which the plain one has
no way to do but a scan. SQLite only: that is where the index decides the ratio."""

PLAIN_LABELS = {"sqlite": "plain sqlite3", "postgresql": "plain psycopg"}
LAPSE_LABELS = {"sqlite": "plain + lapse index"}
VISIBILITY_TIMEOUT_S = 30
MAX_ATTEMPTS = 3
PLAIN_SCHEMA_PREFIX = "alkstore_bench_plain_"


class Side(Protocol):
    """What the workloads need from a store; both sides take and return JSON-able values."""

    def enqueue(self, queue: str, item: Any) -> int: ...

    def enqueue_many(self, queue: str, items: Sequence[Any]) -> int:
        """Enqueue every item in one call; returns how many went in."""
        ...

    def claim_ack(self, queue: str, worker: str) -> bool | None:
        """Claim one job and ack it: ``None`` if the queue is empty, else whether it counted."""
        ...

    def claim_wait_ack(self, queue: str, worker: str) -> bool | None:
        """``claim_ack`` the way a worker loop does it: through ``claim_wait(timeout=0)``
        on an engine (registering with the wake machinery every time); the plain
        sides have no waiting, so the same as ``claim_ack``."""
        ...

    def claim_ack_batch(self, queue: str, worker: str, limit: int) -> tuple[int, int]:
        """Claim up to ``limit`` jobs and ack them in one call: (claimed, acked)."""
        ...

    def stream_append(self, stream: str, item: Any) -> int: ...

    def stream_append_many(self, stream: str, items: Sequence[Any]) -> None:
        """Append in one transaction (untimed prefill)."""
        ...

    def stream_read(self, stream: str, after: int, limit: int) -> list[int]:
        """Offsets of the events read (their payloads decoded, as a reader would)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SideSpec:
    """How to (re)open one side, in this process or a spawned child."""

    engine: str
    plain: bool
    spec: alkstore.EngineSpec
    plain_location: str = ""
    """Plain sqlite3: the database file. Plain psycopg: the schema name."""
    writer_gate: bool = True
    """SQLite engine only: ``False`` opens it without the cross-process writer gate
    (``SqliteDriver(serialize_writers=False)``, which exists to measure the gate)."""
    page_size: int | None = None
    """Plain sqlite3 only: the page size its new file is created with (``None``:
    SQLite's default, as a queue written by hand would have)."""
    lapse_index: bool = False
    """Plain sqlite3 only: the fair baseline, with the lapse index (``LAPSE``)."""

    @property
    def column(self) -> str:
        return column_name(self.engine, self.plain, self.lapse_index)


def column_name(engine: str, plain: bool, lapse_index: bool = False) -> str:
    """A side's column in the results: ``sqlite``, ``sqlite:plain``, ``sqlite:plain+lapse``."""
    if not plain:
        return engine
    return f"{engine}:{LAPSE if lapse_index else PLAIN}"


def open_side(spec: SideSpec, *, create: bool = False) -> Side:
    if not spec.plain:
        if not spec.writer_gate:
            return EngineSide(_ungated_sqlite(spec.spec))
        provider = alkstore.load_engine(spec.engine)
        return EngineSide(provider.open(spec.spec.url, **spec.spec.opts))
    if spec.engine == "sqlite":
        return PlainSqlite(
            spec.plain_location,
            create=create,
            page_size=spec.page_size,
            lapse_index=spec.lapse_index,
        )
    if spec.engine == "postgresql":
        return PlainPostgres(spec.spec.url, spec.plain_location, create=create)
    raise ValueError(f"no plain-driver baseline for engine {spec.engine!r}")


def _ungated_sqlite(spec: alkstore.EngineSpec) -> alkstore.Store:
    from alkstore.core import CoreStore
    from alkstore_sqlite import SqliteDriver, database_path, parse_options

    path = database_path(spec.url)
    return CoreStore(SqliteDriver(path, parse_options(spec.opts), serialize_writers=False))


def has_plain(engine: str) -> bool:
    return engine in PLAIN_LABELS


def baselines_of(engine: str) -> list[tuple[bool, bool]]:
    """The baselines an engine's workloads run beside, as ``(plain, lapse_index)``."""
    if not has_plain(engine):
        return []
    return [(True, False)] + ([(True, True)] if engine in LAPSE_LABELS else [])


def plain_location(engine: str, spec: alkstore.EngineSpec, tag: str) -> str:
    """Where the baseline keeps its tables, next to (never inside) the engine's store."""
    if engine == "sqlite":
        engine_file = spec.url.removeprefix("sqlite:///")
        return os.path.join(os.path.dirname(engine_file), f"plain-{tag}.db")
    return f"{PLAIN_SCHEMA_PREFIX}{tag}_{os.getpid()}"


def drop_plain(engine: str, spec: alkstore.EngineSpec, location: str) -> None:
    if engine == "postgresql":
        PlainPostgres.drop(spec.url, location)
    # Plain sqlite3 files live in the provisioned temp dir, removed with it.


def _now() -> int:
    return int(time.time())


def _dumps(item: Any) -> str:
    return json.dumps(item, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- engine


class EngineSide:
    """The public API, holding its queue and stream objects as an application would."""

    def __init__(self, store: alkstore.Store) -> None:
        self.store = store
        self._queues: dict[str, alkstore.Queue] = {}
        self._streams: dict[str, alkstore.Stream] = {}

    def _queue(self, name: str) -> alkstore.Queue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = self.store.queue(name)
        return queue

    def _stream(self, name: str) -> alkstore.Stream:
        stream = self._streams.get(name)
        if stream is None:
            stream = self._streams[name] = self.store.stream(name)
        return stream

    def enqueue(self, queue: str, item: Any) -> int:
        return self._queue(queue).enqueue(item)

    def enqueue_many(self, queue: str, items: Sequence[Any]) -> int:
        return len(self._queue(queue).enqueue_many(items))

    def claim_ack(self, queue: str, worker: str) -> bool | None:
        handle = self._queue(queue).claim(worker)
        if handle is None:
            return None
        handle.payload  # noqa: B018 - a worker reads its payload
        return handle.ack()

    def claim_wait_ack(self, queue: str, worker: str) -> bool | None:
        handle = self._queue(queue).claim_wait(worker, timeout=0)
        if handle is None:
            return None
        handle.payload  # noqa: B018 - a worker reads its payload
        return handle.ack()

    def claim_ack_batch(self, queue: str, worker: str, limit: int) -> tuple[int, int]:
        q = self._queue(queue)
        handles = q.claim_batch(worker, limit)
        if not handles:
            return 0, 0
        return len(handles), q.ack_batch([h.id for h in handles], worker)

    def stream_append(self, stream: str, item: Any) -> int:
        return self._stream(stream).append(item)

    def stream_append_many(self, stream: str, items: Sequence[Any]) -> None:
        with self.store.transaction() as tx:
            for item in items:
                tx.stream_append(stream, item)

    def stream_read(self, stream: str, after: int, limit: int) -> list[int]:
        return [event.offset for event in self._stream(stream).read(after=after, limit=limit)]

    def close(self) -> None:
        self.store.close()


# --------------------------------------------------------------------------- plain sqlite3


class PlainSqlite:
    """Plain ``sqlite3``: WAL, synchronous NORMAL, ``BEGIN IMMEDIATE`` per write."""

    def __init__(
        self, path: str, *, create: bool, page_size: int | None = None, lapse_index: bool = False
    ) -> None:
        # Autocommit mode: the transactions below are explicit, as the engine's are.
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        if create and page_size is not None:
            self.conn.execute(plain_sql.SQLITE_PAGE_SIZE.format(size=page_size))
        for pragma in plain_sql.SQLITE_PRAGMAS:
            self.conn.execute(pragma)
        if create:
            self.conn.executescript(plain_sql.SQLITE_SCHEMA)
            if lapse_index:
                self.conn.execute(plain_sql.SQLITE_LAPSE_INDEX)

    def _write(self, statement: str, params: Any) -> list[Any]:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = conn.execute(statement, params).fetchall()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return rows

    def enqueue(self, queue: str, item: Any) -> int:
        now = _now()
        params = (queue, _dumps(item), now, now, MAX_ATTEMPTS, VISIBILITY_TIMEOUT_S)
        return int(self._write(plain_sql.SQLITE_INSERT, params)[0][0])

    def enqueue_many(self, queue: str, items: Sequence[Any]) -> int:
        now = _now()
        rows = [(queue, _dumps(i), now, now, MAX_ATTEMPTS, VISIBILITY_TIMEOUT_S) for i in items]
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(plain_sql.SQLITE_INSERT_MANY, rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(rows)

    def claim_ack(self, queue: str, worker: str) -> bool | None:
        now = _now()
        claimed = self._write(
            plain_sql.SQLITE_CLAIM_ONE, {"queue": queue, "worker": worker, "now": now}
        )
        if not claimed:
            return None
        job_id, attempt, text = claimed[0]
        json.loads(text)
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            acked = conn.execute(plain_sql.SQLITE_ACK, (job_id, attempt, now)).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return acked > 0

    def claim_wait_ack(self, queue: str, worker: str) -> bool | None:
        return self.claim_ack(queue, worker)

    def claim_ack_batch(self, queue: str, worker: str, limit: int) -> tuple[int, int]:
        now = _now()
        params = {"queue": queue, "worker": worker, "now": now, "limit": limit}
        claimed = self._write(plain_sql.SQLITE_CLAIM, params)
        if not claimed:
            return 0, 0
        ids = [row[0] for row in claimed]
        for row in claimed:
            json.loads(row[2])
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            acked = conn.execute(
                plain_sql.sqlite_ack_batch(len(ids)), (*ids, queue, worker, now)
            ).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(ids), acked

    def stream_append(self, stream: str, item: Any) -> int:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            offset = self._append(stream, item)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return offset

    def _append(self, stream: str, item: Any) -> int:
        (offset,) = self.conn.execute(plain_sql.SQLITE_NEXT_OFFSET, (stream,)).fetchone()
        self.conn.execute(plain_sql.SQLITE_APPEND, (stream, offset, _dumps(item), _now()))
        return int(offset)

    def stream_append_many(self, stream: str, items: Sequence[Any]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        for item in items:
            self._append(stream, item)
        self.conn.execute("COMMIT")

    def stream_read(self, stream: str, after: int, limit: int) -> list[int]:
        rows = self.conn.execute(plain_sql.SQLITE_READ, (stream, after, limit)).fetchall()
        for row in rows:
            json.loads(row[1])
        return [row[0] for row in rows]

    def close(self) -> None:
        self.conn.close()


# --------------------------------------------------------------------------- plain psycopg


class PlainPostgres:
    """Plain psycopg 3: one connection in autocommit mode, as the engine's are: every
    operation is one statement, so it commits in the same round trip (an explicit
    transaction would add a BEGIN and a COMMIT round trip each). psycopg prepares
    statements after a few runs (its default)."""

    def __init__(self, dsn: str, schema: str, *, create: bool) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.schema = schema
        self.sql = {name: text.format(schema=f'"{schema}"') for name, text in plain_sql.PG.items()}
        if create:
            self.conn.execute(f'CREATE SCHEMA "{schema}"')
            for statement in plain_sql.PG_SCHEMA:
                self.conn.execute(statement.format(schema=f'"{schema}"'))

    @staticmethod
    def drop(dsn: str, schema: str) -> None:
        import psycopg

        if not schema.startswith(PLAIN_SCHEMA_PREFIX):
            raise ValueError(f"refusing to drop schema {schema!r}")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    def _run(self, name: str, params: Any) -> Any:
        cursor = self.conn.execute(self.sql[name], params)
        return cursor

    def enqueue(self, queue: str, item: Any) -> int:
        now = _now()
        row = self._run("insert", (queue, _dumps(item), now, now, MAX_ATTEMPTS)).fetchone()
        return int(row[0])

    def enqueue_many(self, queue: str, items: Sequence[Any]) -> int:
        now = _now()
        texts = [_dumps(i) for i in items]
        (count, _) = self._run("insert_many", (queue, now, now, MAX_ATTEMPTS, texts)).fetchone()
        return int(count)

    def claim_ack(self, queue: str, worker: str) -> bool | None:
        now = _now()
        params = {"queue": queue, "worker": worker, "now": now, "limit": 1}
        row = self._run("claim", params).fetchone()
        if row is None:
            return None
        json.loads(row[2])
        acked = self._run("ack", (row[0], row[1], now)).rowcount
        return bool(acked)

    def claim_wait_ack(self, queue: str, worker: str) -> bool | None:
        return self.claim_ack(queue, worker)

    def claim_ack_batch(self, queue: str, worker: str, limit: int) -> tuple[int, int]:
        now = _now()
        params = {"queue": queue, "worker": worker, "now": now, "limit": limit}
        rows = self._run("claim", params).fetchall()
        if not rows:
            return 0, 0
        for row in rows:
            json.loads(row[2])
        acked = self._run("ack_batch", ([r[0] for r in rows], queue, worker, now)).rowcount
        return len(rows), int(acked)

    def stream_append(self, stream: str, item: Any) -> int:
        (offset,) = self._run("append", (stream, _dumps(item), _now())).fetchone()
        return int(offset)

    def stream_append_many(self, stream: str, items: Sequence[Any]) -> None:
        with self.conn.transaction():
            for item in items:
                self._run("append", (stream, _dumps(item), _now()))

    def stream_read(self, stream: str, after: int, limit: int) -> list[int]:
        rows = self._run("read", (stream, after, limit)).fetchall()
        for row in rows:
            json.loads(row[1])
        return [int(row[0]) for row in rows]

    def close(self) -> None:
        self.conn.close()
