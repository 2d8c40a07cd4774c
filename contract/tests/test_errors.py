"""The error taxonomy (contract §8)."""

from __future__ import annotations

import pytest

import alkstore
from alkstore.errors import (
    AlkstoreError,
    EngineNotFound,
    EngineUnavailable,
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    LeadershipLost,
    PayloadError,
    ReservedName,
    StoreClosed,
)


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (InvalidName, (AlkstoreError, ValueError)),
        (ReservedName, (InvalidName, AlkstoreError, ValueError)),
        (InvalidSpec, (AlkstoreError,)),
        (InvalidOptions, (AlkstoreError, ValueError)),
        (PayloadError, (AlkstoreError, TypeError)),
        (LeadershipLost, (AlkstoreError,)),
        (EngineNotFound, (AlkstoreError,)),
        (StoreClosed, (AlkstoreError,)),
        (EngineUnavailable, (AlkstoreError,)),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_error_derives_from_its_documented_bases(
    error: type[Exception], bases: tuple[type[Exception], ...]
) -> None:
    for base in bases:
        assert issubclass(error, base)


def test_every_error_is_exported_from_the_package() -> None:
    for name in (
        "AlkstoreError",
        "InvalidName",
        "ReservedName",
        "InvalidSpec",
        "InvalidOptions",
        "PayloadError",
        "LeadershipLost",
        "EngineNotFound",
        "StoreClosed",
        "EngineUnavailable",
    ):
        assert issubclass(getattr(alkstore, name), AlkstoreError)


def test_alkstore_error_is_not_a_value_error() -> None:
    # Catching ValueError must not swallow, e.g., StoreClosed.
    assert not issubclass(StoreClosed, ValueError)


def test_invalid_spec_carries_the_spec() -> None:
    error = InvalidSpec("@every 5w", "bad unit")
    assert error.spec == "@every 5w"
    assert "@every 5w" in str(error)


def test_invalid_spec_of_a_zone_names_the_zone_not_a_spec() -> None:
    error = InvalidSpec(None, "no such zone", timezone="Mars/Base")
    assert (error.spec, error.timezone) == (None, "Mars/Base")
    assert "time zone 'Mars/Base'" in str(error)
    assert InvalidSpec("x").timezone is None
    assert "time zone None" in str(InvalidSpec(None, "a str", timezone=None))


def test_engine_not_found_names_the_installed_engines() -> None:
    error = EngineNotFound("nope", ["sqlite", "postgresql"])
    assert error.wanted == "nope"
    assert error.installed == ("postgresql", "sqlite")
    assert "nope" in str(error)
    assert "sqlite" in str(error)
    assert "postgresql" in str(error)


def test_engine_not_found_says_when_none_are_installed() -> None:
    assert "none" in str(EngineNotFound("nope", []))
