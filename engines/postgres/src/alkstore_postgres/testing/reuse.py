"""Schemas a finished ``provision()`` emptied, for the next one to hand out again.

Building a store's schema runs every migration (about 90 statements, 20 tables):
some 200 ms of server CPU, and a certification builds one per test and per
Hypothesis example -- about 1,600 of them. Emptying a used one costs a catalog
read and a ``TRUNCATE`` of the tables the test wrote. Through the contract an
emptied store cannot be told from a new one, except that it has been opened
before, which only the first-open races care about; they take a store from
``provision_unopened()``.

A schema is reused only when it is exactly what this engine's migrations build --
its *shape* (tables, columns, indexes, constraints, functions, triggers, the
applied versions; the schema's own name factored out) equals that of a schema
migrated here for reference -- and no other session holds its tables. Anything
else (a test that altered it, a session still inside a transaction on it) is
dropped, as every store was before. Each process keeps its own schemas: a child
forked from it starts with none, and only the process that made them drops them
at exit.
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
from typing import Any, Final

import psycopg
from psycopg import sql

from ..migrations import ensure_schema

SCHEMA_PREFIX: Final = "alkstore_t_"

LOCK_WAIT: Final = "2s"
"""How long emptying waits for another session's hold on the tables before the schema
is dropped instead (a test's killed child is gone by then; a live one is not ours)."""

SHAPE: Final = """
SELECT md5(string_agg(replace(item, %(schema)s, '{schema}'), E'\\n' ORDER BY item))
FROM (
    SELECT format('relation %%s %%s %%s', c.relname, c.relkind, c.reloptions) AS item
    FROM pg_catalog.pg_class AS c
    WHERE c.relnamespace = n.oid
    UNION ALL
    SELECT format('column %%s.%%s %%s %%s %%s', c.relname, a.attname,
                  format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  pg_catalog.pg_get_expr(d.adbin, d.adrelid))
    FROM pg_catalog.pg_attribute AS a
    JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid
    LEFT JOIN pg_catalog.pg_attrdef AS d ON (d.adrelid, d.adnum) = (a.attrelid, a.attnum)
    WHERE c.relnamespace = n.oid AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'index ' || pg_catalog.pg_get_indexdef(i.indexrelid)
    FROM pg_catalog.pg_index AS i
    JOIN pg_catalog.pg_class AS c ON c.oid = i.indrelid
    WHERE c.relnamespace = n.oid
    UNION ALL
    SELECT format('constraint %%s %%s', k.conname, pg_catalog.pg_get_constraintdef(k.oid))
    FROM pg_catalog.pg_constraint AS k
    WHERE k.connamespace = n.oid
    UNION ALL
    SELECT 'function ' || pg_catalog.pg_get_functiondef(p.oid)
    FROM pg_catalog.pg_proc AS p
    WHERE p.pronamespace = n.oid
    UNION ALL
    SELECT 'trigger ' || pg_catalog.pg_get_triggerdef(t.oid)
    FROM pg_catalog.pg_trigger AS t
    JOIN pg_catalog.pg_class AS c ON c.oid = t.tgrelid
    WHERE c.relnamespace = n.oid AND NOT t.tgisinternal
) AS items
"""
"""One digest of everything the migrations create in a schema (no row for a schema
that does not exist, NULL for an empty one). The versions applied are compared apart
(``VERSIONS``)."""

SHAPE_OF_SCHEMA: Final = (
    "SELECT (" + SHAPE + ") FROM pg_catalog.pg_namespace AS n WHERE n.nspname = %(schema)s"
)

VERSIONS: Final = "SELECT array_agg(version ORDER BY version) FROM {}.alkstore_migrations"

WRITTEN_TABLES: Final = """
SELECT c.relname
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind = 'r' AND c.relname <> 'alkstore_migrations'
  AND pg_catalog.pg_relation_size(c.oid) > 0
ORDER BY c.relname
"""
"""The tables anything was ever written to since they were built or last truncated: a
table's heap has no page until its first row (even one rolled back)."""


def new_schema_name() -> str:
    return SCHEMA_PREFIX + secrets.token_hex(8)


def drop_schemas(conn: psycopg.Connection[Any], *schemas: str) -> None:
    if schemas:
        names = sql.SQL(", ").join(sql.Identifier(schema) for schema in schemas)
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(names))


class EmptiedSchemas:
    """This process's emptied schemas, per server DSN."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self._ready: dict[str, list[str]] = {}
        self._reference: dict[str, tuple[str, list[int]]] = {}
        self._exit_registered = False

    def take(self, dsn: str) -> str:
        """A schema name for a new store: an emptied schema when there is one, else a
        fresh name (the store creates the schema on open)."""
        with self._lock:
            self._forget_if_forked()
            ready = self._ready.get(dsn)
            return ready.pop() if ready else new_schema_name()

    def give_back(self, dsn: str, schema: str) -> None:
        """Empty ``schema`` for a later ``take``, or drop it when it cannot be reused."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            reference = self._reference_of(conn, dsn)
            if _empty(conn, schema, reference):
                with self._lock:
                    self._forget_if_forked()
                    self._ready.setdefault(dsn, []).append(schema)
                    self._drop_at_exit()
            else:
                drop_schemas(conn, schema)

    def _reference_of(self, conn: psycopg.Connection[Any], dsn: str) -> tuple[str, list[int]]:
        """The shape and versions of a schema this engine's migrations just built (built
        once per process and server, then handed out like any emptied schema)."""
        with self._lock:
            self._forget_if_forked()
            known = self._reference.get(dsn)
        if known is not None:
            return known
        schema = new_schema_name()
        ensure_schema(conn, schema, migrate=True)
        reference = _shape(conn, schema)
        if reference is None:  # pragma: no cover - ensure_schema has just built it
            raise RuntimeError(f"the reference schema {schema} was not built")
        with self._lock:
            self._reference.setdefault(dsn, reference)
            self._ready.setdefault(dsn, []).append(schema)
            self._drop_at_exit()
            return self._reference[dsn]

    def _forget_if_forked(self) -> None:
        # A forked child shares its parent's schemas by name only: never its to reuse.
        if os.getpid() != self._owner:
            self._owner = os.getpid()
            self._ready = {}
            self._reference = {}
            self._exit_registered = False

    def _drop_at_exit(self) -> None:
        if not self._exit_registered:
            self._exit_registered = True
            atexit.register(self.drop_all)

    def drop_all(self) -> None:
        """Drop every emptied schema of this process (at interpreter exit)."""
        with self._lock:
            if os.getpid() != self._owner:
                return
            ready, self._ready = self._ready, {}
        for dsn, schemas in ready.items():
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    drop_schemas(conn, *schemas)
            except psycopg.Error:  # the server is already gone: so are its schemas
                pass


def _shape(conn: psycopg.Connection[Any], schema: str) -> tuple[str, list[int]] | None:
    row = conn.execute(SHAPE_OF_SCHEMA, {"schema": schema}).fetchone()
    if row is None or row[0] is None:  # no such schema (its store was never opened), or empty
        return None
    shape: str = row[0]
    try:
        [(versions,)] = conn.execute(sql.SQL(VERSIONS).format(sql.Identifier(schema)))
    except psycopg.errors.UndefinedTable:
        return None
    return shape, list(versions or [])


def _empty(conn: psycopg.Connection[Any], schema: str, reference: tuple[str, list[int]]) -> bool:
    """Empty ``schema`` in one transaction when it has the reference's shape; whether it
    did. Nothing is changed when it did not."""
    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
            if _shape(conn, schema) != reference:
                return False
            written = [name for (name,) in conn.execute(WRITTEN_TABLES, {"schema": schema})]
            if written:
                tables = sql.SQL(", ").join(sql.Identifier(schema, name) for name in written)
                # CASCADE: a written table's referencing tables go too (all of them ours).
                conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(tables))
    except psycopg.Error:
        return False
    return True


EMPTIED: Final = EmptiedSchemas()
"""The process's one set of emptied schemas (``provisioning`` hands them out)."""
