"""The kit's own tests start pytest runs of the suite and read what comes out."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit_runs import RunIn

pytest_plugins = ["pytester"]


@pytest.fixture
def run_in(tmp_path: Path) -> RunIn:
    return RunIn(tmp_path)
