"""A schedule's time zone (contract §5.7): an IANA name, resolved through ``zoneinfo``.

``"UTC"`` resolves without the time-zone database, so a process on a machine
that has none (a minimal container without the system's tzdata and without
the ``tzdata`` package) still runs every ``@every`` schedule and every cron
schedule in UTC, as it did before zones existed.
"""

from __future__ import annotations

import re
from datetime import UTC, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidSpec

UTC_ZONE = "UTC"
"""The zone every schedule has unless it names another."""

# The shape of an IANA name: letters, digits and ``_+-``, in ``/``-separated parts.
_IANA_NAME = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
_MAX_ZONE_LENGTH = 64  # the longest IANA name is 32 characters

# Links to whatever zone the machine itself is set to: a schedule's zone must mean
# the same on every machine that ticks it.
_MACHINE_LOCAL = frozenset({"localtime", "posixrules"})


def check_timezone(value: object) -> str:
    """``value`` if it names a time zone this process can resolve, else ``InvalidSpec``.

    Raises:
        InvalidSpec: ``value`` is not a ``str``, is empty, is not an IANA name, or
            names no zone of the time-zone database; the message names the zone.
    """
    if not isinstance(value, str):
        raise InvalidSpec(None, f"a time zone is a str, got {type(value).__name__}", timezone=value)
    if value == UTC_ZONE:
        return value
    if not value:
        raise InvalidSpec(None, "a time zone is an IANA name, got an empty string", timezone=value)
    if len(value) > _MAX_ZONE_LENGTH or not _IANA_NAME.fullmatch(value) or value in _MACHINE_LOCAL:
        raise InvalidSpec(None, "not an IANA time zone name", timezone=value)
    resolve_zone(value)
    return value


@lru_cache(maxsize=256)
def resolve_zone(name: str) -> tzinfo:
    """The ``tzinfo`` of a zone name ``check_timezone`` accepts.

    Raises:
        InvalidSpec: the time-zone database of this process has no such zone (a
            name accepted elsewhere, by a process with a newer database, may be
            unknown here).
    """
    if name == UTC_ZONE:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidSpec(
            None,
            "no such zone in this process's time-zone database (the system's, or the "
            "tzdata package)",
            timezone=name,
        ) from None
