"""Engines plug in through entry points (contract §1).

An engine distribution registers an ``EngineProvider`` under the entry-point
group ``alkstore.engines``; ``alkstore.open(url)`` picks it by URL scheme.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from . import _guide
from .api import Store
from .clock import Clock, check_clock
from .errors import EngineNotFound, InvalidOptions

ENGINE_GROUP = "alkstore.engines"
"""The entry-point group engines register their ``EngineProvider`` under."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Which optional profiles an engine implements (the queue core is never optional).

    Published as ``EngineProvider.capabilities``; the conformance kit checks the
    profiles an engine declares and marks the others not applicable (contract §1).

    Attributes:
        transactions: ``store.transaction()`` is implemented.
        sql: ``tx.connection`` is a DB-API connection, so business writes share
            the transaction.
        attach: ``store.attach(conn)`` joins a caller's own transaction.
        locks: ``store.lock(name)`` is implemented.
        multi_process: several processes may open the same store at once.
        scheduler: the scheduler of contract §5.
        streams: the streams of contract §7.
        pubsub: ``notify``/``subscribe`` of contract §7.
        ops: contract 1.1's operations (§11): stats, job pages, redrive, purge,
            pause/resume and the error history.
        snooze: contract 1.2's ``JobHandle.snooze`` (``SnoozeDriver``) and the
            ``snoozes`` count on every job.
        cron: contract 1.2's cron specs, time zones and catch-up policies (§5): the
            schedule row stores ``ScheduleRecord.timezone`` and ``catch_up`` and
            takes a ``None`` ``interval_s``. Needs ``scheduler``.
        unique: contract 1.2's unique jobs (``EnqueueOpts(unique=...)``,
            ``UniqueDriver``) and the ``unique_key`` of every job.
        periodic: contract 1.2's declared schedules (§5.11, ``PeriodicDriver``): the
            schedule row stores ``ScheduleRecord.declared_until``, a lease renewed
            by the workers that declare it, and a tick removes a lapsed one. Needs
            ``scheduler`` and ``cron``.
        limits: contract 1.2's fleet-wide concurrency limits per queue
            (``Queue.set_limits``, ``LimitsDriver``), honoured by every claim.
        key_limits: contract 1.2's per-key limits and fairness (§16.9, §16.10):
            ``Limits(concurrency_per_key=N)`` bounds each ``EnqueueOpts.limit_key``'s
            processing jobs and claims serve the keys in turn; every job row keeps its
            ``limit_key``. Needs ``limits``.
        results: contract 1.2's finished jobs (§17): ``QueueOpts.completed_retention_s``
            keeps acked jobs as ``completed`` with their result (``ResultsDriver``).
        workers: contract 1.2's worker registry (§19, ``WorkersDriver``): workers
            register, heartbeat and deregister, and ``store.workers()`` lists the
            live ones.
        dependencies: contract 1.2's job dependencies (§18): ``EnqueueOpts(after=...)``
            makes a job wait, ``waiting``, until the jobs it names complete
            (``DependenciesDriver``).
        metadata: contract 1.2's job metadata (§20): ``EnqueueOpts(metadata=...)``, a
            small map of strings every job row keeps for its whole life
            (``Job.metadata``), as ``alkstore.otel`` carries a trace context.
        async_acks: contract 1.2's acks that need not wait for the disk (§12.11,
            ``AsyncAcksDriver``): a worker's ack, asked for with
            ``Worker(durable_acks=False)``, may commit without waiting for its flush;
            every other write stays durable. Without it the request is ignored.
        async_native: the provider also has ``open_on_loop`` (``AsyncNativeProvider``):
            ``alkstore.aio`` then does the engine's I/O on the event loop with its
            native async driver, and ``attach`` takes the async connection (§13).
    """

    transactions: bool = True
    sql: bool = True
    """``tx.connection`` is a DB-API connection, so business writes share the transaction."""
    attach: bool = True
    locks: bool = True
    multi_process: bool = True
    scheduler: bool = False
    streams: bool = False
    pubsub: bool = False
    ops: bool = False
    """Contract 1.1 operations: stats, job listing, redrive, purge, pause, error history."""
    snooze: bool = False
    """Contract 1.2's snooze: a claim put back to wait without spending an attempt."""
    cron: bool = False
    """Contract 1.2's cron schedules: cron specs, a time zone and a catch-up policy."""
    unique: bool = False
    """Contract 1.2's unique jobs: at most one job of a queue holds a key at a time."""
    periodic: bool = False
    """Contract 1.2's declared schedules: leased by the workers that declare them."""
    limits: bool = False
    """Contract 1.2's queue limits: at most N jobs of a queue processing, fleet-wide."""
    key_limits: bool = False
    """Contract 1.2's per-key limits: at most N jobs of each key processing, keys in turn."""
    results: bool = False
    """Contract 1.2's finished jobs: acked jobs kept as completed, with their results."""
    workers: bool = False
    """Contract 1.2's worker registry: live workers listed, a lapsed one dropped."""
    dependencies: bool = False
    """Contract 1.2's job dependencies: a job waits until the jobs it names complete."""
    metadata: bool = False
    """Contract 1.2's job metadata: a small string map kept with every job for its life."""
    async_acks: bool = False
    """Contract 1.2's asynchronous acks: a worker's acks may commit without a flush."""
    async_native: bool = False
    """``open_on_loop`` exists: ``alkstore.aio`` does this engine's I/O on the loop (§13)."""

    def profiles(self) -> frozenset[str]:
        """The names of the fields that are ``True``: the profiles implemented."""
        return frozenset(name for name in self.__dataclass_fields__ if getattr(self, name) is True)


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """A picklable recipe for reopening one provisioned store (in any process).

    Yielded by ``EngineProvider.provision()``; reopen with
    ``provider.open(spec.url, **spec.opts)`` (contract §1).

    Attributes:
        url: the store's URL.
        opts: the engine options to open it with.
    """

    url: str
    opts: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class EngineProvider(Protocol):
    """What an engine registers under the ``alkstore.engines`` entry-point group.

    ``alkstore.open(url)`` loads the provider whose entry-point name is the URL
    scheme and calls its ``open`` (contract §1). The entry point may name the
    provider object or a class to instantiate with no arguments.

    Attributes:
        name: the engine's name, e.g. ``"sqlite"``.
        version: the engine distribution's version.
        contract_version: the contract version it implements (``CONTRACT_VERSION``).
        capabilities: the optional profiles it implements.
    """

    name: str
    version: str
    contract_version: str
    capabilities: Capabilities

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
        """Open (creating or migrating its tables idempotently) the store at ``url``.

        Args:
            url: the store's URL; its scheme names this engine.
            clock: where time comes from; ``None`` = the engine's default clock.
            **opts: engine options.

        Raises:
            InvalidOptions: the URL or an option is malformed.
            EngineUnavailable: the database cannot be reached.
            EngineMisconfigured: the database refused this configuration, or the
                engine's driver is written against an older driver seam.
        """
        ...

    def provision(self) -> AbstractContextManager[EngineSpec]:
        """Create a fresh, empty, isolated store; yield its ``EngineSpec``; remove it after.

        The conformance kit's only way to get a store (contract §1, §10).
        """
        ...


@runtime_checkable
class AsyncNativeProvider(Protocol):
    """What an engine with ``Capabilities.async_native`` adds to ``EngineProvider`` (§13)."""

    def open_on_loop(
        self, url: str, loop: asyncio.AbstractEventLoop, *, clock: Clock | None = None, **opts: Any
    ) -> Store:
        """Open the store at ``url`` with its database I/O done on ``loop`` by the
        engine's native async driver.

        The store is the ordinary sync ``Store`` (the same core, the same rules);
        ``alkstore.aio`` calls it from threads of its own, which wait while
        ``loop`` does the I/O. Calling it from ``loop``'s own thread raises
        ``InvalidOptions`` (it would wait on itself). ``attach`` takes the
        engine's async connection, and ``tx.connection`` is one.

        Raises:
            InvalidOptions, EngineUnavailable, EngineMisconfigured: as ``open``.
        """
        ...


def installed_engines(group: str = ENGINE_GROUP) -> list[str]:
    """The sorted entry-point names registered under ``group``."""
    return sorted({ep.name for ep in entry_points(group=group)})


def load_engine(name: str, group: str = ENGINE_GROUP) -> EngineProvider:
    """Load an engine by entry-point name, or ``module:object`` for an unpublished one.

    Args:
        name: an entry-point name such as ``"sqlite"``, or ``"module:object"``.
        group: the entry-point group to search.

    Returns:
        The provider (a class named by the entry point is instantiated).

    Raises:
        EngineNotFound: no engine has that name, or the object cannot be imported.
        TypeError: the object found does not satisfy ``EngineProvider``.
    """
    if ":" in name and not name.endswith(":"):
        module_name, _, attr = name.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise EngineNotFound(name, installed_engines(group)) from exc
        return _as_provider(obj)
    for ep in entry_points(group=group):
        if ep.name == name:
            return _as_provider(ep.load())
    raise EngineNotFound(name, installed_engines(group))


_PROVIDER_MEMBERS = (
    *EngineProvider.__annotations__,
    *(name for name, value in vars(EngineProvider).items() if callable(value) and name[0] != "_"),
)
"""What ``EngineProvider`` declares: its attributes, then its methods."""


def _as_provider(obj: Any) -> EngineProvider:
    provider = obj() if isinstance(obj, type) else obj
    if not isinstance(provider, EngineProvider):
        missing = [name for name in _PROVIDER_MEMBERS if not hasattr(provider, name)]
        raise TypeError(
            f"{obj!r} does not satisfy alkstore.EngineProvider: it lacks "
            f"{', '.join(missing)} (a provider has {', '.join(_PROVIDER_MEMBERS)}); "
            f"{_guide.see(_guide.PROVIDER)}"
        )
    return provider


def url_scheme(url: str) -> str:
    """``sqlite:///x.db`` -> ``sqlite``; a driver suffix (``+psycopg``) is dropped."""
    scheme, sep, _ = url.partition(":")
    if not sep or not scheme:
        raise EngineNotFound(url, installed_engines())
    return scheme.split("+", 1)[0].lower()


def open(url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
    """Open a store; the URL scheme names the engine.

    Raises ``InvalidOptions`` for a URL that is not a ``str`` or a ``clock`` that is
    not a ``Clock`` (before any engine is loaded), ``EngineNotFound`` when no
    installed engine has the URL's scheme, and whatever the engine raises for its
    own URL and options (``InvalidOptions``, ``EngineUnavailable``,
    ``EngineMisconfigured``).

    Example: ``alkstore.open("sqlite:///app.db")`` or
    ``alkstore.open("postgresql://u@host/db", schema="alkstore")`` (contract §1).

    Args:
        url: the store's URL; a driver suffix (``postgresql+psycopg``) is ignored
            when choosing the engine.
        clock: where the store's time comes from; ``None`` = the engine's default
            (the system clock; the Postgres engine follows the server's clock).
        **opts: engine options, passed to the engine's ``open``.

    Returns:
        The open ``Store``; close it (or use it as a context manager) when done.

    Raises:
        InvalidOptions: see above.
        EngineNotFound: see above; the message names the installed engines.
        EngineUnavailable: the database cannot be reached.
        EngineMisconfigured: the database refused this configuration."""
    if not isinstance(url, str):
        raise InvalidOptions(
            f"url must be a str such as 'sqlite:///app.db', got {type(url).__name__}"
        )
    check_clock(clock)
    return load_engine(url_scheme(url)).open(url, clock=clock, **opts)
