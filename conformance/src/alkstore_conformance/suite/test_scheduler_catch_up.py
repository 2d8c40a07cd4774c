"""§5.4 (contract 1.2, the cron profile): what a tick does with missed boundaries.

``catch_up="all"`` (the default, checked with ``@every`` by SCHED-CATCH-UP-CAP)
fires every missed boundary, at most ``CATCH_UP_CAP`` per tick; ``"latest"`` fires
only the most recent one; ``"none"`` only those that came due less than
``MISFIRE_GRACE_S`` ago. Every boundary not fired counts in ``TickResult.skipped``,
and the schedule moves on to its first boundary after now.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from alkstore import CATCH_UP_CAP, MISFIRE_GRACE_S, ScheduleOpts, Store, TickResult
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.cron import TICKER
from alkstore_conformance.helpers.profiles import drain, payload_counts, payload_key
from alkstore_conformance.model import cron as oracle

pytestmark = pytest.mark.requires("scheduler")

POLICY = "SCHED-CATCH-UP-POLICY"


def _at(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def _fired_jobs(store: Store, queue: str) -> list[int]:
    """The created_at of every job the schedule fired into ``queue``."""
    return sorted(h.job.created_at for h in drain(store.queue(queue)))


@pytest.mark.property(POLICY)
@pytest.mark.requires("cron")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(missed=st.integers(1, 3 * CATCH_UP_CAP), interval=st.integers(1, 600), into=st.floats(0, 1))
@example(missed=1, interval=10, into=0.0)
@example(missed=2, interval=10, into=0.0)
def test_latest_fires_only_the_most_recent_due_boundary(
    clocked_store: Store, clock: FakeClock, missed: int, interval: int, into: float
) -> None:
    name = unique_name("latest")
    opts = ScheduleOpts(catch_up="latest")
    stored = clocked_store.schedule(name, f"@every {interval}s", name, {"n": 1}, opts)
    try:
        latest = stored.next_fire_at + (missed - 1) * interval
        clock.set(latest + int(into * (interval - 1)))
        assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=missed - 1)
        after = clocked_store.get_schedule(name)
        assert after is not None
        assert after.next_fire_at == latest + interval
        assert _fired_jobs(clocked_store, name) == [int(clock.now())]
        assert clocked_store.tick_schedules(TICKER) == TickResult(fired=0, skipped=0)
    finally:
        clocked_store.unschedule(name)


@pytest.mark.property(POLICY)
@pytest.mark.requires("cron")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(late=st.integers(0, 3 * MISFIRE_GRACE_S), interval=st.integers(1, 90))
@example(late=MISFIRE_GRACE_S - 1, interval=90)
@example(late=MISFIRE_GRACE_S, interval=90)
@example(late=10_000, interval=1)
def test_none_fires_only_boundaries_due_less_than_the_grace_ago(
    clocked_store: Store, clock: FakeClock, late: int, interval: int
) -> None:
    name = unique_name("none")
    opts = ScheduleOpts(catch_up="none")
    stored = clocked_store.schedule(name, f"@every {interval}s", name, {"n": 1}, opts)
    try:
        now = stored.next_fire_at + late
        clock.set(now)
        due = range(stored.next_fire_at, now + 1, interval)
        fresh = [b for b in due if now - b < MISFIRE_GRACE_S]
        result = clocked_store.tick_schedules(TICKER)
        assert result == TickResult(fired=len(fresh), skipped=len(due) - len(fresh))
        after = clocked_store.get_schedule(name)
        assert after is not None
        assert after.next_fire_at == due[-1] + interval
        assert _fired_jobs(clocked_store, name) == [now] * len(fresh)
    finally:
        clocked_store.unschedule(name)


@pytest.mark.property(POLICY)
@pytest.mark.requires("cron")
def test_none_still_fires_a_boundary_a_leader_handover_delayed(
    clocked_store: Store, clock: FakeClock
) -> None:
    # The leader died just before a boundary; its lease ran out (30 s) and the next
    # leader's first tick came a few seconds later.
    stored = clocked_store.schedule("s", "0 * * * *", "q", {}, ScheduleOpts(catch_up="none"))
    clock.set(stored.next_fire_at + 35)
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=0)


@pytest.mark.property(POLICY)
@pytest.mark.requires("cron")
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Australia/Lord_Howe"])
def test_latest_after_a_cron_outage_fires_once_and_counts_the_rest(
    clocked_store: Store, clock: FakeClock, zone: str
) -> None:
    spec = "*/5 * * * *"
    clock.set(_at("2026-03-28T20:02:00Z"))
    stored = clocked_store.schedule(
        "s", spec, "q", {}, ScheduleOpts(timezone=zone, catch_up="latest")
    )
    now = _at("2026-03-29T05:33:20Z")  # across Berlin's spring-forward
    clock.set(now)
    due = [stored.next_fire_at, *oracle.boundaries(spec, zone, stored.next_fire_at, now)]
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=len(due) - 1)
    after = clocked_store.get_schedule("s")
    assert after is not None
    assert after.next_fire_at == oracle.next_fire(spec, zone, now)


@pytest.mark.property(POLICY)
@pytest.mark.requires("cron")
def test_all_replays_a_cron_outage_up_to_the_cap(clocked_store: Store, clock: FakeClock) -> None:
    spec, zone = "* * * * *", "Europe/Berlin"
    clock.set(_at("2026-10-25T00:00:30+02:00"))
    stored = clocked_store.schedule("s", spec, "q", {"from": "s"}, ScheduleOpts(timezone=zone))
    now = stored.next_fire_at + 100 * 60 + 30  # 101 boundaries, across the repeated hour
    clock.set(now)
    assert clocked_store.tick_schedules(TICKER) == TickResult(
        fired=CATCH_UP_CAP, skipped=101 - CATCH_UP_CAP
    )
    assert payload_counts(drain(clocked_store.queue("q"))) == {payload_key({"from": "s"}): 64}
    after = clocked_store.get_schedule("s")
    assert after is not None
    assert after.next_fire_at == oracle.next_fire(spec, zone, now)


YEAR_S = 365 * 86_400


@pytest.mark.property(POLICY)
@pytest.mark.requires("cron")
@pytest.mark.parametrize(
    ("spec", "zone", "boundaries"),
    [
        # Elapsed time: every minute of the year, whatever the clocks did.
        ("* * * * *", "Europe/Berlin", 525_600),
        ("*/15 * * * *", "Asia/Kolkata", 35_040),
        # The wall clock: 02:30 once a day, on the days it does not exist too.
        ("30 2 * * *", "Europe/Berlin", 365),
        ("30 2 * * *", "Australia/Lord_Howe", 365),
    ],
)
def test_a_year_long_outage_is_counted_exactly(
    clocked_store: Store, clock: FakeClock, spec: str, zone: str, boundaries: int
) -> None:
    clock.set(_at("2025-06-01T12:00:30Z"))
    stored = clocked_store.schedule(
        "s", spec, "q", {}, ScheduleOpts(timezone=zone, catch_up="latest")
    )
    clock.set(stored.next_fire_at + YEAR_S - 1)  # a year of boundaries, the first included
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=boundaries - 1)


@pytest.mark.property(POLICY)
@pytest.mark.requires("cron")
def test_a_policy_change_keeps_the_boundary_and_applies_at_the_next_tick(
    clocked_store: Store, clock: FakeClock
) -> None:
    stored = clocked_store.schedule("s", "@every 10s", "q", {})
    clock.set(stored.next_fire_at + 95)  # 10 boundaries due
    kept = clocked_store.schedule("s", "@every 10s", "q", {}, ScheduleOpts(catch_up="latest"))
    assert kept.next_fire_at == stored.next_fire_at
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=9)
