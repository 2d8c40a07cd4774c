"""The engine's own options (``alkstore.open(url, **opts)``), validated before anything opens."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from alkstore import InvalidOptions
from alkstore.core import DEFAULT_REPOLL_S

SYNCHRONOUS_LEVELS = ("NORMAL", "FULL")
"""``NORMAL`` (default): in WAL mode a commit survives an application crash but not
an OS crash or power loss. ``FULL``: every commit is fsynced and survives both."""

DEFAULT_BUSY_TIMEOUT_S = 5.0
DEFAULT_WAKE_POLL_S = 0.0003
DEFAULT_NOTIFICATIONS_KEEP = 10_000
MAX_NOTIFICATIONS_KEEP = 1_000_000_000


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    synchronous: str = "NORMAL"
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S
    """How long a statement waits for a lock held by a writer outside alkstore's own
    writer lock (the caller's connections, the sqlite3 shell) before giving up."""
    wake_poll_s: float = DEFAULT_WAKE_POLL_S
    """How often the watcher checks for other connections' commits while someone waits."""
    repoll_s: Any = DEFAULT_REPOLL_S
    """The core's safety-net re-poll of waiting calls (validated by ``CoreStore``)."""
    notifications_keep: int = DEFAULT_NOTIFICATIONS_KEEP
    """Opening a store prunes pub/sub's notifications table to the newest this many rows."""


_FIELDS = frozenset(SqliteOptions.__dataclass_fields__)


def parse_options(opts: Mapping[str, Any]) -> SqliteOptions:
    unknown = sorted(set(opts) - _FIELDS)
    if unknown:
        raise InvalidOptions(
            f"unknown sqlite engine option(s): {', '.join(unknown)}; "
            f"the options are {', '.join(sorted(_FIELDS))}"
        )
    return SqliteOptions(
        synchronous=_synchronous(opts.get("synchronous", "NORMAL")),
        busy_timeout_s=_seconds(
            opts.get("busy_timeout_s", DEFAULT_BUSY_TIMEOUT_S), "busy_timeout_s", 3600.0
        ),
        wake_poll_s=_seconds(opts.get("wake_poll_s", DEFAULT_WAKE_POLL_S), "wake_poll_s", 1.0),
        repoll_s=opts.get("repoll_s", DEFAULT_REPOLL_S),
        notifications_keep=_count(
            opts.get("notifications_keep", DEFAULT_NOTIFICATIONS_KEEP),
            "notifications_keep",
            MAX_NOTIFICATIONS_KEEP,
        ),
    )


def _synchronous(value: object) -> str:
    if not isinstance(value, str) or value.upper() not in SYNCHRONOUS_LEVELS:
        raise InvalidOptions(
            f"synchronous must be one of {', '.join(map(repr, SYNCHRONOUS_LEVELS))}, got {value!r}"
        )
    return value.upper()


def _seconds(value: object, field: str, maximum: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= maximum
    ):
        raise InvalidOptions(
            f"{field} must be a number of seconds in (0, {maximum:g}], got {value!r}"
        )
    return float(value)


def _count(value: object, field: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidOptions(f"{field} must be an int in [1, {maximum:_}], got {value!r}")
    return value
