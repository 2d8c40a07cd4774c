"""The claim under a per-key limit walks the keys (statements.PICK_IN_TURN, the pick of
CLAIM_IN_TURN) and takes exactly the rows, in exactly the order, that ranking every
claimable row of the queue (REFERENCE, the pick it replaced) takes."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import EnqueueOpts, Limits, QueueOpts
from alkstore.testing import FakeClock
from alkstore_postgres import statements

START = 1_700_000_000
KEYS = (None, "a", "b", "bb", "c", "é", "z")

_LIVE_CLAIMS = """(SELECT count(*) FROM {schema}.alkstore_jobs
      WHERE queue = %(queue)s AND state = 'processing' AND deadline > %(now)s)"""

REFERENCE = f"""
WITH live AS (
    SELECT coalesce(limit_key, '') AS k, count(*) AS n FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND deadline > %(now)s
    GROUP BY 1
), started AS (
    SELECT limit_key AS k, sum(claims) AS n FROM {{schema}}.alkstore_key_claim_starts
    WHERE queue = %(queue)s AND started_at > %(now)s - %(per_s)s::bigint
    GROUP BY 1
), ranked AS (
    SELECT ctid AS row_at, id, coalesce(limit_key, '') AS k,
           row_number() OVER (PARTITION BY coalesce(limit_key, '')
                              ORDER BY priority DESC, run_at, id) AS turn
    FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s
      AND ((state = 'pending' AND run_at <= %(now)s)
           OR (state = 'processing' AND deadline <= %(now)s))
      AND (expires_at IS NULL OR expires_at > %(now)s)
      AND attempts < max_attempts
      AND NOT EXISTS (SELECT FROM {{schema}}.alkstore_paused_queues WHERE queue = %(queue)s)
), chosen AS (
    SELECT ranked.row_at, ranked.id, ranked.k, ranked.turn,
           (%(cursor)s::text IS NOT NULL
            AND ranked.k <= %(cursor)s::text COLLATE "C") AS wrapped
    FROM ranked
    LEFT JOIN live ON live.k = ranked.k
    LEFT JOIN started ON started.k = ranked.k
    WHERE ranked.turn <= coalesce(%(per_key)s::integer - coalesce(live.n, 0), %(limit)s)
      AND ranked.turn <= coalesce(%(rate_per_key)s::integer - coalesce(started.n, 0), %(limit)s)
    ORDER BY ranked.turn, wrapped, ranked.k
    LIMIT least(%(rate_room)s,
        greatest(0, coalesce(%(concurrency)s::integer - {_LIVE_CLAIMS}, %(limit)s)))
)
SELECT id, k FROM chosen ORDER BY turn, wrapped, k
"""
"""The pick of CLAIM_IN_TURN before the key walk: a rank of every claimable row."""


def _random_backlog(
    pg_dsn: str, schema: str, rng: random.Random
) -> tuple[FakeClock, dict[str, Any]]:
    """A keyed queue with pending, scheduled, lapsed, expired and live rows; the
    parameters of its next claim."""
    clock = FakeClock(START)
    keys = rng.sample(KEYS, rng.randint(1, len(KEYS)))
    per_key = rng.choice((None, 1, 2, 3))
    rate_per_key = rng.choice((None, 1, 2, 5)) if per_key is not None else rng.choice((1, 3))
    concurrency = rng.choice((None, None, 4, 20))
    rate = rng.choice((None, None, 6))
    with alkstore.open(pg_dsn, schema=schema, clock=clock) as store:
        queue = store.queue("q", QueueOpts(visibility_timeout_s=rng.choice((5, 100))))
        queue.set_limits(
            Limits(
                concurrency=concurrency,
                rate=rate,
                concurrency_per_key=per_key,
                rate_per_key=rate_per_key,
                per=60 if rate_per_key is not None or rate is not None else None,
            )
        )
        for _ in range(rng.randint(0, 60)):
            opts = EnqueueOpts(
                limit_key=rng.choice(keys),
                priority=rng.choice((0, 0, 1, 5)),
                delay=rng.choice((None, None, 3, 30)),
                expires=rng.choice((None, None, None, 8)),
            )
            queue.enqueue({"n": 1}, opts)
        for _ in range(rng.randint(0, 3)):  # claims in flight; some lapse below
            queue.claim_batch("w", rng.randint(1, 4))
            clock.advance(rng.choice((1, 4, 10)))
    clock.advance(rng.choice((0, 2, 20, 70)))
    per_s = 60 if rate_per_key is not None or rate is not None else None
    limit = rng.randint(1, 12)
    named = {
        "queue": "q",
        "now": clock.now(),
        "limit": limit,
        "concurrency": concurrency,
        # The most the queue's rate lets start (the claim works it out from the limit
        # row and the starts table): the limit itself without a rate.
        "rate_room": limit if rate is None else rng.randint(0, limit),
        "per_s": per_s,
        "per_key": per_key,
        "rate_per_key": rate_per_key,
        "cursor": rng.choice((None, "", *(key for key in keys if key), "b0", "zz")),
    }
    return clock, named


@pytest.mark.parametrize("seed", range(60))
def test_the_key_walk_picks_what_ranking_every_claimable_row_picks(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any], seed: int
) -> None:
    rng = random.Random(seed)
    _, named = _random_backlog(pg_dsn, schema, rng)
    if rng.random() < 0.1:
        admin.execute(f'INSERT INTO "{schema}".alkstore_paused_queues (queue) VALUES (%s)', ("q",))
    expected = admin.execute(statements.render(REFERENCE, schema), named).fetchall()
    picked = admin.execute(statements.render(statements.PICK_IN_TURN, schema), named).fetchall()
    assert picked == expected


def test_the_key_walk_reads_the_key_index_and_never_the_whole_table(
    pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    with alkstore.open(pg_dsn, schema=schema, clock=FakeClock(START)) as store:
        queue = store.queue("q")
        queue.set_limits(Limits(concurrency_per_key=1))
        for key in range(50):
            queue.enqueue_many([{"n": n} for n in range(40)], EnqueueOpts(limit_key=f"k{key}"))
        queue.claim_batch("w", 10)
    admin.execute(f'VACUUM ANALYZE "{schema}".alkstore_jobs')
    named = {
        "queue": "q",
        "now": START,
        "limit": 10,
        "concurrency": None,
        "rate_room": 10,
        "per_s": None,
        "per_key": 1,
        "rate_per_key": None,
        "cursor": "k3",
    }
    explain = b"EXPLAIN " + statements.render(statements.PICK_IN_TURN, schema)
    plan = "\n".join(row[0] for row in admin.execute(explain, named).fetchall())
    assert "alkstore_jobs_pending_key" in plan
    assert "Seq Scan on alkstore_jobs" not in plan
