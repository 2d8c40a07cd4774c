"""The one retry backoff curve: equal jitter under a 3600 s cap (contract §2)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore.backoff import retry_delay, retry_delay_range
from alkstore.constants import BACKOFF_CAP_S
from alkstore.errors import InvalidOptions


def expected_range(base: int, attempt: int) -> tuple[int, int]:
    ceiling = min(base * 2 ** (attempt - 1), 3600)
    return math.ceil(ceiling / 2), ceiling


@given(
    base=st.integers(min_value=0, max_value=10_000),
    attempt=st.integers(min_value=1, max_value=2_000),
    rng=st.randoms(use_true_random=False),
)
def test_retry_delay_lies_in_the_documented_range(
    base: int, attempt: int, rng: random.Random
) -> None:
    low, high = retry_delay_range(base, attempt)
    assert (low, high) == expected_range(base, attempt)
    assert low <= retry_delay(base, attempt, rng) <= high


def test_the_cap_is_one_hour() -> None:
    assert BACKOFF_CAP_S == 3600


@pytest.mark.parametrize("attempt", [13, 100, 10**9])
def test_huge_attempts_stay_under_the_cap(attempt: int) -> None:
    assert retry_delay_range(1, attempt) == (1800, 3600)
    assert 1800 <= retry_delay(1, attempt, random.Random(attempt)) <= 3600


def test_first_attempt_ranges_over_half_base_to_base() -> None:
    assert retry_delay_range(10, 1) == (5, 10)


def test_odd_ceiling_rounds_the_lower_bound_up() -> None:
    assert retry_delay_range(5, 1) == (3, 5)


def test_zero_base_means_no_delay() -> None:
    assert retry_delay(0, 5, random.Random(0)) == 0


@pytest.mark.parametrize(("base", "attempt"), [(10, 3), (1, 50)])
def test_jitter_varies_between_draws(base: int, attempt: int) -> None:
    rng = random.Random(1234)
    draws = {retry_delay(base, attempt, rng) for _ in range(200)}
    assert len(draws) > 1


def test_retry_delay_works_without_an_explicit_rng() -> None:
    assert 5 <= retry_delay(10, 1) <= 10


@pytest.mark.parametrize("base", [-1, 1.5, True, "5", None], ids=repr)
def test_an_invalid_base_is_refused(base: object) -> None:
    with pytest.raises(InvalidOptions, match="backoff_base_s"):
        retry_delay(base, 1, random.Random(0))  # type: ignore[arg-type]


@pytest.mark.parametrize("attempt", [0, -3, 1.0, True, None], ids=repr)
def test_an_invalid_attempt_is_refused(attempt: object) -> None:
    with pytest.raises(InvalidOptions, match="attempt"):
        retry_delay(5, attempt, random.Random(0))  # type: ignore[arg-type]
