"""What a benchmark run measured, the targets it is read against, and how it is shown.

Targets are printed beside the numbers for reading, never asserted: a shared,
noisy two-core machine is no place for speed assertions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Measurement:
    """One workload on one engine."""

    jobs: int = 0
    """Jobs (stream events) completed inside the timed window (samples, for latency workloads)."""
    seconds: float = 0.0
    capped: bool = False
    """The time budget ran out before the workload finished; the rate covers what ran."""
    errors: int = 0
    latencies_ms: list[float] | None = None
    notes: list[str] = field(default_factory=list)
    failure: str | None = None
    """Set when the workload could not run at all (the cell then shows it)."""
    skipped: str | None = None
    """Set when the workload did not run here, and why (a peer not installed): not a failure."""

    @property
    def rate(self) -> float | None:
        """Jobs (events) per second; ``None`` for latency workloads and when nothing ran."""
        if self.latencies_ms is not None:
            return None
        if self.failure is not None or self.skipped is not None:
            return None
        if self.seconds <= 0 or self.jobs <= 0:
            return None
        return self.jobs / self.seconds

    def percentile_ms(self, q: float) -> float | None:
        return percentile(self.latencies_ms or [], q)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rate_per_s"] = self.rate
        if self.latencies_ms is not None:
            data["p50_ms"] = self.percentile_ms(0.50)
            data["p99_ms"] = self.percentile_ms(0.99)
            data["min_ms"] = min(self.latencies_ms, default=None)
            data["max_ms"] = max(self.latencies_ms, default=None)
        return data


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (no interpolation: every reported value was observed)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    min_rate: float | None = None
    zero_errors: bool = False
    max_p50_ms: float | None = None
    max_p99_ms: float | None = None

    def describe(self) -> str:
        parts: list[str] = []
        if self.min_rate is not None:
            parts.append(f">= {compact(self.min_rate)}/s")
        if self.zero_errors:
            parts.append("0 err")
        if self.max_p50_ms is not None:
            parts.append(f"p50 <= {self.max_p50_ms:g} ms")
        if self.max_p99_ms is not None:
            parts.append(f"p99 <= {self.max_p99_ms:g} ms")
        return ", ".join(parts)

    def met(self, m: Measurement) -> bool | None:
        """``None`` when there is nothing to judge (no measurement)."""
        if m.failure is not None or m.skipped is not None:
            return None
        checks: list[bool] = []
        if self.min_rate is not None:
            rate = m.rate
            if rate is None:
                return None
            checks.append(rate >= self.min_rate)
        if self.zero_errors:
            checks.append(m.errors == 0)
        for limit, q in ((self.max_p50_ms, 0.50), (self.max_p99_ms, 0.99)):
            if limit is not None:
                value = m.percentile_ms(q)
                if value is None:
                    return None
                checks.append(value <= limit)
        return all(checks) if checks else None


TARGETS: Mapping[str, Mapping[str, Target]] = {
    "enqueue": {"sqlite": Target(min_rate=30_000), "postgresql": Target(min_rate=3_400)},
    "enqueue_many": {"sqlite": Target(min_rate=200_000), "postgresql": Target(min_rate=100_000)},
    "claim_ack": {"sqlite": Target(min_rate=10_000)},
    "claim_batch": {"sqlite": Target(min_rate=100_000), "postgresql": Target(min_rate=30_000)},
    "four_procs": {
        "sqlite": Target(min_rate=10_000, zero_errors=True),
        "postgresql": Target(min_rate=10_000),
    },
    "wake": {
        "sqlite": Target(max_p50_ms=1.0, max_p99_ms=2.0),
        "postgresql": Target(max_p50_ms=2.0),
    },
    "aio_loop_lag": {"sqlite": Target(max_p99_ms=5.0), "postgresql": Target(max_p99_ms=5.0)},
}

PEERS: Sequence[tuple[str, str]] = (
    (
        "honker 0.5.0",
        "25.8k enqueues/s, 81k/s batched, 0.9k claim+ack/s at depth 20k, "
        "52k/s claim_batch(100), 0.9k/s 4 processes, wake p50 1.5 ms / p99 2.3 ms",
    ),
    (
        "pgqueuer 1.6 (asyncpg)",
        "3.4k enqueues/s, 78k/s batched, 8.0k/s drain one consumer, "
        "8.8k/s 4 consumers, wake p50 3.0 ms (rows P1 and P3 measure it in the run, on PostgreSQL)",
    ),
    ("procrastinate 3.10", "1.4k enqueues/s, 0.7k/s drain, wake 3.6 ms"),
)


# --------------------------------------------------------------------------- formatting


def compact(value: float) -> str:
    """30000 -> "30k", 3400 -> "3.4k", 950 -> "950"."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.3g}"


def cell(key: str, m: Measurement | None, target: Target | None) -> str:
    if m is None:
        return "-"
    if m.failure is not None:
        return f"FAILED ({m.failure})"
    if m.skipped is not None:
        return f"skipped ({m.skipped})"
    if m.latencies_ms is not None:
        p50, p99 = m.percentile_ms(0.50), m.percentile_ms(0.99)
        no_samples = p50 is None or p99 is None
        text = "no samples" if no_samples else f"p50 {p50:.2f} / p99 {p99:.2f} ms"
    else:
        rate = m.rate
        text = "no jobs" if rate is None else f"{rate:,.0f}/s"
    if key.startswith("four_procs") or m.errors:
        text += f", {m.errors} err"
    if m.capped:
        text += " (time-capped)"
    verdict = target.met(m) if target is not None else None
    if verdict is not None:
        text += "  ok" if verdict else "  BELOW"
    return text


RATIO_TARGETS: Mapping[str, Mapping[str, float]] = {
    "sqlite": dict.fromkeys(
        (
            "enqueue",
            "enqueue_many",
            "claim_ack",
            "claim_ack_same_pages",
            "claim_wait_ack",
            "claim_batch",
            "four_procs",
            "four_procs_no_gate",
            "stream_append",
            "stream_read",
            "backlog_1k",
            "backlog_1m",
            "many_queues",
            "big_payload",
        ),
        0.9,
    ),
    "postgresql": {"claim_batch": 0.9},
}
"""Minimum engine / plain-driver rate, per engine and workload."""

LAPSE_RATIO_TARGETS: dict[str, dict[str, float]] = {"sqlite": {"claim_batch": 0.9}}
"""Minimum engine / fair-baseline rate (the plain one with the lapse index, issue 28)."""

BACKLOG_GROWTH_LIMIT = 1.5
"""claim+ack cost at a backlog of 1,000,000 over its cost at 1,000, at most."""


def ratio(engine: Measurement | None, plain: Measurement | None) -> float | None:
    """Engine rate over baseline rate (higher is better for the engine)."""
    if engine is None or plain is None:
        return None
    a, b = engine.rate, plain.rate
    if a is None or b is None or b <= 0:
        return None
    return a / b


def ratio_cell(
    engine: str,
    key: str,
    value: float | None,
    targets: Mapping[str, Mapping[str, float]] = RATIO_TARGETS,
) -> str:
    if value is None:
        return "-"
    text = f"{value:.2f}x"
    floor = targets.get(engine, {}).get(key)
    if floor is not None:
        text += "  ok" if value >= floor else "  BELOW"
    return text


def render_table(
    rows: Sequence[tuple[str, str]],
    engines: Sequence[str],
    results: Mapping[str, Mapping[str, Measurement]],
    plain_labels: Mapping[str, str],
    lapse_labels: Mapping[str, str] | None = None,
) -> str:
    """Rows are (workload key, label); per engine: its column, its plain-driver baseline
    (when it has one) and the ratio engine / baseline, the fair baseline (with the lapse
    index) and its ratio when it has one; then the targets."""
    lapse_labels = lapse_labels or {}
    header = ["workload"]
    for engine in engines:
        header.append(engine)
        if engine in plain_labels:
            header += [plain_labels[engine], "ratio"]
        if engine in lapse_labels:
            header += [lapse_labels[engine], "ratio"]
    header.append("target (" + " | ".join(engines) + ")")
    body: list[list[str]] = []
    for key, label in rows:
        targets = TARGETS.get(key, {})
        line = [label]
        for engine in engines:
            m = results.get(engine, {}).get(key)
            line.append(cell(key, m, targets.get(engine)))
            if engine in plain_labels:
                plain = results.get(f"{engine}:plain", {}).get(key)
                line.append(cell(key, plain, None))
                line.append(ratio_cell(engine, key, ratio(m, plain)))
            if engine in lapse_labels:
                fair = results.get(f"{engine}:plain+lapse", {}).get(key)
                line.append(cell(key, fair, None))
                line.append(ratio_cell(engine, key, ratio(m, fair), LAPSE_RATIO_TARGETS))
        line.append(" | ".join(_target_text(e, key) for e in engines))
        body.append(line)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(r) for r in body)])


def _target_text(engine: str, key: str) -> str:
    parts = []
    target = TARGETS.get(key, {}).get(engine)
    if target is not None:
        parts.append(target.describe())
    floor = RATIO_TARGETS.get(engine, {}).get(key)
    if floor is not None:
        parts.append(f">= {floor:g}x plain")
    fair = LAPSE_RATIO_TARGETS.get(engine, {}).get(key)
    if fair is not None:
        parts.append(f">= {fair:g}x plain + lapse index")
    return ", ".join(parts) or "-"


def backlog_growth(results: Mapping[str, Measurement]) -> float | None:
    """Cost per claim+ack at the large backlog over the cost at the small one."""
    small, large = results.get("backlog_1k"), results.get("backlog_1m")
    if small is None or large is None or small.rate is None or large.rate is None:
        return None
    return small.rate / large.rate


def render_backlog_growth(
    columns: Sequence[str], results: Mapping[str, Mapping[str, Measurement]]
) -> str:
    lines = [
        f"claim+ack cost at the large backlog / at 1,000 (target <= {BACKLOG_GROWTH_LIMIT:g}x):"
    ]
    for column in columns:
        growth = backlog_growth(results.get(column, {}))
        if growth is None:
            continue
        verdict = "ok" if growth <= BACKLOG_GROWTH_LIMIT else "ABOVE"
        lines.append(f"  {column:<18} {growth:.2f}x  {verdict}")
    return "\n".join(lines) if len(lines) > 1 else ""


def render_peers() -> str:
    lines = ["Peers, measured earlier on this machine (for scale only; not re-measured here):"]
    lines += [f"  {name}: {numbers}" for name, numbers in PEERS]
    return "\n".join(lines)


def write_json(
    path: Path,
    *,
    environment: Mapping[str, Any],
    config: Mapping[str, Any],
    rows: Sequence[tuple[str, str]],
    results: Mapping[str, Mapping[str, Measurement]],
    extra: Mapping[str, Any] | None = None,
) -> None:
    document = {
        "environment": dict(environment),
        "config": dict(config),
        "workloads": dict(rows),
        "results": {
            engine: {key: m.as_json() for key, m in by_key.items()}
            for engine, by_key in results.items()
        },
        "targets": {
            key: {engine: asdict(t) for engine, t in per_engine.items()}
            for key, per_engine in TARGETS.items()
        },
        "ratio_targets": {engine: dict(floors) for engine, floors in RATIO_TARGETS.items()},
        "ratios": {
            engine: {
                key: ratio(m, results.get(f"{engine}:plain", {}).get(key))
                for key, m in by_key.items()
            }
            for engine, by_key in results.items()
            if f"{engine}:plain" in results
        },
        "lapse_ratio_targets": {e: dict(floors) for e, floors in LAPSE_RATIO_TARGETS.items()},
        "lapse_ratios": {
            engine: {
                key: ratio(m, results.get(f"{engine}:plain+lapse", {}).get(key))
                for key, m in by_key.items()
            }
            for engine, by_key in results.items()
            if f"{engine}:plain+lapse" in results
        },
        "backlog_growth": {column: backlog_growth(by_key) for column, by_key in results.items()},
        "peers_reference_not_measured": dict(PEERS),
        **(extra or {}),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
