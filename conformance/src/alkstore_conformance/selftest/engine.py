"""``MutantEngine``: the SQLite reference engine with one deliberate bug.

A mutant is an ordinary ``EngineProvider`` (so the kit certifies it exactly
as it would any engine): it provisions and opens SQLite stores, but builds
them from a broken ``SqliteDriver`` subclass, or a broken ``CoreStore``
subclass, and names the manifest property meant to catch the bug.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from alkstore import Capabilities, EngineSpec, Store
from alkstore.clock import Clock
from alkstore.constants import CONTRACT_VERSION
from alkstore.core import CoreStore
from alkstore.driver import Driver
from alkstore_sqlite import SqliteDriver, SqliteOptions, database_path, parse_options
from alkstore_sqlite import provider as sqlite_provider
from alkstore_sqlite.contention import OutageSwitch

from .. import __version__


def _unwrapped(driver: Driver[Any]) -> Driver[Any]:
    return driver


ASSERTION = "AssertionError"
"""A mutant caught by one of the suite's assertions (nearly all of them)."""
BUDGET = "OverBudget"
"""A mutant that makes a test wait forever, caught by the kit's per-test time budget."""


class MutantEngine:
    """An ``alkstore.EngineProvider`` registered under ``alkstore.engines.selftest``."""

    version = __version__
    contract_version = CONTRACT_VERSION

    def __init__(
        self,
        name: str,
        *,
        catches: str,
        bug: str,
        driver: type[SqliteDriver] = SqliteDriver,
        store: type[CoreStore] = CoreStore,
        caught_by: str = ASSERTION,
    ) -> None:
        self.name = f"selftest-{name}"
        self.catches = catches
        """The manifest property id meant to catch this mutant."""
        self.caught_by = caught_by
        """The exception the failure that catches it ends with (``ASSERTION``, ``BUDGET``)."""
        self.bug = bug
        self.capabilities: Capabilities = sqlite_provider.capabilities
        self._driver = driver
        self._store = store

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
        return self.open_with_driver_wrapper(url, _unwrapped, clock=clock, **opts)

    def open_with_driver_wrapper(
        self,
        url: str,
        wrap: Callable[[Driver[Any]], Driver[Any]],
        *,
        clock: Clock | None = None,
        **opts: Any,
    ) -> Store:
        """The kit's fault-injection hook (``alkstore_conformance.hooks``)."""
        options = parse_options(dict(opts))
        driver = self._driver(database_path(url), options)
        return self._store_over(driver, wrap, options, clock)

    def _store_over(
        self,
        driver: SqliteDriver,
        wrap: Callable[[Driver[Any]], Driver[Any]],
        options: SqliteOptions,
        clock: Clock | None,
    ) -> Store:
        """The mutant's store over ``wrap(driver)`` (``driver`` closed if that fails)."""
        try:
            return self._store(
                wrap(driver),
                clock=clock,
                repoll_s=options.repoll_s,
                capabilities=self.capabilities,
                engine_name=self.name,
                max_payload_bytes=options.max_payload_bytes,
            )
        except BaseException:
            driver.close()
            raise

    def provision(self) -> AbstractContextManager[EngineSpec]:
        return sqlite_provider.provision()

    def provision_beside(self, spec: EngineSpec) -> AbstractContextManager[EngineSpec]:
        return sqlite_provider.provision_beside(spec)

    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], Any]:
        return sqlite_provider.native_connection_factory(spec)

    def hold_write_path(self, spec: EngineSpec, seconds: float) -> AbstractContextManager[None]:
        return sqlite_provider.hold_write_path(spec, seconds)

    def outage_switch(self, spec: EngineSpec) -> AbstractContextManager[OutageSwitch]:
        return sqlite_provider.outage_switch(spec)

    def __repr__(self) -> str:
        return f"<alkstore mutant {self.name!r}: {self.bug}; caught by {self.catches}>"
