"""The engine's options (``alkstore.open(url, **opts)``), checked before any connection.

Every option is validated up front so a bad value is refused with
``InvalidOptions`` before anything touches the database -- in particular a
hostile schema name never reaches SQL (it is also only ever used quoted, as a
``psycopg.sql.Identifier``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from alkstore.constants import MAX_PAYLOAD_BYTES
from alkstore.core import DEFAULT_REPOLL_S
from alkstore.errors import InvalidOptions
from alkstore.payload import check_max_payload_bytes

DEFAULT_SCHEMA = "alkstore"
DEFAULT_MESSAGES_KEEP = 10_000
MAX_MESSAGES_KEEP = 2**31 - 1

SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""Lower-case, unquoted-identifier shape, at most 63 bytes (PostgreSQL's NAMEDATALEN - 1)."""

SYSTEM_SCHEMAS = frozenset({"information_schema"})
"""PostgreSQL's own schemas besides the ``pg_`` ones (``pg_catalog``, ``pg_toast``, ...):
tables created there would sit among the server's catalog views."""

POOLERS = frozenset({"transaction"})
"""The poolers ``pooler`` names (a session pooler needs nothing: leave it ``None``)."""

DEFAULT_RECONNECT_MAX_S = 1.0
MAX_RECONNECT_S = 60.0
DEFAULT_LOCK_TIMEOUT_S = 10.0
DEFAULT_CALL_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    schema: str = DEFAULT_SCHEMA
    """The schema holding every table of this store; it may hold others' tables too
    (every engine table and index is named ``alkstore_...``), but not be a system schema."""
    migrate: bool = True
    """Create or upgrade the schema at open; ``False`` only checks it is current."""
    pool_min_size: int = 1
    pool_max_size: int = 10
    repoll_s: float = DEFAULT_REPOLL_S
    """Safety-net re-poll of waiting calls (the only wake without LISTEN, e.g. PgBouncer)."""
    connect_timeout_s: float = 10.0
    """Bound on connecting and on waiting for a pooled connection."""
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
    """The most a call waits for a lock another session holds (a migration's ``ALTER
    TABLE``, a ``LOCK TABLE``, a row another transaction keeps locked); a waiting call
    (``claim_wait``, ``stream.wait``) waits no longer than its own remaining time either
    (see ``lock_waits``)."""
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    """The most one of the store's own units of work (a call's statements and their
    commit, and the commit of ``store.transaction()``) may take on the server; past it
    the store cancels it and raises ``EngineUnavailable`` (``watchdog``). Lock waits
    end sooner, at ``lock_timeout_s``: what this bounds is a commit waiting for a
    synchronous standby that stopped answering, which PostgreSQL never gives up on.
    Greater than ``lock_timeout_s`` (unset: 60 s, or twice ``lock_timeout_s`` when
    that is longer)."""
    reconnect_max_s: float = DEFAULT_RECONNECT_MAX_S
    """While the server is unreachable, the longest the store goes without trying to
    reconnect (the pool's attempts and the listener's backoff): calls work again within
    about this long once the server is back."""
    messages_keep: int = DEFAULT_MESSAGES_KEEP
    """Pub/sub messages too large for NOTIFY are stored; opening a store and each
    stored publish prune them to the newest this many."""
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    """The store's payload size bound (contract §0.4): at most ``MAX_PAYLOAD_BYTES``."""
    pooler: str | None = None
    """``"transaction"``: the URL reaches PostgreSQL through a pooler in transaction
    pooling mode (PgBouncer's ``pool_mode = transaction``), which hands each transaction
    any server connection: the store then keeps no state in a session (no prepared
    statements, every setting ``SET LOCAL`` inside the transaction that needs it) and
    listens only on ``listen_url``. ``None``: a server connection per session."""
    listen_url: str | None = None
    """A URL reaching the same database directly (not through a transaction pooler),
    for the store's one LISTEN connection (wakes and pub/sub). Behind a transaction
    pooler without it the store is poll-only: a waiting call sees other processes'
    work within ``repoll_s`` and the pub/sub profile is unavailable."""


OPTION_NAMES = frozenset(PostgresOptions.__dataclass_fields__)


def validate_schema_name(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidOptions(f"schema must be a str, got {type(value).__name__}")
    if SCHEMA_NAME.fullmatch(value) is None:
        raise InvalidOptions(
            f"schema {value!r} is not a valid engine schema name: use 1-63 characters "
            "of a-z, 0-9 and _, not starting with a digit"
        )
    if value.startswith("pg_") or value in SYSTEM_SCHEMAS:
        raise InvalidOptions(
            f"schema {value!r} is a PostgreSQL system schema (pg_*, information_schema); "
            "name a schema of your own"
        )
    return value


def _check_bool(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptions(f"{field} must be a bool, got {type(value).__name__}")
    return value


def _check_int(value: object, field: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"{field} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InvalidOptions(f"{field} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidOptions(f"{field} must be at most {maximum}, got {value}")
    return value


def _check_seconds(value: object, field: str, maximum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidOptions(f"{field} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or not 0 < value <= maximum:
        raise InvalidOptions(f"{field} must be within (0, {maximum:g}] seconds, got {value!r}")
    return float(value)


def _check_pooler(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in POOLERS:
        raise InvalidOptions(
            f"pooler must be None or one of {', '.join(sorted(POOLERS))}, got {value!r}"
        )
    return value


def _check_listen_url(value: object) -> str | None:
    # Its form is checked where URLs are (``engine.libpq_url``), before anything connects.
    if value is None or isinstance(value, str):
        return value
    raise InvalidOptions(f"listen_url must be a str or None, got {type(value).__name__}")


def parse_options(opts: Mapping[str, Any]) -> PostgresOptions:
    """Validate ``open``'s keyword options; unknown names are refused."""
    unknown = sorted(set(opts) - OPTION_NAMES)
    if unknown:
        raise InvalidOptions(
            f"unknown option(s) for the postgresql engine: {', '.join(unknown)}; "
            f"known: {', '.join(sorted(OPTION_NAMES))}"
        )
    defaults = PostgresOptions()
    lock_timeout_s = _check_seconds(
        opts.get("lock_timeout_s", defaults.lock_timeout_s), "lock_timeout_s", 3600
    )
    # Unset, it stays above a long lock_timeout_s: a lock wait must end first.
    call_timeout_s = _check_seconds(
        opts.get("call_timeout_s", max(defaults.call_timeout_s, 2 * lock_timeout_s)),
        "call_timeout_s",
        86_400,
    )
    if call_timeout_s <= lock_timeout_s:
        raise InvalidOptions(
            f"call_timeout_s ({call_timeout_s:g}) must be greater than lock_timeout_s "
            f"({lock_timeout_s:g}): a lock wait ends first, with its own error"
        )
    min_size = _check_int(opts.get("pool_min_size", defaults.pool_min_size), "pool_min_size", 0)
    max_size = _check_int(opts.get("pool_max_size", defaults.pool_max_size), "pool_max_size", 1)
    if min_size > max_size:
        raise InvalidOptions(
            f"pool_min_size ({min_size}) must not exceed pool_max_size ({max_size})"
        )
    return PostgresOptions(
        schema=validate_schema_name(opts.get("schema", defaults.schema)),
        migrate=_check_bool(opts.get("migrate", defaults.migrate), "migrate"),
        pool_min_size=min_size,
        pool_max_size=max_size,
        repoll_s=_check_seconds(opts.get("repoll_s", defaults.repoll_s), "repoll_s", 3600),
        connect_timeout_s=_check_seconds(
            opts.get("connect_timeout_s", defaults.connect_timeout_s), "connect_timeout_s", 3600
        ),
        lock_timeout_s=lock_timeout_s,
        call_timeout_s=call_timeout_s,
        reconnect_max_s=_check_seconds(
            opts.get("reconnect_max_s", defaults.reconnect_max_s),
            "reconnect_max_s",
            MAX_RECONNECT_S,
        ),
        messages_keep=_check_int(
            opts.get("messages_keep", defaults.messages_keep),
            "messages_keep",
            1,
            MAX_MESSAGES_KEEP,
        ),
        max_payload_bytes=check_max_payload_bytes(
            opts.get("max_payload_bytes", defaults.max_payload_bytes)
        ),
        pooler=_check_pooler(opts.get("pooler", defaults.pooler)),
        listen_url=_check_listen_url(opts.get("listen_url", defaults.listen_url)),
    )
