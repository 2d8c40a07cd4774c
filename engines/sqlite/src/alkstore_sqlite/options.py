"""The engine's own options (``alkstore.open(url, **opts)``), validated before anything opens."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from alkstore import InvalidOptions
from alkstore.constants import MAX_PAYLOAD_BYTES
from alkstore.core import DEFAULT_REPOLL_S
from alkstore.payload import check_max_payload_bytes

SYNCHRONOUS_LEVELS = ("NORMAL", "FULL")
"""``NORMAL`` (default): in WAL mode a commit survives an application crash but not
an OS crash or power loss. ``FULL``: every commit is fsynced and survives both."""

DEFAULT_BUSY_TIMEOUT_S = 5.0
DEFAULT_WAKE_POLL_S = 0.0003
DEFAULT_NOTIFICATIONS_KEEP = 10_000
MAX_NOTIFICATIONS_KEEP = 1_000_000_000
# Half SQLite's default: a queue commits a few small changes at a time, and every
# page a commit changes is written (and checksummed) whole into the WAL. Measured
# against 4 KiB pages: claim + ack and single enqueues ~17-20% faster, batches and
# 64 KiB payloads 3-5% slower (docs/engines/sqlite.md, Page size).
DEFAULT_PAGE_SIZE = 2048
PAGE_SIZES = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
"""The page sizes SQLite accepts."""


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
    page_size: int = DEFAULT_PAGE_SIZE
    """The page size, in bytes, of a database file the store creates (a file that
    already holds a database keeps its own)."""
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    """The store's payload size bound (contract §0.4): at most ``MAX_PAYLOAD_BYTES``."""


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
        page_size=_page_size(opts.get("page_size", DEFAULT_PAGE_SIZE)),
        max_payload_bytes=check_max_payload_bytes(opts.get("max_payload_bytes", MAX_PAYLOAD_BYTES)),
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


def _page_size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in PAGE_SIZES:
        raise InvalidOptions(
            f"page_size must be one of {', '.join(map(str, PAGE_SIZES))} (bytes), got {value!r}"
        )
    return value
