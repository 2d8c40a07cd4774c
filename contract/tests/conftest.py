"""Fixtures for the contract package's own tests: a fake clock, a recording
driver and a ``CoreStore`` over them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fakes import FakeDriver
from running import running  # noqa: F401 (a fixture: a worker run on a thread, stopped after the test)

from alkstore.core import CoreStore
from alkstore.testing import FakeClock

START = 1_700_000_000

StoreFactory = Callable[..., CoreStore]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def driver() -> FakeDriver:
    return FakeDriver()


@pytest.fixture
def make_store(driver: FakeDriver, clock: FakeClock) -> Iterator[StoreFactory]:
    """Build a store over the shared fake driver; every store built is closed afterwards."""
    stores: list[CoreStore] = []

    def build(*, repoll_s: float = 0.01) -> CoreStore:
        store = CoreStore(
            driver,
            clock=clock,
            repoll_s=repoll_s,
            capabilities=driver.capabilities,
            engine_name="fake",
        )
        stores.append(store)
        return store

    yield build
    for store in stores:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> CoreStore:
    return make_store()
