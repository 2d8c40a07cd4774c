"""§5 (contract 1.2, the cron profile): cron specs in their time zone.

Every expected boundary comes from the kit's oracle (``model.cron``), a brute-force
reading of the contract's words that shares no code with the contract's cadence.
Time is the test's ``FakeClock``: a schedule's boundaries are whole epoch seconds
of the store's clock, so the kit moves time instead of waiting for it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings

from alkstore import ScheduleOpts, Store, TickResult
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.cron import TICKER, cron_specs, fire_through, instants, zones
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profiles import drain
from alkstore_conformance.model import cron as oracle

pytestmark = pytest.mark.requires("scheduler")


def _at(text: str) -> int:
    """An ISO instant with its offset (or ``Z``) as epoch seconds."""
    return int(datetime.fromisoformat(text).timestamp())


def _utc(instant: int) -> str:
    return datetime.fromtimestamp(instant, UTC).strftime("%Y-%m-%d %H:%M")


# -- SCHED-CRON-FORMS ----------------------------------------------------------------

MONDAY = _at("2026-03-02T00:00:00Z")  # March 2026 starts on a Sunday
FORMS = {
    # spec: its first boundary after MONDAY, in UTC (read off a calendar)
    "*/15 * * * *": "2026-03-02 00:15",
    "0 9 * * MON-FRI": "2026-03-02 09:00",
    "0 9 * * mon-fri": "2026-03-02 09:00",
    "0 9 * * Sat,sun": "2026-03-07 09:00",
    "30 8 1,15 * *": "2026-03-15 08:30",
    "0 0 * * 7": "2026-03-08 00:00",  # 7 is Sunday, as 0 is
    "0 0 * * 0": "2026-03-08 00:00",
    "0 12 * JAN,jul *": "2026-07-01 12:00",
    "5-55/10 */3 * * *": "2026-03-02 00:05",
    "0 0 13 * FRI": "2026-03-06 00:00",  # both days restricted: a day matching either
    "0 0 */2 * 5": "2026-03-13 00:00",  # day-of-month starts with *: a day matching both
    "0 0 29 2 *": "2028-02-29 00:00",
    "0 0 1-7 * MON": "2026-03-03 00:00",  # the 1st to the 7th, or any Monday
    "0 0 8-14 * MON": "2026-03-08 00:00",
    "0  9\t* * *": "2026-03-02 09:00",  # fields apart by any run of spaces and tabs
    "@hourly": "2026-03-02 01:00",
    "@daily": "2026-03-03 00:00",
    "@midnight": "2026-03-03 00:00",
    "@weekly": "2026-03-08 00:00",
    "@monthly": "2026-04-01 00:00",
    "@yearly": "2027-01-01 00:00",
    "@annually": "2027-01-01 00:00",
}


@pytest.mark.property("SCHED-CRON-FORMS")
@pytest.mark.requires("cron")
@pytest.mark.parametrize(("spec", "first"), sorted(FORMS.items()))
def test_each_form_of_the_grammar_is_accepted_and_first_fires_where_the_calendar_says(
    clocked_store: Store, clock: FakeClock, spec: str, first: str
) -> None:
    clock.set(MONDAY)
    stored = clocked_store.schedule("form", spec, "q", {"spec": spec})
    assert (stored.spec, stored.interval_s, stored.timezone) == (spec, None, "UTC")
    assert _utc(stored.next_fire_at) == first
    assert stored.next_fire_at == oracle.next_fire(spec, "UTC", MONDAY)
    assert clocked_store.get_schedule("form") == stored


@pytest.mark.property("SCHED-CRON-FORMS")
@pytest.mark.requires("cron")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=cron_specs)
def test_every_spec_the_grammar_generates_is_stored_as_given(
    clocked_store: Store, spec: str
) -> None:
    name = unique_name("form")
    stored = clocked_store.schedule(name, spec, "q", {})
    try:
        assert clocked_store.get_schedule(name) == stored
        assert (stored.spec, stored.interval_s) == (spec, None)
    finally:
        clocked_store.unschedule(name)


# -- SCHED-CRON-NEXT-FIRE ------------------------------------------------------------


@pytest.mark.property("SCHED-CRON-NEXT-FIRE")
@pytest.mark.requires("cron")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=cron_specs, zone=zones, now=instants)
@example(spec="30 2 * * *", zone="Europe/Berlin", now=_at("2026-03-28T12:00:00+01:00"))
@example(spec="30 2 * * *", zone="Europe/Berlin", now=_at("2026-10-25T02:10:00+01:00"))
@example(spec="*/15 * * * *", zone="Australia/Lord_Howe", now=_at("2026-10-04T01:50:00+10:30"))
@example(spec="0 * * * *", zone="Pacific/Chatham", now=_at("2026-09-27T02:30:00+12:45"))
@example(spec="*/20 0 * * *", zone="America/Santiago", now=_at("2026-09-05T23:30:00-04:00"))
def test_the_boundaries_of_a_cron_schedule_are_the_oracles(
    clocked_store: Store, clock: FakeClock, spec: str, zone: str, now: int
) -> None:
    name = unique_name("next")
    clock.set(now)
    stored = clocked_store.schedule(name, spec, name, {}, ScheduleOpts(timezone=zone))
    try:
        first = oracle.next_fire(spec, zone, now)
        assert stored.next_fire_at == first
        clock.set(first)
        assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=0)
        after = clocked_store.get_schedule(name)
        assert after is not None
        assert after.next_fire_at == oracle.next_fire(spec, zone, first)
    finally:
        clocked_store.unschedule(name)


# -- SCHED-CRON-IN-ZONE --------------------------------------------------------------

IN_ZONE = {
    # (spec, zone, from, until): the fires, in UTC
    "berlin-spring": (
        "0 9 * * *",
        "Europe/Berlin",
        "2026-03-27T00:00:00Z",
        "2026-03-31T12:00:00Z",
        [
            *("2026-03-27 08:00", "2026-03-28 08:00"),
            *("2026-03-29 07:00", "2026-03-30 07:00", "2026-03-31 07:00"),
        ],
    ),
    "berlin-autumn": (
        "0 9 * * *",
        "Europe/Berlin",
        "2026-10-23T12:00:00Z",
        "2026-10-27T12:00:00Z",
        ["2026-10-24 07:00", "2026-10-25 08:00", "2026-10-26 08:00", "2026-10-27 08:00"],
    ),
    "new-york-weekdays": (
        "30 17 * * MON-FRI",
        "America/New_York",
        "2026-03-05T00:00:00Z",
        "2026-03-11T00:00:00Z",
        ["2026-03-05 22:30", "2026-03-06 22:30", "2026-03-09 21:30", "2026-03-10 21:30"],
    ),
    "sydney-autumn": (
        "0 6 * * *",
        "Australia/Sydney",
        "2026-04-03T00:00:00Z",
        "2026-04-07T00:00:00Z",
        ["2026-04-03 19:00", "2026-04-04 20:00", "2026-04-05 20:00", "2026-04-06 20:00"],
    ),
    "kolkata": (
        "0 9 * * *",
        "Asia/Kolkata",
        "2026-06-01T00:00:00Z",
        "2026-06-03T12:00:00Z",
        ["2026-06-01 03:30", "2026-06-02 03:30", "2026-06-03 03:30"],
    ),
}


@pytest.mark.property("SCHED-CRON-IN-ZONE")
@pytest.mark.requires("cron")
@pytest.mark.parametrize("case", sorted(IN_ZONE))
def test_a_cron_schedule_fires_on_its_zones_wall_clock(
    clocked_store: Store, clock: FakeClock, case: str
) -> None:
    spec, zone, start, until, expected = IN_ZONE[case]
    clock.set(_at(start))
    clocked_store.schedule("local", spec, "q", {"case": case}, ScheduleOpts(timezone=zone))
    fired = fire_through(clocked_store, clock, ["local"], _at(until))
    assert [_utc(at) for at in fired["local"]] == expected
    assert [h.job.created_at for h in drain(clocked_store.queue("q"))] == fired["local"]


@pytest.mark.property("SCHED-CRON-IN-ZONE")
@pytest.mark.requires("cron")
def test_one_spec_in_two_zones_fires_at_two_instants(
    clocked_store: Store, clock: FakeClock
) -> None:
    clock.set(_at("2026-07-01T00:00:00Z"))
    berlin = clocked_store.schedule(
        "berlin", "0 9 * * *", "q", {}, ScheduleOpts(timezone="Europe/Berlin")
    )
    tokyo = clocked_store.schedule(
        "tokyo", "0 9 * * *", "q", {}, ScheduleOpts(timezone="Asia/Tokyo")
    )
    assert _utc(berlin.next_fire_at) == "2026-07-01 07:00"
    assert _utc(tokyo.next_fire_at) == "2026-07-02 00:00"


# -- SCHED-CRON-UPSERT ---------------------------------------------------------------


@pytest.mark.property("SCHED-CRON-UPSERT")
@pytest.mark.requires("cron")
def test_the_zone_and_policy_round_trip_through_every_read_and_a_reopen(
    open_store: StoreFactory, clock: FakeClock
) -> None:
    first = open_store(clock=clock)
    opts = ScheduleOpts(priority=3, timezone="America/Santiago", catch_up="latest")
    stored = first.schedule("digest", "0 9 * * MON-FRI", "mail", {"kind": "digest"}, opts)
    assert (stored.opts, stored.timezone, stored.catch_up) == (opts, "America/Santiago", "latest")
    assert first.get_schedule("digest") == stored
    assert first.schedules() == [stored]
    first.close()
    assert open_store(clock=clock).get_schedule("digest") == stored


@pytest.mark.property("SCHED-CRON-UPSERT")
@pytest.mark.requires("cron")
def test_a_changed_zone_gives_a_fresh_first_boundary(
    clocked_store: Store, clock: FakeClock
) -> None:
    clock.set(_at("2026-05-04T10:00:00Z"))
    clocked_store.schedule("s", "0 12 * * *", "q", {})
    clock.advance(3600)
    moved = clocked_store.schedule("s", "0 12 * * *", "q", {}, ScheduleOpts(timezone="Asia/Tokyo"))
    assert moved.next_fire_at == oracle.next_fire("0 12 * * *", "Asia/Tokyo", int(clock.now()))
    assert _utc(moved.next_fire_at) == "2026-05-05 03:00"


@pytest.mark.property("SCHED-CRON-UPSERT")
@pytest.mark.requires("cron")
def test_a_changed_cron_spec_gives_a_fresh_first_boundary(
    clocked_store: Store, clock: FakeClock
) -> None:
    zone = ScheduleOpts(timezone="Europe/London")
    clock.set(_at("2026-05-04T10:00:00Z"))
    clocked_store.schedule("s", "0 12 * * *", "q", {}, zone)
    clock.advance(60)
    moved = clocked_store.schedule("s", "0 12 * * 1", "q", {}, zone)
    assert moved.next_fire_at == oracle.next_fire("0 12 * * 1", "Europe/London", int(clock.now()))


@pytest.mark.property("SCHED-CRON-UPSERT")
@pytest.mark.requires("cron")
def test_changing_only_the_other_opts_keeps_the_boundary(
    clocked_store: Store, clock: FakeClock
) -> None:
    clock.set(_at("2026-05-04T10:00:00Z"))
    berlin = ScheduleOpts(timezone="Europe/Berlin")
    first = clocked_store.schedule("s", "*/30 * * * *", "q", {"v": 1}, berlin)
    clock.advance(600)
    again = ScheduleOpts(priority=5, expires=60, timezone="Europe/Berlin", catch_up="none")
    kept = clocked_store.schedule("s", "*/30 * * * *", "other", {"v": 2}, again)
    assert kept.next_fire_at == first.next_fire_at
    assert (kept.queue, kept.payload, kept.opts) == ("other", {"v": 2}, again)


@pytest.mark.property("SCHED-CRON-UPSERT")
@pytest.mark.requires("cron")
def test_an_every_spec_stores_its_zone_and_runs_on_elapsed_time(
    clocked_store: Store, clock: FakeClock
) -> None:
    # 23:00 the night before Berlin's spring-forward: two hours of elapsed time
    # later, Berlin's clocks read 02:00 + 1 h = 03:00 CEST.
    clock.set(_at("2026-03-28T23:00:00+01:00"))
    stored = clocked_store.schedule(
        "every", "@every 2h", "q", {}, ScheduleOpts(timezone="Europe/Berlin")
    )
    assert (stored.timezone, stored.interval_s) == ("Europe/Berlin", 7200)
    assert stored.next_fire_at == int(clock.now()) + 7200
    clock.set(stored.next_fire_at)
    assert clocked_store.tick_schedules(TICKER).fired == 1
    after = clocked_store.get_schedule("every")
    assert after is not None
    assert after.next_fire_at == stored.next_fire_at + 7200
