"""Per-key fairness on each engine (contract 1.2 §16.9, §16.10, the key_limits profile).

Each run provisions a fresh store with 100 limit keys whose backlogs are skewed as
Zipf's law has it (the key of rank r holds ``ceil(BIG / r)`` jobs: the first
thousands, the last a few dozen), enqueued biggest key first, on a queue with
``Limits(concurrency_per_key=2)``. One worker claims batches of 10 and acks each
batch before the next, for the first N claims. The report gives each key's share of
those claims (the least, the median and the most claims of any one key, beside the
fair share N / 100), the claim by which every key had been served once (one turn of
100 keys is 100 claims: a key starved behind the big backlogs would show here), and
the claim+ack rate of that queue beside the same backlog on a queue without a
per-key limit (what the ranking of a claim in turn costs). Numbers for reading: no
assertion on them, only that every key was served.

The backlog rows (``key_backlog_rates``) give that claim+ack rate at two backlogs, the
same 100 Zipf keys with ``BIG`` and ``10 * BIG`` jobs for the biggest (10,416 and
103,793 jobs), beside the same backlog without a per-key limit: a claim under a
per-key limit that reads only what it takes keeps its rate as the backlog grows.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import alkstore
from alkstore import EnqueueOpts, Limits

KEYS = 100
BIG = 2_000
QUICK_BIG = 300
CLAIMS = 1_000
QUICK_CLAIMS = 300
PER_KEY = 2
BATCH = 10


@dataclass(frozen=True)
class KeyShares:
    engine: str
    keys: int
    jobs: int
    claims: int
    least: int
    median: float
    most: int
    every_key_by: int | None
    """The claim (1-based) by which every key had its first job claimed; ``None`` if some
    key was never served within ``claims``."""
    keyed_rate: float
    plain_rate: float

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "keys": self.keys,
            "jobs": self.jobs,
            "claims": self.claims,
            "least_claims_of_a_key": self.least,
            "median_claims_of_a_key": self.median,
            "most_claims_of_a_key": self.most,
            "every_key_served_by_claim": self.every_key_by,
            "keyed_claim_ack_per_s": self.keyed_rate,
            "plain_claim_ack_per_s": self.plain_rate,
        }


def backlogs(big: int) -> list[int]:
    """Each key's backlog, biggest first: Zipf's ``ceil(big / rank)``."""
    return [math.ceil(big / rank) for rank in range(1, KEYS + 1)]


def _fill(queue: alkstore.Queue, sizes: list[int], keyed: bool) -> None:
    for rank, size in enumerate(sizes, start=1):
        key = f"tenant-{rank:03d}"
        opts = EnqueueOpts(limit_key=key) if keyed else None
        queue.enqueue_many([{"key": key, "n": n} for n in range(size)], opts)


def _drain(queue: alkstore.Queue, claims: int) -> tuple[list[str | None], float]:
    """The keys of the first ``claims`` claims (batches of ``BATCH``, each acked before
    the next) and the seconds they took."""
    keys: list[str | None] = []
    started = time.perf_counter()
    while len(keys) < claims:
        batch = queue.claim_batch("bench", min(BATCH, claims - len(keys)))
        if not batch:
            break
        keys.extend(handle.job.limit_key for handle in batch)
        queue.ack_batch([handle.id for handle in batch], "bench")
    return keys, time.perf_counter() - started


def key_fairness(engine: str, provider: alkstore.EngineProvider, quick: bool) -> KeyShares:
    sizes = backlogs(QUICK_BIG if quick else BIG)
    claims = QUICK_CLAIMS if quick else CLAIMS
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        keyed = store.queue("bench-keyed")
        keyed.set_limits(Limits(concurrency_per_key=PER_KEY))
        _fill(keyed, sizes, keyed=True)
        plain = store.queue("bench-unkeyed")
        _fill(plain, sizes, keyed=False)
        keys, keyed_s = _drain(keyed, claims)
        _, plain_s = _drain(plain, claims)
    counts = Counter(keys)
    per_key = [counts.get(f"tenant-{rank:03d}", 0) for rank in range(1, KEYS + 1)]
    seen: set[str | None] = set()
    every_key_by = None
    for number, key in enumerate(keys, start=1):
        seen.add(key)
        if len(seen) == KEYS:
            every_key_by = number
            break
    return KeyShares(
        engine=engine,
        keys=KEYS,
        jobs=sum(sizes),
        claims=len(keys),
        least=min(per_key),
        median=statistics.median(per_key),
        most=max(per_key),
        every_key_by=every_key_by,
        keyed_rate=len(keys) / keyed_s,
        plain_rate=claims / plain_s,
    )


@dataclass(frozen=True)
class KeyBacklogRate:
    engine: str
    jobs: int
    claims: int
    keyed_rate: float
    plain_rate: float

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "jobs": self.jobs,
            "claims": self.claims,
            "keyed_claim_ack_per_s": self.keyed_rate,
            "plain_claim_ack_per_s": self.plain_rate,
        }


def key_backlog_rates(
    engine: str, provider: alkstore.EngineProvider, quick: bool
) -> list[KeyBacklogRate]:
    """Claim+ack under ``Limits(concurrency_per_key=PER_KEY)`` and without, on the same
    Zipf backlog at each size (a fresh store each)."""
    rows = []
    claims = QUICK_CLAIMS if quick else CLAIMS
    for big in (QUICK_BIG,) if quick else (BIG, 10 * BIG):
        sizes = backlogs(big)
        with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
            keyed = store.queue("bench-keyed")
            keyed.set_limits(Limits(concurrency_per_key=PER_KEY))
            _fill(keyed, sizes, keyed=True)
            plain = store.queue("bench-unkeyed")
            _fill(plain, sizes, keyed=False)
            keys, keyed_s = _drain(keyed, claims)
            done, plain_s = _drain(plain, claims)
        rows.append(
            KeyBacklogRate(engine, sum(sizes), len(keys), len(keys) / keyed_s, len(done) / plain_s)
        )
    return rows


def render_key_backlog_rates(rows: list[KeyBacklogRate]) -> str:
    if not rows:
        return ""
    lines = [
        f"Claim+ack under a per-key limit as the backlog grows: {KEYS} Zipf keys, "
        f"Limits(concurrency_per_key={PER_KEY}), batches of {BATCH} acked before the next, "
        "beside the same backlog without a per-key limit:"
    ]
    for r in rows:
        lines.append(
            f"  {r.engine:<12} {r.jobs:>9,} jobs waiting, {r.claims:,} claims: "
            f"{r.keyed_rate:,.0f}/s keyed, {r.plain_rate:,.0f}/s without a per-key limit"
        )
    return "\n".join(lines)


def render_key_fairness(rows: list[KeyShares]) -> str:
    if not rows:
        return ""
    lines = [
        f"Per-key fairness: {KEYS} limit keys with Zipf backlogs (biggest enqueued first), "
        f"Limits(concurrency_per_key={PER_KEY}), batches of {BATCH} acked before the next; "
        "each key's claims among the first N (fair share N / keys), the claim by which "
        "every key was served once (one turn: 100 claims), claim+ack rate beside the "
        "same backlog without a per-key limit:"
    ]
    for r in rows:
        served = "never" if r.every_key_by is None else f"claim {r.every_key_by}"
        lines.append(
            f"  {r.engine:<12} {r.jobs:,} jobs, first {r.claims:,} claims: per key "
            f"{r.least}/{r.median:g}/{r.most} (least/median/most; fair {r.claims / r.keys:g}), "
            f"every key by {served}; {r.keyed_rate:,.0f}/s keyed, {r.plain_rate:,.0f}/s "
            "without a per-key limit"
        )
    return "\n".join(lines)
