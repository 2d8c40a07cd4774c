"""The cron grammar (contract §5.2), field by field."""

from __future__ import annotations

from datetime import date

import pytest

from alkstore.cron_grammar import NICKNAMES, parse_cron
from alkstore.errors import InvalidSpec


def test_the_fields_read_as_sets_of_values() -> None:
    fields = parse_cron("*/20 1-3,9 1,15 JAN-mar 0,7")
    assert fields.minutes == {0, 20, 40}
    assert fields.hours == {1, 2, 3, 9}
    assert fields.days == {1, 15}
    assert fields.months == {1, 2, 3}
    assert fields.weekdays == {0}  # 7 is Sunday, like 0


def test_a_stepped_range_starts_at_its_low_end() -> None:
    assert parse_cron("5-50/15 * * * *").minutes == {5, 20, 35, 50}
    assert parse_cron("7-7/5 * * * *").minutes == {7}


@pytest.mark.parametrize(
    ("spec", "either"),
    [("0 0 13 * FRI", True), ("0 0 */2 * FRI", False), ("0 0 13 * *", False), ("0 0 * * 5", False)],
)
def test_both_day_fields_restricted_means_either_day(spec: str, either: bool) -> None:
    assert parse_cron(spec).days_either is either


def test_the_day_rules_match_a_calendar() -> None:
    either = parse_cron("0 0 13 * FRI")
    both = parse_cron("0 0 */2 * FRI")
    friday_6th, friday_13th, sunday_1st = date(2026, 3, 6), date(2026, 3, 13), date(2026, 3, 1)
    assert (either.day_matches(friday_6th), either.day_matches(friday_13th)) == (True, True)
    assert either.day_matches(sunday_1st) is False
    assert (both.day_matches(friday_6th), both.day_matches(friday_13th)) == (False, True)


@pytest.mark.parametrize(
    ("spec", "wall_clock"),
    [("30 2 * * *", True), ("0 0-23 * * *", True), ("*/15 * * * *", False), ("0 * * * *", False)],
)
def test_fixed_minute_and_hour_follow_the_wall_clock(spec: str, wall_clock: bool) -> None:
    assert parse_cron(spec).wall_clock is wall_clock


@pytest.mark.parametrize("nickname", sorted(NICKNAMES))
def test_a_nickname_reads_as_its_five_fields(nickname: str) -> None:
    assert parse_cron(nickname) == parse_cron(NICKNAMES[nickname])


def test_cronsim_is_handed_each_value_listed_and_each_leading_star_kept() -> None:
    assert parse_cron("7-7/5 */15,3 * jan,FEB mon-fri").expression == "7 */15,3 * 1-2 1-5"


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("60 * * * *", "minute field '60': 60 is outside 0-59"),
        ("* * * * 1#2", "day-of-week field '1#2'"),
        ("5/15 * * * *", "a step follows '*' or a range"),
        ("0 0 31 2 *", "day-of-month field: no month"),
        ("* * * * * *", "use '@every <n>s'"),
        ("* * * *", "five fields, this one has 4"),
        ("@often", "no such nickname"),
    ],
)
def test_a_refusal_says_what_is_wrong(spec: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_cron(spec)
    assert reason in str(caught.value)
    assert caught.value.spec == spec


def test_a_day_that_only_some_listed_months_lack_is_accepted() -> None:
    assert parse_cron("0 0 31 2,3 *").months == {2, 3}
    assert parse_cron("0 0 31 2 MON").days_either  # every Monday of February


def test_an_overlong_spec_is_refused() -> None:
    with pytest.raises(InvalidSpec, match="at most 1024"):
        parse_cron(",".join(["1"] * 600) + " * * * *")
