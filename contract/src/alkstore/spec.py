"""Schedule spec grammar v1 (contract §5): ``@every <n><unit>``, unit ``s|m|h|d``."""

from __future__ import annotations

import re

from .constants import MAX_SECONDS
from .errors import InvalidSpec

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_EVERY = re.compile(r"@every ([1-9][0-9]{0,12})([smhd])")


def parse_spec(spec: object) -> int:
    """The interval in seconds of a valid spec; anything else raises ``InvalidSpec``.

    The grammar (contract §5) is ``@every <n><unit>``: ``n`` a positive integer
    without leading zeros, ``unit`` one of ``s``, ``m``, ``h``, ``d``, exactly one
    space, nothing around it. ``parse_spec("@every 5m") == 300``.

    Raises:
        InvalidSpec: ``spec`` is not a ``str`` in the grammar (cron strings
            included), or its interval is too large to store.
    """
    if not isinstance(spec, str):
        raise InvalidSpec(spec, "a spec is a str")
    match = _EVERY.fullmatch(spec)
    if match is None:
        raise InvalidSpec(spec)
    interval = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if interval > MAX_SECONDS:
        raise InvalidSpec(spec, f"interval exceeds {MAX_SECONDS} s")
    return interval
