"""Wake latency behind PgBouncer in transaction pooling mode, beside the direct engine.

A throwaway cluster, a real PgBouncer (``pool_mode = transaction``) in front of
it, and four configurations of the PostgreSQL engine: direct (LISTEN), through
PgBouncer with ``listen_url`` straight to the server, and poll-only through
PgBouncer (no ``listen_url``) at the default ``repoll_s`` and at 0.2 s. Each
sample: a ``claim_wait`` waits in one store, another store enqueues at a random
point of the re-poll cycle, and the time from the enqueue's return to the
claim's is taken. Printed and written as JSON, never asserted (the figures in
docs/engines/postgres.md come from here).
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import alkstore
from alkstore_postgres.testing.pgbouncer import LocalPgBouncer
from alkstore_postgres.testing.server import LocalPostgres

ROOT = Path(__file__).resolve().parents[2]
PGBOUNCER_JSON = ROOT / "reports" / "pgbouncer-wake.json"
QUEUE = "wake"
WARMUP = 2
CLAIM_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class WakeRow:
    configuration: str
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def _one_wake(waiter: Any, producer: Any, delay_s: float) -> float:
    """Seconds from an enqueue in ``producer`` to ``claim_wait`` returning in ``waiter``."""
    claimed: list[float] = []

    def wait() -> None:
        handle = waiter.queue(QUEUE).claim_wait("w", timeout=CLAIM_TIMEOUT_S)
        claimed.append(time.monotonic())
        if handle is not None:
            handle.ack()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    while not waiter._context.hub.has_waiters():  # the claim is waiting
        time.sleep(0.001)
    time.sleep(delay_s)
    producer.queue(QUEUE).enqueue({"at": delay_s})
    sent = time.monotonic()
    thread.join(CLAIM_TIMEOUT_S + 5)
    return claimed[0] - sent if claimed else CLAIM_TIMEOUT_S


def _measure(name: str, url: str, opts: dict[str, Any], rounds: int, seed: int) -> WakeRow:
    picks = random.Random(seed)
    with alkstore.open(url, **opts) as waiter, alkstore.open(url, **opts) as producer:
        latencies = [
            _one_wake(waiter, producer, picks.uniform(0.02, 1.02)) for _ in range(rounds + WARMUP)
        ][WARMUP:]
    ms = sorted(1000 * s for s in latencies)
    p99 = ms[max(0, round(0.99 * len(ms)) - 1)]
    return WakeRow(name, len(ms), round(statistics.median(ms), 1), round(p99, 1), round(ms[-1], 1))


def pgbouncer_wake(rounds: int) -> list[WakeRow]:
    """Every configuration's row; the cluster and PgBouncer are stopped afterwards."""
    rows: list[WakeRow] = []
    with LocalPostgres() as pg, LocalPgBouncer(pg.dsn) as bouncer:
        through = bouncer.url_for(pg.dsn)
        pooled = {"pooler": "transaction"}
        configurations = [
            ("direct, no pooler (LISTEN)", pg.dsn, {}),
            ("PgBouncer, listen_url direct", through, {**pooled, "listen_url": pg.dsn}),
            ("PgBouncer, poll-only, repoll_s=1 (default)", through, pooled),
            ("PgBouncer, poll-only, repoll_s=0.2", through, {**pooled, "repoll_s": 0.2}),
        ]
        for n, (name, url, opts) in enumerate(configurations):
            row = _measure(name, url, {**opts, "schema": f"wake_{n}"}, rounds, seed=n)
            print(
                f"  {name:44s} p50 {row.p50_ms:7.1f} ms  p99 {row.p99_ms:7.1f} ms  "
                f"max {row.max_ms:7.1f} ms",
                flush=True,
            )
            rows.append(row)
    PGBOUNCER_JSON.parent.mkdir(parents=True, exist_ok=True)
    PGBOUNCER_JSON.write_text(
        json.dumps({"rounds": rounds, "rows": [asdict(r) for r in rows]}, indent=2),
        encoding="utf-8",
    )
    return rows
