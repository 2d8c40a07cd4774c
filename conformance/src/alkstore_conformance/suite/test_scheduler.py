"""§5: the scheduler collapsed into queues -- registry, spec grammar, boundaries, fires.

Every test here runs on the test's ``FakeClock``: a schedule's boundaries are
whole epoch seconds of the store's clock, so the kit moves time instead of
waiting for it. Fires are counted by draining the target queue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from alkstore import (
    CATCH_UP_CAP,
    DEFAULT_QUEUE_OPTS,
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    JobState,
    PayloadError,
    QueueOpts,
    ReservedName,
    Schedule,
    ScheduleOpts,
    Store,
    TickResult,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import (
    MALFORMED_IDS,
    MALFORMED_NAMES,
    RESERVED_NAMES,
    unique_name,
)
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profiles import drain, payload_counts, payload_key

pytestmark = pytest.mark.requires("scheduler")

TICKER = "ticker"
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def _now(clock: FakeClock) -> int:
    return int(clock.now())


# -- SCHED-UPSERT-BOUNDARIES ---------------------------------------------------------


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_a_new_schedule_first_fires_one_interval_from_now(
    clocked_store: Store, clock: FakeClock
) -> None:
    stored = clocked_store.schedule("nightly", "@every 2h", "maint", {"task": "sweep"})
    assert stored == Schedule(
        name="nightly",
        spec="@every 2h",
        queue="maint",
        payload={"task": "sweep"},
        opts=ScheduleOpts(),
        interval_s=7200,
        next_fire_at=_now(clock) + 7200,
    )
    assert clocked_store.get_schedule("nightly") == stored


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_reregistering_an_unchanged_spec_keeps_the_boundary(
    clocked_store: Store, clock: FakeClock
) -> None:
    first = clocked_store.schedule("report", "@every 60s", "reports", {"v": 1})
    clock.advance(45)
    opts = ScheduleOpts(priority=4, max_attempts=7, expires=30)
    again = clocked_store.schedule("report", "@every 60s", "elsewhere", {"v": 2}, opts)
    assert again.next_fire_at == first.next_fire_at
    assert (again.queue, again.payload, again.opts) == ("elsewhere", {"v": 2}, opts)
    assert clocked_store.get_schedule("report") == again


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_a_changed_spec_restarts_its_boundary_from_now(
    clocked_store: Store, clock: FakeClock
) -> None:
    clocked_store.schedule("report", "@every 60s", "reports", {"v": 1})
    clock.advance(45)
    changed = clocked_store.schedule("report", "@every 2m", "reports", {"v": 1})
    assert (changed.interval_s, changed.next_fire_at) == (120, _now(clock) + 120)
    assert clocked_store.get_schedule("report") == changed


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_schedule_upserts_by_name(clocked_store: Store) -> None:
    clocked_store.schedule("one", "@every 5m", "q", {"v": 1})
    clocked_store.schedule("one", "@every 5m", "q", {"v": 2})
    clocked_store.schedule("one", "@every 1d", "q", {"v": 3})
    (only,) = clocked_store.schedules()
    assert (only.name, only.spec, only.payload) == ("one", "@every 1d", {"v": 3})


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_schedules_lists_every_schedule(clocked_store: Store) -> None:
    registered = [
        clocked_store.schedule("b", "@every 1s", "q1", [1]),
        clocked_store.schedule("a", "@every 3h", "q2", None),
        clocked_store.schedule("c", "@every 7d", "q1", {"deep": [1, {"x": "y"}]}),
    ]
    assert sorted(clocked_store.schedules(), key=lambda s: s.name) == sorted(
        registered, key=lambda s: s.name
    )


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_get_schedule_of_an_unknown_name_is_none(clocked_store: Store) -> None:
    assert clocked_store.get_schedule("never") is None
    assert clocked_store.schedules() == []


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_unschedule_removes_the_schedule_and_its_future_fires(
    clocked_store: Store, clock: FakeClock
) -> None:
    clocked_store.schedule("gone", "@every 10s", "q", {"v": 1})
    clocked_store.schedule("kept", "@every 10s", "q", {"v": 2})
    assert clocked_store.unschedule("gone") is True
    assert clocked_store.get_schedule("gone") is None
    assert [s.name for s in clocked_store.schedules()] == ["kept"]
    clock.advance(10)
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=0)
    assert [h.payload for h in drain(clocked_store.queue("q"))] == [{"v": 2}]


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_unschedule_of_an_absent_schedule_is_false(clocked_store: Store) -> None:
    assert clocked_store.unschedule("never") is False
    clocked_store.schedule("once", "@every 1m", "q", {})
    assert clocked_store.unschedule("once") is True
    assert clocked_store.unschedule("once") is False


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_a_schedule_registered_again_after_unschedule_starts_afresh(
    clocked_store: Store, clock: FakeClock
) -> None:
    clocked_store.schedule("again", "@every 60s", "q", {})
    clock.advance(45)
    assert clocked_store.unschedule("again") is True
    fresh = clocked_store.schedule("again", "@every 60s", "q", {})
    assert fresh.next_fire_at == _now(clock) + 60


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_schedules_survive_closing_and_reopening_the_store(
    open_store: StoreFactory, clock: FakeClock
) -> None:
    first = open_store(clock=clock)
    stored = first.schedule("durable", "@every 15m", "q", {"keep": True}, ScheduleOpts(priority=2))
    first.close()
    assert open_store(clock=clock).get_schedule("durable") == stored


@pytest.mark.property("SCHED-UPSERT-BOUNDARIES")
def test_a_boundary_fires_when_now_reaches_it_and_advances_by_one_interval(
    clocked_store: Store, clock: FakeClock
) -> None:
    stored = clocked_store.schedule("tick", "@every 30s", "q", {"n": 1})
    clock.set(stored.next_fire_at - 1)
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=0, skipped=0)
    clock.set(stored.next_fire_at)
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=0)
    after = clocked_store.get_schedule("tick")
    assert after is not None
    assert after.next_fire_at == stored.next_fire_at + 30
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=0, skipped=0)
    assert len(drain(clocked_store.queue("q"))) == 1


# -- SCHED-SPEC-GRAMMAR --------------------------------------------------------------

INVALID_SPECS: list[Any] = [
    # @every
    "@every 0s",
    "@every 0m",
    "@every -5s",
    "@every 1.5s",
    "@every 5",
    "@every s",
    "@every",
    "@every 5ms",
    "@every 5w",
    "@every 5y",
    "@every 5S",
    "@EVERY 5s",
    "@every 5 s",
    "@every  5s",
    "@every5s",
    " @every 5s",
    "@every 5s ",
    "every 5s",
    "@every 5s,10s",
    "@every 1h30m",
    # cron: out of range, reversed, step 0, a day no listed month has
    "60 * * * *",
    "* 24 * * *",
    "* * 0 * *",
    "* * 32 * *",
    "* * * 0 *",
    "* * * 13 *",
    "* * * * 8",
    "5-1 * * * *",
    "*/0 * * * *",
    "1-5/0 * * * *",
    "0 0 31 2 *",
    "0 0 30,31 2 *",
    "0 0 31 4,6,9,11 *",
    # cron: not the standard grammar
    "0 0 * * * *",  # six fields: no seconds field (nor a year)
    "0 0 * * * 2030",
    "* * * *",
    "*",
    "0 0 L * *",
    "0 0 LW * *",
    "0 0 15W * *",
    "0 0 * * 5L",
    "0 0 * * 1#2",
    "0 0 ? * *",
    "H * * * *",
    "5/15 * * * *",  # a step needs * or a range before it
    "0 0 * JANUARY *",
    "0 0 * * MONDAY",
    "0 JAN * * *",  # names only in month and day-of-week
    "0 0 * * SAT-SUN",  # reversed: SAT is 6, SUN 0
    "1,,2 * * * *",
    "1, * * * *",
    "-1 * * * *",
    "0 0 * * *\n",
    " 0 0 * * *",
    "0 0 * * * ",
    "@reboot",
    "@Daily",
    "@every 5s @daily",
    "",
    None,
    300,
]


@pytest.mark.property("SCHED-SPEC-GRAMMAR")
@pytest.mark.parametrize("spec", INVALID_SPECS, ids=repr)
def test_specs_outside_the_grammar_are_refused_with_nothing_stored(
    clocked_store: Store, spec: Any
) -> None:
    with pytest.raises(InvalidSpec) as raised:
        clocked_store.schedule("bad", spec, "q", {"v": 1})
    assert raised.value.spec == spec
    assert clocked_store.get_schedule("bad") is None
    assert clocked_store.schedules() == []


@pytest.mark.property("SCHED-SPEC-GRAMMAR")
def test_a_refused_spec_leaves_the_existing_schedule_unchanged(
    clocked_store: Store, clock: FakeClock
) -> None:
    stored = clocked_store.schedule("keep", "@every 10m", "q", {"v": 1})
    clock.advance(5)
    with pytest.raises(InvalidSpec):
        clocked_store.schedule("keep", "60 * * * *", "other", {"v": 2})
    assert clocked_store.schedules() == [stored]


@pytest.mark.property("SCHED-SPEC-GRAMMAR")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 100_000), unit=st.sampled_from(sorted(UNIT_SECONDS)))
def test_every_n_units_is_an_interval_of_n_times_the_unit(
    clocked_store: Store, clock: FakeClock, n: int, unit: str
) -> None:
    name = unique_name("grammar")
    spec = f"@every {n}{unit}"
    stored = clocked_store.schedule(name, spec, "q", {})
    try:
        interval = n * UNIT_SECONDS[unit]
        assert (stored.spec, stored.interval_s) == (spec, interval)
        assert stored.next_fire_at == _now(clock) + interval
    finally:
        clocked_store.unschedule(name)


FIELD_AT_FAULT = {
    "60 * * * *": "minute",
    "5-1 * * * *": "minute",
    "*/0 * * * *": "minute",
    "* 24 * * *": "hour",
    "0 JAN * * *": "hour",
    "* * 32 * *": "day-of-month",
    "0 0 L * *": "day-of-month",
    "0 0 31 2 *": "day-of-month",
    "* * * 13 *": "month",
    "0 0 * JANUARY *": "month",
    "* * * * 8": "day-of-week",
    "0 0 * * 1#2": "day-of-week",
    "0 0 * * SAT-SUN": "day-of-week",
}


@pytest.mark.property("SCHED-SPEC-GRAMMAR")
@pytest.mark.parametrize(("spec", "field"), sorted(FIELD_AT_FAULT.items()))
def test_a_refused_cron_spec_names_the_field_at_fault(
    clocked_store: Store, spec: str, field: str
) -> None:
    with pytest.raises(InvalidSpec, match=f"{field} field") as raised:
        clocked_store.schedule("bad", spec, "q", {})
    assert raised.value.spec == spec
    assert clocked_store.schedules() == []


@pytest.mark.property("SCHED-SPEC-GRAMMAR")
def test_a_six_field_spec_is_refused_pointing_at_every_seconds(clocked_store: Store) -> None:
    with pytest.raises(InvalidSpec, match="@every <n>s"):
        clocked_store.schedule("bad", "*/10 * * * * *", "q", {})
    assert clocked_store.schedules() == []


MALFORMED_ZONES: list[Any] = [
    None,
    5,
    b"Europe/Berlin",
    "",
    "Mars/Olympus_Mons",
    "europe/berlin",  # IANA names are case-sensitive
    "Europe/Berlin ",
    "UTC+2",
    "localtime",  # the machine's own zone: it differs from machine to machine
    "../etc/passwd",
    "/usr/share/zoneinfo/UTC",
]


@pytest.mark.property("SCHED-ZONE-REFUSED")
@pytest.mark.parametrize("zone", MALFORMED_ZONES, ids=repr)
def test_a_zone_that_is_no_iana_zone_is_refused_naming_it(clocked_store: Store, zone: Any) -> None:
    with pytest.raises(InvalidSpec) as raised:
        clocked_store.schedule("bad", "0 9 * * *", "q", {}, ScheduleOpts(timezone=zone))
    assert raised.value.timezone == zone
    assert repr(zone) in str(raised.value)
    assert clocked_store.schedules() == []


@pytest.mark.property("OPTIONS-INVALID-REFUSED")
@pytest.mark.parametrize("policy", ["every", "ALL", "", None, 1], ids=repr)
def test_a_catch_up_policy_outside_the_three_is_refused(clocked_store: Store, policy: Any) -> None:
    with pytest.raises(InvalidOptions, match="catch_up"):
        clocked_store.schedule("bad", "@every 1s", "q", {}, ScheduleOpts(catch_up=policy))
    assert clocked_store.schedules() == []


SCHEDULE_NAME_SURFACES: dict[str, Callable[[Store, Any], object]] = {
    "schedule-name": lambda s, n: s.schedule(n, "@every 1s", "q", {}),
    "schedule-queue": lambda s, n: s.schedule("ok", "@every 1s", n, {}),
    "unschedule": lambda s, n: s.unschedule(n),
    "get_schedule": lambda s, n: s.get_schedule(n),
}


@pytest.mark.property("NAMES-RESERVED-REFUSED")
@pytest.mark.parametrize("surface", list(SCHEDULE_NAME_SURFACES))
@pytest.mark.parametrize("name", RESERVED_NAMES)
def test_reserved_schedule_and_queue_names_are_refused(
    clocked_store: Store, surface: str, name: str
) -> None:
    with pytest.raises(ReservedName):
        SCHEDULE_NAME_SURFACES[surface](clocked_store, name)
    assert clocked_store.schedules() == []


@pytest.mark.property("NAMES-MALFORMED-REFUSED")
@pytest.mark.parametrize("surface", list(SCHEDULE_NAME_SURFACES))
@pytest.mark.parametrize("name", MALFORMED_NAMES, ids=MALFORMED_IDS)
def test_malformed_schedule_and_queue_names_are_refused(
    clocked_store: Store, surface: str, name: Any
) -> None:
    with pytest.raises(InvalidName) as raised:
        SCHEDULE_NAME_SURFACES[surface](clocked_store, name)
    assert not isinstance(raised.value, ReservedName)
    assert clocked_store.schedules() == []


@pytest.mark.property("PAYLOAD-INVALID-REFUSED")
@pytest.mark.parametrize(
    "payload", [{1, 2}, object(), {"x": b"bytes"}], ids=["set", "object", "bytes"]
)
def test_a_schedule_with_a_payload_that_does_not_serialize_is_refused(
    clocked_store: Store, payload: Any
) -> None:
    with pytest.raises(PayloadError):
        clocked_store.schedule("bad", "@every 1s", "q", payload)
    assert clocked_store.schedules() == []


@pytest.mark.property("OPTIONS-INVALID-REFUSED")
@pytest.mark.parametrize(
    "opts", [{"priority": 1}, QueueOpts(), 5], ids=["dict", "queue-opts", "int"]
)
def test_schedule_opts_of_the_wrong_type_are_refused(clocked_store: Store, opts: Any) -> None:
    with pytest.raises(InvalidOptions, match="opts"):
        clocked_store.schedule("bad", "@every 1s", "q", {}, opts)
    assert clocked_store.schedules() == []


# -- SCHED-CATCH-UP-CAP --------------------------------------------------------------

missed_counts = st.integers(0, 3 * CATCH_UP_CAP) | st.sampled_from(
    [CATCH_UP_CAP - 1, CATCH_UP_CAP, CATCH_UP_CAP + 1]
)
intervals = st.tuples(st.integers(1, 30), st.sampled_from(sorted(UNIT_SECONDS)))
"""Modest, so the clock the examples share stays well inside every date range."""


@pytest.mark.property("SCHED-CATCH-UP-CAP")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(missed=missed_counts, every=intervals, into=st.floats(0, 1, exclude_max=True))
@example(missed=CATCH_UP_CAP + 1, every=(1, "s"), into=0.0)
@example(missed=1, every=(1, "d"), into=0.0)
def test_one_tick_fires_at_most_the_cap_and_skips_to_the_first_boundary_after_now(
    clocked_store: Store,
    clock: FakeClock,
    missed: int,
    every: tuple[int, str],
    into: float,
) -> None:
    n, unit = every
    interval = n * UNIT_SECONDS[unit]
    name = unique_name("catch-up")
    stored = clocked_store.schedule(name, f"@every {n}{unit}", name, {"from": name})
    try:
        # ``missed`` boundaries are due: now lies ``into`` of the way to the next one.
        clock.set(stored.next_fire_at + (missed - 1) * interval + int(into * interval))
        fired = min(missed, CATCH_UP_CAP)

        result = clocked_store.tick_schedules(TICKER)

        assert result == TickResult(fired=fired, skipped=missed - fired)
        after = clocked_store.get_schedule(name)
        assert after is not None
        assert after.next_fire_at == stored.next_fire_at + missed * interval
        assert after.next_fire_at > _now(clock) >= after.next_fire_at - interval
        assert payload_counts(drain(clocked_store.queue(name))) == (
            {payload_key({"from": name}): fired} if fired else {}
        )
        assert clocked_store.tick_schedules(TICKER) == TickResult(fired=0, skipped=0)
    finally:
        clocked_store.unschedule(name)


@pytest.mark.property("SCHED-CATCH-UP-CAP")
def test_the_cap_applies_per_schedule(clocked_store: Store, clock: FakeClock) -> None:
    clocked_store.schedule("fast", "@every 1s", "q", "fast")
    clocked_store.schedule("slow", "@every 2s", "q", "slow")
    clock.advance(100)
    assert clocked_store.tick_schedules(TICKER) == TickResult(
        fired=CATCH_UP_CAP + 50, skipped=100 - CATCH_UP_CAP
    )
    counts = payload_counts(drain(clocked_store.queue("q")))
    assert counts == {payload_key("fast"): CATCH_UP_CAP, payload_key("slow"): 50}


@pytest.mark.property("SCHED-CATCH-UP-CAP")
def test_after_a_skip_the_next_boundary_fires_normally(
    clocked_store: Store, clock: FakeClock
) -> None:
    stored = clocked_store.schedule("s", "@every 10s", "q", {})
    clock.set(stored.next_fire_at + 100 * 10 + 3)  # 101 boundaries due
    assert clocked_store.tick_schedules(TICKER) == TickResult(
        fired=CATCH_UP_CAP, skipped=101 - CATCH_UP_CAP
    )
    clock.advance(7)  # exactly the next boundary
    assert clocked_store.tick_schedules(TICKER) == TickResult(fired=1, skipped=0)
    assert len(drain(clocked_store.queue("q"))) == CATCH_UP_CAP + 1


# -- SCHED-FIRE-STAMPS ---------------------------------------------------------------


@pytest.mark.property("SCHED-FIRE-STAMPS")
def test_a_fire_enqueues_the_payload_with_the_default_queue_stamps(
    clocked_store: Store, clock: FakeClock
) -> None:
    stored = clocked_store.schedule("plain", "@every 10s", "target", {"task": ["a", 1]})
    clock.set(stored.next_fire_at + 3)
    fired_at = _now(clock)
    assert clocked_store.tick_schedules(TICKER).fired == 1
    (handle,) = drain(clocked_store.queue("target"))
    job = handle.job
    assert (job.queue, job.payload, job.state) == (
        "target",
        {"task": ["a", 1]},
        JobState.PROCESSING,
    )
    assert (job.priority, job.max_attempts, job.attempts) == (0, DEFAULT_QUEUE_OPTS.max_attempts, 1)
    assert (job.created_at, job.run_at, job.expires_at) == (fired_at, fired_at, None)
    assert job.visibility_timeout_s == DEFAULT_QUEUE_OPTS.visibility_timeout_s
    assert job.backoff_base_s == DEFAULT_QUEUE_OPTS.backoff_base_s
    assert job.dead_letter_retention_s == DEFAULT_QUEUE_OPTS.dead_letter_retention_s


@pytest.mark.property("SCHED-FIRE-STAMPS")
def test_schedule_opts_are_stamped_over_the_defaults(
    clocked_store: Store, clock: FakeClock
) -> None:
    opts = ScheduleOpts(priority=-3, max_attempts=9, expires=90)
    stored = clocked_store.schedule("stamped", "@every 1m", "target", "ping", opts)
    clock.set(stored.next_fire_at)
    fired_at = _now(clock)
    assert clocked_store.tick_schedules(TICKER).fired == 1
    (handle,) = drain(clocked_store.queue("target"))
    job = handle.job
    assert (job.payload, job.priority, job.max_attempts) == ("ping", -3, 9)
    assert (job.run_at, job.expires_at) == (fired_at, fired_at + 90)
    assert job.visibility_timeout_s == DEFAULT_QUEUE_OPTS.visibility_timeout_s
    assert job.backoff_base_s == DEFAULT_QUEUE_OPTS.backoff_base_s
    assert job.dead_letter_retention_s is None


@pytest.mark.property("SCHED-FIRE-STAMPS")
def test_fires_stamp_the_engine_defaults_whatever_queue_handle_exists(
    clocked_store: Store, clock: FakeClock
) -> None:
    # Queues are names: a handle's opts live in the caller's process, a fire does not see them.
    custom = QueueOpts(visibility_timeout_s=7, max_attempts=11, backoff_base_s=2)
    queue = clocked_store.queue("target", custom)
    stored = clocked_store.schedule("s", "@every 5s", "target", {})
    clock.set(stored.next_fire_at)
    assert clocked_store.tick_schedules(TICKER).fired == 1
    (handle,) = drain(queue)
    job = handle.job
    assert (job.visibility_timeout_s, job.max_attempts, job.backoff_base_s) == (
        DEFAULT_QUEUE_OPTS.visibility_timeout_s,
        DEFAULT_QUEUE_OPTS.max_attempts,
        DEFAULT_QUEUE_OPTS.backoff_base_s,
    )


@pytest.mark.property("SCHED-FIRE-STAMPS")
def test_every_fire_of_a_catch_up_is_its_own_job(clocked_store: Store, clock: FakeClock) -> None:
    stored = clocked_store.schedule("s", "@every 1s", "target", {"n": 1})
    clock.set(stored.next_fire_at + 4)
    assert clocked_store.tick_schedules(TICKER).fired == 5
    handles = drain(clocked_store.queue("target"))
    assert len({h.id for h in handles}) == 5
    assert all(h.payload == {"n": 1} for h in handles)
