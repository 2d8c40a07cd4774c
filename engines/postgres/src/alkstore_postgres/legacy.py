"""The unprefixed table layout of alkstore 0.1.0, recognised and renamed in place.

alkstore 0.1.0 named its tables ``jobs``, ``dead_jobs``, ``locks``, ...,
``migrations``: in a schema shared with an application (``public``) they
collided with the application's own tables, and its version reader trusted
any table named ``migrations``. The engine now prefixes every name with
``alkstore_``. A schema still in the old layout is recognised from the
catalogs alone -- a ``migrations`` table with exactly alkstore's columns AND a
``jobs`` table with exactly alkstore's columns -- and only then is anything in
it read or renamed. Any other ``migrations`` table (a framework's) is never
touched.

The rename runs inside the migrating transaction, under the schema's
migration lock: tables, and with each table its constraints, indexes and
identity sequences (``jobs_pkey`` -> ``alkstore_jobs_pkey``), so the result is
exactly the layout a fresh store gets. Processes still running 0.1.0 lose
their tables at that commit: stop them before the upgrade.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg
from psycopg import sql

PREFIX: Final = "alkstore_"

LEGACY_TABLES: Final = (
    "jobs",
    "dead_jobs",
    "locks",
    "schedules",
    "streams",
    "stream_events",
    "stream_consumers",
    "messages",
    "migrations",
)
"""Every table alkstore 0.1.0 could have created (migration 1 made the first three)."""

LEGACY_MIGRATIONS_COLUMNS: Final = frozenset(
    {
        ("version", "integer"),
        ("description", "text"),
        ("applied_at", "timestamp with time zone"),
    }
)

LEGACY_JOBS_COLUMNS: Final = frozenset(
    {
        ("id", "bigint"),
        ("queue", "text"),
        ("state", "text"),
        ("payload", "text"),
        ("priority", "integer"),
        ("attempts", "integer"),
        ("max_attempts", "integer"),
        ("created_at", "bigint"),
        ("run_at", "bigint"),
        ("claimed_at", "bigint"),
        ("deadline", "bigint"),
        ("expires_at", "bigint"),
        ("worker_id", "text"),
        ("visibility_timeout_s", "bigint"),
        ("backoff_base_s", "bigint"),
        ("dead_letter_retention_s", "bigint"),
    }
)

COLUMNS_OF: Final = b"""
SELECT c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid
WHERE n.nspname = %(schema)s AND c.relname = ANY(%(tables)s) AND c.relkind = 'r'
  AND a.attnum > 0 AND NOT a.attisdropped
"""

PRESENT_TABLES: Final = b"""
SELECT c.relname
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname = ANY(%(tables)s) AND c.relkind = 'r'
"""

NAMES_OWNED_BY: Final = b"""
SELECT 'constraint', con.conname
FROM pg_catalog.pg_constraint AS con
WHERE con.conrelid = %(table)s::regclass
UNION ALL
SELECT 'index', i.relname
FROM pg_catalog.pg_index AS x
JOIN pg_catalog.pg_class AS i ON i.oid = x.indexrelid
WHERE x.indrelid = %(table)s::regclass
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint AS con WHERE con.conindid = i.oid)
UNION ALL
SELECT 'sequence', s.relname
FROM pg_catalog.pg_depend AS d
JOIN pg_catalog.pg_class AS s ON s.oid = d.objid
WHERE d.classid = 'pg_catalog.pg_class'::regclass
  AND d.refclassid = 'pg_catalog.pg_class'::regclass
  AND d.refobjid = %(table)s::regclass
  AND s.relkind = 'S' AND d.deptype IN ('a', 'i')
"""
"""A table's constraints, its other indexes (a constraint's index is renamed with
the constraint) and the sequences behind its identity or serial columns."""

LEGACY_VERSION: Final = "SELECT coalesce(max(version), 0) FROM {schema}.migrations"

RENAME_CONSTRAINT: Final = "ALTER TABLE {table} RENAME CONSTRAINT {old} TO {new}"
RENAME_INDEX: Final = "ALTER INDEX {old} RENAME TO {new}"
RENAME_SEQUENCE: Final = "ALTER SEQUENCE {old} RENAME TO {new}"
RENAME_TABLE: Final = "ALTER TABLE {old} RENAME TO {new}"


def legacy_version(conn: psycopg.Connection[Any], schema: str) -> int | None:
    """The migration version of ``schema``'s 0.1.0 layout; ``None`` when the schema is
    not in that layout (no such tables, or tables that are not alkstore's)."""
    rows = conn.execute(COLUMNS_OF, {"schema": schema, "tables": ["migrations", "jobs"]})
    columns: dict[str, set[tuple[str, str]]] = {"migrations": set(), "jobs": set()}
    for table, column, column_type in rows:
        columns[table].add((column, column_type))
    if columns["migrations"] != LEGACY_MIGRATIONS_COLUMNS:
        return None
    if columns["jobs"] != LEGACY_JOBS_COLUMNS:
        return None
    query = sql.SQL(LEGACY_VERSION).format(schema=sql.Identifier(schema))
    [(version,)] = conn.execute(query).fetchall()
    return int(version)


def rename_legacy_layout(conn: psycopg.Connection[Any], schema: str) -> None:
    """Rename every 0.1.0 table of ``schema`` (with what it owns) to its prefixed name.

    Call inside the migrating transaction, after ``legacy_version`` recognised it."""
    present = {
        row[0]
        for row in conn.execute(PRESENT_TABLES, {"schema": schema, "tables": list(LEGACY_TABLES)})
    }
    for table in (t for t in LEGACY_TABLES if t in present):
        qualified = sql.Identifier(schema, table)
        owned = conn.execute(NAMES_OWNED_BY, {"table": qualified.as_string(conn)}).fetchall()
        for kind, name in owned:
            if name.startswith(PREFIX):
                continue
            new = sql.Identifier(PREFIX + name)
            if kind == "constraint":
                conn.execute(
                    sql.SQL(RENAME_CONSTRAINT).format(
                        table=qualified, old=sql.Identifier(name), new=new
                    )
                )
            else:
                template = RENAME_INDEX if kind == "index" else RENAME_SEQUENCE
                conn.execute(sql.SQL(template).format(old=sql.Identifier(schema, name), new=new))
        conn.execute(
            sql.SQL(RENAME_TABLE).format(old=qualified, new=sql.Identifier(PREFIX + table))
        )
