"""Schedule spec grammar: ``@every <n><s|m|h|d>`` and cron (contract §5.2)."""

from __future__ import annotations

import pytest

from alkstore.errors import InvalidSpec
from alkstore.spec import parse_spec


@pytest.mark.parametrize(
    ("spec", "seconds"),
    [
        ("@every 30s", 30),
        ("@every 5m", 300),
        ("@every 2h", 7_200),
        ("@every 1d", 86_400),
        ("@every 1s", 1),
    ],
)
def test_every_spec_parses_to_seconds(spec: str, seconds: int) -> None:
    assert parse_spec(spec).interval_s == seconds


@pytest.mark.parametrize(
    "spec",
    [
        "60 * * * *",
        "0 0 * * * *",
        "@often",
        "@every 0s",
        "@every -1s",
        "@every 5",
        "@every 5w",
        "@every 05s",
        "@every 1.5h",
        "@every  5s",
        "@every 5 s",
        " @every 5s",
        "@every 5s ",
        "@every5s",
        "@EVERY 5s",
        "@every 5S",
        "@every 5s\n",
        "",
        "@every 99999999999999d",
    ],
)
def test_anything_else_is_an_invalid_spec_carrying_the_spec(spec: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(spec)
    assert caught.value.spec == spec


@pytest.mark.parametrize("spec", [None, 30, b"@every 5s"], ids=repr)
def test_a_non_str_spec_is_refused(spec: object) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(spec)
    assert caught.value.spec == spec


def test_the_refusal_message_shows_the_spec() -> None:
    with pytest.raises(InvalidSpec, match="@every 5w"):
        parse_spec("@every 5w")


@pytest.mark.parametrize("spec", ["*/5 * * * *", "0 0 * * *", "@hourly", "0 9 * * MON-FRI"])
def test_a_cron_spec_has_no_interval(spec: str) -> None:
    assert parse_spec(spec).interval_s is None


def test_an_every_spec_keeps_its_zone_but_counts_elapsed_seconds() -> None:
    cadence = parse_spec("@every 1d", "Europe/Berlin")
    assert (cadence.timezone, cadence.next_after(100)) == ("Europe/Berlin", 100 + 86_400)


def test_an_unknown_zone_is_an_invalid_spec_naming_the_zone() -> None:
    with pytest.raises(InvalidSpec, match="'Mars/Base'") as caught:
        parse_spec("0 9 * * *", "Mars/Base")
    assert caught.value.timezone == "Mars/Base"
