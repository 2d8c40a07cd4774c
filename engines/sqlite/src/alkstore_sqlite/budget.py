"""How long one engine call may wait for locks, and how it waits.

Each call has one budget: ``busy_timeout_s``, or the caller's remaining time
(``wait_s``, e.g. what is left of a ``claim_wait`` timeout) when that is
shorter. Everything the call waits for comes out of that one budget: the
writer gate (held by another thread or process) and SQLite's write lock held
by a connection outside alkstore. Once it is spent the call fails with
``EngineUnavailable`` saying what was held, for how long, and which limit
applied.

Waiting is a try followed by pauses that start well under a millisecond and
double up to ``LONGEST_PAUSE_S``: short enough that a lock released by a
writer is picked up within about a write's own duration, long enough that a
lock held for seconds costs a few hundred tries a second.
"""

from __future__ import annotations

import time

FIRST_PAUSE_S = 0.00005
LONGEST_PAUSE_S = 0.002
_DOUBLINGS = 6  # FIRST_PAUSE_S * 2**6 passes LONGEST_PAUSE_S


def limit_s(wait_s: float | None, busy_timeout_s: float) -> float:
    """The seconds a call may wait in total."""
    if wait_s is None or wait_s >= busy_timeout_s:
        return busy_timeout_s
    return max(wait_s, 0.0)


def describe_limit(wait_s: float | None, busy_timeout_s: float) -> str:
    """Which option set a call's limit, for error messages."""
    if wait_s is None or wait_s >= busy_timeout_s:
        return f"busy_timeout_s={busy_timeout_s:g}"
    return (
        f"the caller's remaining timeout ({max(wait_s, 0.0):.3g} s; "
        f"busy_timeout_s={busy_timeout_s:g})"
    )


def pause(attempt: int, deadline: float) -> bool:
    """Sleep before the next try (``attempt`` counts the pauses so far), never past
    ``deadline`` (``time.monotonic()``). ``False``, without sleeping, once the
    deadline has passed: the try made after the last pause was the last one."""
    left = deadline - time.monotonic()
    if left <= 0.0:
        return False
    time.sleep(min(FIRST_PAUSE_S * (1 << min(attempt, _DOUBLINGS)), LONGEST_PAUSE_S, left))
    return True
