"""Scenario tests run each story against every installed reference engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import alkstore
from alkstore import EngineSpec

REFERENCE_ENGINES = ("sqlite", "postgresql")


@pytest.fixture(params=REFERENCE_ENGINES)
def engine_spec(request: pytest.FixtureRequest) -> Iterator[tuple[str, EngineSpec]]:
    provider = alkstore.load_engine(request.param)
    with provider.provision() as spec:
        yield request.param, spec
