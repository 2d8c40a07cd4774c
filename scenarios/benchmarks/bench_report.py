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

    @property
    def rate(self) -> float | None:
        """Jobs (events) per second; ``None`` for latency workloads and when nothing ran."""
        if self.latencies_ms is not None:
            return None
        if self.failure is not None or self.seconds <= 0 or self.jobs <= 0:
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
        if m.failure is not None:
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
        "8.8k/s 4 consumers, wake p50 3.0 ms",
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
    if m.latencies_ms is not None:
        p50, p99 = m.percentile_ms(0.50), m.percentile_ms(0.99)
        no_samples = p50 is None or p99 is None
        text = "no samples" if no_samples else f"p50 {p50:.2f} / p99 {p99:.2f} ms"
    else:
        rate = m.rate
        text = "no jobs" if rate is None else f"{rate:,.0f}/s"
    if key == "four_procs" or m.errors:
        text += f", {m.errors} err"
    if m.capped:
        text += " (time-capped)"
    verdict = target.met(m) if target is not None else None
    if verdict is not None:
        text += "  ok" if verdict else "  BELOW"
    return text


def render_table(
    rows: Sequence[tuple[str, str]],
    engines: Sequence[str],
    results: Mapping[str, Mapping[str, Measurement]],
) -> str:
    """Rows are (workload key, label); one column per engine, then the targets."""
    header = ["workload", *engines, "target (" + " | ".join(engines) + ")"]
    body: list[list[str]] = []
    for key, label in rows:
        targets = TARGETS.get(key, {})
        line = [label]
        line += [cell(key, results.get(e, {}).get(key), targets.get(e)) for e in engines]
        line.append(" | ".join(targets[e].describe() if e in targets else "-" for e in engines))
        body.append(line)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(r) for r in body)])


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
        "peers_reference_not_measured": dict(PEERS),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
