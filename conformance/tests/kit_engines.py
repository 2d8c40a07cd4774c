"""Engines the kit's own tests load with ``--engine kit_engines:NAME``.

This directory is put on ``PYTHONPATH`` for the pytest runs the tests start.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager
from typing import Any

from alkstore import Capabilities, Clock, EngineProvider, EngineSpec, Store, load_engine

REFERENCE_ENGINE = "sqlite"


class StubProvider:
    """Enough of a provider to load and collect against; it opens no store."""

    name = "stub"
    version = "0"
    contract_version = "1"
    capabilities = Capabilities()

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
        raise AssertionError("the stub engine opens no stores")

    def provision(self) -> AbstractContextManager[EngineSpec]:
        raise AssertionError("the stub engine provisions no stores")


stub = StubProvider()


class WrongContractVersion(StubProvider):
    """Claims a contract the kit does not certify: the provider-surface property fails."""

    contract_version = "0"


wrong_contract_version = WrongContractVersion()


class ReferenceWithoutLocks:
    """The reference engine, claiming not to implement the ``locks`` profile."""

    def __init__(self) -> None:
        self._inner: EngineProvider = load_engine(REFERENCE_ENGINE)
        self.name = self._inner.name
        self.version = self._inner.version
        self.contract_version = self._inner.contract_version
        self.capabilities = dataclasses.replace(self._inner.capabilities, locks=False)

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
        return self._inner.open(url, clock=clock, **opts)

    def provision(self) -> AbstractContextManager[EngineSpec]:
        return self._inner.provision()


class ReferenceWithoutOps(ReferenceWithoutLocks):
    """The reference engine, claiming not to implement contract 1.1's ``ops`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, ops=False)


class ReferenceWithoutSnooze(ReferenceWithoutLocks):
    """The reference engine, claiming to be a contract 1.1 engine: no ``snooze`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, snooze=False)


class ReferenceWithoutUnique(ReferenceWithoutLocks):
    """The reference engine, claiming to be a contract 1.1 engine: no ``unique`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, unique=False)


class ReferenceWithoutPeriodic(ReferenceWithoutLocks):
    """The reference engine as a contract 1.2 engine from before declared schedules: its
    schedule rows have no lease, so no ``periodic`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, periodic=False)


class ReferenceWithoutLimits(ReferenceWithoutLocks):
    """The reference engine, claiming to be an engine before the ``limits`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, limits=False)


class ReferenceWithoutResults(ReferenceWithoutLocks):
    """The reference engine, claiming to be a contract 1.1 engine: no ``results`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, results=False)


class ReferenceWithoutKeyLimits(ReferenceWithoutLocks):
    """The reference engine, claiming to be an engine before the ``key_limits`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, key_limits=False)


class ReferenceWithoutWorkers(ReferenceWithoutLocks):
    """The reference engine, claiming to be an engine before the ``workers`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, workers=False)


class ReferenceWithoutDependencies(ReferenceWithoutLocks):
    """The reference engine, claiming to be an engine before the ``dependencies`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, dependencies=False)


class ReferenceWithoutMetadata(ReferenceWithoutLocks):
    """The reference engine, claiming to be an engine before the ``metadata`` profile."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = dataclasses.replace(self._inner.capabilities, metadata=False)


class ReferenceClaimingNoProfiles(ReferenceWithoutLocks):
    """The reference engine, claiming every optional profile false: the queue core
    still runs (it is never optional)."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = Capabilities(
            **{field.name: False for field in dataclasses.fields(Capabilities)}
        )


class ReferenceWhoseProvisionSkips(ReferenceWithoutLocks):
    """Provisioning skips the test (as a flaky fixture might): never a pass, an error."""

    def provision(self) -> AbstractContextManager[EngineSpec]:
        import pytest

        pytest.skip("no store today")


class ReferenceWhoseProvisionFails(ReferenceWithoutLocks):
    """Provisioning raises: a setup error, never a skip."""

    def provision(self) -> AbstractContextManager[EngineSpec]:
        raise RuntimeError("the database server is on fire")


class ReferenceReusingStores(ReferenceWithoutLocks):
    """An engine whose ``provision()`` would hand out stores opened before: a test that
    needs an unopened store must take it from ``provision_unopened()``."""

    def provision(self) -> AbstractContextManager[EngineSpec]:
        raise AssertionError("provision() reuses stores: a first open needs provision_unopened()")

    def provision_unopened(self) -> AbstractContextManager[EngineSpec]:
        return self._inner.provision()


class DescribedReference(ReferenceWithoutLocks):
    """The reference engine (all of it) with a backend description for the report."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = self._inner.capabilities

    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]:
        return {"driver": "sqlite3", "provisioned": "a temp file", "url_scheme": spec.url[:7]}


class BrokenDescription(DescribedReference):
    def describe_backend(self, spec: EngineSpec) -> dict[str, Any]:
        raise OSError("cannot ask the server")


class CapabilitiesAsADict(StubProvider):
    """Capabilities that are not ``alkstore.Capabilities`` data: refused up front."""

    def __init__(self) -> None:
        self.capabilities = {"locks": True}  # type: ignore[assignment]


capabilities_as_a_dict = CapabilitiesAsADict()


class ReferenceOnTheNamedServer(ReferenceWithoutLocks):
    """A "server engine": it provisions only on the server the kit's run names
    (``alkstore_conformance.hooks.SERVER_ENV``), here a directory for the files."""

    def provision(self) -> AbstractContextManager[EngineSpec]:
        from alkstore_conformance.hooks import conformance_server

        server = conformance_server()
        if server != "file:kit-server":
            raise RuntimeError(f"no server to provision on (got {server!r})")
        return self._inner.provision()


class MemoryWithoutCron:
    """A contract 1.1 engine: the memory engine with 1.1's schedule rows -- no zone,
    no catch-up policy, the boundary kept for an unchanged spec -- and no ``cron``
    profile (nor the ``periodic`` one, which needs it), as an engine certified before
    contract 1.2 is."""

    def __init__(self) -> None:
        from alkstore_memory import ENGINE

        self._inner = ENGINE
        self.name = "memory-1.1"
        self.version = ENGINE.version
        self.contract_version = ENGINE.contract_version
        self.capabilities = dataclasses.replace(ENGINE.capabilities, cron=False, periodic=False)

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
        from alkstore.core import CoreStore
        from alkstore_memory.database import database

        name = url.removeprefix("memory://")
        return CoreStore(
            _schedule_rows_of_1_1()(database(name)),
            clock=clock,
            capabilities=self.capabilities,
            engine_name=self.name,
        )

    def provision(self) -> AbstractContextManager[EngineSpec]:
        return self._inner.provision()


def _schedule_rows_of_1_1() -> type:
    from alkstore.rows import ScheduleRecord
    from alkstore_memory.driver import MemoryDriver

    class OneOneScheduleRows(MemoryDriver):
        def schedule_upsert(self, c: Any, record: ScheduleRecord) -> None:
            # Built as a 1.1 driver builds it: the fields 1.1 knew, positionally.
            row = ScheduleRecord(
                record.name,
                record.spec,
                record.queue,
                record.payload,
                record.priority,
                record.max_attempts,
                record.expires_s,
                record.interval_s,
                record.next_fire_at,
            )
            stored = c.tables.schedules.get(row.name)
            if stored is not None and stored.spec == row.spec:
                row = dataclasses.replace(row, next_fire_at=stored.next_fire_at)
            c.tables.schedules[row.name] = row

    return OneOneScheduleRows
