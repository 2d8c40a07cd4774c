"""Clocks (CONTRACT.md §1): all stored time comes from the store's clock."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from .errors import InvalidOptions


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Epoch seconds."""
        ...

    def sleep(self, seconds: float) -> None: ...


class RealtimeClock:
    """A clock that moves with wall time; waits on it may use real timeouts."""

    def now(self) -> float:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class SystemClock(RealtimeClock):
    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class OffsetClock(RealtimeClock):
    """The local clock shifted by ``offset`` seconds (e.g. to follow a database server)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset

    def __repr__(self) -> str:
        return f"OffsetClock(offset={self.offset!r})"


def check_clock(clock: object) -> None:
    """Refuse a ``clock`` option that is not a ``Clock`` (``None`` means the default)."""
    if clock is not None and not isinstance(clock, Clock):
        raise InvalidOptions(
            f"clock must be an alkstore.Clock (with now() and sleep()), got {type(clock).__name__}"
        )
