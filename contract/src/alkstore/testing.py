"""Test helpers shipped with the contract."""

from __future__ import annotations

import threading

from .errors import InvalidOptions


class FakeClock:
    """A settable clock: ``set(t)``, ``advance(s)``; ``sleep(s)`` advances it at once.

    Open a store with it to drive time in tests (contract §1):
    ``alkstore.open(url, clock=FakeClock(1_700_000_000))``. Thread-safe.

    Args:
        start: the initial reading in epoch seconds.
    """

    def __init__(self, start: float = 1_700_000_000) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current reading in epoch seconds."""
        with self._lock:
            return self._now

    def set(self, t: float) -> None:
        """Jump to ``t`` epoch seconds (backwards too: tests may need it)."""
        with self._lock:
            self._now = float(t)

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new reading.

        Raises:
            InvalidOptions: ``seconds`` is negative.
        """
        if seconds < 0:
            raise InvalidOptions(f"a clock only moves forward; advance({seconds!r})")
        with self._lock:
            self._now += seconds
            return self._now

    def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` at once, without blocking (nothing for zero or less)."""
        if seconds > 0:
            self.advance(seconds)

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"
