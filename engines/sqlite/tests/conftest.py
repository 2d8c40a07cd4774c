"""Fixtures for the SQLite engine's own tests: a database file per test, stores on it."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import StoreFactory

import alkstore
from alkstore import Store
from alkstore.testing import FakeClock
from alkstore_sqlite import database_url

START = 1_700_000_000


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def url(db_path: Path) -> str:
    return database_url(str(db_path))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def open_store(url: str) -> Iterator[StoreFactory]:
    """``open_store(**opts)``: a new store on the test's database file, closed afterwards."""
    opened: list[Store] = []

    def open_(**opts: Any) -> Store:
        store = alkstore.open(url, **opts)
        opened.append(store)
        return store

    yield open_
    for store in reversed(opened):
        store.close()


@pytest.fixture
def store(open_store: StoreFactory, clock: FakeClock) -> Store:
    return open_store(clock=clock)


@pytest.fixture(autouse=True)
def _no_child_outlives_its_test() -> Iterator[None]:
    """A failing assert must not leave spawned workers behind (or hang the run)."""
    yield
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(5)
