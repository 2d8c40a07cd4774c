"""A cron spec's boundaries (contract §5.8, §5.9): the DST rule and exact counts.

The kit checks the cadence against its brute-force oracle over random specs and
zones (``conformance/tests/test_cron_oracle.py``); these are the contract's own
examples and the places where the cadence corrects what cronsim's walk gives.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from alkstore.spec import parse_spec


def _at(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


def _next(spec: str, zone: str, after: str) -> str:
    cadence = parse_spec(spec, zone)
    tz = cadence.zone  # type: ignore[attr-defined]
    return datetime.fromtimestamp(cadence.next_after(_at(after)), tz).isoformat()


@pytest.mark.parametrize(
    ("spec", "after", "fires"),
    [
        # A local time that does not exist fires at the first instant after the gap.
        ("30 2 * * *", "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"),
        ("0,30 2 * * *", "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"),
        ("0,30 2 * * *", "2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"),
        # A local time that occurs twice fires at its first occurrence only...
        ("30 2 * * *", "2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00"),
        ("30 2 * * *", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"),
        # ...also when the walk starts inside the second pass (cronsim meets the
        # first pass again there, an instant already behind).
        ("30 2 * * *", "2026-10-25T02:10:00+01:00", "2026-10-26T02:30:00+01:00"),
        # Elapsed time: an hourly spec fires in both passes and never in the gap.
        ("0 * * * *", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00"),
        ("0 * * * *", "2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"),
    ],
)
def test_the_dst_rule_in_berlin(spec: str, after: str, fires: str) -> None:
    assert _next(spec, "Europe/Berlin", after) == fires


def test_an_elapsed_spec_after_a_30_minute_shift_fires_on_the_hour() -> None:
    # Lord Howe moves its clocks on by 30 minutes at 02:00. cronsim's own walk steps
    # whole hours of elapsed time from there and lands on :30, missing 12:00.
    assert (
        _next("*/30 12 * * *", "Australia/Lord_Howe", "2026-10-04T01:50:00+10:30")
        == "2026-10-04T12:00:00+11:00"
    )


def test_an_elapsed_spec_skips_a_midnight_that_does_not_exist() -> None:
    # Santiago moves from 00:00 to 01:00: no minute of hour 0 exists that day.
    assert (
        _next("*/20 0 * * *", "America/Santiago", "2026-09-05T23:30:00-04:00")
        == "2026-09-07T00:00:00-03:00"
    )


def _iterated(cadence: object, at: int, now: int) -> tuple[int, int, int]:
    count, latest = 1, at
    step = cadence.next_after(at)  # type: ignore[attr-defined]
    while step <= now:
        count, latest = count + 1, step
        step = cadence.next_after(step)  # type: ignore[attr-defined]
    return count, latest, step


@pytest.mark.parametrize(
    ("spec", "zone"),
    [
        ("*/5 * * * *", "Europe/Berlin"),
        ("* 2 * * *", "Australia/Lord_Howe"),
        ("0,30 1-3 * * *", "America/New_York"),
        ("15 */2 * * MON", "Pacific/Chatham"),
        ("*/10 0 * * *", "America/Santiago"),
    ],
)
def test_counting_the_due_boundaries_agrees_with_walking_them(spec: str, zone: str) -> None:
    cadence = parse_spec(spec, zone)
    # Thirty days across a DST transition in either hemisphere.
    for start in ("2026-03-15T00:00:00Z", "2026-09-20T00:00:00Z", "2026-10-20T00:00:00Z"):
        at = cadence.next_after(_at(start))
        now = at + 30 * 86_400 + 12_345
        due = cadence.due(at, now)
        assert (due.count, due.latest, due.after) == _iterated(cadence, at, now)


def test_a_year_of_every_minute_counts_every_minute() -> None:
    cadence = parse_spec("* * * * *", "Europe/Berlin")
    at = cadence.next_after(_at("2026-01-01T00:00:30Z"))
    assert cadence.due(at, at + 365 * 86_400 - 1).count == 525_600
