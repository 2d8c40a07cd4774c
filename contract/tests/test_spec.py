"""Schedule spec grammar v1: ``@every <n><s|m|h|d>`` (contract §5)."""

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
    assert parse_spec(spec) == seconds


@pytest.mark.parametrize(
    "spec",
    [
        "*/5 * * * *",
        "0 0 * * *",
        "@hourly",
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
