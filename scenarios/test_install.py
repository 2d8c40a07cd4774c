"""An app's install path: the built wheels alone, in a fresh virtual environment.

The wheels of ``alkstore`` and ``alkstore-sqlite`` are built from the checkout,
installed into a new venv from those files only (no index, no editable
install, none of this machine's pip configuration), and the quickstart is run
by that venv's interpreter from a directory outside the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP_DISTRIBUTIONS = {"alkstore": ROOT / "contract", "alkstore_sqlite": ROOT / "engines/sqlite"}
QUICKSTART = ROOT / "scenarios" / "quickstart.py"
STEP_TIMEOUT_S = 180


def isolated_env() -> dict[str, str]:
    """This environment without pip's configuration or Python path additions, so
    nothing but the named wheel files can satisfy an install."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(*args: object, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=isolated_env(),
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Freshly built wheels of the app's two distributions, by import name."""
    out = tmp_path_factory.mktemp("wheels")
    # The build backend comes from this machine's usual index (build isolation).
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out)]
        + [str(path) for path in APP_DISTRIBUTIONS.values()],
        check=True,
        timeout=STEP_TIMEOUT_S,
    )
    return {name: next(out.glob(f"{name}-*.whl")) for name in APP_DISTRIBUTIONS}


@pytest.fixture(scope="module")
def app_python(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a new venv holding only the two wheels and their (no) deps."""
    venv = tmp_path_factory.mktemp("app") / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)  # this pip installs into it
    python = venv / "bin" / "python"
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "-q",
        "--no-index",
        *wheels.values(),
    )
    return python


@pytest.mark.parametrize("name", sorted(APP_DISTRIBUTIONS))
def test_wheel_ships_its_py_typed_marker(wheels: dict[str, Path], name: str) -> None:
    assert f"{name}/py.typed" in zipfile.ZipFile(wheels[name]).namelist()


def test_wheels_install_into_a_venv_without_the_checkout(app_python: Path) -> None:
    out = run(
        app_python,
        "-c",
        "import alkstore, alkstore_sqlite; print(alkstore.__file__); "
        "print(alkstore_sqlite.__file__); print(alkstore.installed_engines())",
    )
    contract_file, engine_file, engines = out.splitlines()
    site_packages = app_python.parent.parent / "lib"
    assert Path(contract_file).is_relative_to(site_packages)
    assert Path(engine_file).is_relative_to(site_packages)
    assert engines == "['sqlite']"


def test_quickstart_runs_from_the_installed_wheels(app_python: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'quickstart.db'}"

    out = run(app_python, QUICKSTART, url, cwd=tmp_path)

    assert out.splitlines() == ["handled {'to': 'a@example.com'}", "handled {'order': 7}"]
