"""The claim under a per-key limit walks the keys (PICK_IN_TURN) and takes exactly the
rows, in exactly the order, that ranking every claimable row (PICK_IN_TURN_RANKED,
the statement it replaced) takes."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import EnqueueOpts, Limits, QueueOpts
from alkstore.testing import FakeClock
from alkstore_sqlite import statements as sql

START = 1_700_000_000
KEYS = (None, "a", "b", "bb", "c", "é", "z")


def _random_backlog(url: str, rng: random.Random) -> tuple[FakeClock, dict[str, Any]]:
    """A keyed queue with pending, scheduled, lapsed, expired and live rows; the
    parameters of its next claim."""
    clock = FakeClock(START)
    keys = rng.sample(KEYS, rng.randint(1, len(KEYS)))
    per_key = rng.choice((None, 1, 2, 3))
    rate_per_key = rng.choice((None, 1, 2, 5)) if per_key is not None else rng.choice((1, 3))
    concurrency = rng.choice((None, None, 4, 20))
    with alkstore.open(url, clock=clock) as store:
        queue = store.queue("q", QueueOpts(visibility_timeout_s=rng.choice((5, 100))))
        queue.set_limits(
            Limits(
                concurrency=concurrency,
                concurrency_per_key=per_key,
                rate_per_key=rate_per_key,
                per=60 if rate_per_key is not None else None,
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
    named = {
        "queue": "q",
        "now": clock.now(),
        "limit": rng.randint(1, 12),
        "per_key": per_key,
        "rate_per_key": rate_per_key,
        "per_s": 60 if rate_per_key is not None else None,
        "cursor": rng.choice((None, "", *(key for key in keys if key), "b0", "zz")),
    }
    return clock, named


@pytest.mark.parametrize("seed", range(120))
def test_the_key_walk_picks_what_ranking_every_claimable_row_picks(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    db_path = tmp_path / "store.db"
    _, named = _random_backlog(f"sqlite:///{db_path}", rng)
    conn = sqlite3.connect(str(db_path))
    try:
        if rng.random() < 0.1:
            conn.execute("INSERT INTO __alkstore_paused (queue) VALUES ('q')")
        expected = conn.execute(sql.PICK_IN_TURN_RANKED, named).fetchall()
        assert conn.execute(sql.PICK_IN_TURN, named).fetchall() == expected
    finally:
        conn.close()


def test_the_key_walk_reads_the_key_index_and_never_ranks_the_backlog(tmp_path: Path) -> None:
    db_path = tmp_path / "store.db"
    with alkstore.open(f"sqlite:///{db_path}", clock=FakeClock(START)) as store:
        store.queue("q").set_limits(Limits(concurrency_per_key=1))
    conn = sqlite3.connect(str(db_path))
    try:
        named = {"queue": "q", "now": START, "limit": 5, "per_key": 1, "rate_per_key": None}
        plan = conn.execute(
            f"EXPLAIN QUERY PLAN {sql.PICK_IN_TURN}", {**named, "per_s": None, "cursor": None}
        ).fetchall()
        details = " ".join(str(row[-1]) for row in plan)
        assert "__alkstore_jobs_key" in details
        assert "SCAN __alkstore_jobs" not in details
    finally:
        conn.close()
