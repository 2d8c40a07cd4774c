"""The kit's driver suite over ``PostgresDriver``: every seam rule, one fresh schema
per test (the ``schema`` fixture drops it), drivers on it playing the other processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import alkstore
from alkstore_conformance.driver_suite import DriverFactory, driver_suite, opened_drivers
from alkstore_postgres.driver import PostgresDriver
from alkstore_postgres.options import parse_options

TestPostgresDriver = driver_suite(
    alkstore.load_engine("postgresql").capabilities, "TestPostgresDriver"
)


@pytest.fixture
def driver_factory(pg_dsn: str, schema: str) -> Iterator[DriverFactory]:
    options = parse_options({"schema": schema})
    with opened_drivers(lambda: PostgresDriver(pg_dsn, options, None)) as factory:
        yield factory
