"""§5.11 (contract 1.2, the periodic profile): schedules declared with the worker.

A worker declares its schedules when it starts (``declare_schedule``), renews their
lease while it runs (``renew_schedules``), and a tick removes a declaration whose
lease lapsed before it fires anything. Time is the test's ``FakeClock``; declarers
in threads and processes each run on their own ``FakeClock``, later than the first
declaration, so a declaration that restarted the boundary would show.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, cast

import pytest

from alkstore import (
    DECLARATION_LEASE_S,
    EngineProvider,
    EngineSpec,
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    PayloadError,
    ProfileUnavailable,
    ReservedName,
    ScheduleOpts,
    Store,
    TickResult,
)
from alkstore.testing import FakeClock
from alkstore.worker import Worker
from alkstore_conformance.helpers.cron import TICKER
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import declare_at, declarer_process
from alkstore_conformance.helpers.profiles import (
    Children,
    drain,
    in_thread,
    payload_counts,
    payload_key,
)
from alkstore_conformance.helpers.workers import RunningWorker, eventually

pytestmark = pytest.mark.requires("scheduler")
"""Every property here but PERIODIC-PROFILE-DECLARED is of the periodic profile (and
needs cron, as the manifest says): not_applicable on an engine without it."""

TIME_LIMIT_S = 90.0
DECLARERS = 8
LATER_S = 100
"""How much later than the first declaration the fleet starts: within one interval."""
TARGET = "declared-fires"
DECLARATIONS: list[tuple[str, str, str, Any]] = [
    ("fleet-half-hourly", "@every 1800s", TARGET, {"schedule": "fleet-half-hourly"}),
    ("fleet-hourly", "@every 3600s", TARGET, {"schedule": "fleet-hourly"}),
    ("fleet-daily", "0 9 * * *", TARGET, {"schedule": "fleet-daily"}),
]

INTERVALS = {"fleet-half-hourly": 1800, "fleet-hourly": 3600, "fleet-daily": 86_400}
"""The distance between boundaries of each (the daily one's, in UTC)."""


def _declare_first(store: Store) -> dict[str, int]:
    return {
        name: store.declare_schedule(name, spec, queue, payload).next_fire_at
        for name, spec, queue, payload in DECLARATIONS
    }


def _check_declared_once(
    store: Store, clock: FakeClock, first: dict[str, int], answers: list[list[int]]
) -> None:
    """One row each, the first declaration's boundary, and each boundary fired once."""
    expected = [first[name] for name, *_ in DECLARATIONS]
    assert answers == [expected] * DECLARERS
    stored = {s.name: s for s in store.schedules() if s.name in first}
    assert {name: s.next_fire_at for name, s in stored.items()} == first
    assert all(s.declared_until is not None for s in stored.values())
    last = max(first.values())
    clock.set(last)
    store.renew_schedules(list(first))  # the fleet keeps renewing while it runs
    result = store.tick_schedules(TICKER)
    counts = payload_counts(drain(store.queue(TARGET)))
    # Every boundary from each schedule's first one up to the last first one fired once
    # (the daily one's next boundary is a day after its first, past all of them).
    due = {name: (last - boundary) // INTERVALS[name] + 1 for name, boundary in first.items()}
    assert counts == {payload_key({"schedule": name}): n for name, n in due.items()}
    assert result == TickResult(fired=sum(due.values()), skipped=0)


# -- PERIODIC-UPSERT-ONCE ------------------------------------------------------------


@pytest.mark.property("PERIODIC-UPSERT-ONCE")
def test_declarers_in_threads_declare_each_schedule_once_keeping_its_first_boundary(
    open_store: StoreFactory, clocked_store: Store, clock: FakeClock
) -> None:
    first = _declare_first(clocked_store)
    barrier = threading.Barrier(DECLARERS)
    declarers = []
    for index in range(DECLARERS):
        store = open_store(clock=FakeClock(clock.now() + LATER_S))
        declarers.append(
            in_thread(
                functools.partial(declare_at, store, DECLARATIONS, barrier, TIME_LIMIT_S),
                name=f"declarer-{index}",
            )
        )
    answers = [declarer.join(TIME_LIMIT_S * 2) for declarer in declarers]
    _check_declared_once(clocked_store, clock, first, answers)


@pytest.mark.property("PERIODIC-UPSERT-ONCE")
@pytest.mark.requires("multi_process")
def test_declarers_in_processes_declare_each_schedule_once_keeping_its_first_boundary(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    clocked_store: Store,
    clock: FakeClock,
) -> None:
    first = _declare_first(clocked_store)
    with Children(TIME_LIMIT_S) as children:
        barrier = children.context.Barrier(DECLARERS)
        for _ in range(DECLARERS):
            children.start(
                declarer_process,
                engine_name,
                engine_group,
                engine_spec,
                int(clock.now()) + LATER_S,
                DECLARATIONS,
                barrier,
                children.results,
                TIME_LIMIT_S,
            )
        answers = [children.expect("declared") for _ in range(DECLARERS)]
    _check_declared_once(clocked_store, clock, first, answers)


class StillClock(FakeClock):
    """A worker's fake clock that only the test moves: the scheduler's sleeps pass a
    little real time instead of jumping the clock forward past every lease."""

    def sleep(self, seconds: float) -> None:
        time.sleep(min(max(seconds, 0.0), 0.005))


class CountingStore:
    """The worker's store, counting the declarations the worker made through it."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.declared: list[int] = []

    def declare_schedule(self, *args: Any, **kwargs: Any) -> Any:
        schedule = self._store.declare_schedule(*args, **kwargs)
        self.declared.append(schedule.next_fire_at)
        return schedule

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _fleet_worker(store: CountingStore, index: int) -> Worker:
    worker = Worker(cast(Store, store), name=f"fleet-{index}")
    (name, spec, queue, payload), *others = DECLARATIONS
    worker.periodic(name, spec, queue=queue, payload=payload)(lambda job: None)
    for name, spec, queue, payload in others:
        worker.periodic(name, spec, queue=queue, payload=payload)
    return worker


@pytest.mark.property("PERIODIC-UPSERT-ONCE")
def test_a_fleet_of_workers_starting_at_once_declares_each_schedule_once(
    open_store: StoreFactory, clocked_store: Store, clock: FakeClock
) -> None:
    first = _declare_first(clocked_store)
    stores = [
        CountingStore(open_store(clock=StillClock(clock.now() + LATER_S))) for _ in range(DECLARERS)
    ]
    runs = [RunningWorker(_fleet_worker(store, i), TIME_LIMIT_S) for i, store in enumerate(stores)]
    try:
        eventually(
            lambda: all(len(store.declared) == len(DECLARATIONS) for store in stores) or None,
            "every worker declared its schedules",
            TIME_LIMIT_S,
        )
    finally:
        for run in runs:
            run.stop()
    _check_declared_once(clocked_store, clock, first, [store.declared for store in stores])


# -- PERIODIC-LEASE-LAPSES -----------------------------------------------------------

STEP_S = DECLARATION_LEASE_S // 3
"""A renewing worker's cadence: a third of the lease."""


def _fires(store: Store, queue: str) -> int:
    """How many jobs the schedule fired into ``queue`` since the last count (acked)."""
    handles = drain(store.queue(queue))
    assert all(handle.ack() for handle in handles)
    return len(handles)


@pytest.mark.property("PERIODIC-LEASE-LAPSES")
def test_a_declaration_nobody_renews_stops_firing_at_its_lease_and_is_removed(
    clocked_store: Store, clock: FakeClock
) -> None:
    start = int(clock.now())
    lapsing = clocked_store.declare_schedule("lapsing", "@every 60s", "lapsing", {})
    assert lapsing.declared_until == start + DECLARATION_LEASE_S
    fired = 0
    for instant in range(start + 30, start + DECLARATION_LEASE_S + 1, 30):
        clock.set(instant)
        clocked_store.tick_schedules(TICKER)
        fired += _fires(clocked_store, "lapsing")
        if instant < lapsing.declared_until:
            assert clocked_store.get_schedule("lapsing") is not None
    # Its boundaries before the lease fired; at the lease (a boundary too) the tick
    # removed it before firing anything.
    assert fired == (DECLARATION_LEASE_S - 1) // 60
    assert clocked_store.get_schedule("lapsing") is None
    clock.set(start + 10 * DECLARATION_LEASE_S)
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=0, skipped=0)
    assert _fires(clocked_store, "lapsing") == 0


@pytest.mark.property("PERIODIC-LEASE-LAPSES")
def test_a_lapsed_declaration_that_is_not_due_is_removed_by_the_next_tick(
    clocked_store: Store, clock: FakeClock
) -> None:
    clocked_store.declare_schedule("not-due", "@every 1d", "not-due", {})
    clock.advance(DECLARATION_LEASE_S)
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=0, skipped=0)
    assert clocked_store.get_schedule("not-due") is None


@pytest.mark.property("PERIODIC-LEASE-LAPSES")
def test_a_renewed_declaration_and_a_plain_schedule_never_lapse(
    clocked_store: Store, clock: FakeClock
) -> None:
    start = int(clock.now())
    clocked_store.declare_schedule("renewed", "@every 60s", "renewed", {})
    clocked_store.schedule("plain", "@every 60s", "plain", {})
    for step in range(1, 31):  # ten leases
        clock.set(start + step * STEP_S)
        assert clocked_store.renew_schedules(["renewed", "plain"]) == ["renewed"]
        clocked_store.tick_schedules(TICKER)
    boundaries = (30 * STEP_S) // 60
    assert _fires(clocked_store, "renewed") == boundaries
    assert _fires(clocked_store, "plain") == boundaries
    renewed = clocked_store.get_schedule("renewed")
    plain = clocked_store.get_schedule("plain")
    assert renewed is not None
    assert plain is not None
    assert renewed.declared_until == start + 30 * STEP_S + DECLARATION_LEASE_S
    assert plain.declared_until is None


# -- PERIODIC-RENEW-KEEPS-BOUNDARY ---------------------------------------------------


@pytest.mark.property("PERIODIC-RENEW-KEEPS-BOUNDARY")
def test_renewing_changes_only_the_lease(clocked_store: Store, clock: FakeClock) -> None:
    opts = ScheduleOpts(priority=3, timezone="Europe/Berlin", catch_up="latest")
    declared = clocked_store.declare_schedule("renew", "0 9 * * *", "q", {"n": 1}, opts)
    clock.advance(STEP_S)
    assert clocked_store.renew_schedules(("renew",)) == ["renew"]
    renewed = clocked_store.get_schedule("renew")
    assert renewed is not None
    assert renewed.declared_until == int(clock.now()) + DECLARATION_LEASE_S
    assert renewed == declared.__class__(
        **{**_fields(declared), "declared_until": renewed.declared_until}
    )


def _fields(schedule: Any) -> dict[str, Any]:
    return {name: getattr(schedule, name) for name in schedule.__dataclass_fields__}


@pytest.mark.property("PERIODIC-RENEW-KEEPS-BOUNDARY")
def test_re_declaring_an_unchanged_declaration_keeps_its_boundary(
    clocked_store: Store, clock: FakeClock
) -> None:
    first = clocked_store.declare_schedule("again", "@every 3600s", "q", {"n": 1})
    clock.advance(STEP_S)  # a worker restarting: it declares again
    again = clocked_store.declare_schedule("again", "@every 3600s", "q", {"n": 2})
    assert again.next_fire_at == first.next_fire_at
    assert again.declared_until == int(clock.now()) + DECLARATION_LEASE_S
    assert again.payload == {"n": 2}
    changed = clocked_store.declare_schedule("again", "@every 600s", "q", {"n": 2})
    assert changed.next_fire_at == int(clock.now()) + 600


@pytest.mark.property("PERIODIC-RENEW-KEEPS-BOUNDARY")
def test_renew_skips_names_that_are_gone_or_undeclared_and_declares_nothing(
    clocked_store: Store,
) -> None:
    clocked_store.schedule("plain", "@every 60s", "q", {})
    clocked_store.declare_schedule("declared", "@every 60s", "q", {})
    renewed = clocked_store.renew_schedules(["missing", "plain", "declared", "declared"])
    assert renewed == ["declared"]
    assert clocked_store.get_schedule("missing") is None
    plain = clocked_store.get_schedule("plain")
    assert plain is not None
    assert plain.declared_until is None
    assert clocked_store.renew_schedules([]) == []


@pytest.mark.property("PERIODIC-RENEW-KEEPS-BOUNDARY")
def test_a_plain_schedule_of_a_declared_name_makes_it_undeclared_keeping_its_boundary(
    clocked_store: Store, clock: FakeClock
) -> None:
    declared = clocked_store.declare_schedule("taken", "@every 60s", "q", {})
    clock.advance(30)
    taken = clocked_store.schedule("taken", "@every 60s", "q", {})
    assert (taken.next_fire_at, taken.declared_until) == (declared.next_fire_at, None)
    clock.advance(10 * DECLARATION_LEASE_S)
    clocked_store.tick_schedules(TICKER)
    assert clocked_store.get_schedule("taken") is not None
    assert clocked_store.renew_schedules(["taken"]) == []


# -- PERIODIC-ARGUMENTS --------------------------------------------------------------

REFUSED_DECLARATIONS: dict[str, tuple[tuple[Any, ...], type[Exception]]] = {
    "empty-name": (("", "@every 60s", "q", {}), InvalidName),
    "reserved-name": (("__alkstore_x", "@every 60s", "q", {}), ReservedName),
    "name-not-str": ((7, "@every 60s", "q", {}), InvalidName),
    "empty-queue": (("refused", "@every 60s", "", {}), InvalidName),
    "reserved-queue": (("refused", "@every 60s", "__alkstore_q", {}), ReservedName),
    "bad-spec": (("refused", "@every 0s", "q", {}), InvalidSpec),
    "six-fields": (("refused", "0 0 9 * * *", "q", {}), InvalidSpec),
    "spec-not-str": (("refused", 60, "q", {}), InvalidSpec),
    "payload": (("refused", "@every 60s", "q", {"not": {1, 2}}), PayloadError),
    "opts": (("refused", "@every 60s", "q", {}, {"timezone": "UTC"}), InvalidOptions),
}


@pytest.mark.property("PERIODIC-ARGUMENTS")
@pytest.mark.parametrize("case", sorted(REFUSED_DECLARATIONS))
def test_a_malformed_declaration_is_refused_with_nothing_stored(
    clocked_store: Store, case: str
) -> None:
    args, error = REFUSED_DECLARATIONS[case]
    with pytest.raises(error):
        clocked_store.declare_schedule(*args)
    assert clocked_store.schedules() == []


@pytest.mark.property("PERIODIC-ARGUMENTS")
def test_a_declaration_in_an_unknown_zone_is_refused_with_nothing_stored(
    clocked_store: Store,
) -> None:
    with pytest.raises(InvalidSpec):
        clocked_store.declare_schedule(
            "refused", "0 9 * * *", "q", {}, ScheduleOpts(timezone="Mars/Olympus")
        )
    assert clocked_store.schedules() == []


REFUSED_RENEWALS: dict[str, tuple[Any, type[Exception]]] = {
    "a-str": ("declared", InvalidOptions),
    "not-a-sequence": ({"declared"}, InvalidOptions),
    "none": (None, InvalidOptions),
    "bad-name": (["declared", ""], InvalidName),
    "name-not-str": (["declared", 7], InvalidName),
    "reserved-name": (["declared", "__alkstore_x"], ReservedName),
}


@pytest.mark.property("PERIODIC-ARGUMENTS")
@pytest.mark.parametrize("case", sorted(REFUSED_RENEWALS))
def test_a_malformed_renewal_is_refused_and_renews_nothing(
    clocked_store: Store, clock: FakeClock, case: str
) -> None:
    declared = clocked_store.declare_schedule("declared", "@every 60s", "q", {})
    clock.advance(STEP_S)
    names, error = REFUSED_RENEWALS[case]
    with pytest.raises(error):
        clocked_store.renew_schedules(names)
    assert clocked_store.get_schedule("declared") == declared


# -- PERIODIC-PROFILE-DECLARED (every engine with a scheduler) ----------------------------


@pytest.mark.property("PERIODIC-PROFILE-DECLARED")
def test_declaring_works_exactly_when_the_engine_declares_the_profile(
    clocked_store: Store, engine: EngineProvider
) -> None:
    capabilities = engine.capabilities
    if capabilities.periodic and capabilities.cron:
        declared = clocked_store.declare_schedule("declared", "@every 60s", "q", {})
        assert declared.declared_until is not None
        assert clocked_store.renew_schedules(["declared"]) == ["declared"]
        return
    with pytest.raises(ProfileUnavailable):
        clocked_store.declare_schedule("declared", "@every 60s", "q", {})
    with pytest.raises(ProfileUnavailable):
        clocked_store.renew_schedules(["declared"])
    worker = Worker(clocked_store, name="declaring")
    worker.periodic("declared", "@every 60s")(lambda job: None)
    with pytest.raises(ProfileUnavailable):
        worker.run()
    assert clocked_store.schedules() == []  # nothing was written
    plain = clocked_store.schedule("plain", "@every 60s", "q", {})  # the scheduler carries on
    assert plain.declared_until is None
