"""Fault runs of the reference engines (``nox -s faults``).

    python scenarios/faults/run.py [--engine sqlite|postgresql] [--scenario NAME] [--quick]

Nine scenarios, each on a fresh store of each engine, through the public API:

* ``storm``     -- worker crash storm: SIGKILLed workers, restarted; on
  PostgreSQL the server is also stopped and started twice mid-run;
* ``atomicity`` -- transactions SIGKILLed mid-flight leave all or nothing;
* ``hostile``   -- the hostile-input table: the exact error, nothing written;
* ``long-jobs`` -- ``alkstore.worker`` processes SIGKILLed while 1-5 s jobs run:
  every cut run re-runs once its claim lapses, none lost, none acked twice.
* ``backend-kills`` -- PostgreSQL only: ``pg_terminate_backend`` on random
  client backends several times a second under the storm's workers.
* ``pool-exhaustion`` -- PostgreSQL only: another party holds every connection
  slot (about 300) and the engine's backends are cut; calls end within their
  budget with ``EngineUnavailable``, and nothing is lost once the slots return.
* ``xmin-pin`` -- PostgreSQL only: steady load while an idle-in-transaction
  session pins xmin (10 min): throughput, claim latency, dead tuples and sizes
  over time, and how long they take to come back; plotted.
* ``rr-readers`` -- PostgreSQL only: the same with four REPEATABLE READ readers
  scanning the jobs table.
* ``failover``  -- PostgreSQL only: a primary stopped hard under producers and
  workers, its standby promoted; synchronous and asynchronous replication, each
  on a pair of its own (``ReplicatedPostgres``).

PostgreSQL runs on a PRIVATE throwaway server (``LocalPostgres``: local server
binaries required) so the storm can restart it; it is always stopped at the
end. Prints one table of figures per scenario and exits non-zero on any loss,
duplicate, unexpected error or failing hostile-input row.
"""

from __future__ import annotations

import argparse
import dataclasses
import secrets
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

from fault_atomicity import AtomicityConfig, run_atomicity
from fault_failover import FailoverConfig, run_failover, run_label
from fault_hostile import run_hostile
from fault_long_jobs import LongJobsConfig, run_long_jobs
from fault_pressure import PressureConfig, run_backend_kills, run_pool_exhaustion
from fault_report import ScenarioResult, failure, render
from fault_snapshots import SnapshotsConfig, run_snapshots
from fault_storm import Disruption, StormConfig, run_storm

import alkstore
from alkstore import EngineSpec
from alkstore_postgres.testing.server import LocalPostgres

ENGINES = ("sqlite", "postgresql")
ALIASES = {"postgres": "postgresql"}
SCENARIOS = (
    "storm",
    "atomicity",
    "hostile",
    "long-jobs",
    "backend-kills",
    "pool-exhaustion",
    "xmin-pin",
    "rr-readers",
    "failover",
)
POSTGRES_ONLY = ("backend-kills", "pool-exhaustion", "xmin-pin", "rr-readers", "failover")
SNAPSHOTS = ("xmin-pin", "rr-readers")
PG_MAX_CONNECTIONS = 320
"""The private server's slots: pool exhaustion has another party hold about 300."""
PG_SCHEMA_PREFIX = "alkstore_faults_"
PG_CONNECT_TIMEOUT_S = 2
"""Workers give up on a dead server quickly and retry, instead of blocking 10 s."""
PG_DOWN_S = 2.0
"""How long the second (fast) restart keeps the server down."""
QUICK_LONG_JOBS = LongJobsConfig(jobs=20, workers=3, concurrency=2, kills=3)
QUICK_STORM = StormConfig(jobs=300, workers=3, storm_s=30.0, drain_s=30.0)
QUICK_ATOMICITY = AtomicityConfig(kills=8)
QUICK_PRESSURE = PressureConfig(
    storm=StormConfig(
        jobs=600, workers=3, work_s=0.02, sigkill_workers=False, storm_s=60.0, drain_s=30.0
    ),
    kill_for_s=4.0,
    exhaust_for_s=4.0,
)
FAILOVER_TAIL_S = 1.0
QUICK_FAILOVER_S = 4.0
"""--quick: the run before the stop and after the promotion (else FailoverConfig's)."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", choices=[*ENGINES, *ALIASES])
    parser.add_argument("--scenario", action="append", choices=SCENARIOS)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--jobs", type=int, help="crash storm: jobs enqueued")
    parser.add_argument("--workers", type=int, help="crash storm: worker processes")
    parser.add_argument("--kills", type=int, help="atomicity: transaction writers SIGKILLed")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill choices and times")
    args = parser.parse_args(argv)
    for name in ("jobs", "workers", "kills"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be positive")
    return args


def storm_config(args: argparse.Namespace) -> StormConfig:
    base = QUICK_STORM if args.quick else StormConfig()
    return StormConfig(
        jobs=args.jobs or base.jobs,
        workers=args.workers or base.workers,
        kill_every_s=base.kill_every_s,
        visibility_timeout_s=base.visibility_timeout_s,
        work_s=base.work_s,
        batch=base.batch,
        storm_s=base.storm_s,
        drain_s=base.drain_s,
        seed=args.seed,
    )


def long_jobs_config(args: argparse.Namespace) -> LongJobsConfig:
    base = QUICK_LONG_JOBS if args.quick else LongJobsConfig()
    return LongJobsConfig(
        jobs=base.jobs,
        workers=args.workers or base.workers,
        kills=base.kills,
        seed=args.seed,
    )


def atomicity_config(args: argparse.Namespace) -> AtomicityConfig:
    base = QUICK_ATOMICITY if args.quick else AtomicityConfig()
    return AtomicityConfig(
        kills=args.kills or base.kills,
        min_life_s=base.min_life_s,
        max_life_s=base.max_life_s,
        seed=args.seed,
    )


def pressure_config(args: argparse.Namespace) -> PressureConfig:
    base = QUICK_PRESSURE if args.quick else PressureConfig()
    storm = dataclasses.replace(
        base.storm, jobs=args.jobs or base.storm.jobs, workers=args.workers or base.storm.workers
    )
    return dataclasses.replace(base, storm=storm, seed=args.seed)


def snapshots_config(name: str, args: argparse.Namespace) -> SnapshotsConfig:
    if args.quick:
        return SnapshotsConfig(pressure=name, baseline_s=10, pressure_s=20, after_s=15)
    if name == "rr-readers":
        return SnapshotsConfig(pressure=name, baseline_s=60, pressure_s=180, after_s=120)
    return SnapshotsConfig(pressure=name)


def failover_configs(args: argparse.Namespace) -> list[FailoverConfig]:
    """Synchronous replication first (nothing may be lost), then asynchronous: as it
    comes on loopback (the standby milliseconds behind), then with the standby cut off
    ``FAILOVER_TAIL_S`` before the stop (a lagging standby: a real tail to lose)."""
    span = {"before_s": QUICK_FAILOVER_S, "after_s": QUICK_FAILOVER_S} if args.quick else {}
    return [
        FailoverConfig(synchronous=True, **span),
        FailoverConfig(synchronous=False, **span),
        FailoverConfig(synchronous=False, tail_s=FAILOVER_TAIL_S, **span),
    ]


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- stores


class Stores:
    """Fresh stores per scenario: a temp file for SQLite, a fresh schema on the
    private PostgreSQL server (started on first use) for PostgreSQL."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._pg: LocalPostgres | None = None

    @contextmanager
    def fresh(self, engine: str) -> Iterator[EngineSpec]:
        if engine != "postgresql":
            with alkstore.load_engine(engine).provision() as spec:
                yield spec
            return
        pg = self.postgres()
        schema = PG_SCHEMA_PREFIX + secrets.token_hex(6)
        yield EngineSpec(pg.dsn, {"schema": schema, "connect_timeout_s": PG_CONNECT_TIMEOUT_S})

    def postgres(self) -> LocalPostgres:
        if self._pg is None:
            # fsync off: only processes crash here, never the OS, so what reached
            # the kernel survives; fsync would only slow the storm down.
            self._pg = self._stack.enter_context(
                LocalPostgres(fsync=False, max_connections=PG_MAX_CONNECTIONS)
            )
            progress(f"private PostgreSQL {self._pg.version} at {self._pg.dsn}")
        return self._pg

    def disruptions(self, engine: str) -> list[Disruption]:
        """Two server restarts mid-storm on PostgreSQL: a crash-like one and a slow one."""
        if engine != "postgresql":
            return []
        pg = self.postgres()

        def immediate() -> None:
            pg.stop("immediate")  # like a crash: no checkpoint, clients cut off
            pg.start()

        def fast_with_outage() -> None:
            pg.stop("fast")
            time.sleep(PG_DOWN_S)
            pg.start()

        return [
            Disruption(0.25, "PostgreSQL stop -m immediate + start", immediate),
            Disruption(
                0.6, f"PostgreSQL stop -m fast, {PG_DOWN_S:g} s down, start", fast_with_outage
            ),
        ]


def run_scenario(
    name: str, engine: str, stores: Stores, args: argparse.Namespace
) -> ScenarioResult:
    started = time.monotonic()
    try:
        with stores.fresh(engine) as spec:
            if name == "storm":
                return run_storm(
                    engine, spec, storm_config(args), stores.disruptions(engine), progress
                )
            if name == "atomicity":
                return run_atomicity(engine, spec, atomicity_config(args), progress)
            if name == "long-jobs":
                return run_long_jobs(engine, spec, long_jobs_config(args), progress)
            if name == "backend-kills":
                admin = stores.postgres().dsn
                return run_backend_kills(admin, engine, spec, pressure_config(args), progress)
            if name in SNAPSHOTS:
                admin = stores.postgres().dsn
                return run_snapshots(admin, spec, snapshots_config(name, args), progress)
            if name == "pool-exhaustion":
                admin = stores.postgres().dsn
                return run_pool_exhaustion(admin, engine, spec, pressure_config(args), progress)
            return run_hostile(engine, spec, progress)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return failure(name, engine, time.monotonic() - started, exc)


def run_failovers(engine: str, args: argparse.Namespace) -> list[ScenarioResult]:
    """The failover runs: PostgreSQL's replication only, each on its own primary and
    standby (never the storm's server)."""
    if engine != "postgresql":
        return []
    results = []
    for config in failover_configs(args):
        label = run_label(config)
        progress(f"failover: {label}...")
        started = time.monotonic()
        try:
            results.append(run_failover(config, progress))
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            seconds = time.monotonic() - started
            results.append(failure("failover", label, seconds, exc))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    engines = list(dict.fromkeys(ALIASES.get(e, e) for e in (args.engine or ENGINES)))
    scenarios = [s for s in SCENARIOS if not args.scenario or s in args.scenario]
    results: list[ScenarioResult] = []
    began = time.monotonic()
    with ExitStack() as stack:
        stores = Stores(stack)
        for scenario in scenarios:
            for engine in engines:
                if scenario in POSTGRES_ONLY and engine != "postgresql":
                    continue
                if scenario == "failover":
                    results.extend(run_failovers(engine, args))
                    continue
                progress(f"{scenario} on {engine}...")
                results.append(run_scenario(scenario, engine, stores, args))
    print()
    print(render(results))
    failed = [f"{r.scenario} on {r.engine}" for r in results if r.failed]
    print(f"\n{len(results)} runs in {time.monotonic() - began:.0f} s; ", end="")
    print(
        f"FAILED: {', '.join(failed)}" if failed else "no loss, no duplicate, no unexpected error"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
