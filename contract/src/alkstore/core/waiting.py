"""Turning clock instants into bounded real waits."""

from __future__ import annotations

import time
from datetime import timedelta

from ..clock import Clock, RealtimeClock
from ..timeconv import duration_seconds

_LEAST_WAIT_S = 0.001


class Deadline:
    """A caller's timeout in monotonic time (``None`` = no timeout)."""

    def __init__(self, timeout: object, field: str = "timeout") -> None:
        if timeout is None:
            self._at: float | None = None
        else:
            seconds = _seconds(timeout, field)
            self._at = time.monotonic() + seconds

    def remaining(self) -> float | None:
        if self._at is None:
            return None
        return max(0.0, self._at - time.monotonic())

    def wait_s(self) -> float | None:
        """The budget to hand an engine for one call: how long it may wait for a
        connection or a lock (``None``: no timeout, the engine's own limit applies)."""
        remaining = self.remaining()
        # Never zero: an engine given no time at all still gets one try.
        return None if remaining is None else max(remaining, _LEAST_WAIT_S)

    def expired(self) -> bool:
        remaining = self.remaining()
        return remaining is not None and remaining <= 0.0


def _seconds(value: object, field: str) -> float:
    # Timeouts are real waits: keep sub-second precision, but validate like durations.
    whole = duration_seconds(value, field)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, float):
        return value
    return float(whole)


def wait_budget(clock: Clock, deadline: Deadline, next_due: int | None, repoll: float) -> float:
    """How long to block: until the caller's timeout, the next due instant
    (on a realtime clock) or the safety-net re-poll, whichever is first."""
    budget = repoll
    if next_due is not None and isinstance(clock, RealtimeClock):
        budget = min(budget, max(0.0, next_due - clock.now()))
    remaining = deadline.remaining()
    if remaining is not None:
        budget = min(budget, remaining)
    return budget
