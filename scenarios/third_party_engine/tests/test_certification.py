"""The third-party path end to end: certify this engine as its author would.

Runs, from this engine's own directory, exactly the command that
``docs/certify-your-engine.md`` shows, reads the report it writes, and checks
the guide's sample of this run against its output
(``tools/generate_guide.py --check --sample-from``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from alkstore_conformance import report_schema

ENGINE_DIR = Path(__file__).resolve().parents[1]
GUIDE_TOOL = ENGINE_DIR.parents[1] / "tools" / "generate_guide.py"
LACKING = ["async_acks", "async_native", "attach", "multi_process", "sql"]
"""The profiles ``alkstore_memory.MemoryEngine.capabilities`` declares False."""


def _certify(report: Path) -> subprocess.CompletedProcess[str]:
    report_to = ("--report", str(report))
    command = shutil.which("alkstore-conformance")
    assert command is not None, "the kit's console script is installed with alkstore-conformance"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    return subprocess.run(
        # Four xdist workers: the memory engine's tests mostly wait (deadlines, lapses).
        [command, "run", "--engine", "memory", "--certify", "--reduced", "-n", "4", *report_to],
        cwd=ENGINE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def certified(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One certification run of this engine, shared: its result and report path."""
    path = tmp_path_factory.mktemp("certified") / "conformance-report.json"
    return _certify(path), path


def test_the_memory_engine_certifies_with_its_missing_profiles_not_applicable(
    certified: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, path = certified
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))

    jsonschema.Draft202012Validator(
        report_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(report)
    assert (report["mode"], report["reduced"], report["certified"]) == ("certify", True, True)
    assert report["verdict_reasons"] == []
    engine = report["engine"]
    assert (engine["reference"], engine["name"]) == ("memory", "memory")
    assert engine["distribution"] == {"name": "alkstore-memory", "version": "0.1.0"}
    assert engine["not_applicable_profiles"] == LACKING
    assert engine["backend"]["storage"] == "Python dicts in this process"
    statuses = {p["id"]: p["status"] for p in report["properties"]}
    assert set(statuses.values()) <= {"pass", "not_applicable"}
    assert statuses["TX-ATTACH"] == "not_applicable"
    assert statuses["QUEUE-CLAIM-EXACTLY-ONCE"] == "pass"  # its threads test ran
    assert report["not_run"] == []
    assert "certified: true" in result.stdout


def test_the_guides_sample_run_is_this_run(
    certified: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path
) -> None:
    result, _ = certified
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    output = tmp_path / "output.txt"
    output.write_text(result.stdout, encoding="utf-8")

    check = subprocess.run(
        [sys.executable, str(GUIDE_TOOL), "--check", "--sample-from", str(output)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert check.returncode == 0, check.stderr
