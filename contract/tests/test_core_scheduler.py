"""The scheduler collapsed into queues (contract §5), over the recording fake.

``run_schedules`` on a ``FakeClock`` never blocks: its sleeps advance fake
time, so the tests steer it with driver hooks that run between transactions.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pytest
from background import InBackground
from conftest import START
from fakes import FakeDriver, FakeProfilesDriver, FakeTx
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore.constants import CATCH_UP_CAP, SCHEDULER_LEASE_S, SCHEDULER_LOCK
from alkstore.core import CoreLock, CoreStore
from alkstore.driver import SCHEDULES_TOPIC, queue_topic
from alkstore.errors import (
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    LeadershipLost,
    PayloadError,
    ProfileUnavailable,
    ReservedName,
)
from alkstore.options import DEFAULT_QUEUE_OPTS, EnqueueOpts, ScheduleOpts
from alkstore.stop import StopToken
from alkstore.testing import FakeClock
from alkstore.values import LockInfo, TickResult

SAFETY_NET_S = 10


@pytest.fixture
def driver() -> FakeProfilesDriver:
    return FakeProfilesDriver()


def on_fires(driver: FakeDriver, actions: dict[int, Callable[[], None]]) -> None:
    """Run ``actions[n]`` right after the ``n``-th fire commits."""
    fires = 0

    def hook(c: FakeTx) -> None:
        nonlocal fires
        if "insert_jobs" in driver.statement_names_in(c.number):
            fires += 1
            action = actions.get(fires)
            if action is not None:
                action()

    driver.after_transaction = hook


def lead_in_background(
    store: CoreStore, stop: StopToken, worker_id: str | None = "leader"
) -> InBackground:
    """``run_schedules`` in a thread, so a leader that ignores ``stop`` fails the
    test instead of hanging it (closing the store ends such a thread)."""
    return InBackground(lambda: store.run_schedules(stop, worker_id), "run_schedules")


# -- registry -------------------------------------------------------------------


def test_schedule_stores_the_schedule_with_its_interval(store: CoreStore) -> None:
    opts = ScheduleOpts(priority=2, max_attempts=4, expires=60)
    schedule = store.schedule("maint", "@every 5m", "work", {"task": "sweep"}, opts)
    assert (schedule.name, schedule.spec, schedule.queue, schedule.payload) == (
        "maint",
        "@every 5m",
        "work",
        {"task": "sweep"},
    )
    assert (schedule.opts, schedule.interval_s) == (opts, 300)
    assert store.get_schedule("maint") == schedule


def test_a_new_schedule_first_fires_one_interval_from_now(store: CoreStore) -> None:
    assert store.schedule("s", "@every 2h", "q", 1).next_fire_at == START + 7200


def test_schedule_without_opts_stores_the_default_schedule_opts(store: CoreStore) -> None:
    assert store.schedule("s", "@every 1s", "q", 1).opts == ScheduleOpts()


@pytest.mark.parametrize("spec", ["60 * * * *", "@every 0s", "@every 5", "@every 1w", "@often"])
def test_schedule_refuses_specs_outside_the_grammar(
    store: CoreStore, driver: FakeDriver, spec: str
) -> None:
    with pytest.raises(InvalidSpec) as raised:
        store.schedule("s", spec, "q", 1)
    assert raised.value.spec == spec
    assert driver.calls == []


@pytest.mark.parametrize(("name", "queue"), [("", "q"), ("s", ""), ("s\x00", "q"), ("s", 7)])
def test_schedule_refuses_malformed_names(
    store: CoreStore, driver: FakeDriver, name: str, queue: str
) -> None:
    with pytest.raises(InvalidName):
        store.schedule(name, "@every 1s", queue, 1)
    assert driver.calls == []


@pytest.mark.parametrize(("name", "queue"), [("__alkstore_s", "q"), ("s", "__alkstore_q")])
def test_schedule_refuses_reserved_names(
    store: CoreStore, driver: FakeDriver, name: str, queue: str
) -> None:
    with pytest.raises(ReservedName):
        store.schedule(name, "@every 1s", queue, 1)
    assert driver.calls == []


def test_schedule_refuses_opts_of_the_wrong_type(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(InvalidOptions, match="opts"):
        store.schedule("s", "@every 1s", "q", 1, EnqueueOpts())  # type: ignore[arg-type]
    assert driver.calls == []


@pytest.mark.parametrize(
    "kwargs", [{"priority": 2**31}, {"max_attempts": 0}, {"expires": 0}, {"expires": -1}]
)
def test_schedule_opts_refuse_out_of_range_values(kwargs: dict[str, int]) -> None:
    with pytest.raises(InvalidOptions):
        ScheduleOpts(**kwargs)


def test_schedule_with_a_bad_payload_stores_nothing(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(PayloadError):
        store.schedule("s", "@every 1s", "q", {"bad": object()})
    assert driver.calls == []
    assert store.get_schedule("s") is None


def test_rescheduling_an_unchanged_spec_keeps_the_next_boundary(
    store: CoreStore, clock: FakeClock
) -> None:
    store.schedule("s", "@every 300s", "q", {"v": 1})
    clock.advance(100)
    updated = store.schedule("s", "@every 300s", "other", {"v": 2}, ScheduleOpts(priority=9))
    assert updated.next_fire_at == START + 300
    assert (updated.queue, updated.payload, updated.opts.priority) == ("other", {"v": 2}, 9)


def test_rescheduling_a_changed_spec_restarts_from_now(store: CoreStore, clock: FakeClock) -> None:
    store.schedule("s", "@every 300s", "q", 1)
    clock.advance(100)
    assert store.schedule("s", "@every 60s", "q", 1).next_fire_at == START + 100 + 60


def test_scheduling_wakes_a_sleeping_leader(store: CoreStore) -> None:
    with store._context.hub.waiter(SCHEDULES_TOPIC) as waiter:
        store.schedule("s", "@every 1s", "q", 1)
        assert waiter.wait(timeout=0) is True


def test_unschedule_removes_the_schedule(store: CoreStore) -> None:
    store.schedule("s", "@every 1s", "q", 1)
    assert store.unschedule("s") is True
    assert store.get_schedule("s") is None


def test_unschedule_of_an_unknown_name_returns_false(store: CoreStore) -> None:
    assert store.unschedule("nope") is False


def test_unschedule_refuses_reserved_names(store: CoreStore) -> None:
    with pytest.raises(ReservedName):
        store.unschedule("__alkstore_s")


def test_get_schedule_of_an_unknown_name_returns_none(store: CoreStore) -> None:
    assert store.get_schedule("nope") is None


def test_schedules_are_listed_by_name(store: CoreStore) -> None:
    for name in ["b", "c", "a"]:
        store.schedule(name, "@every 1s", "q", name)
    assert [schedule.name for schedule in store.schedules()] == ["a", "b", "c"]


# -- tick -------------------------------------------------------------------------


def test_a_tick_before_the_boundary_fires_nothing(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(9)
    assert store.tick_schedules("w") == TickResult(fired=0, skipped=0)
    assert driver.live_rows("q") == []


def test_a_tick_fires_every_due_boundary_up_to_the_cap(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(35)
    assert store.tick_schedules("w") == TickResult(fired=3, skipped=0)
    assert len(driver.live_rows("q")) == 3
    schedule = store.get_schedule("s")
    assert schedule is not None
    assert schedule.next_fire_at == START + 40


def test_a_fire_enqueues_the_payload_stamped_with_the_schedule_opts(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", {"task": "x"}, ScheduleOpts(5, 7, 60))
    clock.advance(12)
    store.tick_schedules("w")
    (row,) = driver.live_rows("q")
    now = START + 12
    assert (row["payload"], row["priority"], row["max_attempts"], row["expires_at"]) == (
        '{"task":"x"}',
        5,
        7,
        now + 60,
    )
    assert (row["created_at"], row["run_at"], row["state"]) == (now, now, "pending")


def test_a_fire_stamps_the_default_queue_opts_under_the_schedule_opts(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(10)
    store.tick_schedules("w")
    (row,) = driver.live_rows("q")
    assert (
        row["priority"],
        row["max_attempts"],
        row["expires_at"],
        row["visibility_timeout_s"],
        row["backoff_base_s"],
        row["dead_letter_retention_s"],
    ) == (
        0,
        DEFAULT_QUEUE_OPTS.max_attempts,
        None,
        DEFAULT_QUEUE_OPTS.visibility_timeout_s,
        DEFAULT_QUEUE_OPTS.backoff_base_s,
        DEFAULT_QUEUE_OPTS.dead_letter_retention_s,
    )


def test_each_fire_advances_and_enqueues_in_its_own_write(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(30)
    store.tick_schedules("w")
    fire_txns = [call.txn for call in driver.calls_named("schedule_advance")]
    assert len(set(fire_txns)) == 3
    for txn in fire_txns:
        # The insert announces the queue itself (the seam's rule): no extra statement.
        assert driver.statement_names_in(txn) == ["schedule_advance", "insert_jobs"]
    writes = {call.txn for call in driver.calls_named("begin") if call.args == ("write",)}
    assert set(fire_txns) <= writes


def test_each_fire_moves_the_boundary_by_one_interval(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(30)
    store.tick_schedules("w")
    moves = [call.args for call in driver.calls_named("schedule_advance")]
    assert moves == [
        ("s", START + 10, START + 20),
        ("s", START + 20, START + 30),
        ("s", START + 30, START + 40),
    ]


def test_a_fire_wakes_the_target_queues_waiters(store: CoreStore, clock: FakeClock) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(10)
    with store._context.hub.waiter(queue_topic("q")) as waiter:
        store.tick_schedules("w")
        assert waiter.wait(timeout=0) is True


def test_a_tick_fires_at_most_the_catch_up_cap_and_skips_the_rest(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 1s", "q", 1)
    clock.advance(100)
    assert store.tick_schedules("w") == TickResult(fired=CATCH_UP_CAP, skipped=100 - CATCH_UP_CAP)
    assert len(driver.live_rows("q")) == CATCH_UP_CAP


@settings(deadline=None)  # a shared, loaded machine must not fail a correct example
@given(
    due=st.integers(min_value=1, max_value=3 * CATCH_UP_CAP),
    interval=st.integers(min_value=1, max_value=100_000),
    into_next=st.floats(min_value=0, max_value=0.999),
)
def test_a_tick_fires_min_of_due_and_cap_and_lands_on_the_first_boundary_after_now(
    due: int, interval: int, into_next: float
) -> None:
    driver = FakeProfilesDriver()
    clock = FakeClock(START)
    with CoreStore(driver, clock=clock, capabilities=driver.capabilities) as store:
        store.schedule("s", f"@every {interval}s", "q", 1)
        # Exactly ``due`` boundaries lie at or before now.
        clock.set(START + due * interval + int(into_next * interval))
        result = store.tick_schedules("w")
        assert result == TickResult(
            fired=min(due, CATCH_UP_CAP), skipped=max(0, due - CATCH_UP_CAP)
        )
        assert len(driver.live_rows("q")) == min(due, CATCH_UP_CAP)
        schedule = store.get_schedule("s")
        assert schedule is not None
        assert schedule.next_fire_at == START + (due + 1) * interval


def test_a_tick_fires_every_due_schedule(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("a", "@every 10s", "qa", 1)
    store.schedule("b", "@every 5s", "qb", 1)
    clock.advance(10)
    assert store.tick_schedules("w") == TickResult(fired=3, skipped=0)
    assert (len(driver.live_rows("qa")), len(driver.live_rows("qb"))) == (1, 2)


def test_a_tick_fires_only_the_boundaries_another_ticker_left(
    store: CoreStore, driver: FakeProfilesDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(30)

    def other_ticker_fires_first(c: FakeTx) -> None:
        if "schedules_due" in driver.statement_names_in(c.number):
            driver.move_next_fire_at("s", START + 20)  # it fired the first boundary

    driver.after_transaction = other_ticker_fires_first
    assert store.tick_schedules("w") == TickResult(fired=2, skipped=0)
    assert len(driver.live_rows("q")) == 2
    schedule = store.get_schedule("s")
    assert schedule is not None
    assert schedule.next_fire_at == START + 40


def test_a_tick_stops_firing_a_schedule_once_another_ticker_overtakes_it(
    store: CoreStore, driver: FakeProfilesDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(30)
    on_fires(driver, {1: lambda: driver.move_next_fire_at("s", START + 40)})
    assert store.tick_schedules("w") == TickResult(fired=1, skipped=0)
    assert len(driver.live_rows("q")) == 1


def test_fires_made_before_another_ticker_overtook_still_wake_the_queue(
    store: CoreStore, driver: FakeProfilesDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    clock.advance(30)
    on_fires(driver, {1: lambda: driver.move_next_fire_at("s", START + 40)})
    with store._context.hub.waiter(queue_topic("q")) as waiter:
        store.tick_schedules("w")
        assert waiter.wait(timeout=0) is True


def test_a_tick_fires_nothing_while_another_owner_holds_the_leadership_lock(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    driver.hold_lock(SCHEDULER_LOCK, "other", START + 100)
    clock.advance(30)
    assert store.tick_schedules("w") == TickResult(fired=0, skipped=0)
    assert driver.live_rows("q") == []
    assert CoreLock(store._context, SCHEDULER_LOCK).holder() == LockInfo("other", START + 100)


def test_a_tick_takes_the_leadership_lock(store: CoreStore) -> None:
    store.tick_schedules("w")
    holder = CoreLock(store._context, SCHEDULER_LOCK).holder()
    assert holder == LockInfo("w", START + SCHEDULER_LEASE_S)


def test_a_tick_renews_the_callers_own_lock(store: CoreStore, clock: FakeClock) -> None:
    store.tick_schedules("w")
    clock.advance(20)
    store.tick_schedules("w")
    holder = CoreLock(store._context, SCHEDULER_LOCK).holder()
    assert holder == LockInfo("w", START + 20 + SCHEDULER_LEASE_S)


def test_tick_refuses_a_malformed_worker_id(store: CoreStore, driver: FakeDriver) -> None:
    with pytest.raises(InvalidName):
        store.tick_schedules("")
    assert driver.calls == []


# -- run_schedules ------------------------------------------------------------------


def test_run_schedules_fires_successive_boundaries_until_stopped(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    stop = StopToken()
    on_fires(driver, {3: stop.stop})
    lead_in_background(store, stop).join()
    fired_at = [row["created_at"] for row in driver.live_rows("q")]
    assert fired_at == [START + 10, START + 20, START + 30]


def test_run_schedules_releases_the_lock_when_stopped(store: CoreStore, driver: FakeDriver) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    stop = StopToken()
    on_fires(driver, {1: stop.stop})
    lead_in_background(store, stop).join()
    assert CoreLock(store._context, SCHEDULER_LOCK).holder() is None
    assert [call.args[1] for call in driver.calls_named("lock_release")] == ["leader"]


def test_run_schedules_returns_when_stopped_from_another_thread(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    stop = StopToken()
    fired_twice = threading.Event()
    on_fires(driver, {2: fired_twice.set})
    leading = lead_in_background(store, stop)
    assert fired_twice.wait(SAFETY_NET_S)
    stop.stop()
    leading.join()
    assert len(driver.live_rows("q")) >= 2
    assert CoreLock(store._context, SCHEDULER_LOCK).holder() is None


def test_run_schedules_without_a_worker_id_leads_under_a_generated_one(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    stop = StopToken()
    holders: list[LockInfo | None] = []

    def note_holder_and_stop() -> None:
        holders.append(CoreLock(store._context, SCHEDULER_LOCK).holder())
        stop.stop()

    on_fires(driver, {1: note_holder_and_stop})
    lead_in_background(store, stop, worker_id=None).join()
    (holder,) = holders
    assert holder is not None
    assert f":{os.getpid()}:" in holder.owner


def test_run_schedules_with_a_set_stop_returns_without_leading(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    stop = StopToken()
    stop.stop()
    lead_in_background(store, stop).join()
    assert driver.calls_named("lock_acquire") == []
    assert driver.live_rows("q") == []


def test_run_schedules_raises_leadership_lost_when_the_lock_is_taken(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    stop = StopToken()

    def steal() -> None:
        driver.hold_lock(SCHEDULER_LOCK, "thief", START + 1000)

    # The stop at the third fire only bounds a leader that ignores the loss.
    on_fires(driver, {1: steal, 3: stop.stop})
    with pytest.raises(LeadershipLost):
        lead_in_background(store, stop).join()
    assert len(driver.live_rows("q")) == 1
    assert CoreLock(store._context, SCHEDULER_LOCK).holder() == LockInfo("thief", START + 1000)


def test_run_schedules_waits_while_another_owner_leads_then_takes_over(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.schedule("s", "@every 10s", "q", 1)
    lapses_at = START + 25
    driver.hold_lock(SCHEDULER_LOCK, "other", lapses_at)
    stop = StopToken()
    on_fires(driver, {1: stop.stop})
    lead_in_background(store, stop).join()
    attempts = [call.args[2] for call in driver.calls_named("lock_acquire")]
    assert min(attempts) < lapses_at  # it tried while the other owner led
    fired_at = [row["created_at"] for row in driver.live_rows("q")]
    assert fired_at
    assert min(fired_at) >= lapses_at


def test_run_schedules_refuses_a_stop_that_is_not_a_stop_token(
    store: CoreStore, driver: FakeDriver
) -> None:
    with pytest.raises(InvalidOptions, match="stop"):
        store.run_schedules(threading.Event())  # type: ignore[arg-type]
    assert driver.calls == []


# -- without the profile --------------------------------------------------------------


@pytest.mark.parametrize(
    "use",
    [
        lambda store: store.schedule("s", "@every 1s", "q", 1),
        lambda store: store.unschedule("s"),
        lambda store: store.get_schedule("s"),
        lambda store: store.schedules(),
        lambda store: store.tick_schedules("w"),
        lambda store: store.run_schedules(StopToken()),
    ],
    ids=["schedule", "unschedule", "get_schedule", "schedules", "tick", "run"],
)
def test_an_engine_without_the_scheduler_profile_raises_not_implemented(
    clock: FakeClock, use: Callable[[CoreStore], object]
) -> None:
    plain = FakeDriver()
    with CoreStore(plain, clock=clock) as store, pytest.raises(ProfileUnavailable):
        use(store)
    assert plain.calls == []
