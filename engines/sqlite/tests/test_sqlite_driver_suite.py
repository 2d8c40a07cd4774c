"""The kit's driver suite over ``SqliteDriver``: every seam rule, one fresh database
file per test, drivers opened on it playing the other processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alkstore_conformance.driver_suite import DriverFactory, driver_suite, opened_drivers
from alkstore_sqlite import SqliteDriver, SqliteEngine, parse_options

TestSqliteDriver = driver_suite(SqliteEngine.capabilities, "TestSqliteDriver")


@pytest.fixture
def driver_factory(tmp_path: Path) -> Iterator[DriverFactory]:
    path = str(tmp_path / "driver-suite.db")
    with opened_drivers(lambda: SqliteDriver(path, parse_options({}))) as factory:
        yield factory
