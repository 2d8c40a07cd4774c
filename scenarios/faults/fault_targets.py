"""Fresh, not-yet-created stores to aim hostile ``open`` calls at, and their traces.

A refused ``alkstore.open(url, **opts)`` must leave nothing behind. Each
reference engine gets a target that hands out URLs/options of stores that do
not exist yet and can tell afterwards whether any of them was created: a
database file (SQLite) or an engine schema (PostgreSQL). This is the one
engine-specific part of the fault scenarios; other engines get no open rows.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

from alkstore import EngineSpec

PG_SCHEMA_PREFIX = "alkstore_hostile_"
SELECT_SCHEMAS = "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)"
DROP_SCHEMA = "DROP SCHEMA IF EXISTS {} CASCADE"


@dataclass(frozen=True, slots=True)
class Fresh:
    """The URL and options of a store nobody has created."""

    url: str
    opts: dict[str, Any] = field(default_factory=dict)


class OpenTarget(Protocol):
    kind: str
    """``"sqlite"`` or ``"postgresql"``: which URL rows apply."""

    def fresh(self) -> Fresh: ...

    def traces(self) -> list[str]:
        """What refused opens created (files, schemas); empty when nothing was."""
        ...

    def clear(self) -> None:
        """Remove every trace, so the next row starts clean."""
        ...


@dataclass
class SqliteTarget:
    directory: str
    kind: str = "sqlite"
    _made: int = 0

    def fresh(self) -> Fresh:
        self._made += 1
        path = os.path.join(self.directory, f"fresh-{self._made}.db")
        return Fresh(f"sqlite:///{quote(path)}")

    def traces(self) -> list[str]:
        return sorted(os.listdir(self.directory))

    def clear(self) -> None:
        for name in os.listdir(self.directory):
            os.remove(os.path.join(self.directory, name))


@dataclass
class PostgresTarget:
    server_url: str
    """A ``postgresql://`` URL of the server (the provisioned store's own)."""
    prefix: str
    kind: str = "postgresql"
    _made: int = 0

    def fresh(self) -> Fresh:
        self._made += 1
        return Fresh(self.server_url, {"schema": f"{self.prefix}{self._made}"})

    def traces(self) -> list[str]:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            rows = conn.execute(SELECT_SCHEMAS, (self.prefix,)).fetchall()
        return sorted(str(row[0]) for row in rows)

    def clear(self) -> None:
        import psycopg
        from psycopg import sql

        names = self.traces()
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            for name in names:
                conn.execute(sql.SQL(DROP_SCHEMA).format(sql.Identifier(name)))


@contextmanager
def open_target(spec: EngineSpec) -> Iterator[OpenTarget | None]:
    """A target next to the store ``spec`` names; ``None`` for engines not known here."""
    scheme = urlsplit(spec.url).scheme.lower()
    if scheme == "sqlite":
        directory = tempfile.mkdtemp(prefix="alkstore-hostile-")
        try:
            yield SqliteTarget(directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    elif scheme.split("+")[0] in ("postgresql", "postgres"):
        target = PostgresTarget(spec.url, f"{PG_SCHEMA_PREFIX}{secrets.token_hex(4)}_")
        try:
            yield target
        finally:
            target.clear()
    else:
        yield None


def with_userinfo(url: str, userinfo: str) -> str:
    """``url`` with its ``user[:password]@`` replaced (for malformed-credential rows)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{host}"))


def with_port(url: str, port: str) -> str:
    """``url`` with its port replaced by ``port`` verbatim (for malformed-port rows)."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    host = hostport.rsplit(":", 1)[0] if not hostport.endswith("]") else hostport
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{host}:{port}"))


def with_query(url: str, query: str) -> str:
    return f"{url}{'&' if urlsplit(url).query else '?'}{query}"
