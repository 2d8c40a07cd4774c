"""How the command line reads durations and engine options (``alkstore.cli.arguments``)."""

from __future__ import annotations

import pytest

from alkstore.cli.arguments import engine_options, parse_duration, parse_engine_option
from alkstore.errors import InvalidOptions


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("30m", 1800), ("12h", 43_200), ("7d", 604_800)]
)
def test_a_duration_reads_as_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "7x", "07d", "0s", "-1d", "7 d", "1.5h", "@every 7d"])
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(InvalidOptions, match="not a duration"):
        parse_duration(text)


def test_an_engine_option_keeps_text_as_text() -> None:
    assert parse_engine_option("schema=jobs") == ("schema", "jobs")


@pytest.mark.parametrize(
    ("text", "value"),
    [("busy_timeout_s=10", 10), ("repoll_s=0.5", 0.5), ("migrate=false", False)],
)
def test_an_engine_option_reads_json_scalars(text: str, value: object) -> None:
    assert parse_engine_option(text)[1] == value


def test_a_quoted_engine_option_stays_text() -> None:
    assert parse_engine_option('schema="123"') == ("schema", "123")


def test_an_engine_option_without_a_name_is_refused() -> None:
    with pytest.raises(InvalidOptions, match="NAME=VALUE"):
        parse_engine_option("=x")


def test_an_engine_option_given_twice_is_refused() -> None:
    with pytest.raises(InvalidOptions, match="twice"):
        engine_options(("schema=a", "schema=b"))
