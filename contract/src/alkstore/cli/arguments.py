"""How the command line reads durations and engine options (stdlib only)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..errors import InvalidOptions, InvalidSpec
from ..spec import parse_spec

DURATION_FORMAT = "<n><s|m|h|d>, e.g. 7d, 12h, 30m, 90s"


def parse_duration(text: str) -> int:
    """Seconds of a duration such as ``7d``, ``12h``, ``30m`` or ``90s``.

    The grammar is the schedule spec's interval (``@every <n><unit>``, contract
    §5), so the two never drift apart: a positive integer without leading zeros
    and one unit.

    Raises:
        InvalidOptions: ``text`` is not such a duration.
    """
    try:
        interval = parse_spec(f"@every {text}").interval_s
    except InvalidSpec as exc:
        detail = f" ({exc.reason})" if exc.reason else ""
        raise InvalidOptions(f"{text!r} is not a duration: {DURATION_FORMAT}{detail}") from None
    assert interval is not None  # (an @every spec always has one)
    return interval


def parse_payload(text: str) -> Any:
    """A payload typed on the command line: JSON text, decoded.

    Raises:
        InvalidOptions: ``text`` is not one JSON value.
    """
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidOptions(
            f"the payload is not JSON ({exc}); quote text as JSON: '\"text\"'"
        ) from None


def parse_instant(text: str) -> int | datetime:
    """``--run-at``: epoch seconds, or an ISO 8601 instant with a UTC offset (``Z`` too).

    A time without an offset is refused, as ``EnqueueOpts`` refuses a naive
    ``datetime``: the shell's zone and the store's may differ.

    Raises:
        InvalidOptions: ``text`` is neither, or has no offset.
    """
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidOptions(
            f"--run-at {text!r} is neither epoch seconds nor an ISO 8601 instant"
        ) from None
    if when.tzinfo is None:
        raise InvalidOptions(
            f"--run-at {text!r} has no UTC offset: add one, e.g. {text}+00:00 or {text}Z"
        )
    return when


def parse_engine_option(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` as ``alkstore.open`` takes it: ``schema=app`` -> ``("schema", "app")``.

    ``VALUE`` is a JSON number, ``true``, ``false`` or ``null`` when it reads as one
    (``busy_timeout_s=10``, ``migrate=false``), else the text itself; a JSON string
    (``schema='"123"'``) forces text.

    Raises:
        InvalidOptions: ``text`` has no ``=`` or an empty name.
    """
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise InvalidOptions(f"an engine option is NAME=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        return name, raw
    if isinstance(value, (list, dict)):
        return name, raw  # no engine option takes a structure: keep what was typed
    return name, value


def engine_options(texts: tuple[str, ...]) -> dict[str, Any]:
    """Every ``--opt`` as keyword arguments for ``alkstore.open``; a name given twice is refused.

    Raises:
        InvalidOptions: an option is malformed or repeated.
    """
    options: dict[str, Any] = {}
    for text in texts:
        name, value = parse_engine_option(text)
        if name in options:
            raise InvalidOptions(f"engine option {name!r} is given twice")
        options[name] = value
    return options
