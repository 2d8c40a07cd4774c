"""What a retry or a fail costs in a worker's group, beside an ack (issue 28 §1).

A worker writes a group's acks as one ``tx.ack_all`` statement, its retries as one
``tx.retry_all`` and its fails as one ``tx.fail_all`` (contract §12.10, §3.11), and a
run's slot stays taken until its group is written. This times the group's write
alone, in one process on a freshly provisioned store: ``GROUP`` claimed jobs settled
in one ``store.transaction()``, three sides taking turns group by group (the order
turns each group):

- **acks**: ``tx.ack_all`` of all ``GROUP``;
- **mixed, one by one**: one job in five not acking, as ``bench_worker_scale
  --failing`` has it: ``tx.ack_all`` of the rest, then ``RETRIES`` ``tx.retry`` (a
  delay, so no job comes back during the round) and ``FAILS`` ``tx.fail``, each its
  own statement: how the worker wrote a group before §3.11;
- **mixed, grouped**: the same outcomes, the retries in one ``tx.retry_all`` and the
  fails in one ``tx.fail_all``: how it writes them now.

The row gives each side's median time per group over the rounds, the cost of one
retry or fail beyond the ack it replaces ((mixed - acks) / (RETRIES + FAILS)) on
each mixed side, and the ack's own share (acks / GROUP). Printed and written to the
report, never asserted: in ``nox -s bench`` (the report's ``group_outcomes``), or
alone with

    python scenarios/benchmarks/bench_group_outcomes.py [--engine E] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench_workloads import payloads

import alkstore
from alkstore import JobHandle, QueueOpts

GROUP = 64
"""Outcomes in a group: a worker of 64 handlers whose runs all finish in one window."""
RETRIES = 7
FAILS = 6
"""Of ``GROUP``, the ones that retry and fail: one in five does not ack."""
GROUPS = 40
QUICK_GROUPS = 3
ROUNDS = 5
QUICK_ROUNDS = 1
RETRY_DELAY_S = 3_600
QUEUE = "bench-group-outcomes"


SIDES = ("acks", "each", "grouped")
"""Acks only; mixed, a statement per retry or fail; mixed, a statement per kind."""


@dataclass(frozen=True, slots=True)
class GroupRow:
    engine: str
    acks_ms: float
    """Median time to write a group of ``GROUP`` acks."""
    mixed_ms: float
    """Median time to write a group of ``GROUP - RETRIES - FAILS`` acks, ``RETRIES``
    retries and ``FAILS`` fails, each retry and fail a statement of its own."""
    grouped_ms: float
    """The same group, its retries in one ``tx.retry_all`` and its fails in one
    ``tx.fail_all``."""
    per_ack_us: float
    per_other_us: float
    """One retry or fail beyond the ack it replaces, a statement each."""
    per_other_grouped_us: float
    """One retry or fail beyond the ack it replaces, in the grouped statements."""
    rounds_acks_ms: list[float]
    rounds_mixed_ms: list[float]
    rounds_grouped_ms: list[float]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _write(store: alkstore.Store, handles: list[JobHandle], side: str) -> float:
    acked = GROUP if side == "acks" else GROUP - RETRIES - FAILS
    retried, failed = handles[acked : acked + RETRIES], handles[acked + RETRIES :]
    started = time.perf_counter()
    with store.transaction() as tx:
        refused = list(tx.ack_all(handles[:acked]))
        if side == "each":
            for handle in retried:
                tx.retry(handle, "again", RETRY_DELAY_S)  # StaleHandle if refused
            for handle in failed:
                tx.fail(handle, "broken")
        elif side == "grouped":
            refused += tx.retry_all(retried, "again", RETRY_DELAY_S)
            refused += tx.fail_all(failed, "broken")
    assert refused == [], f"{len(refused)} claims refused: the timing would be of less work"
    return time.perf_counter() - started


def group_row(engine: str, provider: alkstore.EngineProvider, quick: bool) -> GroupRow:
    groups, rounds = (QUICK_GROUPS, QUICK_ROUNDS) if quick else (GROUPS, ROUNDS)
    per_side: dict[str, list[float]] = {side: [] for side in SIDES}
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        queue = store.queue(QUEUE, QueueOpts(max_attempts=1_000))
        for number in range(rounds):
            totals = dict.fromkeys(SIDES, 0.0)
            for count in range(groups):
                turn = (count + number) % len(SIDES)
                for side in SIDES[turn:] + SIDES[:turn]:
                    queue.enqueue_many(payloads(GROUP))
                    handles = queue.claim_batch("bench", GROUP)
                    assert len(handles) == GROUP, f"claimed {len(handles)} of {GROUP}"
                    totals[side] += _write(store, handles, side)
            for side, total in totals.items():
                per_side[side].append(total / groups)
    acks_s, each_s, grouped_s = (statistics.median(per_side[side]) for side in SIDES)
    others = RETRIES + FAILS
    return GroupRow(
        engine,
        acks_s * 1e3,
        each_s * 1e3,
        grouped_s * 1e3,
        acks_s / GROUP * 1e6,
        (each_s - acks_s) / others * 1e6,
        (grouped_s - acks_s) / others * 1e6,
        *([round(s * 1e3, 3) for s in per_side[side]] for side in SIDES),
    )


def render_group_rows(rows: Sequence[GroupRow]) -> str:
    """The rows' table; ``""`` for none."""
    if not rows:
        return ""
    lines = [
        f"A worker's group of {GROUP}: acks only beside {RETRIES} retries and {FAILS} fails "
        "among them, a statement each or one per kind (tx.retry_all, tx.fail_all), "
        "medians per group",
        "engine      | acks only | mixed, each | mixed, grouped | per ack | "
        "per retry/fail beyond an ack: each, grouped",
    ]
    lines += [
        f"{r.engine:<11} | {r.acks_ms:6.2f} ms | {r.mixed_ms:8.2f} ms | {r.grouped_ms:11.2f} ms "
        f"| {r.per_ack_us:4.1f} us | {r.per_other_us:5.0f} us, {r.per_other_grouped_us:5.0f} us"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", action="append", choices=("sqlite", "postgresql"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    for engine in args.engine or ["sqlite", "postgresql"]:
        row = group_row(engine, alkstore.load_engine(engine), args.quick)
        print(render_group_rows([row]).splitlines()[-1], flush=True)
        rows.append(row)
    print(render_group_rows(rows))
    print(f"load average at end {os.getloadavg()}")
    if args.json is not None:
        text = json.dumps([row.as_json() for row in rows], indent=2) + "\n"
        args.json.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
