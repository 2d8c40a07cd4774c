"""Child pytest / CLI runs for the kit's own tests, bounded in time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

TESTS_DIR = Path(__file__).parent


def kit_env() -> dict[str, str]:
    """The environment of child runs: this directory importable (``kit_engines``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))
    for inherited in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        env.pop(inherited, None)
    return env


class RunIn:
    """Run commands in a scratch directory with the kit environment."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            cwd=self.cwd,
            env=kit_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def pytest(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return self(
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, timeout=timeout
        )

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return self(
            sys.executable, "-m", "alkstore_conformance.certify.cli", *args, timeout=timeout
        )

    def report(self, name: str = "report.json") -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.cwd / name).read_text(encoding="utf-8"))
        return data


class Once:
    """Work that several xdist workers need, done by the first to ask and read from
    its JSON by the rest: a long kit run is made once per test session, not once per
    worker that happens to run a test needing it."""

    def __init__(self, shared: Path) -> None:
        self.shared = shared

    def __call__(self, name: str, compute: Callable[[RunIn], Any]) -> Any:
        done = self.shared / f"{name}.json"
        with FileLock(self.shared / f"{name}.lock"):
            if done.exists():
                return json.loads(done.read_text(encoding="utf-8"))
            scratch = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.shared))
            # A failure raises here, writes nothing, and the next worker asking tries
            # again: each test needing it errors with the failure, none reads a half.
            value = compute(RunIn(scratch))
            done.write_text(json.dumps(value), encoding="utf-8")
            return value


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def report_problems(report: dict[str, Any]) -> list[str]:
    """Where ``report`` breaks the shipped JSON Schema (``jsonschema`` is test-only)."""
    import jsonschema

    from alkstore_conformance import report_schema

    validator = jsonschema.Draft202012Validator(
        report_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(report)
    ]
