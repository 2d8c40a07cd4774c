"""Errors only this engine raises, and the mapping of driver errors onto the contract's."""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout

from alkstore.errors import AlkstoreError, EngineUnavailable


class SchemaNotMigrated(AlkstoreError):
    """``open(..., migrate=False)`` found the engine schema missing or older than this code.

    The caller acts differently: run the migrations (open once with
    ``migrate=True``, or ``alkstore_postgres.migrate(url, schema=...)``).
    """

    def __init__(self, schema: str, found: int, required: int) -> None:
        self.schema = schema
        self.found = found
        self.required = required
        state = (
            "has no alkstore tables"
            if found == 0
            else f"is at migration version {found}, this engine needs {required}"
        )
        super().__init__(
            f"schema {schema!r} {state}; opened with migrate=False, so nothing was changed. "
            "Migrate it first: alkstore_postgres.migrate(url, schema=...) or open once "
            "with migrate=True (the default)."
        )


# SQLSTATE classes meaning "the server is not (or no longer) serving this session":
# 08 connection exception, 57P0x admin/crash shutdown, cannot connect now,
# database dropped, idle-session timeout; 53300 too many connections.
_UNAVAILABLE_PREFIXES = ("08", "57P")
_UNAVAILABLE_STATES = frozenset({"53300"})


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached (rather than a bad statement)."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    sqlstate = exc.sqlstate
    if sqlstate is None:
        # Raised by libpq itself (refused, reset, closed): no server verdict at all.
        return True
    return sqlstate.startswith(_UNAVAILABLE_PREFIXES) or sqlstate in _UNAVAILABLE_STATES


def unavailable(exc: psycopg.Error, doing: str) -> EngineUnavailable:
    """The contract's error for a lost or unreachable server (chain ``exc`` with ``from``)."""
    return EngineUnavailable(f"PostgreSQL is unavailable while {doing}: {exc}")
