"""The PostgreSQL engine as the conformance kit sees it behind PgBouncer (transaction mode).

``alkstore-conformance run --engine alkstore_postgres.testing.behind_pgbouncer:ENGINE``
certifies the ordinary engine with every store reached through a real PgBouncer
(``pool_mode = transaction``, ``testing.pgbouncer``): one PgBouncer per test
process, started on first use in front of the server ``provision()`` uses
(``$ALKSTORE_PG_DSN``, else a throwaway cluster) and stopped at interpreter exit.
Each spec opens its store with ``pooler="transaction"`` and a ``listen_url``
straight to the server (LISTEN needs a session of its own), so every profile,
prompt wakes and pub/sub included, is checked through the pooler.

The outage switch cuts both paths at once: a loopback proxy in front of PgBouncer
and one in front of the server for the listener.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from alkstore.engine import EngineSpec

from ..engine import PostgresEngine, libpq_url
from .contention import OUTAGE_LIMIT_S, OUTAGE_RECONNECT_MAX_S, OutageSwitch, _cut, _target
from .pgbouncer import LocalPgBouncer
from .provisioning import dsn_as_url, reused_schema, shared_server_dsn
from .proxy import HOST, CuttableProxy

_lock = threading.Lock()
_bouncer: LocalPgBouncer | None = None


def shared_pgbouncer() -> LocalPgBouncer:
    """This process's PgBouncer in front of ``shared_server_dsn()`` (started once)."""
    global _bouncer
    with _lock:
        if _bouncer is None:
            stack = ExitStack()
            bouncer = stack.enter_context(LocalPgBouncer(dsn_as_url(shared_server_dsn())))
            atexit.register(stack.close)
            _bouncer = bouncer
        return _bouncer


def _spec(schema: str) -> EngineSpec:
    direct = dsn_as_url(shared_server_dsn())
    opts = {"schema": schema, "pooler": "transaction", "listen_url": direct}
    return EngineSpec(url=shared_pgbouncer().url_for(direct), opts=opts)


def _through(proxy: CuttableProxy, url: str) -> str:
    params = conninfo_to_dict(libpq_url(url))
    params.pop("hostaddr", None)
    params.update(host=HOST, port=str(proxy.port))
    return dsn_as_url(make_conninfo(**{k: str(v) for k, v in params.items()}))


@dataclass(frozen=True, slots=True)
class PairedOutageSwitch(OutageSwitch):
    """An outage of the pooler's path and the listener's direct one together."""

    listen_proxy: CuttableProxy | None = None

    def unavailable(self, seconds: float) -> AbstractContextManager[None]:
        return _cut_both(self.proxy, self.listen_proxy, seconds)


@contextmanager
def _cut_both(
    proxy: CuttableProxy, listen_proxy: CuttableProxy | None, seconds: float
) -> Iterator[None]:
    with ExitStack() as stack:
        if listen_proxy is not None:
            stack.enter_context(_cut(listen_proxy, seconds))
        stack.enter_context(_cut(proxy, seconds))
        yield


class PgBouncerEngine(PostgresEngine):
    """``PostgresEngine`` whose test hooks put PgBouncer between the kit and the server."""

    def provision(self) -> AbstractContextManager[EngineSpec]:
        return _provision()

    def provision_unopened(self) -> AbstractContextManager[EngineSpec]:
        return _provision(fresh=True)

    def provision_beside(self, spec: EngineSpec) -> AbstractContextManager[EngineSpec]:
        return _provision()  # the same server and database, another schema

    def outage_switch(self, spec: EngineSpec) -> AbstractContextManager[OutageSwitch]:
        return _outage_switch(spec)

    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], psycopg.Connection[Any]]:
        """Caller-owned connections through the pooler, as an application behind it opens
        them: never preparing a statement (it would be lost with the server connection)."""
        conninfo = libpq_url(spec.url)
        return lambda: psycopg.connect(conninfo, prepare_threshold=None)

    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]:
        backend = super().describe_backend(spec)
        bouncer = shared_pgbouncer()
        backend["pooler"] = (
            f"PgBouncer ({bouncer.binary}) pool_mode={bouncer.pool_mode} on {HOST}:"
            f"{bouncer.port}; LISTEN on the direct listen_url"
        )
        return backend


@contextmanager
def _provision(*, fresh: bool = False) -> Iterator[EngineSpec]:
    with reused_schema(shared_server_dsn(), fresh=fresh) as schema:
        yield _spec(schema)


@contextmanager
def _outage_switch(spec: EngineSpec) -> Iterator[OutageSwitch]:
    listen_url = spec.opts.get("listen_url")
    with ExitStack() as stack:
        proxy = stack.enter_context(CuttableProxy(_target(conninfo_to_dict(libpq_url(spec.url)))))
        opts = {
            **spec.opts,
            "connect_timeout_s": OUTAGE_LIMIT_S,
            "lock_timeout_s": OUTAGE_LIMIT_S,
            "reconnect_max_s": OUTAGE_RECONNECT_MAX_S,
        }
        listen_proxy = None
        if isinstance(listen_url, str):
            direct = conninfo_to_dict(libpq_url(listen_url))
            listen_proxy = stack.enter_context(CuttableProxy(_target(direct)))
            opts["listen_url"] = _through(listen_proxy, listen_url)
        yield PairedOutageSwitch(
            EngineSpec(url=_through(proxy, spec.url), opts=opts), proxy, listen_proxy=listen_proxy
        )


ENGINE: Final = PgBouncerEngine()
"""For ``--engine alkstore_postgres.testing.behind_pgbouncer:ENGINE``."""
