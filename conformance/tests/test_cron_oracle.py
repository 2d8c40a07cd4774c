"""The kit's cron oracle (``model.cron``) against the contract's cadence, and the
oracle itself against a calendar.

The oracle shares no code with the cadence (no cron library, its own reading of
the fields), so the two agreeing over random specs, zones and instants -- many
more than a conformance run checks through a store -- is evidence for both; where
they disagree, one of them misreads the contract.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore.spec import parse_spec
from alkstore_conformance.helpers.cron import (
    ZONES,
    cron_specs,
    dst_transitions,
    instants,
    transition_specs,
    zones,
)
from alkstore_conformance.model import cron as oracle


def _at(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


@settings(max_examples=400, deadline=None)
@given(spec=cron_specs, zone=zones, after=instants)
def test_the_oracle_and_the_cadence_agree_on_the_next_fire(
    spec: str, zone: str, after: int
) -> None:
    assert parse_spec(spec, zone).next_after(after) == oracle.next_fire(spec, zone, after)


@settings(max_examples=200, deadline=None)
@given(
    spec=cron_specs,
    transition=st.sampled_from(dst_transitions()),
    offset=st.integers(-4 * 3600, 4 * 3600),
)
def test_they_agree_next_to_every_dst_transition(
    spec: str, transition: object, offset: int
) -> None:
    zone, at = transition.zone, transition.at  # type: ignore[attr-defined]
    assert parse_spec(spec, zone).next_after(at + offset) == oracle.next_fire(
        spec, zone, at + offset
    )


@pytest.mark.parametrize("transition", dst_transitions(), ids=str)
def test_they_agree_on_every_boundary_around_each_transition(transition: object) -> None:
    zone, at = transition.zone, transition.at  # type: ignore[attr-defined]
    for spec in transition_specs(transition):  # type: ignore[arg-type]
        cadence = parse_spec(spec, zone)
        expected = oracle.boundaries(spec, zone, at - 6 * 3600, at + 6 * 3600)
        walked, step = [], cadence.next_after(at - 6 * 3600)
        while step <= at + 6 * 3600:
            walked.append(step)
            step = cadence.next_after(step)
        assert walked == expected, (spec, zone)


def test_every_dst_zone_has_two_transitions_a_year() -> None:
    transitions = dst_transitions()
    assert {t.zone for t in transitions} == set(ZONES) - {"UTC", "Asia/Kolkata"}
    assert len(transitions) == 7 * 2 * 4
    assert {t.kind for t in transitions} == {"gap", "overlap"}


@pytest.mark.parametrize(
    ("spec", "zone", "after", "fires"),
    [
        ("30 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", "2026-03-29T03:00:00+02:00"),
        ("30 2 * * *", "Europe/Berlin", "2026-10-25T02:40:00+02:00", "2026-10-26T02:30:00+01:00"),
        ("0 * * * *", "Europe/Berlin", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00"),
        ("0 9 * * MON-FRI", "UTC", "2026-03-06T09:00:00Z", "2026-03-09T09:00:00Z"),
        ("0 0 13 * FRI", "UTC", "2026-03-02T00:00:00Z", "2026-03-06T00:00:00Z"),
        ("0 0 29 2 *", "UTC", "2026-03-02T00:00:00Z", "2028-02-29T00:00:00Z"),
        ("0 3 * * *", "Pacific/Chatham", "2026-09-27T00:00:00+12:45", "2026-09-27T03:45:00+13:45"),
    ],
)
def test_the_oracle_reads_a_calendar_as_the_contract_says(
    spec: str, zone: str, after: str, fires: str
) -> None:
    assert oracle.next_fire(spec, zone, _at(after)) == _at(fires)
