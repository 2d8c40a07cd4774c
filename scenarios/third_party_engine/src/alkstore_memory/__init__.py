"""alkstore-memory: an example third-party alkstore engine, kept in memory.

This package shows the whole path for an outside engine author:

1. **Implement the seam** (``driver.py``): one class with the methods of
   ``alkstore.driver.Driver`` (transactions plus one method per statement),
   and of any optional profile you declare (``SchedulerDriver``,
   ``StreamDriver``, ``PubSubDriver``). Rules live in the shared core; the
   driver only stores and selects.
2. **Hand the driver to the core**: ``alkstore.core.CoreStore(driver, capabilities=..., ...)``
   is the ``Store`` applications use, identical on every engine.
3. **Publish a provider** (this module): an object with ``name``,
   ``version``, ``contract_version``, ``capabilities``, ``open(url, clock=,
   **opts)`` and ``provision()``, registered in ``pyproject.toml`` under the
   entry-point group ``alkstore.engines``. ``alkstore.open("memory://x")``
   then finds it by the URL's scheme, and the conformance kit gets stores
   from ``provision()``.

The engine itself: one process, data in Python dicts, one re-entrant lock
per database. ``memory://name`` names a process-global database, so
reopening the URL sees the same data (until the process exits, or until the
``provision()`` that created it ends).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from alkstore import Capabilities, EngineSpec, InvalidOptions, Store
from alkstore.clock import Clock
from alkstore.constants import CONTRACT_VERSION, MAX_PAYLOAD_BYTES
from alkstore.core import DEFAULT_REPOLL_S, CoreStore
from alkstore.driver import Driver
from alkstore.payload import check_max_payload_bytes

from . import contention
from .database import database, drop
from .driver import DEFAULT_LOCK_TIMEOUT_S, MemoryDriver

__version__ = "0.1.0"

SCHEME = "memory://"


def _database_name(url: str) -> str:
    if not url.lower().startswith(SCHEME) or not url[len(SCHEME) :]:
        raise InvalidOptions(f"a memory engine URL looks like 'memory://<name>', got {url!r}")
    return url[len(SCHEME) :]


class MemoryEngine:
    """The ``alkstore.EngineProvider`` registered as ``memory``."""

    name = "memory"
    version = __version__
    contract_version = CONTRACT_VERSION
    # Every profile except those a single-process engine without SQL cannot offer.
    capabilities = Capabilities(
        transactions=True,
        sql=False,
        attach=False,
        locks=True,
        multi_process=False,
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
    )

    def __init__(self, *, without: Iterable[str] = ()) -> None:
        """The engine with the optional profiles ``without`` switched off (none by
        default): its capabilities declare them absent and its stores refuse them
        with ``ProfileUnavailable``, as an engine that never had them would.

        ``alkstore_memory.without:locks`` (or ``without:locks+streams``) names such an
        engine for ``--engine``: a way to check that a suite, an application or the
        conformance kit copes with an engine lacking any one profile."""
        switched_off = tuple(without)
        offered = sorted(type(self).capabilities.profiles())
        unknown = sorted(set(switched_off) - set(offered))
        if unknown:
            raise ValueError(
                f"the memory engine has no profile {', '.join(unknown)} to switch off "
                f"(it has: {', '.join(offered)})"
            )
        self.without = tuple(sorted(set(switched_off)))
        if self.without:
            self.capabilities = dataclasses.replace(
                type(self).capabilities, **dict.fromkeys(self.without, False)
            )

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
        """Open ``memory://<name>``; an unknown name starts an empty database.

        The options are ``repoll_s`` (the core's safety-net re-poll interval),
        ``max_payload_bytes`` (the store's payload size bound, the contract's
        ``MAX_PAYLOAD_BYTES`` or lower) and ``lock_timeout_s`` (5: the most a call
        waits for the database while another thread's transaction holds it; a
        call with a timeout of its own waits no longer than that either)."""
        return self.open_with_driver_wrapper(url, lambda driver: driver, clock=clock, **opts)

    def open_with_driver_wrapper(
        self,
        url: str,
        wrap: Callable[[Driver[Any]], Driver[Any]],
        *,
        clock: Clock | None = None,
        **opts: Any,
    ) -> Store:
        """The conformance kit's fault-injection hook: ``open`` over ``wrap(driver)``."""
        repoll_s = opts.pop("repoll_s", DEFAULT_REPOLL_S)
        max_payload_bytes = check_max_payload_bytes(
            opts.pop("max_payload_bytes", MAX_PAYLOAD_BYTES)
        )
        lock_timeout_s = contention.check_lock_timeout(
            opts.pop("lock_timeout_s", DEFAULT_LOCK_TIMEOUT_S)
        )
        if opts:
            raise InvalidOptions(f"unknown memory engine option(s): {', '.join(sorted(opts))}")
        # Without the ops profile a job has no error history (contract §11).
        driver = MemoryDriver(
            database(_database_name(url)), lock_timeout_s, error_history=self.capabilities.ops
        )
        return CoreStore(
            wrap(driver),
            clock=clock,
            repoll_s=repoll_s,
            capabilities=self.capabilities,
            engine_name=self.name,
            max_payload_bytes=max_payload_bytes,
        )

    @contextmanager
    def provision(self) -> Iterator[EngineSpec]:
        """A fresh, empty database for the conformance kit, forgotten afterwards."""
        name = f"provisioned-{uuid.uuid4().hex}"
        try:
            yield EngineSpec(url=SCHEME + name, opts={})
        finally:
            drop(name)

    @contextmanager
    def provision_beside(self, spec: EngineSpec) -> Iterator[EngineSpec]:
        """The conformance kit's hook for isolation between stores on one server: a
        second fresh database in this process (this engine's "server"), beside
        ``spec``'s, forgotten afterwards."""
        _database_name(spec.url)  # a spec of this engine's, or InvalidOptions
        with self.provision() as beside:
            yield EngineSpec(url=beside.url, opts=dict(spec.opts))

    def hold_write_path(self, spec: EngineSpec, seconds: float) -> AbstractContextManager[None]:
        """The conformance kit's contention hook: another thread keeps a write
        transaction open on ``spec``'s database until exit (``seconds`` at most)."""
        return contention.hold_write_path(database(_database_name(spec.url)), seconds)

    @contextmanager
    def outage_switch(self, spec: EngineSpec) -> Iterator[contention.OutageSwitch]:
        """The conformance kit's outage hook: ``spec``'s database, refusing every call
        while the switch's ``unavailable(seconds)`` is entered."""
        yield contention.OutageSwitch(
            contention.outage_spec(spec), database(_database_name(spec.url))
        )

    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]:
        """The conformance kit's hook for its report: what backs the store ``spec`` names."""
        return {
            "storage": "Python dicts in this process",
            "database": _database_name(spec.url),
            "provisioned": "a uniquely named in-process database, dropped afterwards",
        }

    def __repr__(self) -> str:
        lacking = f" without {', '.join(self.without)}" if self.without else ""
        return f"<alkstore engine {self.name} {self.version}{lacking}>"


ENGINE = MemoryEngine()
"""The entry point's target (``alkstore.engines: memory = "alkstore_memory:ENGINE"``)."""

__all__ = ["ENGINE", "MemoryDriver", "MemoryEngine"]
