"""§5: the boundary guarantee under concurrency -- no double fire, crash-safe ticks.

Each fire enqueues the schedule's payload; every schedule here has its own
payload, so counting the payloads in the target queue afterwards shows how
often each schedule fired, and comparing that with the boundaries due shows
whether any boundary fired twice or not at all. Tickers (threads, or child
processes) run on their own ``FakeClock`` set to the instants the test gives them.
"""

from __future__ import annotations

import functools
import threading
import time

import pytest

from alkstore import CATCH_UP_CAP, SCHEDULER_LEASE_S, EngineSpec, Schedule, Store, TickResult
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import (
    doomed_ticker_process,
    tick_at_instants,
    ticker_process,
)
from alkstore_conformance.helpers.profiles import (
    Children,
    drain,
    in_thread,
    payload_counts,
    payload_key,
)
from alkstore_conformance.helpers.trials import Trial

pytestmark = pytest.mark.requires("scheduler")

TIME_LIMIT_S = 90.0
TICKERS = 2
ROUNDS = 12
TARGET = "fired"
SPECS = {
    "every-1s": ("@every 1s", 1),
    "every-7s": ("@every 7s", 7),
    "every-13s": ("@every 13s", 13),
}


def _register(
    store: Store, specs: dict[str, tuple[str, int]], target: str = TARGET
) -> dict[str, Schedule]:
    return {
        name: store.schedule(name, spec, target, {"schedule": name})
        for name, (spec, _) in specs.items()
    }


def _interval(schedule: Schedule) -> int:
    """The interval of one of these ``@every`` schedules."""
    assert schedule.interval_s is not None
    return schedule.interval_s


def _boundaries_due(schedule: Schedule, now: int) -> int:
    """How many boundaries of ``schedule`` (as registered) are at or before ``now``."""
    if now < schedule.next_fire_at:
        return 0
    return (now - schedule.next_fire_at) // _interval(schedule) + 1


# -- SCHED-NO-DOUBLE-FIRE ------------------------------------------------------------

IDENTITIES = pytest.mark.parametrize("identities", ["one-worker-id", "own-worker-ids"])
"""With one worker id every ticker passes the leadership lock (a rogue twin): only the
compare-and-set advance of each boundary stands between them and a double fire."""


def _worker_id(identities: str, index: int) -> str:
    return "twin" if identities == "one-worker-id" else f"ticker-{index}"


def _instants(start: int, trial: Trial) -> list[int]:
    """The instants every ticker ticks at: at most 40 s apart, so never past the cap."""
    rng = trial.random()
    instants = [start]
    for _ in range(ROUNDS):
        instants.append(instants[-1] + rng.randint(1, 40))
    return instants


def _check_each_boundary_fired_once(
    store: Store,
    clock: FakeClock,
    registered: dict[str, Schedule],
    last: int,
    ticks: list[list[tuple[int, int]]],
) -> None:
    clock.set(last)  # the fired jobs run from the tickers' instants on
    due = {name: _boundaries_due(schedule, last) for name, schedule in registered.items()}
    counts = payload_counts(drain(store.queue(TARGET)))
    assert counts == {payload_key({"schedule": name}): n for name, n in due.items() if n}
    assert sum(fired for run in ticks for fired, _ in run) == sum(due.values())
    assert all(skipped == 0 for run in ticks for _, skipped in run)
    for name, schedule in registered.items():
        current = store.get_schedule(name)
        assert current is not None
        assert current.next_fire_at == schedule.next_fire_at + due[name] * _interval(schedule)


@pytest.mark.property("SCHED-NO-DOUBLE-FIRE")
@IDENTITIES
def test_tickers_in_threads_never_fire_a_boundary_twice(
    open_store: StoreFactory, clocked_store: Store, clock: FakeClock, trial: Trial, identities: str
) -> None:
    registered = _register(clocked_store, SPECS)
    instants = _instants(int(clock.now()), trial)
    barrier = threading.Barrier(TICKERS)
    tickers = []
    for index in range(TICKERS):
        own_clock = FakeClock(instants[0])  # each ticker on its own clock, like a process
        store = open_store(clock=own_clock)
        worker_id = _worker_id(identities, index)
        tickers.append(
            in_thread(
                functools.partial(
                    tick_at_instants, store, own_clock, worker_id, instants, barrier, TIME_LIMIT_S
                ),
                name=f"ticker-{index}",
            )
        )
    ticks = [ticker.join(TIME_LIMIT_S * 2) for ticker in tickers]
    _check_each_boundary_fired_once(clocked_store, clock, registered, instants[-1], ticks)


@pytest.mark.property("SCHED-NO-DOUBLE-FIRE")
@pytest.mark.requires("multi_process")
@IDENTITIES
def test_tickers_in_processes_never_fire_a_boundary_twice(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    clocked_store: Store,
    clock: FakeClock,
    trial: Trial,
    identities: str,
) -> None:
    registered = _register(clocked_store, SPECS)
    instants = _instants(int(clock.now()), trial)
    with Children(TIME_LIMIT_S) as children:
        barrier = children.context.Barrier(TICKERS)
        for index in range(TICKERS):
            children.start(
                ticker_process,
                engine_name,
                engine_group,
                engine_spec,
                _worker_id(identities, index),
                instants,
                barrier,
                children.results,
                TIME_LIMIT_S,
            )
        ticks = [children.expect("ticks") for _ in range(TICKERS)]
    _check_each_boundary_fired_once(clocked_store, clock, registered, instants[-1], ticks)


# -- SCHED-CRASH-REFIRES-AT-MOST-ONE -------------------------------------------------

CRASH_ROUNDS = 3
"""A kill lands at a random point of the tick: several rounds, several chances to
land between the enqueue and the advance of one boundary."""
CRASH_SCHEDULES = 16
CRASH_INTERVAL_S = 60
"""Longer than the leadership lease, so no boundary comes due while the lease lapses."""
POLL_S = 0.001


def _fired_so_far(store: Store, registered: dict[str, Schedule]) -> int:
    """Boundaries fired, read from how far each schedule's next_fire_at moved."""
    moved = 0
    for schedule in store.schedules():
        before = registered[schedule.name]
        moved += (schedule.next_fire_at - before.next_fire_at) // _interval(before)
    return moved


def _kill_mid_tick(
    children: Children,
    engine: tuple[str, str, EngineSpec],
    store: Store,
    registered: dict[str, Schedule],
    crash_at: int,
    linger_s: float,
) -> None:
    """Start a ticker at ``crash_at``; SIGKILL it once it has fired something."""
    go = children.context.Event()
    doomed = children.start(
        doomed_ticker_process, *engine, "doomed", crash_at, go, children.results, TIME_LIMIT_S
    )
    children.expect("ready")
    go.set()
    give_up_at = time.monotonic() + TIME_LIMIT_S
    while _fired_so_far(store, registered) == 0 and time.monotonic() < give_up_at:
        time.sleep(POLL_S)
    time.sleep(linger_s)
    doomed.kill()
    doomed.join(TIME_LIMIT_S)


@pytest.mark.property("SCHED-CRASH-REFIRES-AT-MOST-ONE")
@pytest.mark.requires("multi_process")
def test_a_ticker_killed_mid_tick_leaves_every_boundary_fired_exactly_once(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    clocked_store: Store,
    clock: FakeClock,
    trial: Trial,
) -> None:
    assert CRASH_INTERVAL_S > SCHEDULER_LEASE_S
    rng = trial.random()
    total = CATCH_UP_CAP * CRASH_SCHEDULES
    span = CATCH_UP_CAP * CRASH_INTERVAL_S
    for round_ in range(CRASH_ROUNDS):
        target = f"fired-{round_}"
        specs = {
            f"crash-{round_}-{i:02d}": (f"@every {CRASH_INTERVAL_S}s", CRASH_INTERVAL_S)
            for i in range(CRASH_SCHEDULES)
        }
        registered = _register(clocked_store, specs, target)
        # Every schedule has exactly the cap due: one uninterrupted tick would fire them all.
        crash_at = int(clock.now()) + span
        with Children(TIME_LIMIT_S) as children:
            engine = (engine_name, engine_group, engine_spec)
            _kill_mid_tick(
                children, engine, clocked_store, registered, crash_at, rng.uniform(0, 0.01)
            )
        # A server engine may still be resolving the killed client's last transaction
        # (a COMMIT already on the wire lands after the process is gone). Re-registering
        # an unchanged schedule writes its row, so it waits out that transaction's row
        # lock and changes nothing else: after it, the fired count is settled.
        _register(clocked_store, specs, target)
        fired_before = _fired_so_far(clocked_store, registered)
        assert 0 < fired_before <= total, "the doomed ticker fired before it was killed"
        # A survivor ticks once the doomed ticker's lease lapsed (no new boundary is due).
        clock.set(crash_at + SCHEDULER_LEASE_S)
        result = clocked_store.tick_schedules("survivor")
        assert result == TickResult(fired=total - fired_before, skipped=0)
        counts = payload_counts(drain(clocked_store.queue(target)))
        assert counts == {payload_key({"schedule": name}): CATCH_UP_CAP for name in specs}
        for name, schedule in registered.items():
            current = clocked_store.get_schedule(name)
            assert current is not None
            assert current.next_fire_at == schedule.next_fire_at + span
            assert clocked_store.unschedule(name) is True  # out of the next round's way
