"""Test helpers shipped with the contract."""

from __future__ import annotations

import threading

from .errors import InvalidOptions


class FakeClock:
    """A settable clock: ``set(t)``, ``advance(s)``; ``sleep(s)`` advances it at once."""

    def __init__(self, start: float = 1_700_000_000) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def set(self, t: float) -> None:
        with self._lock:
            self._now = float(t)

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise InvalidOptions(f"a clock only moves forward; advance({seconds!r})")
        with self._lock:
            self._now += seconds
            return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"
