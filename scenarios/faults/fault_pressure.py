"""PostgreSQL under pressure from someone else: its backends terminated, its
connection slots taken.

Both scenarios run the crash storm's workers and judge them the same way
(lost, acked twice, duplicate claims, stranded, unexpected errors: all must be
0), but no worker is SIGKILLed: the pressure comes from the database's side.

* ``backend-kills`` -- an administrator's ``pg_terminate_backend`` on a random
  client backend of the database, several times a second, for a while: the
  engine's pooled connections die mid-statement, it reconnects, and a caller
  sees at most ``EngineUnavailable`` (never a driver's own exception).
* ``pool-exhaustion`` -- another party opens idle connections until the server
  refuses more (``max_connections``), then the engine's own backends are
  terminated, so every pool must reconnect and cannot. A probe store calls the
  store meanwhile: each call must end within its budget with
  ``EngineUnavailable`` saying why, never hang; once the slots come back, the
  workers drain everything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import psycopg
from fault_report import Figure, ScenarioResult, count, must_be_zero
from fault_storm import QUEUE, Disruption, StormConfig, run_storm

import alkstore
from alkstore import EngineSpec, EngineUnavailable

BACKEND_KILLS = "backend kills"
POOL_EXHAUSTION = "pool exhaustion"
_CLIENT_BACKENDS = """
SELECT pid FROM pg_stat_activity
WHERE backend_type = 'client backend' AND datname = current_database()
  AND pid <> pg_backend_pid() AND NOT (pid = ANY(%(spared)s))
"""
_TERMINATE = "SELECT pg_terminate_backend(%(pid)s)"
HOG_MAX = 1000
"""The most connections the other party opens (the server refuses long before)."""
CUT_ROUNDS = 20
HUNG_FACTOR = 3.0
HUNG_SLACK_S = 5.0
"""A call counts as hung past ``HUNG_FACTOR`` times its budget plus this slack:
far beyond any scheduling delay of a loaded machine, far below a real hang."""


PRESSURE_STORM = StormConfig(
    jobs=3000, workers=4, work_s=0.02, sigkill_workers=False, storm_s=120.0
)
"""The storm's workers and judge, no worker SIGKILLed: the pressure is the database's."""


@dataclass(frozen=True, slots=True)
class PressureConfig:
    storm: StormConfig = PRESSURE_STORM
    at_fraction: float = 0.1
    """The pressure starts once this share of the jobs is acked."""
    kills_per_s: float = 5.0
    kill_for_s: float = 10.0
    exhaust_for_s: float = 10.0
    probe_every_s: float = 0.2
    seed: int = 0


@contextlib.contextmanager
def _admin(dsn: str) -> Iterator[psycopg.Connection[tuple[int, ...]]]:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        yield conn


def _terminate(conn: psycopg.Connection[tuple[int, ...]], pid: int) -> bool:
    row = conn.execute(_TERMINATE, {"pid": pid}).fetchone()
    return bool(row and row[0])


def _client_backends(conn: psycopg.Connection[tuple[int, ...]], spared: list[int]) -> list[int]:
    return [pid for (pid,) in conn.execute(_CLIENT_BACKENDS, {"spared": spared}).fetchall()]


# --------------------------------------------------------------------------- backend kills


@dataclass
class _Barrage:
    """``pg_terminate_backend`` on a random client backend, ``kills_per_s`` times a second."""

    dsn: str
    config: PressureConfig
    terminated: int = 0

    def __call__(self) -> None:
        rng = random.Random(self.config.seed)
        pause = 1.0 / self.config.kills_per_s
        with _admin(self.dsn) as admin:
            until = time.monotonic() + self.config.kill_for_s
            while time.monotonic() < until:
                backends = _client_backends(admin, [])
                if backends and _terminate(admin, rng.choice(backends)):
                    self.terminated += 1
                time.sleep(pause)


def run_backend_kills(
    admin_dsn: str,
    engine: str,
    spec: EngineSpec,
    config: PressureConfig = PressureConfig(),
    progress: Callable[[str], None] = lambda _: None,
) -> ScenarioResult:
    barrage = _Barrage(admin_dsn, config)
    label = f"pg_terminate_backend {config.kills_per_s:g}/s for {config.kill_for_s:g} s"
    result = run_storm(
        engine, spec, config.storm, [Disruption(config.at_fraction, label, barrage)], progress
    )
    return _renamed(result, BACKEND_KILLS, [count("backends terminated", barrage.terminated)])


# --------------------------------------------------------------------------- exhaustion


@dataclass
class _Exhaustion:
    """Every connection slot taken by someone else, then the engine's backends cut."""

    dsn: str
    probe: alkstore.Store
    budget_s: float
    config: PressureConfig
    held: int = 0
    terminated: int = 0
    probes: int = 0
    longest_s: float = 0.0
    hung: int = 0
    outcomes: Counter[str] = dataclasses.field(default_factory=Counter)
    first_message: str = ""

    def __call__(self) -> None:
        with _admin(self.dsn) as admin, contextlib.ExitStack() as hog:
            held = _take_free_slots(self.dsn, hog)
            # A terminated backend frees its slot, and a pool may reconnect into it
            # before the other party takes it: cut and take again until none is left.
            for _ in range(CUT_ROUNDS):
                engine_pids = _client_backends(admin, [admin.info.backend_pid, *held])
                if not engine_pids:
                    break
                self.terminated += sum(_terminate(admin, pid) for pid in engine_pids)
                held.extend(_take_free_slots(self.dsn, hog))
            self.held = len(held)
            until = time.monotonic() + self.config.exhaust_for_s
            while time.monotonic() < until:
                self._probe_once()
                time.sleep(self.config.probe_every_s)
        # The other party's connections close here: the slots come back.

    def _probe_once(self) -> None:
        began = time.monotonic()
        try:
            self.probe.queue(QUEUE).stats()
        except EngineUnavailable as exc:
            outcome = "EngineUnavailable"
            self.first_message = self.first_message or str(exc)
        except Exception as exc:  # judged: anything else is a contract breach
            outcome = type(exc).__name__
        else:
            outcome = "answered"
        took = time.monotonic() - began
        self.probes += 1
        self.outcomes[outcome] += 1
        self.longest_s = max(self.longest_s, took)
        if took > HUNG_FACTOR * self.budget_s + HUNG_SLACK_S:
            self.hung += 1


def _take_free_slots(dsn: str, hog: contextlib.ExitStack) -> list[int]:
    """Open idle connections until the server refuses one; they stay open in ``hog``.
    Returns their backends' pids."""
    pids: list[int] = []
    while len(pids) < HOG_MAX:
        try:
            conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError:
            break
        hog.enter_context(conn)
        pids.append(conn.info.backend_pid)
    return pids


def run_pool_exhaustion(
    admin_dsn: str,
    engine: str,
    spec: EngineSpec,
    config: PressureConfig = PressureConfig(),
    progress: Callable[[str], None] = lambda _: None,
) -> ScenarioResult:
    budget_s = float(spec.opts.get("connect_timeout_s", 10.0))
    with alkstore.load_engine(engine).open(spec.url, **spec.opts) as probe:
        exhaustion = _Exhaustion(admin_dsn, probe, budget_s, config)
        label = f"every connection slot held for {config.exhaust_for_s:g} s"
        result = run_storm(
            engine,
            spec,
            config.storm,
            [Disruption(config.at_fraction, label, exhaustion)],
            progress,
        )
    others = sum(k for name, k in exhaustion.outcomes.items() if name != "EngineUnavailable")
    figures = [
        count("idle connections held by another party", exhaustion.held),
        count("engine backends terminated", exhaustion.terminated),
        count("probe calls while exhausted", exhaustion.probes),
        count("probe calls: EngineUnavailable", exhaustion.outcomes["EngineUnavailable"]),
        count("probe budget (s)", budget_s),
        count("probe longest call (s)", round(exhaustion.longest_s, 2)),
        must_be_zero("probe calls hung", exhaustion.hung),
        must_be_zero("probe calls not EngineUnavailable", others),
        must_be_zero("pressure never bound", 0 if exhaustion.held and exhaustion.probes else 1),
    ]
    notes = [f"probe's first message: {exhaustion.first_message}"]
    notes.extend(
        f"probe outcome {name} x{k}"
        for name, k in sorted(exhaustion.outcomes.items())
        if name != "EngineUnavailable"
    )
    return _renamed(result, POOL_EXHAUSTION, figures, notes)


def _renamed(
    result: ScenarioResult,
    scenario: str,
    figures: Sequence[Figure],
    notes: Sequence[str] = (),
) -> ScenarioResult:
    return dataclasses.replace(
        result,
        scenario=scenario,
        figures=(*result.figures, *figures),
        notes=(*result.notes, *notes),
    )
