"""Benchmarks of the reference engines beside plain-driver baselines (``nox -s bench``).

    python scenarios/benchmarks/run.py [--engine sqlite|postgresql] [--jobs N] [--quick]
    python scenarios/benchmarks/run.py --sustained 300     (the sustained PostgreSQL run only)
    python scenarios/benchmarks/run.py --sustained-worker 300 [--sustained-window 0.002 ...]
                                                           (the same with the real worker)
    python scenarios/benchmarks/run.py --dashboard         (the dashboard rows only)

Each workload runs on a freshly provisioned store of each engine, through the
public API only, and right after it on that engine's plain-driver baseline
(plain ``sqlite3`` / plain ``psycopg`` running the same statements by hand).
Prints one table (rows = workloads; per engine: the engine, its baseline and
the ratio; then the targets) and writes the results to ``reports/bench.json``.
Nothing here asserts on speed: the numbers are for reading.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from bench_async_acks import AckRow, async_ack_rows, render_async_acks, write_async_acks
from bench_before import plain_before_after
from bench_catalog import KEYS, WORKLOADS, Entry
from bench_dashboard import DashboardRun, dashboard_run, render_dashboard
from bench_graph import GraphRun, graph_run, render_graph
from bench_group_outcomes import GroupRow, group_row, render_group_rows
from bench_key_limits import (
    KeyBacklogRate,
    KeyShares,
    key_backlog_rates,
    key_fairness,
    render_key_backlog_rates,
    render_key_fairness,
)
from bench_limits import LimitsRows, limits_rows, render_limits
from bench_report import (
    Measurement,
    render_backlog_growth,
    render_peers,
    render_table,
    write_json,
)
from bench_results import Ratio, render_results_ratios, results_ratios
from bench_sides import (
    LAPSE_LABELS,
    PLAIN_LABELS,
    EngineSide,
    Side,
    SideSpec,
    baselines_of,
    column_name,
    drop_plain,
    has_plain,
    open_side,
    plain_location,
)
from bench_unique import Overhead, floor_overhead, render_unique_overhead, unique_overhead
from bench_worker import render_worker_overhead, worker_overhead_json
from bench_worker_scale import ScaleRow, render_row, render_scale, scale_rows
from bench_workloads import Bench

import alkstore

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports" / "bench.json"
ENGINES = ("sqlite", "postgresql")
ALIASES = {"postgres": "postgresql"}
QUICK_JOBS = 500
QUICK_WAKE_ROUNDS = 20
QUICK_BUDGET_S = 30.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engine",
        action="append",
        metavar="NAME",
        help="sqlite or postgresql (repeatable; default: both); any installed engine "
        "or module:object also works, without targets",
    )
    parser.add_argument(
        "--jobs", type=int, default=20_000, help="jobs (or stream events) per workload (N)"
    )
    parser.add_argument(
        "--wake-rounds", type=int, default=200, help="measured wake and pub/sub samples"
    )
    parser.add_argument(
        "--budget", type=float, default=120.0, help="time cap per workload run, seconds"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run with small N")
    parser.add_argument(
        "--workload",
        action="append",
        choices=KEYS,
        help="run only this workload (repeatable; default: all)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the in-process workloads into reports/profile/ (numbers then skew)",
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the plain-driver baseline runs"
    )
    parser.add_argument(
        "--sustained",
        type=float,
        metavar="SECONDS",
        help="run only the sustained PostgreSQL run for this long (producers + consumers at a "
        "steady rate); writes reports/sustained-postgres.{json,png}",
    )
    parser.add_argument(
        "--sustained-rate",
        type=int,
        default=2_000,
        help="jobs per second the sustained run's producer offers",
    )
    parser.add_argument(
        "--sustained-worker",
        type=int,
        metavar="SECONDS",
        help="run only the sustained PostgreSQL run of the worker (4 processes x 16 "
        "handlers, 1 ms jobs) for this long, once per --sustained-window; writes "
        "reports/sustained-worker.{json,png}",
    )
    parser.add_argument(
        "--sustained-window",
        type=float,
        action="append",
        metavar="SECONDS",
        help="the ack window of a --sustained-worker run (repeatable; default: the "
        "worker's default, DEFAULT_ACK_WINDOW_S)",
    )
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="run only the wake latency behind PgBouncer (transaction pooling) beside the "
        "direct engine, on a throwaway cluster; writes reports/pgbouncer-wake.json",
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="run only the dashboard rows (its pages' server time at 1,000,000 jobs and "
        "the CPU of open event streams on an idle store); a full run includes them",
    )
    parser.add_argument(
        "--dashboard-jobs",
        type=int,
        metavar="N",
        help="jobs in the dashboard rows' store (default 1,000,000; --quick: 4,000)",
    )
    parser.add_argument(
        "--async-acks",
        action="store_true",
        help="run only the PostgreSQL rows of acks that need not wait for the disk beside "
        "durable acks, on a throwaway fsync-on cluster; writes reports/async-acks.json "
        "(a full run includes them)",
    )
    parser.add_argument("--json", type=Path, default=REPORT, help="where to write the results")
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs = min(args.jobs, QUICK_JOBS)
        args.wake_rounds = min(args.wake_rounds, QUICK_WAKE_ROUNDS)
        args.budget = min(args.budget, QUICK_BUDGET_S)
    if args.jobs < 1 or args.wake_rounds < 1 or args.budget <= 0:
        parser.error("--jobs, --wake-rounds and --budget must be positive")
    return args


def environment(engines: Sequence[str], providers: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "postgresql_server": postgres_server_version() if "postgresql" in engines else None,
        "engines": {name: getattr(p, "version", "?") for name, p in providers.items()},
        "alkstore": alkstore.__version__,
        "loadavg_start": _loadavg(),
    }
    return env


def postgres_server_version() -> str | None:
    """The server behind ``$ALKSTORE_PG_DSN``, if psycopg is installed and it answers."""
    dsn = os.environ.get("ALKSTORE_PG_DSN")
    if not dsn:
        return None
    try:
        import psycopg
    except ImportError:
        return None
    try:
        with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"
    return str(row[0]) if row else None


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment_line(env: dict[str, Any]) -> str:
    pg = env["postgresql_server"] or "n/a"
    engines = ", ".join(f"{name} {version}" for name, version in env["engines"].items())
    return (
        f"Python {env['python']} ({env['implementation']}) on {env['platform']}, "
        f"{env['cpus']} CPUs; SQLite {env['sqlite']}; PostgreSQL server {pg}; "
        f"engines: {engines}"
    )


T = TypeVar("T")


def _timed(label: str, column: str, work: Callable[[], T]) -> T:
    """``work()``, then a line on stderr saying how long it took (kept if a later one hangs)."""
    started = time.perf_counter()
    result = work()
    print(
        f"  {label:<13} {column:<18} done in {time.perf_counter() - started:6.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return result


def _section(text: str) -> None:
    """A table of the report, after a blank line; nothing when it has no rows."""
    if text:
        print()
        print(text)


def run_one(
    entry: Entry,
    engine: str,
    provider: alkstore.EngineProvider,
    args: argparse.Namespace,
    *,
    plain: bool,
    lapse_index: bool = False,
) -> Measurement:
    """One workload on a freshly provisioned, empty store of one engine, or on one of
    that engine's plain-driver baselines (its tables next to the provisioned store)."""
    profile_dir = ROOT / "reports" / "profile" if args.profile else None
    try:
        with provider.provision() as spec:
            side_spec = SideSpec(engine, plain, spec, writer_gate=entry.writer_gate)
            store: alkstore.Store | None = None
            if plain:
                location = plain_location(engine, spec, entry.key)
                side_spec = replace(
                    side_spec,
                    plain_location=location,
                    page_size=entry.plain_page_size,
                    lapse_index=lapse_index,
                )
                side: Side = open_side(side_spec, create=True)
            else:
                store = provider.open(spec.url, **spec.opts)
                side = EngineSide(store)
            try:
                bench = Bench(
                    engine=engine,
                    side=side,
                    side_spec=side_spec,
                    store=store,
                    jobs=args.jobs,
                    wake_rounds=args.wake_rounds,
                    budget_s=args.budget,
                    quick=args.quick,
                    profile_dir=profile_dir,
                )
                return entry.run(bench)
            finally:
                side.close()
                if plain:
                    drop_plain(engine, spec, side_spec.plain_location)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return Measurement(failure=f"{type(exc).__name__}: {exc}"[:80])


def _unique_rows(
    engine: str, provider: alkstore.EngineProvider, args: argparse.Namespace, baselines: bool
) -> list[Overhead]:
    rows = unique_overhead(provider, args.jobs, args.quick)
    if baselines and has_plain(engine):  # the driver's floor, right after
        rows += floor_overhead(engine, provider, args.jobs, args.quick)
        before = plain_before_after(engine, args.jobs, args.quick)
        if isinstance(before, str):
            print(f"  plain enqueue before unique jobs: skipped ({before})", file=sys.stderr)
        else:
            rows.append(before)
    return rows


def _print_scale_row(row: ScaleRow) -> None:
    print(render_row(row), file=sys.stderr, flush=True)


def run_sustained(args: argparse.Namespace) -> int:
    from bench_sustained import SUSTAINED_JSON, SUSTAINED_PNG, sustained_postgres

    provider = alkstore.load_engine("postgresql")
    print(f"Sustained PostgreSQL run: {args.sustained:g} s, load average {_loadavg()}", flush=True)
    series = sustained_postgres(provider, args.sustained, args.sustained_rate)
    print(series.summary())
    print(f"Series written to {SUSTAINED_JSON}, plot to {SUSTAINED_PNG}")
    return 0 if series.ok else 1


def run_sustained_worker(args: argparse.Namespace) -> int:
    from bench_worker_scale import plot_sustained, sustained_run

    from alkstore.worker import DEFAULT_ACK_WINDOW_S

    provider = alkstore.load_engine("postgresql")
    print(
        f"Sustained PostgreSQL worker run: {args.sustained_worker} s, load average {_loadavg()}",
        flush=True,
    )
    runs = []
    for window in args.sustained_window or [DEFAULT_ACK_WINDOW_S]:
        runs.append(sustained_run(provider, args.sustained_worker, window, args.sustained_rate))
        print(runs[-1].summary(), flush=True)
    print(f"Load average at end {_loadavg()}")
    path = ROOT / "reports" / "sustained-worker.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([run.as_json() for run in runs], indent=2) + "\n", "utf-8")
    plot_sustained(runs, path.with_suffix(".png"))
    print(f"Series written to {path}, plot to {path.with_suffix('.png')}")
    return 0


def run_pgbouncer(args: argparse.Namespace) -> int:
    from bench_pgbouncer import PGBOUNCER_JSON, pgbouncer_wake

    print(
        f"Wake latency behind PgBouncer: {args.wake_rounds} samples per configuration, "
        f"load average {_loadavg()}",
        flush=True,
    )
    pgbouncer_wake(args.wake_rounds)
    print(f"Written to {PGBOUNCER_JSON}")
    return 0


def run_dashboard(
    engines: Sequence[str],
    providers: dict[str, alkstore.EngineProvider],
    quick: bool,
    jobs: int | None = None,
) -> list[DashboardRun]:
    runs = []
    for engine in engines:
        if not providers[engine].capabilities.ops:
            continue  # no stats, no job pages: nothing of the dashboard to time
        runs.append(
            _timed("dashboard", engine, partial(_dashboard_run, engine, providers, quick, jobs))
        )
    return runs


def _dashboard_run(
    engine: str, providers: dict[str, alkstore.EngineProvider], quick: bool, jobs: int | None
) -> DashboardRun:
    try:
        run = dashboard_run(engine, providers[engine], quick, jobs)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        run = DashboardRun(engine=engine, jobs=0, failure=f"{type(exc).__name__}: {exc}"[:80])
    print(render_dashboard([run]), file=sys.stderr, flush=True)  # kept if a later one hangs
    return run


def run_dashboard_only(args: argparse.Namespace) -> int:
    engines = list(dict.fromkeys(ALIASES.get(e, e) for e in (args.engine or ENGINES)))
    providers = {engine: alkstore.load_engine(engine) for engine in engines}
    env = environment(engines, providers)
    print(environment_line(env), flush=True)
    runs = run_dashboard(engines, providers, args.quick, args.dashboard_jobs)
    env["loadavg_end"] = _loadavg()
    print(f"Load average (1/5/15 min) at start {env['loadavg_start']}, at end {env['loadavg_end']}")
    print(render_dashboard(runs))
    document = {"environment": env, "quick": args.quick, "dashboard": [r.as_json() for r in runs]}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"\nResults written to {args.json}")
    return 1 if any(run.failure is not None for run in runs) else 0


def run_async_acks(quick: bool) -> list[AckRow]:
    rows = _timed("async acks", "postgresql", partial(async_ack_rows, quick))
    write_async_acks(rows, _loadavg())
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.async_acks:
        print(f"Async acks beside durable acks: load average {_loadavg()}", flush=True)
        print(render_async_acks(run_async_acks(args.quick)))
        return 0
    if args.sustained is not None:
        return run_sustained(args)
    if args.sustained_worker is not None:
        return run_sustained_worker(args)
    if args.pgbouncer:
        return run_pgbouncer(args)
    if args.dashboard:
        return run_dashboard_only(args)
    engines = list(dict.fromkeys(ALIASES.get(e, e) for e in (args.engine or ENGINES)))
    entries = [e for e in WORKLOADS if not args.workload or e.key in args.workload]
    keys = [e.key for e in entries]
    rows = [(e.key, e.label) for e in entries]
    providers = {engine: alkstore.load_engine(engine) for engine in engines}
    env = environment(engines, providers)
    print(environment_line(env), flush=True)
    print(
        f"N = {args.jobs:,} jobs (or stream events) per workload, "
        f"{args.wake_rounds} wake and pub/sub samples, "
        f"~100-byte JSON payloads, time cap {args.budget:g} s per run"
        + (" (quick smoke run)" if args.quick else ""),
        flush=True,
    )

    baselines = not args.no_baseline
    columns = [
        column_name(engine, plain, lapse)
        for engine in engines
        for plain, lapse in [(False, False), *(baselines_of(engine) if baselines else [])]
    ]
    results: dict[str, dict[str, Measurement]] = {column: {} for column in columns}
    # Interleave engines and baselines per workload so a burst of load on the
    # shared machine does not land on one column: each ratio compares runs made
    # seconds apart.
    for entry in entries:
        for engine in engines:
            if entry.only is not None and entry.only != engine:
                continue
            sides = [(False, False)]
            if baselines and entry.baseline:
                sides += baselines_of(engine)
            for plain, lapse in sides:
                column = column_name(engine, plain, lapse)
                results[column][entry.key] = _timed(
                    entry.key,
                    column,
                    partial(
                        run_one,
                        entry,
                        engine,
                        providers[engine],
                        args,
                        plain=plain,
                        lapse_index=lapse,
                    ),
                )

    dashboard: list[DashboardRun] = []
    if not args.workload:
        dashboard = run_dashboard(engines, providers, args.quick)

    unique: dict[str, list[Overhead]] = {}
    if not args.workload or {"enqueue", "enqueue_many"} & set(args.workload):
        for engine in engines:
            if not providers[engine].capabilities.unique:
                continue
            unique[engine] = _timed(
                "unique", engine, partial(_unique_rows, engine, providers[engine], args, baselines)
            )

    finished: dict[str, list[Ratio]] = {}
    if not args.workload or "claim_ack" in set(args.workload):
        for engine in engines:
            provider = providers[engine]
            if provider.capabilities.results and provider.capabilities.transactions:
                finished[engine] = _timed(
                    "results",
                    engine,
                    partial(results_ratios, engine, provider, args.jobs, args.quick),
                )

    fairness: list[KeyShares] = []
    key_backlog: list[KeyBacklogRate] = []
    if not args.workload or {"claim_ack", "claim_batch"} & set(args.workload):
        for engine in engines:
            provider = providers[engine]
            if provider.capabilities.key_limits:
                fairness.append(
                    _timed(
                        "key fairness", engine, partial(key_fairness, engine, provider, args.quick)
                    )
                )
                key_backlog += _timed(
                    "key backlog", engine, partial(key_backlog_rates, engine, provider, args.quick)
                )

    graphs: list[GraphRun] = []
    if not args.workload or "claim_ack" in set(args.workload):
        for engine in engines:
            provider = providers[engine]
            if provider.capabilities.dependencies:
                graphs.append(
                    _timed("job graph", engine, partial(graph_run, engine, provider, args.quick))
                )

    scaled: list[ScaleRow] = []
    if not args.workload or {"worker_1p", "worker_4p"} & set(args.workload):
        for engine in engines:
            scaled += _timed(
                "worker scale",
                engine,
                partial(scale_rows, engine, providers[engine], args.quick, _print_scale_row),
            )

    groups: list[GroupRow] = []
    if not args.workload or {"worker_1p", "worker_4p"} & set(args.workload):
        for engine in engines:
            groups.append(
                _timed(
                    "group outcomes",
                    engine,
                    partial(group_row, engine, providers[engine], args.quick),
                )
            )

    limited: list[LimitsRows] = []
    if not args.workload or {"claim_ack", "claim_batch"} & set(args.workload):
        for engine in engines:
            provider = providers[engine]
            if provider.capabilities.limits:
                limited.append(
                    _timed(
                        "limits",
                        engine,
                        partial(limits_rows, engine, provider, args.jobs, args.quick),
                    )
                )

    async_acks: list[AckRow] = []
    if "postgresql" in engines and (not args.workload or "claim_ack" in set(args.workload)):
        async_acks = run_async_acks(args.quick)

    env["loadavg_end"] = _loadavg()
    print()
    print(environment_line(env))
    print(
        f"Load average (1/5/15 min) at start {env['loadavg_start']}, at end {env['loadavg_end']} "
        "(shared machine: other work runs alongside)"
    )
    labels = {e: PLAIN_LABELS[e] for e in engines if f"{e}:plain" in results}
    lapse_labels = {e: LAPSE_LABELS[e] for e in engines if f"{e}:plain+lapse" in results}
    print(render_table(rows, engines, results, labels, lapse_labels))
    _section(render_backlog_growth(columns, results))
    _section(render_worker_overhead(columns, results))
    _section(render_unique_overhead(unique))
    _section(render_results_ratios(finished))
    _section(render_graph(graphs))
    _section(render_key_fairness(fairness))
    _section(render_key_backlog_rates(key_backlog))
    _section(render_scale(scaled))
    _section(render_group_rows(groups))
    _section(render_limits(limited))
    _section(render_async_acks(async_acks))
    _section(render_dashboard(dashboard))
    notes = [
        f"  {column} / {key}: {note}"
        for key in keys
        for column in columns
        for note in (results[column][key].notes if key in results[column] else [])
    ]
    if notes:
        print("\nNotes:")
        print("\n".join(notes))
    print()
    print(render_peers())

    config = {
        "jobs": args.jobs,
        "wake_rounds": args.wake_rounds,
        "budget_s": args.budget,
        "quick": args.quick,
        "profile": args.profile,
        "engines": engines,
        "baselines": baselines,
    }
    write_json(
        args.json,
        environment=env,
        config=config,
        rows=rows,
        results=results,
        extra={
            "worker_overhead": worker_overhead_json(columns, results),
            "unique_overhead": {
                engine: [o.as_json() for o in rows] for engine, rows in unique.items()
            },
            "dashboard": [run.as_json() for run in dashboard],
            "results_ratios": {
                engine: [r.as_json() for r in rows] for engine, rows in finished.items()
            },
            "key_fairness": [row.as_json() for row in fairness],
            "key_backlog": [row.as_json() for row in key_backlog],
            "job_graph": [run.as_json() for run in graphs],
            "limits": [row.as_json() for row in limited],
            "worker_scale": [row.as_json() for row in scaled],
            "group_outcomes": [row.as_json() for row in groups],
            "async_acks": [row.as_json() for row in async_acks],
        },
    )
    print(f"\nResults written to {args.json}")
    failed = any(m.failure is not None for by_key in results.values() for m in by_key.values())
    failed = failed or any(run.failure is not None for run in graphs)
    failed = failed or any(row.failure is not None for row in scaled)
    return 1 if failed or any(run.failure is not None for run in dashboard) else 0


if __name__ == "__main__":
    sys.exit(main())
