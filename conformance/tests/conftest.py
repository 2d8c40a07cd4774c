"""The kit's own tests start pytest runs of the suite and read what comes out."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit_runs import Once, RunIn

pytest_plugins = ["pytester"]


@pytest.fixture
def run_in(tmp_path: Path) -> RunIn:
    return RunIn(tmp_path)


@pytest.fixture(scope="session")
def once(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Once:
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker's base is a directory of the session's own.
    return Once(base if worker_id == "master" else base.parent)
