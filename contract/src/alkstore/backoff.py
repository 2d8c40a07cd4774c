"""The retry backoff curve (contract §2, decision 010 §3): the one implementation.

Equal-jitter exponential: for attempt ``a`` and base ``b`` the ceiling is
``min(b * 2**(a-1), BACKOFF_CAP_S)`` and the delay is uniform over
``[ceiling / 2, ceiling]``, rounded up to whole seconds. The cap applies to
the ceiling, so capped retries keep their jitter and a fleet never herds.
"""

from __future__ import annotations

import math
import random

from .constants import BACKOFF_CAP_S
from .errors import InvalidOptions

# 2**12 * 1 s already exceeds the cap; larger exponents only risk huge ints.
_MAX_EXPONENT = 40


def retry_ceiling(base: int, attempt: int) -> int:
    """The upper end of the delay range for ``attempt`` (before jitter)."""
    if isinstance(base, bool) or not isinstance(base, int) or base < 0:
        raise InvalidOptions(f"backoff_base_s must be a non-negative int, got {base!r}")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidOptions(f"attempt must be an int >= 1, got {attempt!r}")
    exponent = min(attempt - 1, _MAX_EXPONENT)
    return int(min(base * 2**exponent, BACKOFF_CAP_S))


def retry_delay_range(base: int, attempt: int) -> tuple[int, int]:
    """Inclusive bounds of what ``retry_delay`` may return."""
    ceiling = retry_ceiling(base, attempt)
    return math.ceil(ceiling / 2), ceiling


def retry_delay(base: int, attempt: int, rng: random.Random | None = None) -> int:
    """Whole seconds to wait before retry number ``attempt`` of a job with ``base``.

    Equal jitter: uniform over ``[ceiling / 2, ceiling]`` with
    ``ceiling = min(base * 2**(attempt - 1), BACKOFF_CAP_S)``, rounded up; every
    engine uses this one curve (contract §2).

    Args:
        base: the job's ``backoff_base_s`` (a non-negative int).
        attempt: the job's ``attempts`` when the retry is scheduled (at least 1).
        rng: the random source; default the ``random`` module.

    Returns:
        The delay in whole seconds, within ``retry_delay_range(base, attempt)``.

    Raises:
        InvalidOptions: ``base`` or ``attempt`` is not an int in range.
    """
    ceiling = retry_ceiling(base, attempt)
    draw = (rng or random).uniform(ceiling / 2, ceiling)
    return min(math.ceil(draw), ceiling)
