"""The kit's driver suite over ``MemoryDriver``: every seam rule, one fresh database
per test, drivers sharing it playing the other processes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from alkstore_conformance.driver_suite import DriverFactory, driver_suite, opened_drivers
from alkstore_memory import MemoryEngine
from alkstore_memory.database import database, drop
from alkstore_memory.driver import MemoryDriver

TestMemoryDriver = driver_suite(MemoryEngine.capabilities, "TestMemoryDriver")


@pytest.fixture
def driver_factory() -> Iterator[DriverFactory]:
    name = f"driver-suite-{uuid.uuid4().hex}"
    try:
        with opened_drivers(lambda: MemoryDriver(database(name))) as factory:
            yield factory
    finally:
        drop(name)
