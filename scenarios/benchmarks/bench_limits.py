"""Queue limits on each engine (contract 1.2 §16.2, §16.6, the limits profile).

Three rows:

* **L1, a limit that never binds**: claim + ack one job at a time on a queue with
  ``Limits(concurrency=10_000, rate=100_000, per=1)`` (the largest rate §16.6
  allows) beside a queue without
  limits, the two sides taking turns of 100 jobs (which goes first flips every
  turn), a fresh store per round; each side's median rate and the median over
  rounds of the ratio (limited over unlimited). The issue's target: at least 0.9x.
* **L2, a concurrency limit that binds**: 8 worker processes (the real ``Worker``,
  each with a task of concurrency 2, so 16 slots would-be) drain a backlog on a
  queue with ``Limits(concurrency=4)``; each handler sleeps ~20 ms and records
  when it started and ended. Jobs/s from the first start to the last end, and the
  most handlers running at once (the max overlap of the recorded intervals). A
  handler runs inside its claim, so that maximum can never exceed the bound: it is
  asserted, as the bound, not as a timing.
* **L3, a rate limit**: 4 worker processes on a queue with ``Limits(rate=R, per=W)``
  and a backlog bigger than the run can drain, for a few seconds. Each handler
  records its job's ``claimed_at`` (the store's whole-second clock the window is
  counted on, §16.6); the most starts in any window of ``W`` seconds (the starts at
  ``t`` with ``now - W < t <= now``) is asserted to be at most ``R``, and the mean
  rate over the run's whole seconds is set beside ``R / W``.

L1 is also split by kind (``never_binding_split``): a queue with the concurrency limit
alone, one with the rate alone and one with both (``SPLIT_KINDS``), each beside a queue
without limits in the same store, the four sides taking turns of 100 jobs (the order
reversed every turn), a fresh store per round; each kind's ratio is the median over
rounds of the unlimited side's time over its own. ``python bench_limits.py ENGINE
[JOBS] [--durable]`` runs L1 and its split alone (``--durable``: against a throwaway
PostgreSQL with ``fsync`` on, the way a production server commits).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from bench_children import run_children, serve_until_stopped
from bench_turns import Timing, alternating, start_timing, timing_since
from bench_workloads import payloads

import alkstore
from alkstore import MAX_RATE_LIMIT, Limits
from alkstore.worker import Worker

ROUNDS = 5
QUICK_ROUNDS = 2
JOBS_CAP = 5_000
"""L1's jobs per side and round, at most."""
QUICK_JOBS = 400
CHUNK = 100
TARGET = 0.9
"""The issue's target: claim + ack under a limit that never binds at least 0.9x."""
NEVER_BINDS = Limits(concurrency=10_000, rate=MAX_RATE_LIMIT, per=1)
"""The issue asked for ``rate=10_000_000``; §16.6 bounds a rate at ``MAX_RATE_LIMIT``
(100,000), which never binds either: one claimer here takes a few thousand a second."""
SPLIT_KINDS: Mapping[str, Limits] = {
    "concurrency": Limits(concurrency=NEVER_BINDS.concurrency),
    "rate": Limits(rate=NEVER_BINDS.rate, per=NEVER_BINDS.per),
    "both": NEVER_BINDS,
}
"""L1 split by kind: each part of ``NEVER_BINDS`` alone, and the two together."""

BOUND = 4
BOUND_PROCESSES = 8
BOUND_TASK_CONCURRENCY = 2
BOUND_SLEEP_S = 0.020
BOUND_JOBS = 600
QUICK_BOUND_JOBS = 80

RATE = 50
PER = 1
RATE_PROCESSES = 4
RATE_TASK_CONCURRENCY = 2
RATE_SLEEP_S = 0.005
RATE_SECONDS = 5.0
QUICK_RATE_SECONDS = 2.0

CHILD_TIMEOUT_S = 120.0
SHUTDOWN_GRACE_S = 10.0


@dataclass(frozen=True)
class SplitRow:
    """One kind of L1's split beside the unlimited queue of the same turns."""

    kind: str
    limited_rate: float
    unlimited_rate: float
    ratio: float
    ratios: tuple[float, ...]
    cpu_ratio: float

    def as_json(self) -> dict[str, Any]:
        limits = SPLIT_KINDS[self.kind]
        return {
            "kind": self.kind,
            "limits": {"concurrency": limits.concurrency, "rate": limits.rate, "per": limits.per},
            "limited_rate_per_s": round(self.limited_rate, 1),
            "unlimited_rate_per_s": round(self.unlimited_rate, 1),
            "ratio": round(self.ratio, 3),
            "ratios": [round(r, 3) for r in self.ratios],
            "cpu_ratio": round(self.cpu_ratio, 3),
        }


@dataclass(frozen=True)
class LimitsRows:
    engine: str
    jobs: int
    limited_rate: float
    unlimited_rate: float
    ratio: float
    """L1: median over rounds of the limited side's rate over the unlimited side's."""
    ratios: tuple[float, ...]
    cpu_ratio: float
    bound_jobs: int
    bound_rate: float
    bound_max_overlap: int
    rate_starts: int
    rate_seconds: float
    rate_max_in_window: int
    rate_mean_per_s: float
    """L3: starts per second over the run's whole seconds (the first and last, which
    the run covers only in part, left out)."""
    split: tuple[SplitRow, ...] = ()
    """L1 split by kind (``SPLIT_KINDS``), each beside no limit."""

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "never_binding_limits": {
                "concurrency": NEVER_BINDS.concurrency,
                "rate": NEVER_BINDS.rate,
                "per": NEVER_BINDS.per,
            },
            "jobs": self.jobs,
            "limited_rate_per_s": round(self.limited_rate, 1),
            "unlimited_rate_per_s": round(self.unlimited_rate, 1),
            "ratio": round(self.ratio, 3),
            "ratios": [round(r, 3) for r in self.ratios],
            "cpu_ratio": round(self.cpu_ratio, 3),
            "target_ratio": TARGET,
            "split": [row.as_json() for row in self.split],
            "bound": {
                "concurrency": BOUND,
                "processes": BOUND_PROCESSES,
                "task_concurrency": BOUND_TASK_CONCURRENCY,
                "handler_sleep_s": BOUND_SLEEP_S,
                "jobs": self.bound_jobs,
                "jobs_per_s": round(self.bound_rate, 1),
                "max_processing": self.bound_max_overlap,
            },
            "rate": {
                "rate": RATE,
                "per": PER,
                "processes": RATE_PROCESSES,
                "starts": self.rate_starts,
                "seconds": round(self.rate_seconds, 2),
                "max_starts_in_a_window": self.rate_max_in_window,
                "mean_starts_per_s": round(self.rate_mean_per_s, 2),
                "set_rate_per_s": RATE / PER,
            },
        }


# -- L1: a limit that never binds ---------------------------------------------------


def _claim_ack(queue: alkstore.Queue, count: int) -> Timing:
    started = start_timing()
    for _ in range(count):
        handle = queue.claim("bench")
        assert handle is not None
        assert handle.ack()
    return timing_since(started)


def _chunk(queues: Mapping[bool, alkstore.Queue], limited: bool, start: int, end: int) -> Timing:
    return _claim_ack(queues[limited], end - start)


def never_binding(
    provider: alkstore.EngineProvider, jobs: int, rounds: int
) -> tuple[list[Timing], list[Timing]]:
    """Each round's total time of the unlimited and the limited side."""
    plain: list[Timing] = []
    limited: list[Timing] = []
    for number in range(rounds):
        with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
            queues = {False: store.queue("bench-unlimited"), True: store.queue("bench-limited")}
            queues[True].set_limits(NEVER_BINDS)
            for queue in queues.values():
                queue.enqueue_many(payloads(jobs))
            unlimited_total, limited_total = alternating(
                jobs, CHUNK, number, partial(_chunk, queues)
            )
            plain.append(unlimited_total)
            limited.append(limited_total)
    return plain, limited


UNLIMITED = "none"
"""The unlimited side of L1's split."""


def _split_turns(queues: Mapping[str, alkstore.Queue], jobs: int, number: int) -> dict[str, Timing]:
    """One round of the split: every side claims and acks ``CHUNK`` jobs in its turn,
    the sides' order reversed every turn (and every round), so a burst of load on the
    shared machine lands on all of them; each side's total."""
    order = list(queues)
    totals = dict.fromkeys(order, (0.0, 0.0))
    for count, start in enumerate(range(0, jobs, CHUNK)):
        size = min(CHUNK, jobs - start)
        for side in order if (count + number) % 2 == 0 else order[::-1]:
            took = _claim_ack(queues[side], size)
            totals[side] = (totals[side][0] + took[0], totals[side][1] + took[1])
    return totals


def never_binding_split(
    provider: alkstore.EngineProvider, jobs: int, rounds: int
) -> list[dict[str, Timing]]:
    """Each round's total time of the unlimited side and of each kind of ``SPLIT_KINDS``."""
    totals: list[dict[str, Timing]] = []
    for number in range(rounds):
        with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
            queues = {UNLIMITED: store.queue("bench-split-none")}
            for kind, limits in SPLIT_KINDS.items():
                queues[kind] = store.queue(f"bench-split-{kind}")
                queues[kind].set_limits(limits)
            for queue in queues.values():
                queue.enqueue_many(payloads(jobs))
            totals.append(_split_turns(queues, jobs, number))
    return totals


def split_rows(rounds: list[dict[str, Timing]], jobs: int) -> tuple[SplitRow, ...]:
    """Each kind's rates and ratios (the unlimited side's time over the kind's) over rounds."""
    rows = []
    for kind in SPLIT_KINDS:
        pairs = [(r[UNLIMITED], r[kind]) for r in rounds]
        ratios = tuple(plain[0] / limited[0] for plain, limited in pairs)
        rows.append(
            SplitRow(
                kind=kind,
                limited_rate=jobs / statistics.median(limited[0] for _, limited in pairs),
                unlimited_rate=jobs / statistics.median(plain[0] for plain, _ in pairs),
                ratio=statistics.median(ratios),
                ratios=ratios,
                cpu_ratio=statistics.median(plain[1] / limited[1] for plain, limited in pairs),
            )
        )
    return tuple(rows)


# -- L2 and L3: worker processes ----------------------------------------------------

Span = tuple[float, float, int]
"""One handler run: its start and end (``time.monotonic()``, one clock for every
process of the machine) and its job's ``claimed_at``."""


def _worker_child(
    url: str,
    opts: dict[str, Any],
    queue: str,
    concurrency: int,
    sleep_s: float,
    ready: Any,
    stop: Any,
    results: Any,
) -> None:
    spans: list[Span] = []
    lock = threading.Lock()
    with alkstore.open(url, **opts) as store:
        worker = Worker(store, shutdown_grace_s=SHUTDOWN_GRACE_S)

        @worker.task(queue, concurrency=concurrency)
        def handle(job: alkstore.Job) -> None:
            started = time.monotonic()
            time.sleep(sleep_s)
            ended = time.monotonic()
            with lock:
                spans.append((started, ended, job.claimed_at or 0))

        serve_until_stopped(worker, ready, stop, CHILD_TIMEOUT_S, SHUTDOWN_GRACE_S)
    with lock:
        results.put(list(spans))


def _run_workers(
    spec: alkstore.EngineSpec,
    queue: str,
    processes: int,
    concurrency: int,
    sleep_s: float,
    until: Any,
) -> list[Span]:
    """Start ``processes`` worker processes on ``queue`` (a backlog already there),
    call ``until()`` once every one is up, then stop them; every handler run."""
    args = (spec.url, dict(spec.opts), queue, concurrency, sleep_s)
    return run_children(_worker_child, args, processes, until, CHILD_TIMEOUT_S)


def max_overlap(spans: list[Span]) -> int:
    """The most intervals open at one instant (an end before a start at a tie)."""
    events = sorted([(s, 1) for s, _, _ in spans] + [(e, -1) for _, e, _ in spans])
    most = running = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def max_in_window(seconds: list[int], per: int) -> int:
    """The most starts at instants ``t`` with ``now - per < t <= now``, over every ``now``."""
    counts = Counter(seconds)
    if not counts:
        return 0
    return max(
        sum(counts.get(t, 0) for t in range(now - per + 1, now + 1))
        for now in range(min(counts), max(counts) + 1)
    )


def _drained(queue: alkstore.Queue) -> None:
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while time.monotonic() < deadline:
        stats = queue.stats()
        if stats.ready + stats.scheduled + stats.processing + stats.lapsed == 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"queue {queue.name!r} was not drained in {CHILD_TIMEOUT_S:g} s")


def bound(provider: alkstore.EngineProvider, jobs: int) -> tuple[float, int]:
    """L2: jobs/s and the most handlers running at once."""
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        queue = store.queue("bench-bound")
        queue.set_limits(Limits(concurrency=BOUND))
        queue.enqueue_many(payloads(jobs))
        spans = _run_workers(
            spec,
            "bench-bound",
            BOUND_PROCESSES,
            BOUND_TASK_CONCURRENCY,
            BOUND_SLEEP_S,
            partial(_drained, queue),
        )
    assert len(spans) == jobs, f"{len(spans)} handler runs for {jobs} jobs"
    most = max_overlap(spans)
    assert most <= BOUND, f"{most} jobs processing at once under Limits(concurrency={BOUND})"
    elapsed = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    return jobs / elapsed, most


def rate(provider: alkstore.EngineProvider, seconds: float) -> tuple[int, float, int, float]:
    """L3: the starts, the run's seconds, the most starts in a window and the mean rate."""
    backlog = int(RATE / PER * (seconds + 5)) * 2
    with provider.provision() as spec, provider.open(spec.url, **spec.opts) as store:
        queue = store.queue("bench-rate")
        queue.set_limits(Limits(rate=RATE, per=PER))
        queue.enqueue_many(payloads(backlog))
        spans = _run_workers(
            spec,
            "bench-rate",
            RATE_PROCESSES,
            RATE_TASK_CONCURRENCY,
            RATE_SLEEP_S,
            partial(time.sleep, seconds),
        )
    assert spans, "no job started under the rate limit"
    assert len(spans) < backlog, "the backlog ran out: the rate limit was not what held"
    starts = [claimed for _, _, claimed in spans]
    most = max_in_window(starts, PER)
    assert most <= RATE, f"{most} starts in a window of {PER} s under Limits(rate={RATE})"
    first, last = min(starts), max(starts)
    inner = [t for t in starts if first < t < last]
    mean = len(inner) / (last - first - 1) if last - first > 1 else float("nan")
    elapsed = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
    return len(spans), elapsed, most, mean


def limits_rows(
    engine: str, provider: alkstore.EngineProvider, jobs: int, quick: bool
) -> LimitsRows:
    """L1, L2 and L3 on one engine (one with the limits profile)."""
    count = min(jobs, QUICK_JOBS if quick else JOBS_CAP)
    rounds = QUICK_ROUNDS if quick else ROUNDS
    plain, limited = never_binding(provider, count, rounds)
    split = split_rows(never_binding_split(provider, count, rounds), count)
    pairs = list(zip(plain, limited, strict=True))
    ratios = tuple(p[0] / lim[0] for p, lim in pairs)  # rate ratio = time ratio inverted
    bound_jobs = QUICK_BOUND_JOBS if quick else BOUND_JOBS
    bound_rate, overlap = bound(provider, bound_jobs)
    starts, seconds, most, mean = rate(provider, QUICK_RATE_SECONDS if quick else RATE_SECONDS)
    return LimitsRows(
        engine=engine,
        jobs=count,
        limited_rate=count / statistics.median(lim[0] for lim in limited),
        unlimited_rate=count / statistics.median(p[0] for p in plain),
        ratio=statistics.median(ratios),
        ratios=ratios,
        cpu_ratio=statistics.median(p[1] / lim[1] for p, lim in pairs),
        bound_jobs=bound_jobs,
        bound_rate=bound_rate,
        bound_max_overlap=overlap,
        rate_starts=starts,
        rate_seconds=seconds,
        rate_max_in_window=most,
        rate_mean_per_s=mean,
        split=split,
    )


def render_limits(rows: list[LimitsRows]) -> str:
    if not rows:
        return ""
    c, r, p = NEVER_BINDS.concurrency, NEVER_BINDS.rate, NEVER_BINDS.per
    lines = [
        f"Queue limits. L1: claim + ack one at a time under Limits(concurrency={c:_}, "
        f"rate={r:_}, per={p}) (never binds) beside no limit, sides taking turns of "
        f"{CHUNK}; ratio = limited / unlimited (median of rounds; target >= {TARGET}x). "
        f"L2: {BOUND_PROCESSES} worker processes, Limits(concurrency={BOUND}), handlers "
        f"sleeping {BOUND_SLEEP_S * 1000:g} ms: jobs/s and the most processing at once "
        f"(must be <= {BOUND}). L3: {RATE_PROCESSES} worker processes, Limits(rate={RATE}, "
        f"per={PER}): the most starts in any {PER} s window (must be <= {RATE}) and the "
        f"mean rate beside {RATE / PER:g}/s:",
        f"  {'engine':<10} {'L1 limited/s':>12} {'unlimited/s':>11} {'ratio':>6} {'cpu':>6}"
        f" | {'L2 jobs/s':>9} {'max':>4} | {'L3 starts':>9} {'max/win':>7} {'mean/s':>7}",
    ]
    for row in rows:
        lines.append(
            f"  {row.engine:<10} {row.limited_rate:>12.0f} {row.unlimited_rate:>11.0f} "
            f"{row.ratio:>5.2f}x {row.cpu_ratio:>5.2f}x | {row.bound_rate:>9.1f} "
            f"{row.bound_max_overlap:>4} | {row.rate_starts:>9} {row.rate_max_in_window:>7} "
            f"{row.rate_mean_per_s:>7.1f}"
        )
    lines.extend(render_split(rows))
    return "\n".join(lines)


def render_split(rows: list[LimitsRows]) -> list[str]:
    """L1 split by kind: each kind beside no limit in the same turns."""
    lines = [
        f"  L1 split by kind (each beside no limit, four sides taking turns of {CHUNK}; "
        "ratio = limited / unlimited, median of rounds):",
        f"  {'engine':<10} {'kind':<12} {'limited/s':>10} {'unlimited/s':>11} {'ratio':>6}"
        f" {'cpu':>6}  rounds",
    ]
    for row in rows:
        for part in row.split:
            rounds = ", ".join(f"{r:.2f}" for r in part.ratios)
            lines.append(
                f"  {row.engine:<10} {part.kind:<12} {part.limited_rate:>10.0f} "
                f"{part.unlimited_rate:>11.0f} {part.ratio:>5.2f}x {part.cpu_ratio:>5.2f}x"
                f"  {rounds}"
            )
    return lines


def main(argv: list[str] | None = None) -> None:
    """L1 and its split alone on one engine: ``bench_limits.py ENGINE [JOBS] [--durable]``."""
    parser = argparse.ArgumentParser(description="L1 and its split alone on one engine.")
    parser.add_argument("engine", help="an engine name (sqlite, postgresql)")
    parser.add_argument("jobs", nargs="?", type=int, default=JOBS_CAP, help="jobs a side")
    parser.add_argument(
        "--durable",
        action="store_true",
        help="PostgreSQL: a throwaway cluster with fsync on, where each side's commits"
        " wait for the disk, instead of $ALKSTORE_PG_DSN's server",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"JOBS must be at least 1, not {args.jobs}")
    if not args.durable:
        _run_alone(args.engine, args.jobs)
        return
    if args.engine not in ("postgresql", "postgres"):
        parser.error(f"--durable starts a PostgreSQL cluster; engine {args.engine!r} has none")
    from alkstore_postgres.testing.server import DSN_ENV, LocalPostgres

    with LocalPostgres(fsync=True) as durable:
        os.environ[DSN_ENV] = durable.dsn
        print("a throwaway cluster with fsync on:", durable.dsn)
        _run_alone(args.engine, args.jobs)


def _run_alone(engine: str, jobs: int) -> None:
    provider = alkstore.load_engine(engine)
    plain, limited = never_binding(provider, jobs, ROUNDS)
    ratios = [p[0] / lim[0] for p, lim in zip(plain, limited, strict=True)]
    cpu = statistics.median(p[1] / lim[1] for p, lim in zip(plain, limited, strict=True))
    print("load at start", tuple(round(x, 2) for x in os.getloadavg()))
    limited_rate = jobs / statistics.median(t[0] for t in limited)
    plain_rate = jobs / statistics.median(t[0] for t in plain)
    print(
        f"L1 {engine} ({jobs} jobs a side): limited {limited_rate:.0f}/s,"
        f" none {plain_rate:.0f}/s, ratio "
        f"{statistics.median(ratios):.2f}x (cpu {cpu:.2f}x), rounds "
        + ", ".join(f"{r:.2f}" for r in ratios)
    )
    split = split_rows(never_binding_split(provider, jobs, ROUNDS), jobs)
    for part in split:
        print(
            f"split {part.kind}: limited {part.limited_rate:.0f}/s,"
            f" none {part.unlimited_rate:.0f}/s, ratio {part.ratio:.2f}x"
            f" (cpu {part.cpu_ratio:.2f}x), rounds " + ", ".join(f"{r:.2f}" for r in part.ratios)
        )
    print("load at end", tuple(round(x, 2) for x in os.getloadavg()))


if __name__ == "__main__":
    main()
