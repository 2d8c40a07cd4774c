"""§5: ``run_schedules`` -- lead, fire, stop cleanly, and give up a stolen lead.

The leader loop runs in a thread on a ``SteppedClock``: each of its sleeps
parks until the test wakes it, so the test decides what happens between two
turns of the loop (time moves, the lease lapses, another worker takes the
lock, the stop token is set) without racing it. Whether the leadership lock
is held is observed the public way: another worker's ``tick_schedules``
fires a due boundary only when no one else holds the lock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from alkstore import SCHEDULER_LEASE_S, LeadershipLost, StopToken, Store, TickResult
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.fixtures import FAKE_CLOCK_START, StoreFactory
from alkstore_conformance.helpers.profiles import Outcome, SteppedClock, drain, in_thread

pytestmark = pytest.mark.requires("scheduler")

GENEROUS_S = 60.0
SETTLE_S = 0.2
T0 = FAKE_CLOCK_START
MAX_TURNS = 1000
"""Bound on the leader's sleeps while the test walks time forward."""


@pytest.fixture
def stepped() -> SteppedClock:
    return SteppedClock(T0)


@pytest.fixture
def leader_store(open_store: StoreFactory, stepped: SteppedClock) -> Store:
    return open_store(clock=stepped)


@pytest.fixture
def other_store(open_store: StoreFactory, stepped: SteppedClock) -> Store:
    """Another worker on the same store and the same (stepped) time."""
    return open_store(clock=stepped)


@pytest.fixture
def stop(stepped: SteppedClock) -> Iterator[StopToken]:
    token = StopToken()
    yield token
    # Whatever the test did, the leader thread ends: stopped, and never parked again.
    token.stop()
    stepped.release()


def _lead(store: Store, stop: StopToken, worker_id: str) -> Outcome[None]:
    return in_thread(lambda: store.run_schedules(stop, worker_id), name=f"leader-{worker_id}")


def _parked(stepped: SteppedClock) -> None:
    assert stepped.wait_parked(GENEROUS_S), "run_schedules never slept"


# -- SCHED-RUN-STOPS -----------------------------------------------------------------


@pytest.mark.property("SCHED-RUN-STOPS")
def test_the_leader_fires_each_boundary_as_time_reaches_it(
    leader_store: Store, stepped: SteppedClock, stop: StopToken
) -> None:
    stored = leader_store.schedule("every-20s", "@every 20s", "q", {"n": 1})
    leader = _lead(leader_store, stop, "leader")
    queue = leader_store.queue("q")
    for boundary in range(1, 4):
        due = stored.next_fire_at + (boundary - 1) * 20
        for _ in range(MAX_TURNS):
            _parked(stepped)
            if stepped.now() >= due:
                break
            stepped.wake(advance=True)  # the sleep lasts as long as the leader asked
        assert stepped.now() >= due, "the leader's sleeps never reached the boundary"
        assert len(drain(queue)) == 1, f"boundary {boundary} fired once, when due"
        current = leader_store.get_schedule("every-20s")
        assert current is not None
        assert current.next_fire_at == due + 20
    stop.stop()
    stepped.wake(advance=False)
    assert leader.join(GENEROUS_S) is None


@pytest.mark.property("SCHED-RUN-STOPS")
def test_stop_while_leading_returns_none_and_releases_the_lock(
    leader_store: Store, other_store: Store, stepped: SteppedClock, stop: StopToken
) -> None:
    stored = leader_store.schedule("s", "@every 20s", "q", {})
    leader = _lead(leader_store, stop, "leader")
    _parked(stepped)  # leading: it ticked, and sleeps toward the boundary
    stop.stop()
    stepped.wake(advance=False)
    assert leader.join(GENEROUS_S) is None
    # Inside the lease the leader took, yet another worker may lead at once: released.
    stepped.set(stored.next_fire_at)
    assert stepped.now() < T0 + SCHEDULER_LEASE_S
    assert other_store.tick_schedules("next-leader") == TickResult(fired=1, skipped=0)


@pytest.mark.property("SCHED-RUN-STOPS")
def test_stop_set_before_the_call_returns_none_and_holds_no_lock(
    leader_store: Store, other_store: Store, stepped: SteppedClock, stop: StopToken
) -> None:
    stored = leader_store.schedule("s", "@every 20s", "q", {})
    stop.stop()
    assert _lead(leader_store, stop, "leader").join(GENEROUS_S) is None
    stepped.set(stored.next_fire_at)
    assert other_store.tick_schedules("next-leader") == TickResult(fired=1, skipped=0)


@pytest.mark.property("SCHED-RUN-STOPS")
def test_stop_while_waiting_for_leadership_returns_none(
    leader_store: Store, other_store: Store, stepped: SteppedClock, stop: StopToken
) -> None:
    stored = leader_store.schedule("s", "@every 20s", "q", {})
    assert other_store.tick_schedules("incumbent") == TickResult(fired=0, skipped=0)  # leads
    waiting = _lead(leader_store, stop, "hopeful")
    _parked(stepped)  # waiting for the incumbent's lease
    stop.stop()
    stepped.wake(advance=False)
    assert waiting.join(GENEROUS_S) is None
    stepped.set(stored.next_fire_at)  # the incumbent's lease still runs
    assert leader_store.tick_schedules("third") == TickResult(fired=0, skipped=0)
    assert other_store.tick_schedules("incumbent") == TickResult(fired=1, skipped=0)


@pytest.mark.property("SCHED-RUN-STOPS")
def test_stop_wakes_a_leader_waiting_on_the_system_clock(open_store: StoreFactory) -> None:
    incumbent = open_store()
    hopeful = open_store()
    assert incumbent.tick_schedules("incumbent") == TickResult(fired=0, skipped=0)
    token = StopToken()
    waiting = _lead(hopeful, token, "hopeful")
    try:
        time.sleep(SETTLE_S)
        assert not waiting.done(), "run_schedules waits while another worker leads"
        token.stop()
        assert waiting.join(GENEROUS_S) is None
    finally:
        token.stop()


# -- SCHED-LEADERSHIP-LOST -----------------------------------------------------------


@pytest.mark.property("SCHED-LEADERSHIP-LOST")
def test_a_leader_whose_lock_was_taken_raises_before_ticking(
    leader_store: Store, other_store: Store, stepped: SteppedClock, stop: StopToken
) -> None:
    stored = leader_store.schedule("s", "@every 60s", "q", {"n": 1})
    leader = _lead(leader_store, stop, "leader")
    _parked(stepped)  # it ticked at T0 (nothing due) and sleeps
    stepped.set(T0 + SCHEDULER_LEASE_S + 1)  # its lease lapsed while it slept...
    assert other_store.tick_schedules("usurper") == TickResult(fired=0, skipped=0)  # ...taken
    stepped.set(stored.next_fire_at)  # a boundary is due, inside the usurper's lease
    stepped.wake(advance=False)
    with pytest.raises(LeadershipLost):
        leader.join(GENEROUS_S)
    assert drain(leader_store.queue("q")) == [], "the deposed leader fired nothing"
    current = leader_store.get_schedule("s")
    assert current is not None
    assert current.next_fire_at == stored.next_fire_at
    assert other_store.tick_schedules("usurper") == TickResult(fired=1, skipped=0)


@pytest.mark.property("SCHED-LEADERSHIP-LOST")
def test_a_leader_whose_lease_lapsed_unnoticed_raises_before_ticking(
    leader_store: Store, stepped: SteppedClock, stop: StopToken
) -> None:
    stored = leader_store.schedule("s", "@every 60s", "q", {"n": 1})
    leader = _lead(leader_store, stop, "leader")
    _parked(stepped)
    stepped.set(stored.next_fire_at)  # past its lease: expiry is silent until the renew
    stepped.wake(advance=False)
    with pytest.raises(LeadershipLost):
        leader.join(GENEROUS_S)
    assert drain(leader_store.queue("q")) == []


@pytest.mark.property("SCHED-LEADERSHIP-LOST")
def test_a_tick_under_another_live_leader_fires_nothing(
    clocked_store: Store, open_store: StoreFactory, clock: FakeClock
) -> None:
    stored = clocked_store.schedule("s", "@every 10s", "q", {})
    assert clocked_store.tick_schedules("leader") == TickResult(fired=0, skipped=0)
    clock.set(stored.next_fire_at)
    rival = open_store(clock=clock)
    assert rival.tick_schedules("rival") == TickResult(fired=0, skipped=0)
    assert drain(clocked_store.queue("q")) == []
    assert clocked_store.tick_schedules("leader") == TickResult(fired=1, skipped=0)
