"""Clocks (contract §1): all stored time comes from the store's clock."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from .errors import InvalidOptions


@runtime_checkable
class Clock(Protocol):
    """Where a store's time comes from (contract §1).

    Engines pass its "now" into every statement and never let the database pick
    its own, so tests can drive time (``alkstore.testing.FakeClock``). Pass one as
    ``alkstore.open(url, clock=...)``; any object with these two methods will do.
    """

    def now(self) -> float:
        """Epoch seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass on this clock (a fake clock just advances)."""
        ...


class RealtimeClock:
    """A clock that moves with wall time; waits on it may use real timeouts."""

    def now(self) -> float:
        """Epoch seconds; each subclass decides where they come from."""
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` of real time (nothing for zero or less)."""
        if seconds > 0:
            time.sleep(seconds)


class SystemClock(RealtimeClock):
    """The local system clock: the default clock of a store (contract §1)."""

    def now(self) -> float:
        """``time.time()``."""
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


class OffsetClock(RealtimeClock):
    """The local clock shifted by ``offset`` seconds (e.g. to follow a database server)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        """``time.time()`` plus ``offset``."""
        return time.time() + self.offset

    def __repr__(self) -> str:
        return f"OffsetClock(offset={self.offset!r})"


def check_clock(clock: object) -> None:
    """Refuse a ``clock`` option that is not a ``Clock`` (``None`` means the default)."""
    if clock is not None and not isinstance(clock, Clock):
        raise InvalidOptions(
            f"clock must be an alkstore.Clock (with now() and sleep()), got {type(clock).__name__}"
        )
