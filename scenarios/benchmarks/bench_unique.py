"""Unique enqueue beside plain enqueue, on each engine (contract §15).

Each round provisions a fresh store and times, in one process, N single
enqueues without a key and N with a fresh key each (every one a new job: the
cost of holding a key, not of finding it held), the two sides taking turns of
100 enqueues (which goes first flips every turn, so a burst of load on the
shared machine lands on both alike), then N jobs by ``enqueue_many`` in
batches of 1,000 taking turns batch by batch, without a key and with ``Unique()``
(each payload its own key). The report gives each side's median rate and the
median of the per-round cost (unique time over plain time, minus one), in wall
time and in this process's CPU time. The issue's target: a key costs at most 15%
on a single enqueue.

Beside them, the floor of each engine's driver (``floor_overhead``): the plain
baseline's table (``bench_plain_sql``) with a key column, the same insert into it
with and without a partial unique index over the key (``ON CONFLICT DO NOTHING``),
one row per transaction and in batches of 1,000 (taking turns as above), keys
shaped as the engine rows'.
What the index costs there no implementation of a race-free key can save; the
plain-enqueue row (engine without a key against the bare insert) shows what the
engine's own layers cost a plain enqueue in the same run.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import bench_plain_sql as plain_sql
from bench_sides import (
    MAX_ATTEMPTS,
    VISIBILITY_TIMEOUT_S,
    PlainPostgres,
    PlainSqlite,
    SideSpec,
    drop_plain,
    open_side,
    plain_location,
)
from bench_turns import Timing, alternating, start_timing, timing_since
from bench_workloads import ENQUEUE_MANY_BATCH, payloads

import alkstore
from alkstore import EnqueueOpts, Unique
from alkstore.core.unique import payload_key

ROUNDS = 5
QUICK_ROUNDS = 2
SINGLE_CAP = 5_000
"""Single enqueues per side and round, at most: a round of both sides stays short."""
CHUNK = 100
"""Single enqueues the sides take turns in (batches take turns one batch each)."""
TARGET = 0.15
"""The issue's target for a single enqueue: a unique key costs at most 15%."""


@dataclass(frozen=True)
class Overhead:
    workload: str
    jobs: int
    plain_rate: float
    unique_rate: float
    cost: float
    """Median over rounds of unique seconds / plain seconds - 1."""
    costs: tuple[float, ...]
    side: str = "engine"
    """``engine`` (the public API), ``raw`` (the bare driver: the floor) or ``before``
    (plain enqueue on the code before unique jobs, ``plain``, against now's, ``unique``)."""
    cpu_cost: float = 0.0
    """``cost`` in the timing process's CPU seconds: on a busy shared machine steadier
    than the wall clock, but blind to a server's work (PostgreSQL)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "workload": self.workload,
            "jobs": self.jobs,
            "plain_rate_per_s": round(self.plain_rate, 1),
            "unique_rate_per_s": round(self.unique_rate, 1),
            "cost": round(self.cost, 4),
            "costs": [round(c, 4) for c in self.costs],
            "cpu_cost": round(self.cpu_cost, 4),
        }


def _single(queue: alkstore.Queue, items: list[Any], keyed: bool, tag: str) -> Timing:
    started = start_timing()
    if keyed:
        for n, item in enumerate(items):
            queue.enqueue(item, EnqueueOpts(unique=f"{tag}-{n}"))
    else:
        for item in items:
            queue.enqueue(item)
    return timing_since(started)


def _many(queue: alkstore.Queue, items: list[Any], keyed: bool, tag: str) -> Timing:
    opts = EnqueueOpts(unique=Unique()) if keyed else None
    started = start_timing()
    for start in range(0, len(items), ENQUEUE_MANY_BATCH):
        queue.enqueue_many(items[start : start + ENQUEUE_MANY_BATCH], opts)
    return timing_since(started)


def _engine_chunk(
    run: Callable[[alkstore.Queue, list[Any], bool, str], Timing],
    queues: dict[bool, alkstore.Queue],
    items: dict[bool, list[Any]],
    tag: str,
    keyed: bool,
    start: int,
    end: int,
) -> Timing:
    return run(queues[keyed], items[keyed][start:end], keyed, f"{tag}-{start}")


def _rounds(
    provider: alkstore.EngineProvider,
    jobs: int,
    rounds: int,
    run: Callable[[alkstore.Queue, list[Any], bool, str], Timing],
    chunk: int,
) -> tuple[list[Timing], list[Timing]]:
    plain: list[Timing] = []
    unique: list[Timing] = []
    for number in range(rounds):
        with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
            # Distinct payloads per side and round: Unique() keys of one side never meet
            # the other's, and every keyed enqueue makes a job.
            items = {
                keyed: [{**p, "side": keyed, "round": number} for p in payloads(jobs)]
                for keyed in (False, True)
            }
            queues = {
                keyed: store.queue(f"bench-{'unique' if keyed else 'plain'}") for keyed in items
            }

            chunk_of = partial(_engine_chunk, run, queues, items, f"r{number}")
            totals = alternating(jobs, chunk, number, chunk_of)
            plain.append(totals[0])
            unique.append(totals[1])
    return plain, unique


def overhead(
    workload: str, jobs: int, plain: list[Timing], unique: list[Timing], side: str = "engine"
) -> Overhead:
    pairs = list(zip(plain, unique, strict=True))
    costs = tuple(u[0] / p[0] - 1 for p, u in pairs)
    return Overhead(
        workload=workload,
        jobs=jobs,
        plain_rate=jobs / statistics.median(p[0] for p in plain),
        unique_rate=jobs / statistics.median(u[0] for u in unique),
        cost=statistics.median(costs),
        costs=costs,
        side=side,
        cpu_cost=statistics.median(u[1] / p[1] - 1 for p, u in pairs),
    )


# -- the floor: the bare driver, the same insert with and without the unique index ----


def _keys(texts: list[str], batched: bool, tag: str) -> list[str]:
    """Keys shaped as the engine rows' are: a short key per single enqueue, a
    payload's own key (``payload:sha256:…``) per row of a batch."""
    if batched:
        return [payload_key(text) for text in texts]
    return [f"{tag}-{n}" for n in range(len(texts))]


def _raw_sqlite(side: PlainSqlite, texts: list[str], keys: list[str], indexed: bool) -> Timing:
    conn = side.conn
    now = int(time.time())
    one = plain_sql.SQLITE_INSERT_KEYED[indexed]
    started = start_timing()
    for text, key in zip(texts, keys, strict=True):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(one, ("q", text, now, now, MAX_ATTEMPTS, VISIBILITY_TIMEOUT_S, key)).fetchall()
        conn.execute("COMMIT")
    return timing_since(started)


def _raw_sqlite_many(side: PlainSqlite, texts: list[str], keys: list[str], indexed: bool) -> Timing:
    conn = side.conn
    now = int(time.time())
    many = plain_sql.SQLITE_INSERT_KEYED_MANY[indexed]
    started = start_timing()
    for start in range(0, len(texts), ENQUEUE_MANY_BATCH):
        rows = [
            ("q", text, now, now, MAX_ATTEMPTS, VISIBILITY_TIMEOUT_S, key)
            for text, key in zip(
                texts[start : start + ENQUEUE_MANY_BATCH],
                keys[start : start + ENQUEUE_MANY_BATCH],
                strict=True,
            )
        ]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(many, rows)
        conn.execute("COMMIT")
    return timing_since(started)


def _raw_postgres(side: PlainPostgres, texts: list[str], keys: list[str], indexed: bool) -> Timing:
    conn = side.conn
    now = int(time.time())
    one = plain_sql.PG_INSERT_KEYED[indexed].format(schema=f'"{side.schema}"')
    started = start_timing()
    for text, key in zip(texts, keys, strict=True):
        conn.execute(one, ("q", text, now, now, MAX_ATTEMPTS, key)).fetchone()
    return timing_since(started)


def _raw_postgres_many(
    side: PlainPostgres, texts: list[str], keys: list[str], indexed: bool
) -> Timing:
    conn = side.conn
    now = int(time.time())
    many = plain_sql.PG_INSERT_KEYED_MANY[indexed].format(schema=f'"{side.schema}"')
    started = start_timing()
    for start in range(0, len(texts), ENQUEUE_MANY_BATCH):
        end = start + ENQUEUE_MANY_BATCH
        conn.execute(many, ("q", now, now, MAX_ATTEMPTS, texts[start:end], keys[start:end]))
    return timing_since(started)


def _add_key(engine: str, side: Any, indexed: bool) -> None:
    """The key column on the plain side's table, and the unique index if ``indexed``."""
    if engine == "sqlite":
        statements = [plain_sql.SQLITE_UNIQUE_COLUMN]
        statements += [plain_sql.SQLITE_UNIQUE_INDEX] if indexed else []
    else:
        schema = f'"{side.schema}"'
        statements = [plain_sql.PG_UNIQUE_COLUMN.format(schema=schema)]
        statements += [plain_sql.PG_UNIQUE_INDEX.format(schema=schema)] if indexed else []
    for statement in statements:
        side.conn.execute(statement)


def _raw_chunk(
    run: Callable[[Any, list[str], list[str], bool], Timing],
    sides: dict[bool, Any],
    texts: list[str],
    keys: list[str],
    indexed: bool,
    start: int,
    end: int,
) -> Timing:
    return run(sides[indexed], texts[start:end], keys[start:end], indexed)


def _raw_rounds(
    engine: str, provider: alkstore.EngineProvider, jobs: int, rounds: int, batched: bool
) -> tuple[list[Timing], list[Timing]]:
    run: Callable[[Any, list[str], list[str], bool], Timing]
    if engine == "sqlite":
        run = _raw_sqlite_many if batched else _raw_sqlite
    else:
        run = _raw_postgres_many if batched else _raw_postgres
    chunk = ENQUEUE_MANY_BATCH if batched else CHUNK
    plain: list[Timing] = []
    unique: list[Timing] = []
    for number in range(rounds):
        with provider.provision() as spec:
            tags = {indexed: f"floor-{int(batched)}-{number}-{int(indexed)}" for indexed in (0, 1)}
            locations = {indexed: plain_location(engine, spec, tags[indexed]) for indexed in tags}
            sides: dict[bool, Any] = {}
            try:
                for indexed in (False, True):
                    spec_of = SideSpec(engine, True, spec, locations[indexed])
                    sides[indexed] = open_side(spec_of, create=True)
                    _add_key(engine, sides[indexed], indexed)
                texts = [
                    json.dumps({**p, "round": number}, separators=(",", ":"))
                    for p in payloads(jobs)
                ]
                keys = _keys(texts, batched, f"r{number}")

                chunk_of = partial(_raw_chunk, run, sides, texts, keys)
                totals = alternating(jobs, chunk, number, chunk_of)
                plain.append(totals[0])
                unique.append(totals[1])
            finally:
                for indexed, side in sides.items():
                    side.close()
                    drop_plain(engine, spec, locations[indexed])
    return plain, unique


def floor_overhead(
    engine: str, provider: alkstore.EngineProvider, jobs: int, quick: bool
) -> list[Overhead]:
    """The bare driver's insert with the unique index against without, on one engine's
    database (``engine``: ``sqlite`` or ``postgresql``)."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    single = min(jobs, SINGLE_CAP)
    plain, unique = _raw_rounds(engine, provider, single, rounds, batched=False)
    results = [overhead("1 insert", single, plain, unique, side="raw")]
    plain, unique = _raw_rounds(engine, provider, jobs, rounds, batched=True)
    results.append(overhead("2 insert, batches of 1,000", jobs, plain, unique, side="raw"))
    return results


def unique_overhead(provider: alkstore.EngineProvider, jobs: int, quick: bool) -> list[Overhead]:
    """Both comparisons on one engine."""
    rounds = QUICK_ROUNDS if quick else ROUNDS
    single = min(jobs, SINGLE_CAP)
    results = []
    plain, unique = _rounds(provider, single, rounds, _single, CHUNK)
    results.append(overhead("1 enqueue", single, plain, unique))
    plain, unique = _rounds(provider, jobs, rounds, _many, ENQUEUE_MANY_BATCH)
    results.append(overhead("2 enqueue_many (1,000)", jobs, plain, unique))
    return results


RAW_LABELS = {"sqlite": "plain sqlite3", "postgresql": "plain psycopg"}


def render_unique_overhead(overheads: Mapping[str, Sequence[Overhead]]) -> str:
    """The engine rows, each engine's floor under them, and its plain enqueue against
    the bare insert (what the engine's layers cost an enqueue without a key)."""
    if not overheads:
        return ""
    lines = [
        "Unique enqueue against plain enqueue, same engine, medians of each run's rounds "
        f"(target for a single enqueue: a key costs at most {TARGET:.0%}); under each "
        "engine its floor, the bare driver's same insert with against without the "
        "unique index:"
    ]
    for engine, rows in overheads.items():
        for o in rows:
            if o.side == "before":
                lines.append(
                    f"  {'':<16} {o.workload}, N={o.jobs:,}: before {o.plain_rate:,.0f}/s, "
                    f"now {o.unique_rate:,.0f}/s: {o.cost:+.0%} time (CPU {o.cpu_cost:+.0%})"
                )
                continue
            verdict = ""
            if o.side == "engine" and o.workload.startswith("1 "):
                verdict = "  ok" if o.cost <= TARGET else "  ABOVE"
            label = engine if o.side == "engine" else f"  {RAW_LABELS.get(engine, 'raw')}"
            key = "unique" if o.side == "engine" else "indexed"
            lines.append(
                f"  {label:<16} {o.workload:<28} N={o.jobs:,}: plain {o.plain_rate:,.0f}/s, "
                f"{key} {o.unique_rate:,.0f}/s: {o.cost:+.0%}{verdict} (CPU {o.cpu_cost:+.0%})"
            )
        by = {(o.side, o.workload[0]): o for o in rows}
        engine_one, raw_one = by.get(("engine", "1")), by.get(("raw", "1"))
        if engine_one is not None and raw_one is not None:
            lines.append(
                f"  {'':<16} plain enqueue against the bare insert: engine "
                f"{engine_one.plain_rate:,.0f}/s, {RAW_LABELS.get(engine, 'raw')} "
                f"{raw_one.plain_rate:,.0f}/s ({engine_one.plain_rate / raw_one.plain_rate:.2f}x)"
            )
    return "\n".join(lines)
