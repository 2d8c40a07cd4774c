"""L1's floor on PostgreSQL (docs/benchmarks.md, "Queue limits"): plain psycopg, one
autocommit connection, claim + ack one at a time, three sides in
turns of 100: plain (a one-row claim of pending rows), floor (the same statement with
the limit row locked FOR UPDATE and the start upserted, in that one statement, counting
nothing), the floor's two halves apart (lock only: what a concurrency limit needs at
the least; start only: what a rate needs), the floor of migration 19's layout (claims
row: the queue's claims row locked and the start counted in it, one tuple written), and
the engine's alkstore_claim_limited (lock, count, claim, record)."""

from __future__ import annotations

import os
import statistics
import sys
import time

import psycopg
from psycopg import sql as pgsql

import alkstore
from alkstore import Limits

ROUNDS = 5
CLAIM = """UPDATE {s}.alkstore_jobs AS job SET state = 'processing', attempts = job.attempts + 1,
 claimed_at = %(now)s, worker_id = 'w', deadline = %(now)s + job.visibility_timeout_s
 WHERE job.ctid = (SELECT ctid FROM {s}.alkstore_jobs WHERE queue = %(q)s AND state = 'pending'
   AND run_at <= %(now)s ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING job.id"""
FLOOR = (
    """WITH lim AS (SELECT queue FROM {s}.alkstore_queue_limits WHERE queue = %(q)s FOR UPDATE),
claimed AS ("""
    + CLAIM
    + """),
rec AS (INSERT INTO {s}.alkstore_claim_starts AS st (queue, started_at, claims)
  SELECT %(q)s, %(now)s, count(*) FROM claimed, lim HAVING count(*) > 0
  ON CONFLICT (queue, started_at) DO UPDATE SET claims = st.claims + excluded.claims)
SELECT id FROM claimed"""
)
LOCK_ONLY = (
    """WITH lim AS (SELECT queue FROM {s}.alkstore_queue_limits WHERE queue = %(q)s FOR UPDATE),
claimed AS ("""
    + CLAIM
    + """)
SELECT id FROM claimed, lim"""
)
START_ONLY = (
    """WITH claimed AS ("""
    + CLAIM
    + """),
rec AS (INSERT INTO {s}.alkstore_claim_starts AS st (queue, started_at, claims)
  SELECT %(q)s, %(now)s, count(*) FROM claimed HAVING count(*) > 0
  ON CONFLICT (queue, started_at) DO UPDATE SET claims = st.claims + excluded.claims)
SELECT id FROM claimed"""
)
CLAIMS_ROW = (
    """WITH lim AS (SELECT ctid FROM {s}.alkstore_queue_claims WHERE queue = %(q)s FOR UPDATE),
claimed AS ("""
    + CLAIM
    + """),
rec AS (UPDATE {s}.alkstore_queue_claims SET rate_second = %(now)s,
  rate_second_claims = CASE WHEN rate_second = %(now)s THEN rate_second_claims ELSE 0 END
    + (SELECT count(*) FROM claimed)
  WHERE ctid = (SELECT ctid FROM lim) AND EXISTS (SELECT FROM claimed))
SELECT id FROM claimed"""
)
FUNC = "SELECT id FROM {s}.alkstore_claim_limited(%(q)s, 'w', %(now)s::bigint, 1, 'x')"
ACK = "DELETE FROM {s}.alkstore_jobs WHERE id = %(id)s"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    p = alkstore.load_engine("postgresql")
    res: dict[str, list[float]] = {}
    sides = {
        "plain": (CLAIM, "pl"),
        "floor": (FLOOR, "fl"),
        "lock only": (LOCK_ONLY, "lo"),
        "start only": (START_ONLY, "so"),
        "claims row": (CLAIMS_ROW, "cr"),
        "function": (FUNC, "fn"),
    }
    res.update({k: [] for k in sides})
    for _ in range(ROUNDS):
        with p.provision() as spec, p.open(spec.url, **spec.opts) as store:
            schema = str(spec.opts["schema"])
            for k, (_, q) in sides.items():
                queue = store.queue(q)
                if k != "plain":
                    queue.set_limits(Limits(concurrency=10_000, rate=100_000, per=1))
                queue.enqueue_many(list(range(n)))
            url = os.environ["ALKSTORE_PG_DSN"]
            with psycopg.connect(url, autocommit=True) as conn:
                st = {
                    k: (v[0].format(s=pgsql.Identifier(schema).as_string(conn)), v[1])
                    for k, v in sides.items()
                }
                ack = ACK.format(s=pgsql.Identifier(schema).as_string(conn))
                tot = dict.fromkeys(sides, 0.0)
                order = list(sides)
                for chunk in range(n // 100):
                    for k in order if chunk % 2 == 0 else order[::-1]:
                        sql, q = st[k]
                        t = time.perf_counter()
                        for _ in range(100):
                            now = int(time.time())
                            row = conn.execute(sql, {"q": q, "now": now}, prepare=True).fetchone()
                            assert row is not None, f"side {k} claimed nothing"
                            conn.execute(ack, {"id": row[0]}, prepare=True)
                        tot[k] += time.perf_counter() - t
                for k in sides:
                    res[k].append(tot[k])
    print("load", os.getloadavg())
    for k in sides:
        print(
            k,
            f"{n / statistics.median(res[k]):.0f}/s",
            "ratio to plain (median of rounds)",
            round(statistics.median(a / b for a, b in zip(res["plain"], res[k], strict=True)), 2),
        )


if __name__ == "__main__":
    main()
