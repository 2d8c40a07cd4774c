"""§5.8 (contract 1.2, the cron profile): every DST transition, checked explicitly.

For each transition of the kit's DST zones in 2025-2028, schedules whose boundaries
land in the gap or the repeated stretch (both classes: wall-clock specs and
elapsed-time specs) are registered three hours before it and fired through
``tick_schedules`` until three hours after; each one's fires must be the oracle's
boundaries. A wall-clock spec fires a local time that does not exist once, at the
first instant after the gap, and a repeated one once, at its first pass; an
elapsed-time spec fires at every matching instant.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from alkstore import ScheduleOpts, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.cron import (
    Transition,
    dst_transitions,
    fire_through,
    transition_specs,
)
from alkstore_conformance.model import cron as oracle

pytestmark = pytest.mark.requires("scheduler")

AROUND_S = 3 * 3600


def _local(instants: list[int], zone: str) -> list[str]:
    tz = oracle.zone_of(zone)
    return [datetime.fromtimestamp(at, tz).strftime("%m-%d %H:%M%z") for at in instants]


@pytest.mark.property("SCHED-CRON-DST")
@pytest.mark.requires("cron")
@pytest.mark.parametrize("transition", dst_transitions(), ids=str)
def test_fires_across_a_dst_transition_are_the_oracles(
    clocked_store: Store, clock: FakeClock, transition: Transition
) -> None:
    zone = transition.zone
    start, end = transition.at - AROUND_S, transition.at + AROUND_S
    clock.set(start)
    specs = {f"s{i}": spec for i, spec in enumerate(transition_specs(transition))}
    for name, spec in specs.items():
        clocked_store.schedule(name, spec, "dst", {"spec": spec}, ScheduleOpts(timezone=zone))
    fired = fire_through(clocked_store, clock, list(specs), end)
    for name, spec in specs.items():
        expected = oracle.boundaries(spec, zone, start, end)
        assert _local(fired[name], zone) == _local(expected, zone), f"{spec!r} in {zone}"


BERLIN = "Europe/Berlin"


def _berlin(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


DST_EXAMPLES = {
    # spec, registered at, until: the fires, as Berlin's clocks read them
    "a-nonexistent-time-fires-after-the-gap": (
        "30 2 * * *",
        "2026-03-28T12:00:00+01:00",
        "2026-03-30T12:00:00+02:00",
        ["03-29 03:00+0200", "03-30 02:30+0200"],
    ),
    "two-times-in-one-gap-fire-once": (
        "0,30 2 * * *",
        "2026-03-29T00:00:00+01:00",
        "2026-03-29T12:00:00+02:00",
        ["03-29 03:00+0200"],
    ),
    "a-repeated-time-fires-at-its-first-pass": (
        "30 2 * * *",
        "2026-10-24T12:00:00+02:00",
        "2026-10-26T12:00:00+01:00",
        ["10-25 02:30+0200", "10-26 02:30+0100"],
    ),
    "an-hourly-spec-fires-in-both-passes": (
        "0 * * * *",
        "2026-10-25T00:30:00+02:00",
        "2026-10-25T04:30:00+01:00",
        [
            *("10-25 01:00+0200", "10-25 02:00+0200", "10-25 02:00+0100"),
            *("10-25 03:00+0100", "10-25 04:00+0100"),
        ],
    ),
    "an-hourly-spec-skips-the-gap": (
        "0 * * * *",
        "2026-03-29T00:30:00+01:00",
        "2026-03-29T04:30:00+02:00",
        ["03-29 01:00+0100", "03-29 03:00+0200", "03-29 04:00+0200"],
    ),
}


@pytest.mark.property("SCHED-CRON-DST")
@pytest.mark.requires("cron")
@pytest.mark.parametrize("case", sorted(DST_EXAMPLES))
def test_the_contracts_dst_examples_in_berlin(
    clocked_store: Store, clock: FakeClock, case: str
) -> None:
    spec, start, until, expected = DST_EXAMPLES[case]
    clock.set(_berlin(start))
    clocked_store.schedule("berlin", spec, "q", {}, ScheduleOpts(timezone=BERLIN))
    fired = fire_through(clocked_store, clock, ["berlin"], _berlin(until))
    assert _local(fired["berlin"], BERLIN) == expected
