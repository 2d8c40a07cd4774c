"""The ``EngineProvider`` registered as ``postgresql`` (alias ``postgres``)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from alkstore.clock import Clock, check_clock
from alkstore.constants import CONTRACT_VERSION
from alkstore.core import CoreStore
from alkstore.driver import Driver
from alkstore.engine import Capabilities, EngineSpec
from alkstore.errors import InvalidOptions

from .clock import ServerClock
from .driver import PostgresDriver, session_target
from .errors import contract_error
from .loop_io import LoopDriver
from .migrations import ensure_schema
from .options import DEFAULT_SCHEMA, PostgresOptions, parse_options, validate_schema_name

if TYPE_CHECKING:
    from .testing.contention import OutageSwitch

ENGINE_NAME: Final = "postgresql"
CAPABILITIES: Final = Capabilities(
    scheduler=True,
    streams=True,
    pubsub=True,
    ops=True,
    snooze=True,
    cron=True,
    unique=True,
    periodic=True,
    limits=True,
    key_limits=True,
    results=True,
    workers=True,
    dependencies=True,
    metadata=True,
    async_acks=True,
    async_native=True,
)
"""Every optional profile: scheduler, streams, pub/sub, ops, snooze, cron, unique,
periodic, limits, results, workers, async acks (and attach, locks, ...), and ``open_on_loop`` for
``alkstore.aio`` (see ``loop_io``)."""
__version__ = "0.1.0"

_URL_SCHEME = re.compile(r"^(postgres(?:ql)?)(\+[a-z0-9_]+)?://", re.IGNORECASE)


def capabilities_of(options: PostgresOptions) -> Capabilities:
    """What a store opened with ``options`` implements: every profile, but pub/sub
    when it has nowhere to LISTEN (behind a transaction pooler, no ``listen_url``)."""
    if options.pooler is not None and options.listen_url is None:
        return dataclasses.replace(CAPABILITIES, pubsub=False)
    return CAPABILITIES


def libpq_url(url: str) -> str:
    """The connection string libpq understands (``postgresql+psycopg://`` ->
    ``postgresql://``), checked before anything connects: a URL libpq cannot parse
    (an unclosed ``[``, a bad ``%`` escape, an unknown ``?parameter``) or a port that
    is not a number is refused with ``InvalidOptions``."""
    if not isinstance(url, str):
        raise InvalidOptions(f"url must be a str, got {type(url).__name__}")
    match = _URL_SCHEME.match(url)
    if match is None:
        raise InvalidOptions(f"not a postgresql:// or postgres:// URL: {url.partition(':')[0]!r}")
    conninfo = "postgresql://" + url[match.end() :]
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        reason = _without_password(str(exc).strip(), conninfo)
        # Not chained: psycopg's message would show the password the reason masks.
        raise InvalidOptions(f"invalid postgresql URL: {reason}") from None
    _check_ports(params.get("port"))
    return conninfo


def _check_ports(value: object) -> None:
    # libpq would refuse it only when connecting, as if the server were unreachable.
    if value is None:
        return
    for port in str(value).split(","):
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise InvalidOptions(f"invalid postgresql URL: port {port!r} is not a TCP port")


def _without_password(message: str, conninfo: str) -> str:
    """``message`` with the URL's password (as written, and decoded) masked: libpq
    quotes the token it could not parse, which may be the password."""
    authority = conninfo[len("postgresql://") :].split("/", 1)[0]
    userinfo, at, _ = authority.rpartition("@")
    _, colon, password = userinfo.partition(":")
    if not (at and colon and password):
        return message
    for secret in {password, unquote(password)}:
        if secret:
            message = message.replace(secret, "***")
    return message


def open_store(
    url: str,
    *,
    clock: Clock | None = None,
    wrap: Callable[[Driver[Any]], Driver[Any]] | None = None,
    **opts: Any,
) -> CoreStore:
    """Open (creating or migrating the schema unless ``migrate=False``) a store."""
    return _open(url, clock, wrap, None, opts)


def _open(
    url: str,
    clock: Clock | None,
    wrap: Callable[[Driver[Any]], Driver[Any]] | None,
    loop: asyncio.AbstractEventLoop | None,
    opts: dict[str, Any],
) -> CoreStore:
    """``open_store``; with ``loop``, a store whose database I/O runs on that event
    loop (``loop_io``)."""
    options = parse_options(opts)  # before any connection: bad options touch nothing
    check_clock(clock)
    conninfo = libpq_url(url)
    if options.listen_url is not None:
        options = dataclasses.replace(options, listen_url=libpq_url(options.listen_url))
    # The default clock follows the server; a ServerClock passed in is kept measured too.
    server_clock = clock if isinstance(clock, ServerClock) else None
    if clock is None:
        server_clock = ServerClock()
    if loop is None:
        driver = PostgresDriver(conninfo, options, server_clock)
    else:
        driver = LoopDriver(conninfo, options, server_clock, _usable_loop(loop))
    try:
        return CoreStore(
            wrap(driver) if wrap is not None else driver,
            clock=clock if clock is not None else server_clock,
            repoll_s=options.repoll_s,
            capabilities=capabilities_of(options),
            engine_name=ENGINE_NAME,
            max_payload_bytes=options.max_payload_bytes,
        )
    except BaseException:
        driver.close()  # its pool and listener must not outlive a failed open
        raise


def _usable_loop(loop: object) -> asyncio.AbstractEventLoop:
    if not isinstance(loop, asyncio.AbstractEventLoop):
        raise InvalidOptions(f"loop must be an asyncio event loop, got {type(loop).__name__}")
    if loop.is_closed():
        raise InvalidOptions("loop is closed: open the store on a running event loop")
    if not loop.is_running():
        raise InvalidOptions("loop is not running: open the store on a running event loop")
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        # Opening waits for the loop to connect: on its own thread it would wait forever.
        raise InvalidOptions(
            "open_on_loop() waits while the loop connects, so it must not run on that "
            "loop's thread: use 'await alkstore.aio.open(url)'"
        )
    return loop


def migrate(url: str, *, schema: str = DEFAULT_SCHEMA, connect_timeout_s: float = 10.0) -> int:
    """Create or upgrade the engine schema (for deployments that open with
    ``migrate=False``); returns the schema's migration version."""
    name = validate_schema_name(schema)
    timeout = parse_options({"connect_timeout_s": connect_timeout_s}).connect_timeout_s
    conninfo = libpq_url(url)
    target = session_target(conninfo)
    try:
        with psycopg.connect(
            conninfo, autocommit=True, connect_timeout=max(2, math.ceil(timeout)), **target
        ) as conn:
            return ensure_schema(conn, name, migrate=True)
    except psycopg.Error as exc:
        error = contract_error(exc, "migrating")
        if error is not None:
            raise error from exc
        raise


class PostgresEngine:
    """``alkstore.EngineProvider`` for PostgreSQL."""

    name: str = ENGINE_NAME
    version: str = __version__
    contract_version: str = CONTRACT_VERSION
    capabilities: Capabilities = CAPABILITIES

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> CoreStore:
        return open_store(url, clock=clock, **opts)

    def open_on_loop(
        self, url: str, loop: asyncio.AbstractEventLoop, *, clock: Clock | None = None, **opts: Any
    ) -> CoreStore:
        """``open``, with the database I/O on ``loop`` (psycopg's ``AsyncConnection`` and
        ``AsyncConnectionPool``, LISTEN in a task); for ``alkstore.aio.open``, which calls
        it off the loop and then calls the store from threads of its own. The store is the
        same ``CoreStore`` over the same driver; ``attach`` takes a ``psycopg.AsyncConnection``
        and ``tx.connection`` is one (contract §13)."""
        return _open(url, clock, None, loop, opts)

    def open_with_driver_wrapper(
        self,
        url: str,
        wrap: Callable[[Driver[Any]], Driver[Any]],
        *,
        clock: Clock | None = None,
        **opts: Any,
    ) -> CoreStore:
        """The conformance kit's fault-injection hook: ``open`` over ``wrap(driver)``."""
        return open_store(url, clock=clock, wrap=wrap, **opts)

    def provision(self) -> AbstractContextManager[EngineSpec]:
        """An empty schema on a server for the conformance kit (``testing.provisioning``):
        ``$ALKSTORE_PG_DSN``, else a throwaway server; one a finished provision emptied,
        else a fresh one; emptied for the next or dropped afterwards."""
        from .testing.provisioning import provision  # test infrastructure, loaded on use

        return provision()

    def provision_unopened(self) -> AbstractContextManager[EngineSpec]:
        """The conformance kit's hook for the first-open races: a schema that does not
        exist yet, so the store's first open builds it."""
        from .testing.provisioning import provision_unopened

        return provision_unopened()

    def provision_beside(self, spec: EngineSpec) -> AbstractContextManager[EngineSpec]:
        """The conformance kit's hook for isolation between stores on one server:
        another schema in the database ``spec`` names, as ``provision`` hands out."""
        from .testing.provisioning import provision_beside

        return provision_beside(spec)

    def hold_write_path(self, spec: EngineSpec, seconds: float) -> AbstractContextManager[None]:
        """The conformance kit's contention hook (``testing.contention``): another session
        locks the store's tables ``IN EXCLUSIVE MODE`` until exit, ``seconds`` at most."""
        from .testing.contention import hold_write_path  # test infrastructure, loaded on use

        return hold_write_path(spec, seconds)

    def outage_switch(self, spec: EngineSpec) -> AbstractContextManager[OutageSwitch]:
        """The conformance kit's outage hook (``testing.contention``): stores opened on the
        switch's spec reach the server through a loopback proxy it can cut."""
        from .testing.contention import outage_switch  # test infrastructure, loaded on use

        return outage_switch(spec)

    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], psycopg.Connection[Any]]:
        """The conformance kit's hook for ``attach``: each call opens a new, caller-owned
        ``psycopg.Connection`` (not autocommit: its first statement opens a transaction)."""
        conninfo = libpq_url(spec.url)
        return lambda: psycopg.connect(conninfo)

    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]:
        """The conformance kit's hook for its report: the server and driver behind ``spec``."""
        with psycopg.connect(libpq_url(spec.url), autocommit=True) as conn:
            server_version = conn.info.parameter_status("server_version")
        return {
            "server_version": server_version,
            "driver": f"psycopg {psycopg.__version__}",
            "libpq": psycopg.pq.version(),
            "provisioned": f"schema {spec.opts.get('schema')!s}, emptied or dropped after use",
        }

    def __repr__(self) -> str:
        return f"<alkstore engine {self.name} {self.version}>"


ENGINE: Final = PostgresEngine()
"""The one provider instance both entry points (``postgresql``, ``postgres``) name."""

__all__ = [
    "DEFAULT_SCHEMA",
    "ENGINE",
    "ENGINE_NAME",
    "PostgresEngine",
    "PostgresOptions",
    "libpq_url",
    "migrate",
    "open_store",
]
