"""``provision()`` for the conformance kit: a schema per store, one server per process.

The server is ``$ALKSTORE_PG_DSN`` when set (the nox sessions start one and
export it); otherwise ONE throwaway server per process, started lazily through
``server.provision_server()`` and stopped at interpreter exit. Each
``provision()`` names a schema no other store uses: one a finished
``provision()`` of this process emptied (``reuse``: building a schema costs some
200 ms of server CPU), else a fresh name, which the store creates on open.
Afterwards it is emptied for the next one, or dropped -- CASCADE -- when it is
not exactly what the migrations build. ``provision_unopened()`` always names a
fresh schema (the first-open races need one nobody has opened);
``provision_beside(spec)`` another store in the database of ``spec``. The
yielded ``EngineSpec`` is plain data, so child processes reopen the same store
from it.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from urllib.parse import quote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from alkstore.engine import EngineSpec

from .reuse import EMPTIED, SCHEMA_PREFIX, drop_schemas, new_schema_name
from .server import DSN_ENV, provision_server

__all__ = ["SCHEMA_PREFIX", "provision", "provision_beside", "provision_unopened"]

_lock = threading.Lock()
_shared_dsn: str | None = None


def shared_server_dsn() -> str:
    """The DSN every ``provision()`` of this process uses (starting a server at most once)."""
    global _shared_dsn
    env = os.environ.get(DSN_ENV)
    if env:
        return env
    with _lock:
        if _shared_dsn is None:
            stack = ExitStack()
            server = stack.enter_context(provision_server())
            atexit.register(stack.close)
            _shared_dsn = server.dsn
        return _shared_dsn


def dsn_as_url(dsn: str) -> str:
    """A ``postgresql://`` URL for ``dsn`` (libpq URLs pass through; key=value strings
    are rewritten), so ``alkstore.open(spec.url)`` picks this engine by its scheme."""
    if dsn.startswith(("postgresql://", "postgres://")):
        return dsn
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    auth = f"{user}:{quote(password, safe='')}@" if password is not None else f"{user}@"
    hosts = _url_hosts(params.pop("host", ""), params.pop("port", ""), params)
    dbname = quote(params.pop("dbname", ""), safe="")
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())
    userinfo = auth if user or password else ""
    return f"postgresql://{userinfo}{hosts}/{dbname}{'?' + query if query else ''}"


def _url_hosts(host: str, port: str, params: dict[str, str]) -> str:
    """The URL's ``host:port,host:port`` list for libpq's multi-host ``host=a,b
    port=p,q`` (one port applies to every host). Lists libpq would refuse (more
    ports than hosts) stay key=value parameters in ``params``, for libpq to judge."""
    hosts, ports = host.split(","), port.split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    if len(ports) != len(hosts):
        params.update(host=host, port=port)
        return ""
    return ",".join(
        quote(h, safe="") + (f":{p}" if p else "") for h, p in zip(hosts, ports, strict=True)
    )


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_schemas(conn, schema)


@contextmanager
def provision() -> Iterator[EngineSpec]:
    """An empty, isolated store: yields ``EngineSpec(url, {"schema": ...})``."""
    dsn = shared_server_dsn()
    with reused_schema(dsn) as schema:
        yield EngineSpec(url=dsn_as_url(dsn), opts={"schema": schema})


@contextmanager
def provision_unopened() -> Iterator[EngineSpec]:
    """A store no process has opened: a schema that does not exist yet."""
    dsn = shared_server_dsn()
    with reused_schema(dsn, fresh=True) as schema:
        yield EngineSpec(url=dsn_as_url(dsn), opts={"schema": schema})


@contextmanager
def provision_beside(spec: EngineSpec) -> Iterator[EngineSpec]:
    """Another store in the database ``spec`` names: a second store on the same
    server, sharing its NOTIFY channels' namespace."""
    from ..engine import libpq_url  # the engine imports this module lazily, on use

    with reused_schema(libpq_url(spec.url)) as schema:
        yield EngineSpec(url=spec.url, opts={**spec.opts, "schema": schema})


@contextmanager
def reused_schema(dsn: str, *, fresh: bool = False) -> Iterator[str]:
    """A schema of the server ``dsn`` for one store (``fresh``: one that does not exist
    yet), emptied for reuse or dropped afterwards."""
    schema = new_schema_name() if fresh else EMPTIED.take(dsn)
    try:
        yield schema
    finally:
        EMPTIED.give_back(dsn, schema)
