"""An engine kept outside this repository is certified through ``nox -s
conformance``: ``--install PATH`` installs it into the session first.

The engine is the example engine copied to a temp directory under another
distribution name (``engine_copy``); nox runs this checkout's noxfile with its
virtualenvs in another temp directory, from the directory holding the copy,
which ``--install`` names by a relative path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine_copy import DISTRIBUTION, NAME, ROOT, copy_example_engine

PROPERTIES = ("ENGINE-PROVIDER-SURFACE", "QUEUE-CLAIM-ORDER")
TIMEOUT_S = 900


def _nox_env() -> dict[str, str]:
    """This environment without the running session's venv or pytest's settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "HYPOTHESIS_", "NOX_", "PYTHON")) and key != "VIRTUAL_ENV"
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_nox_certifies_an_engine_installed_from_outside_the_repository(tmp_path: Path) -> None:
    engine_parent = tmp_path / "elsewhere"
    engine_parent.mkdir()
    copy_example_engine(engine_parent)
    report = tmp_path / "report.json"
    selected = [arg for property_id in PROPERTIES for arg in ("--property", property_id)]

    nox = [sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py")]
    session = ["--envdir", str(tmp_path / "nox-envs"), "-s", "conformance", "--"]
    kit = ["--engine", NAME, "--install", DISTRIBUTION, *selected, "-n", "0"]
    kit += ["--report", str(report)]
    done = subprocess.run(
        [*nox, *session, *kit],
        cwd=engine_parent,
        env=_nox_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    data = json.loads(report.read_text(encoding="utf-8"))
    engine = data["engine"]
    assert (engine["reference"], engine["name"]) == (NAME, NAME)
    assert engine["distribution"] == {"name": DISTRIBUTION, "version": "0.1.0"}
    assert {p["id"]: p["status"] for p in data["properties"]} == dict.fromkeys(PROPERTIES, "pass")
