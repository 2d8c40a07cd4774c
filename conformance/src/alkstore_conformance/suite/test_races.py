"""Races on every "only one" of the contract (§6, §7), in threads and in processes.

Contenders meet at a barrier before each round, so their calls collide; a
round's outcome must be what one serial order of the calls gives. Processes
matter: an engine whose writers only serialize inside one process (a
read-then-write guarded by a thread lock) is caught only there.
"""

from __future__ import annotations

import functools
import threading
import time

import pytest

from alkstore import EngineSpec, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import (
    LockAction,
    lock_racer_process,
    offset_committer_process,
    race_lock_actions,
    race_offset_commits,
)
from alkstore_conformance.helpers.profiles import Children, in_thread
from alkstore_conformance.helpers.trials import Trial

TIME_LIMIT_S = 60.0
CONTENDERS = 3
ROUNDS = 12
TTL_S = 30
LAPSED_AFTER_S = 2 * TTL_S


def _race_in_threads(
    open_store: StoreFactory,
    clock: FakeClock | None,
    plans: list[list[LockAction]],
) -> list[list[bool]]:
    """Each plan on its own store in its own thread; the outcomes per contender."""
    barrier = threading.Barrier(len(plans))
    stores = [open_store(clock=clock) for _ in plans]
    racers = [
        in_thread(functools.partial(race_lock_actions, s, p, TTL_S, barrier, TIME_LIMIT_S))
        for s, p in zip(stores, plans, strict=True)
    ]
    return [racer.join(TIME_LIMIT_S) for racer in racers]


def _race_in_processes(
    engine_ref: tuple[str, str, EngineSpec], clock_at: int | None, plans: list[list[LockAction]]
) -> list[list[bool]]:
    with Children(TIME_LIMIT_S) as children:
        barrier = children.context.Barrier(len(plans))
        for plan in plans:
            children.start(
                lock_racer_process,
                *engine_ref,
                plan,
                TTL_S,
                clock_at,
                barrier,
                children.results,
                TIME_LIMIT_S,
            )
        reports = [children.expect("locked") for _ in plans]
    # Children report in the order they finish: match each report to its plan.
    by_plan = {repr(actions): outcomes for actions, outcomes in reports}
    return [by_plan[repr(plan)] for plan in plans]


# -- LOCK-ACQUIRE-RACE ----------------------------------------------------------------


def _acquire_plans(prefix: str) -> list[list[LockAction]]:
    return [
        [(f"{prefix}-{round_}", "acquire", f"owner-{who}") for round_ in range(ROUNDS)]
        for who in range(CONTENDERS)
    ]


def _hold_lapsed(store: Store, prefix: str) -> None:
    for round_ in range(ROUNDS):
        assert store.lock(f"{prefix}-{round_}").acquire("old-owner", TTL_S) is True


def _check_one_winner_per_round(store: Store, prefix: str, outcomes: list[list[bool]]) -> None:
    for round_ in range(ROUNDS):
        won = [who for who in range(CONTENDERS) if outcomes[who][round_]]
        assert len(won) == 1, f"round {round_}: contenders {won} all acquired the lock"
        holder = store.lock(f"{prefix}-{round_}").holder()
        assert holder is not None
        assert holder.owner == f"owner-{won[0]}"


@pytest.mark.property("LOCK-ACQUIRE-RACE")
def test_threads_racing_for_a_free_lock_have_exactly_one_winner(
    open_store: StoreFactory, clock: FakeClock, trial: Trial
) -> None:
    outcomes = _race_in_threads(open_store, clock, _acquire_plans("free"))
    _check_one_winner_per_round(open_store(clock=clock), "free", outcomes)


@pytest.mark.property("LOCK-ACQUIRE-RACE")
def test_threads_racing_for_a_lapsed_lock_have_exactly_one_winner(
    open_store: StoreFactory, clock: FakeClock, trial: Trial
) -> None:
    store = open_store(clock=clock)
    _hold_lapsed(store, "lapsed")
    clock.advance(LAPSED_AFTER_S)
    outcomes = _race_in_threads(open_store, clock, _acquire_plans("lapsed"))
    _check_one_winner_per_round(store, "lapsed", outcomes)


@pytest.mark.property("LOCK-ACQUIRE-RACE")
@pytest.mark.requires("multi_process")
def test_processes_racing_for_a_free_lock_have_exactly_one_winner(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    clocked_store: Store,
    clock: FakeClock,
    trial: Trial,
) -> None:
    engine_ref = (engine_name, engine_group, engine_spec)
    outcomes = _race_in_processes(engine_ref, int(clock.now()), _acquire_plans("free"))
    _check_one_winner_per_round(clocked_store, "free", outcomes)


@pytest.mark.property("LOCK-ACQUIRE-RACE")
@pytest.mark.requires("multi_process")
def test_processes_racing_for_a_lapsed_lock_have_exactly_one_winner(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    clocked_store: Store,
    clock: FakeClock,
    trial: Trial,
) -> None:
    _hold_lapsed(clocked_store, "lapsed")
    clock.advance(LAPSED_AFTER_S)
    engine_ref = (engine_name, engine_group, engine_spec)
    outcomes = _race_in_processes(engine_ref, int(clock.now()), _acquire_plans("lapsed"))
    _check_one_winner_per_round(clocked_store, "lapsed", outcomes)


# -- LOCK-TAKEOVER-RACE ----------------------------------------------------------------


def _takeover_plans() -> list[list[LockAction]]:
    """The old owner renews then releases; the new owner takes over, both rounds."""
    names = [f"taken-{round_}" for round_ in range(ROUNDS)]
    return [
        [(name, action, "old-owner") for name in names for action in ("renew", "release")],
        [(name, action, "new-owner") for name in names for action in ("acquire", "renew")],
    ]


def _check_takeovers(store: Store, outcomes: list[list[bool]]) -> None:
    old, new = outcomes
    for round_ in range(ROUNDS):
        renewed, released = old[2 * round_], old[2 * round_ + 1]
        acquired, kept = new[2 * round_], new[2 * round_ + 1]
        assert (renewed, released) == (False, False), f"round {round_}: the lapsed owner won"
        assert (acquired, kept) == (True, True), f"round {round_}: the takeover was disturbed"
        holder = store.lock(f"taken-{round_}").holder()
        assert holder is not None
        assert holder.owner == "new-owner"


@pytest.mark.property("LOCK-TAKEOVER-RACE")
def test_a_lapsed_owner_racing_a_takeover_in_threads_never_disturbs_it(
    open_store: StoreFactory, clock: FakeClock, trial: Trial
) -> None:
    store = open_store(clock=clock)
    _hold_lapsed_names(store)
    clock.advance(LAPSED_AFTER_S)
    _check_takeovers(store, _race_in_threads(open_store, clock, _takeover_plans()))


@pytest.mark.property("LOCK-TAKEOVER-RACE")
@pytest.mark.requires("multi_process")
def test_a_lapsed_owner_racing_a_takeover_in_processes_never_disturbs_it(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    clocked_store: Store,
    clock: FakeClock,
    trial: Trial,
) -> None:
    _hold_lapsed_names(clocked_store)
    clock.advance(LAPSED_AFTER_S)
    engine_ref = (engine_name, engine_group, engine_spec)
    outcomes = _race_in_processes(engine_ref, int(clock.now()), _takeover_plans())
    _check_takeovers(clocked_store, outcomes)


def _hold_lapsed_names(store: Store) -> None:
    for round_ in range(ROUNDS):
        assert store.lock(f"taken-{round_}").acquire("old-owner", TTL_S) is True


# -- STREAM-COMMIT-RACE -------------------------------------------------------------------

STREAM = "committed"
EVENTS = 2 * CONTENDERS + 2


def _commit_plans() -> list[list[tuple[str, int]]]:
    """Contender ``who`` commits offset ``who + 2`` for every round's consumer."""
    return [
        [(f"consumer-{round_}", who + 2) for round_ in range(ROUNDS)] for who in range(CONTENDERS)
    ]


def _watch_offsets(store: Store, stop: threading.Event) -> set[int]:
    """Every offset a reader saw while the commits raced (until ``stop``, or the time limit
    if the test never gets to set it)."""
    seen: set[int] = set()
    handle = store.stream(STREAM)
    give_up_at = time.monotonic() + TIME_LIMIT_S
    while not stop.is_set() and time.monotonic() < give_up_at:
        seen.update(handle.offset(f"consumer-{round_}") for round_ in range(ROUNDS))
    return seen


def _check_offsets(store: Store, seen: set[int]) -> None:
    committed = {who + 2 for who in range(CONTENDERS)}
    assert seen <= committed | {0}, f"a reader saw offsets {sorted(seen - committed)}"
    for round_ in range(ROUNDS):
        assert store.stream(STREAM).offset(f"consumer-{round_}") in committed


def _with_events(store: Store) -> None:
    stream = store.stream(STREAM)
    for n in range(EVENTS):
        stream.append({"n": n})


@pytest.mark.property("STREAM-COMMIT-RACE")
def test_threads_committing_one_offset_leave_one_of_their_values(
    open_store: StoreFactory, store: Store, trial: Trial
) -> None:
    _with_events(store)
    plans = _commit_plans()
    barrier = threading.Barrier(len(plans))
    stop = threading.Event()
    watcher = in_thread(lambda: _watch_offsets(open_store(), stop))
    committers = [
        in_thread(functools.partial(race_offset_commits, s, STREAM, p, barrier, TIME_LIMIT_S))
        for s, p in zip([open_store() for _ in plans], plans, strict=True)
    ]
    for committer in committers:
        committer.join(TIME_LIMIT_S)
    stop.set()
    _check_offsets(store, watcher.join(TIME_LIMIT_S))


@pytest.mark.property("STREAM-COMMIT-RACE")
@pytest.mark.requires("multi_process")
def test_processes_committing_one_offset_leave_one_of_their_values(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    _with_events(store)
    plans = _commit_plans()
    stop = threading.Event()
    watcher = in_thread(lambda: _watch_offsets(store, stop))
    try:
        with Children(TIME_LIMIT_S) as children:
            barrier = children.context.Barrier(len(plans))
            for plan in plans:
                children.start(
                    offset_committer_process,
                    engine_name,
                    engine_group,
                    engine_spec,
                    STREAM,
                    plan,
                    barrier,
                    children.results,
                    TIME_LIMIT_S,
                )
            for _ in plans:
                children.expect("committed")
    finally:
        stop.set()
    _check_offsets(store, watcher.join(TIME_LIMIT_S))
