"""Optional engine hooks the kit uses when an engine offers them.

**native_connection_factory** (certifies ``attach``):

``store.attach(conn)`` joins a connection the *caller* opened, and only the
engine knows how to open one (``sqlite3.connect(path)``,
``psycopg.connect(dsn)``, …). An engine that wants ``attach`` certified
exposes on its provider::

    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], Any]:
        '''A zero-argument callable; each call opens a NEW DB-API 2.0
        connection to the store ``spec`` names (the type ``store.attach``
        accepts), with a transaction already open. The caller owns it: it
        commits or rolls back and closes it.'''

Without the hook the attach properties are reported not_applicable.

**describe_backend** (for the report)::

    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]:
        '''JSON data about what backs the store ``spec`` names: server version,
        driver and its version, how provisioned, ...'''

The kit calls it once per test process on a freshly provisioned spec and
records the first answer as the report's ``engine.backend``. A hook that
raises, or answers something that is not a JSON object, is recorded as
``{"error": "..."}``: it never fails a test.

**open_with_driver_wrapper** (certifies crash atomicity at every statement)::

    def open_with_driver_wrapper(
        self, url: str, wrap: Callable[[Driver], Driver], *, clock=None, **opts
    ) -> Store:
        '''Open like open(), but build the store over wrap(engine_driver), so
        every alkstore.driver.Driver call goes through what wrap returns.'''

For an engine built on the shared core this is one line:
``CoreStore(wrap(driver), clock=clock, ...)``. The kit wraps the driver in a
proxy that counts statement calls inside a child process and SIGKILLs that
process right after statement N (``alkstore_conformance.helpers.faults``), for every
N of an operation, then checks the store shows all of the operation's
transaction or none of it. Without the hook those properties are reported
not_applicable.

**The server a provision uses** (an engine on a database server)::

    def provision(self):
        server = os.environ.get("ALKSTORE_CONFORMANCE_SERVER")  # SERVER_ENV
        ...  # a fresh database, schema or prefix on that server

``provision()`` takes no arguments, so the kit hands a server engine the address
of the server to provision on in the environment variable ``SERVER_ENV``: set it
with ``alkstore-conformance run --server URL`` (or ``pytest --alkstore-server
URL``), or export it yourself. Every test process the kit starts (xdist workers,
spawned children) inherits it. Read it with ``conformance_server()``; what the
value means (a URL, a DSN) is the engine's to document.

**provision_beside** (certifies isolation between stores on one server)::

    def provision_beside(self, spec: EngineSpec) -> AbstractContextManager[EngineSpec]:
        '''A context manager yielding the spec of a fresh, empty store on the SAME
        server as the store ``spec`` names (PostgreSQL: another schema of the same
        database; SQLite: another file in the same directory; in memory: another
        database of the same process), and removing that store on exit.'''

Two stores side by side on one server must share nothing: no job, lock,
schedule, stream event, pub/sub message or wake, not even through what the
server shares between them (a ``NOTIFY`` channel, a directory, a process-wide
registry). Without the hook the kit takes a second ``provision()``, which is
on the same server for most engines but need not be: the hook makes it so.

**provision_unopened** (for an engine whose ``provision()`` reuses stores)::

    def provision_unopened(self) -> AbstractContextManager[EngineSpec]:
        '''Like provision(), but the store has never been opened: its first open
        builds it.'''

``provision()`` may hand out a store an earlier one emptied (building one can
cost more than the test that uses it): through the contract it is as empty as a
new one, but it has been opened before. The races of first opens
(``STORE-OPEN-IDEMPOTENT``) need a store nobody has opened, and take it from this
hook; without it they take ``provision()``, whose stores must then all be new.

**hold_write_path** (certifies time limits under contention, contract §8.5)::

    def hold_write_path(self, spec: EngineSpec, seconds: float) -> AbstractContextManager[None]:
        '''Entering returns once another connection, session, thread or process
        holds what the writes of stores on ``spec`` need -- SQLite: BEGIN IMMEDIATE
        on the file from a connection of its own; PostgreSQL: the store's tables
        locked IN EXCLUSIVE MODE by another session; an in-memory engine: its
        lock, taken by another thread. Leaving lets go; so does ``seconds`` passing,
        whichever comes first. The kit has opened a store on ``spec`` before.'''

The kit then checks that ``claim_wait``, ``claim_wait_any`` and ``stream.wait``
return within their timeout plus ``SLACK_S`` (``helpers.contention``), and that
calls without a timeout complete once the hold ends or raise
``EngineUnavailable`` -- never a driver's own exception, never a hang. Without
the hook those properties are reported not_applicable.

**outage_switch** (certifies outages, contract §8.4)::

    def outage_switch(self, spec: EngineSpec) -> AbstractContextManager[OutageSwitch]:
        '''An object with ``spec`` (an EngineSpec of the same store that the
        switch can cut off: e.g. reached through a proxy; its options may set
        the engine's limits short), ``give_up_s`` (how long a call that does not
        wait takes to raise EngineUnavailable while cut off: the engine's
        connect or lock limit under those options) and
        ``unavailable(seconds) -> AbstractContextManager[None]``: while it is
        entered (``seconds`` at most), stores opened on the switch's spec cannot
        use the database -- PostgreSQL: a loopback proxy between them and the
        server closes every connection and turns new ones away; SQLite: another
        holder of the file's write lock and the engine's writer gate (a WAL
        reader is never blocked, so reads go on); an in-memory engine: a flag
        that makes the database refuse every call. Leaving the context brings
        the database back.'''

The kit opens stores on ``switch.spec`` itself (so the ``--via aio`` run leaves
these properties to the ordinary one). Without the hook the outage properties
are reported not_applicable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from alkstore import Clock, EngineProvider, EngineSpec, Store
from alkstore.driver import Driver

SERVER_ENV = "ALKSTORE_CONFORMANCE_SERVER"
"""The environment variable naming the server a server engine's ``provision()`` uses."""

NATIVE_CONNECTION_HOOK = "native_connection_factory"
DESCRIBE_BACKEND_HOOK = "describe_backend"
DRIVER_WRAPPER_HOOK = "open_with_driver_wrapper"
PROVISION_BESIDE_HOOK = "provision_beside"
PROVISION_UNOPENED_HOOK = "provision_unopened"
HOLD_WRITE_PATH_HOOK = "hold_write_path"
OUTAGE_SWITCH_HOOK = "outage_switch"

DriverWrapper = Callable[[Driver[Any]], Driver[Any]]


@runtime_checkable
class NativeConnectionFactoryProvider(Protocol):
    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], Any]: ...


def native_connection_factory(provider: object, spec: EngineSpec) -> Callable[[], Any] | None:
    """The engine's factory of caller-owned connections for ``spec``, if it has one."""
    if not isinstance(provider, NativeConnectionFactoryProvider):
        return None
    return provider.native_connection_factory(spec)


@runtime_checkable
class DescribeBackendProvider(Protocol):
    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]: ...


def describe_backend(provider: object, spec: EngineSpec) -> dict[str, Any] | None:
    """The provider's JSON description of ``spec``'s backend; None without the hook."""
    if not isinstance(provider, DescribeBackendProvider):
        return None
    try:
        described = provider.describe_backend(spec)
        if not isinstance(described, dict):
            raise TypeError(f"returned {type(described).__name__}, not a dict")
        # A round trip: the description crosses processes and lands in a JSON report.
        plain: dict[str, Any] = json.loads(json.dumps(described))
    except Exception as exc:
        return {"error": f"{DESCRIBE_BACKEND_HOOK}(spec) failed: {type(exc).__name__}: {exc}"}
    return plain


@runtime_checkable
class DriverWrapperProvider(Protocol):
    def open_with_driver_wrapper(
        self, url: str, wrap: DriverWrapper, *, clock: Clock | None = None, **opts: Any
    ) -> Store: ...


def has_driver_wrapper(provider: object) -> bool:
    """Whether the engine lets the kit interpose on its driver (crash points)."""
    return isinstance(provider, DriverWrapperProvider)


def open_with_driver_wrapper(
    provider: object, spec: EngineSpec, wrap: DriverWrapper, clock: Clock | None = None
) -> Store:
    """Open ``spec``'s store over ``wrap(driver)``; the engine must have the hook."""
    if not isinstance(provider, DriverWrapperProvider):
        raise TypeError(f"the engine provides no {DRIVER_WRAPPER_HOOK} hook")
    return provider.open_with_driver_wrapper(spec.url, wrap, clock=clock, **spec.opts)


def conformance_server() -> str | None:
    """The server the kit's run names for ``provision()`` (``SERVER_ENV``), if any."""
    return os.environ.get(SERVER_ENV) or None


@runtime_checkable
class ProvisionBesideProvider(Protocol):
    def provision_beside(self, spec: EngineSpec) -> AbstractContextManager[EngineSpec]: ...


def has_provision_beside(provider: object) -> bool:
    """Whether the engine can provision a second store on the server of a first."""
    return isinstance(provider, ProvisionBesideProvider)


def provision_beside(
    provider: EngineProvider, spec: EngineSpec
) -> AbstractContextManager[EngineSpec]:
    """A fresh store beside ``spec``'s, on the same server: the engine's hook, or
    (without it) a second ``provider.provision()``."""
    if isinstance(provider, ProvisionBesideProvider):
        return provider.provision_beside(spec)
    return provider.provision()


@runtime_checkable
class ProvisionUnopenedProvider(Protocol):
    def provision_unopened(self) -> AbstractContextManager[EngineSpec]: ...


def provision_unopened(provider: EngineProvider) -> AbstractContextManager[EngineSpec]:
    """A store no process has opened yet: the engine's hook, or (without it)
    ``provider.provision()``, whose stores are then all new."""
    if isinstance(provider, ProvisionUnopenedProvider):
        return provider.provision_unopened()
    return provider.provision()


@runtime_checkable
class HoldWritePathProvider(Protocol):
    def hold_write_path(self, spec: EngineSpec, seconds: float) -> AbstractContextManager[None]: ...


def has_hold_write_path(provider: object) -> bool:
    """Whether the engine can have another party hold its store's write path."""
    return isinstance(provider, HoldWritePathProvider)


class OutageSwitch(Protocol):
    """What ``outage_switch(spec)`` yields (an engine's own class, shaped like this)."""

    @property
    def spec(self) -> EngineSpec: ...

    @property
    def give_up_s(self) -> float: ...

    def unavailable(self, seconds: float) -> AbstractContextManager[None]: ...


@runtime_checkable
class OutageSwitchProvider(Protocol):
    def outage_switch(self, spec: EngineSpec) -> AbstractContextManager[OutageSwitch]: ...


def has_outage_switch(provider: object) -> bool:
    """Whether the engine can make its database unavailable to a store and bring it back."""
    return isinstance(provider, OutageSwitchProvider)
