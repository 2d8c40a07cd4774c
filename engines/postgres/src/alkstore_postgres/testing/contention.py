"""The conformance kit's contention hooks (``alkstore_conformance.hooks``) for PostgreSQL.

* ``hold_write_path``: a session of its own takes every engine table of the
  store's schema ``IN EXCLUSIVE MODE`` and keeps its transaction open, as a
  migration or a ``CREATE INDEX`` would: plain reads go on, every write and
  claim waits for the lock, at most ``lock_timeout_s`` or the caller's own
  remaining time. Only the store's own schema is touched; the holder's session
  ends by itself (``idle_in_transaction_session_timeout``) should this process
  die holding it.
* ``outage_switch``: stores opened on the switch's spec reach the server
  through a loopback proxy (``proxy.CuttableProxy``) of this process;
  "unavailable" cuts it: every connection of those stores is closed and new
  ones are turned away, as in a server restart or a network cut, while the
  server itself (shared with others) is never touched. The spec's options
  make calls give up after 1 s (``connect_timeout_s``, ``lock_timeout_s``)
  and reconnect every 0.25 s at most.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from alkstore.engine import EngineSpec

from ..engine import libpq_url
from ..options import DEFAULT_SCHEMA
from .provisioning import dsn_as_url
from .proxy import HOST, CuttableProxy

OUTAGE_LIMIT_S = 1.0
"""``connect_timeout_s`` and ``lock_timeout_s`` of the stores the outage switch's spec
opens: how long a call that does not wait takes to give up while the server is cut off."""
OUTAGE_RECONNECT_MAX_S = 0.25

ENGINE_TABLES = """
SELECT tablename FROM pg_tables
 WHERE schemaname = %(schema)s
   AND tablename LIKE 'alkstore\\_%%' AND tablename <> 'alkstore_migrations'
 ORDER BY tablename
"""
"""The store's tables a write may need (the migrations table aside: opening reads it)."""


def hold_write_path(spec: EngineSpec, seconds: float) -> AbstractContextManager[None]:
    """Every engine table of ``spec``'s schema (the store has been opened once, so they
    exist) locked ``IN EXCLUSIVE MODE`` by another session, from entering until exit,
    ``seconds`` at most."""
    return _holding(libpq_url(spec.url), str(spec.opts.get("schema", DEFAULT_SCHEMA)), seconds)


@contextmanager
def _holding(conninfo: str, schema: str, seconds: float) -> Iterator[None]:
    holding, let_go = threading.Event(), threading.Event()
    failed: list[BaseException] = []
    milliseconds = max(1, math.ceil(seconds * 1000))

    def hold() -> None:
        try:
            with psycopg.connect(conninfo, connect_timeout=max(2, math.ceil(seconds))) as conn:
                # Never wait for the tables forever, and never hold them past seconds.
                conn.execute(f"SET lock_timeout = {milliseconds}".encode())
                conn.execute(f"SET idle_in_transaction_session_timeout = {milliseconds}".encode())
                tables = [row[0] for row in conn.execute(ENGINE_TABLES, {"schema": schema})]
                if not tables:
                    raise LookupError(f"schema {schema!r} has no engine tables: open it first")
                conn.execute(
                    sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(
                        sql.SQL(", ").join(sql.Identifier(schema, t) for t in tables)
                    )
                )
                holding.set()
                let_go.wait(seconds)
                conn.rollback()
        except BaseException as exc:
            failed.append(exc)
            holding.set()

    holder = threading.Thread(target=hold, name="alkstore-pg-holder", daemon=True)
    holder.start()
    holding.wait(seconds)
    try:
        if failed:
            raise RuntimeError(f"could not lock the tables of schema {schema!r}") from failed[0]
        yield
    finally:
        let_go.set()
        holder.join(seconds)


@dataclass(frozen=True, slots=True)
class OutageSwitch:
    """What ``outage_switch`` yields: the spec to open stores on (through the proxy),
    their limit for a call that does not wait, and the switch itself."""

    spec: EngineSpec
    proxy: CuttableProxy
    give_up_s: float = OUTAGE_LIMIT_S

    def unavailable(self, seconds: float) -> AbstractContextManager[None]:
        return _cut(self.proxy, seconds)


@contextmanager
def _cut(proxy: CuttableProxy, seconds: float) -> Iterator[None]:
    # The switch is restored on leaving, and after seconds at most.
    timer = threading.Timer(seconds, proxy.restore)
    timer.daemon = True
    proxy.cut()
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        proxy.restore()


@contextmanager
def outage_switch(spec: EngineSpec) -> Iterator[OutageSwitch]:
    """A proxy to ``spec``'s server for as long as the context lasts."""
    params = conninfo_to_dict(libpq_url(spec.url))
    with CuttableProxy(_target(params)) as proxy:
        params.pop("hostaddr", None)
        params.update(host=HOST, port=str(proxy.port))
        url = dsn_as_url(make_conninfo(**{k: str(v) for k, v in params.items()}))
        opts = {
            **spec.opts,
            "connect_timeout_s": OUTAGE_LIMIT_S,
            "lock_timeout_s": OUTAGE_LIMIT_S,
            "reconnect_max_s": OUTAGE_RECONNECT_MAX_S,
        }
        yield OutageSwitch(EngineSpec(url=url, opts=opts), proxy)


def _target(params: Mapping[str, object]) -> tuple[str, int] | str:
    """Where the proxy connects: the server's TCP address, or its unix socket."""
    host = str(params.get("hostaddr") or params.get("host") or "")
    port = int(str(params.get("port") or 5432).split(",")[0])
    host = host.split(",")[0]
    if not host or host.startswith("/"):
        directory = host or "/var/run/postgresql"
        return os.path.join(directory, f".s.PGSQL.{port}")
    return (host, port)
