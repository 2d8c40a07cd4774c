"""Durations and instants become whole seconds, rounded up (contract §0)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore.constants import MAX_SECONDS
from alkstore.errors import InvalidOptions
from alkstore.timeconv import duration_seconds, instant_seconds, whole_now


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),
        (7, 7),
        (2.0, 2),
        (1.2, 2),
        (0.0001, 1),
        (timedelta(seconds=3), 3),
        (timedelta(microseconds=1), 1),
        (timedelta(seconds=1, microseconds=1), 2),
        (timedelta(minutes=2, microseconds=999_999), 121),
        (timedelta(days=1), 86_400),
    ],
)
def test_duration_is_whole_seconds_rounded_up(value: object, expected: int) -> None:
    assert duration_seconds(value, "d") == expected


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=100_000)))
def test_timedelta_duration_rounds_up_exactly_to_the_microsecond(value: timedelta) -> None:
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    assert duration_seconds(value, "d") == -(-micros // 1_000_000)


def test_duration_result_is_an_int() -> None:
    assert type(duration_seconds(1.5, "d")) is int


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        math.nan,
        math.inf,
        -math.inf,
        -1,
        -0.5,
        timedelta(seconds=-1),
        timedelta(microseconds=-1),
        MAX_SECONDS + 1,
        float(MAX_SECONDS) * 2,
        timedelta.max,
        "5",
        None,
    ],
    ids=repr,
)
def test_bad_duration_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidOptions, match="my_field"):
        duration_seconds(value, "my_field")


def test_duration_below_the_minimum_is_refused() -> None:
    with pytest.raises(InvalidOptions, match="ttl"):
        duration_seconds(0, "ttl", minimum=1)


def test_duration_at_the_largest_accepted_value_passes() -> None:
    assert duration_seconds(MAX_SECONDS, "d") == MAX_SECONDS


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1_700_000_000, 1_700_000_000),
        (1_700_000_000.0, 1_700_000_000),
        (1_700_000_000.25, 1_700_000_001),
        (datetime(2024, 1, 1, tzinfo=UTC), 1_704_067_200),
        (datetime(2024, 1, 1, microsecond=1, tzinfo=UTC), 1_704_067_201),
        (datetime(2024, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), 1_704_067_200),
    ],
    ids=repr,
)
def test_instant_is_whole_epoch_seconds_rounded_up(value: object, expected: int) -> None:
    assert instant_seconds(value, "at") == expected


def test_naive_datetime_instant_is_refused() -> None:
    with pytest.raises(InvalidOptions, match="run_at"):
        instant_seconds(datetime(2024, 1, 1), "run_at")


@pytest.mark.parametrize(
    "value",
    [True, math.nan, math.inf, -1, MAX_SECONDS + 1, "1700000000", None],
    ids=repr,
)
def test_bad_instant_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidOptions, match="run_at"):
        instant_seconds(value, "run_at")


def test_now_is_floored_to_a_whole_second() -> None:
    assert whole_now(1_700_000_000.999) == 1_700_000_000
