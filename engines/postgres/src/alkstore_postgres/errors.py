"""Errors only this engine raises, and the mapping of driver errors onto the contract's."""

from __future__ import annotations

import re

import psycopg
from psycopg_pool import PoolTimeout

from alkstore.errors import AlkstoreError, EngineMisconfigured, EngineUnavailable


class SchemaNotMigrated(AlkstoreError):
    """``open(..., migrate=False)`` found the engine schema missing or older than this code.

    The caller acts differently: run the migrations (open once with
    ``migrate=True``, or ``alkstore_postgres.migrate(url, schema=...)``).
    """

    def __init__(
        self, schema: str, found: int, required: int, *, legacy_layout: bool = False
    ) -> None:
        self.schema = schema
        self.found = found
        self.required = required
        self.legacy_layout = legacy_layout
        """The schema holds alkstore 0.1.0's unprefixed tables (migrating renames them)."""
        if legacy_layout:
            state = (
                f"holds the unprefixed tables of alkstore 0.1.0 (migration version {found}), "
                "which migrating renames to alkstore_*"
            )
        elif found == 0:
            state = "has no alkstore tables"
        else:
            state = f"is at migration version {found}, this engine needs {required}"
        super().__init__(
            f"schema {schema!r} {state}; opened with migrate=False, so nothing was changed. "
            "Migrate it first: alkstore_postgres.migrate(url, schema=...) or open once "
            "with migrate=True (the default)."
        )


# SQLSTATE classes meaning "the server is not (or no longer) serving this session":
# 08 connection exception, 57P0x admin/crash shutdown, cannot connect now,
# database dropped, idle-session timeout; 53300 too many connections; 55P03 a lock
# another session held past lock_timeout.
_UNAVAILABLE_PREFIXES = ("08", "57P")
_UNAVAILABLE_STATES = frozenset({"53300", "55P03"})

# 25006 read_only_sql_transaction: a standby (or a server not yet promoted) refused a
# write ("cannot execute INSERT in a read-only transaction"). Nothing was written, and
# a failover may make that server -- or another host of the URL -- the primary soon:
# unavailable, not misconfigured (docs/engines/postgres.md, Failover and standbys).
READ_ONLY_STATE = "25006"

# SQLSTATEs meaning "the server was reached and refused this configuration": invalid
# authorization (28000: no such role, no pg_hba.conf entry, login not allowed), wrong
# password (28P01), no such database (3D000), insufficient privilege (42501).
_MISCONFIGURED_STATES = frozenset({"28000", "28P01", "3D000", "42501"})

# A connection the server refuses fails inside libpq, which keeps only the message
# (no SQLSTATE): these are the server's FATAL messages for the states above, and
# libpq's own for a password it was never given. (A server with translated
# lc_messages words them differently; those refusals report as unavailable.)
_MISCONFIGURED_MESSAGES = re.compile(
    r'FATAL:\s+(?:database "[^"]*" does not exist'
    r'|role "[^"]*" does not exist'
    r'|role "[^"]*" is not permitted to log in'
    r"|\w+ authentication failed for user"
    r"|no pg_hba\.conf entry for"
    r"|permission denied for database)"
    r"|fe_sendauth: no password supplied"
)


# SQLSTATEs a transaction pooler causes when the store was not told it is there: a
# statement psycopg prepared on one server connection is missing on the next
# (26000 invalid_sql_statement_name) or already there under the same name,
# prepared by another client (42P05 duplicate_prepared_statement). The engine
# never names a prepared statement itself, so only a pooler makes these. A Bind
# that reaches another client's statement of the same name fails as a protocol
# violation (08P01) naming psycopg's statement ("_pg3_0"): that too.
_POOLER_STATES = frozenset({"26000", "42P05"})
_POOLER_PROTOCOL_VIOLATION = re.compile(r'prepared statement "_pg3_\d+"')

POOLER_HINT = (
    "a pooler in transaction mode (PgBouncer's pool_mode = transaction) is between the "
    "store and PostgreSQL, and it hands each transaction another server connection: "
    "open the store with pooler='transaction' (and a direct listen_url for prompt "
    "wakes), or point the URL at the server or a session-mode pool"
)


def behind_undeclared_pooler(exc: BaseException) -> bool:
    """Whether ``exc`` is what a transaction pooler the store was not told of causes."""
    if not isinstance(exc, psycopg.Error):
        return False
    if exc.sqlstate in _POOLER_STATES:
        return True
    return exc.sqlstate == "08P01" and bool(_POOLER_PROTOCOL_VIOLATION.search(str(exc)))


def is_misconfigured(exc: BaseException) -> bool:
    """Whether ``exc`` says the server refused this configuration (not transient): no
    such database or role, a wrong or missing password, a missing privilege."""
    if not isinstance(exc, psycopg.Error):
        return False
    if behind_undeclared_pooler(exc):
        return True
    sqlstate = exc.sqlstate
    if sqlstate is not None:
        return sqlstate in _MISCONFIGURED_STATES
    return isinstance(exc, psycopg.OperationalError) and bool(
        _MISCONFIGURED_MESSAGES.search(str(exc))
    )


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached (rather than a bad statement
    or a refused configuration)."""
    if isinstance(exc, PoolTimeout):
        return True
    if isinstance(exc, psycopg.Error) and exc.sqlstate == READ_ONLY_STATE:
        return True
    if not isinstance(exc, psycopg.OperationalError) or is_misconfigured(exc):
        return False
    sqlstate = exc.sqlstate
    if sqlstate is None:
        # Raised by libpq itself (refused, reset, closed): no server verdict at all.
        return True
    return sqlstate.startswith(_UNAVAILABLE_PREFIXES) or sqlstate in _UNAVAILABLE_STATES


def unavailable(exc: psycopg.Error, doing: str) -> EngineUnavailable:
    """The contract's error for a lost or unreachable server (chain ``exc`` with ``from``)."""
    return EngineUnavailable(f"PostgreSQL is unavailable while {doing}: {exc}")


def misconfigured(exc: psycopg.Error, doing: str) -> EngineMisconfigured:
    """The contract's error for a refused configuration (chain ``exc`` with ``from``)."""
    if behind_undeclared_pooler(exc):
        return EngineMisconfigured(f"PostgreSQL failed while {doing}: {POOLER_HINT}: {exc}")
    return EngineMisconfigured(
        f"PostgreSQL refused this configuration while {doing} (check the URL's database, "
        f"user and password, and the role's privileges): {exc}"
    )


def contract_error(exc: psycopg.Error, doing: str) -> AlkstoreError | None:
    """The contract's error for ``exc``, or ``None`` for an error of the statement itself
    (which is not masked: it propagates as psycopg raised it)."""
    if is_misconfigured(exc):
        return misconfigured(exc, doing)
    if is_unavailable(exc):
        return unavailable(exc, doing)
    return None
