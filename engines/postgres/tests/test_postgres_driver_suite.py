"""The kit's driver suite over ``PostgresDriver``: every seam rule, one empty schema
per test (as the kit's ``provision()`` hands out: emptied after use, or dropped),
drivers on it playing the other processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import alkstore
from alkstore_conformance.driver_suite import DriverFactory, driver_suite, opened_drivers
from alkstore_postgres.driver import PostgresDriver
from alkstore_postgres.options import parse_options
from alkstore_postgres.testing.provisioning import reused_schema

TestPostgresDriver = driver_suite(
    alkstore.load_engine("postgresql").capabilities, "TestPostgresDriver"
)


@pytest.fixture
def driver_factory(pg_dsn: str) -> Iterator[DriverFactory]:
    with reused_schema(pg_dsn) as schema:
        options = parse_options({"schema": schema})
        with opened_drivers(lambda: PostgresDriver(pg_dsn, options, None)) as factory:
            yield factory
