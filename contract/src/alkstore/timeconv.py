"""Durations and instants (contract §0): everything stored is whole epoch seconds.

Durations round *up* so "wait at least this long" is never shortened; instants
round up for the same reason ("not before").
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import TypeAlias

from .constants import MAX_SECONDS
from .errors import InvalidOptions

Duration: TypeAlias = "int | float | timedelta"
Instant: TypeAlias = "int | float | datetime"


def _ceil_seconds(value: float, field: str) -> int:
    if not math.isfinite(value):
        raise InvalidOptions(f"{field} must be finite, got {value!r}")
    return math.ceil(value)


def _negative(value: int | float | timedelta) -> bool:
    return value < timedelta(0) if isinstance(value, timedelta) else value < 0


def duration_seconds(value: object, field: str, *, minimum: int = 0) -> int:
    """Whole seconds of a duration, rounded up; ``InvalidOptions`` names ``field``."""
    if isinstance(value, bool):
        raise InvalidOptions(f"{field} must be seconds or a timedelta, got a bool")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, float):
        seconds = _ceil_seconds(value, field)
    elif isinstance(value, timedelta):
        # total_seconds() is a float; whole microseconds keep exactness for rounding up.
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        seconds = -((-micros) // 1_000_000)
    else:
        raise InvalidOptions(
            f"{field} must be int | float seconds or a timedelta, got {type(value).__name__}"
        )
    # Check the sign before rounding too: -0.5 s rounds up to 0 but is still negative.
    if seconds < minimum or _negative(value):
        raise InvalidOptions(f"{field} must be at least {minimum} s, got {value!r}")
    if seconds > MAX_SECONDS:
        raise InvalidOptions(f"{field} must be at most {MAX_SECONDS} s, got {value!r}")
    return seconds


def instant_seconds(value: object, field: str) -> int:
    """Whole epoch seconds of an instant, rounded up; naive datetimes are refused."""
    if isinstance(value, bool):
        raise InvalidOptions(f"{field} must be epoch seconds or a datetime, got a bool")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, float):
        seconds = _ceil_seconds(value, field)
    elif isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidOptions(f"{field} must be a timezone-aware datetime")
        seconds = _ceil_seconds(value.timestamp(), field)
    else:
        raise InvalidOptions(
            f"{field} must be int | float epoch seconds or an aware datetime, "
            f"got {type(value).__name__}"
        )
    if not 0 <= seconds <= MAX_SECONDS:
        raise InvalidOptions(f"{field} must be within 0..{MAX_SECONDS}, got {value!r}")
    return seconds


def whole_now(now: float) -> int:
    """The stored form of "now": the clock's reading floored to a whole second."""
    return math.floor(now)
