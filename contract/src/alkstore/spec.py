"""Schedule specs (contract §5.2): ``@every <n><unit>`` and cron, one cadence each.

``parse_spec(spec, timezone)`` checks a spec and returns its ``Cadence``
(``alkstore.cadence``): the one value the core computes every boundary with,
whatever the spec's kind.
"""

from __future__ import annotations

import re

from .cadence import Cadence, Due, EveryCadence
from .constants import MAX_SECONDS
from .cron_cadence import CronCadence
from .cron_grammar import parse_cron
from .errors import InvalidSpec
from .zones import UTC_ZONE, check_timezone, resolve_zone

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_EVERY = re.compile(r"@every ([1-9][0-9]{0,12})([smhd])")

__all__ = ["Cadence", "Due", "parse_spec"]


def parse_spec(spec: object, timezone: object = UTC_ZONE) -> Cadence:
    """The ``Cadence`` of a valid spec read in ``timezone``; anything else raises ``InvalidSpec``.

    The grammar (contract §5.2): ``@every <n><unit>`` (``n`` a positive integer
    without leading zeros, ``unit`` one of ``s``, ``m``, ``h``, ``d``, exactly one
    space, nothing around it), the five standard cron fields, or a cron nickname
    (``@hourly``, ``@daily``, ``@midnight``, ``@weekly``, ``@monthly``, ``@yearly``,
    ``@annually``). ``parse_spec("@every 5m").interval_s == 300``;
    ``parse_spec("0 9 * * MON-FRI", "Europe/Berlin").next_after(t)`` is the first
    weekday 09:00 in Berlin after ``t``.

    Raises:
        InvalidSpec: ``spec`` is not a ``str`` in the grammar (the reason names the
            cron field at fault), its interval is too large to store, or
            ``timezone`` is not a zone (the message names the zone).
    """
    if not isinstance(spec, str):
        raise InvalidSpec(spec, "a spec is a str")
    zone = check_timezone(timezone)
    match = _EVERY.fullmatch(spec)
    if match is not None:
        interval = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        if interval > MAX_SECONDS:
            raise InvalidSpec(spec, f"interval exceeds {MAX_SECONDS} s")
        return EveryCadence(spec=spec, timezone=zone, interval_s=interval)
    if spec.startswith("@every"):
        raise InvalidSpec(spec, "'@every' takes one positive integer and a unit: s, m, h or d")
    return CronCadence(spec, zone, parse_cron(spec), resolve_zone(zone))
