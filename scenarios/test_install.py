"""An app's install path: the built wheels alone, in a fresh virtual environment.

The wheels of ``alkstore`` and ``alkstore-sqlite`` are built from the checkout,
installed into a new venv from those files and the contract's one dependency
(cronsim, fetched as a wheel beforehand) only (no index, no editable install,
none of this machine's pip configuration), and the quickstart is run by that
venv's interpreter from a directory outside the repository.

The install lines of ``README.md`` and ``docs/install.md`` are then run as
written, by ``sh``, in a new venv with the pip Python ships: the wheel line with
the ``[cli]`` extra, and the git lines (a pip upgrade, then the packages from a
``git+file://`` clone of this checkout). What is not ours (click, rich, pip,
the build backend) comes from this machine's usual package index.

So are the engine author's lines of ``docs/certify-your-engine.md``: the kit's
wheel line and git lines, the selftest engines' line, and ``pip install -e .``
of an engine kept outside the repository (a copy of the example engine under
another name, ``engine_copy``), which the kit installed that way then runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from engine_copy import DISTRIBUTION, NAME, copy_example_engine

ROOT = Path(__file__).resolve().parent.parent
APP_DISTRIBUTIONS = {"alkstore": ROOT / "contract", "alkstore_sqlite": ROOT / "engines/sqlite"}
QUICKSTART = ROOT / "scenarios" / "quickstart.py"
INSTALL_DOCS = (ROOT / "README.md", ROOT / "docs" / "install.md")
ENGINE_GUIDE = ROOT / "docs" / "certify-your-engine.md"
KIT_DISTRIBUTIONS = {
    "alkstore": ROOT / "contract",
    "alkstore_conformance": ROOT / "conformance",
    "alkstore_sqlite": ROOT / "engines/sqlite",
}
"""What an engine author installs: the contract, the kit, and the SQLite engine the
kit's selftest engines wrap."""
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


def build_wheels(out: Path, distributions: dict[str, Path]) -> dict[str, Path]:
    """Freshly built wheels of ``distributions`` in ``out``, by import name."""
    # The build backend comes from this machine's usual index (build isolation).
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out)]
        + [str(path) for path in distributions.values()],
        check=True,
        timeout=STEP_TIMEOUT_S,
    )
    return {name: next(out.glob(f"{name}-*.whl")) for name in distributions}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Freshly built wheels of the app's two distributions, by import name."""
    return build_wheels(tmp_path_factory.mktemp("wheels"), APP_DISTRIBUTIONS)


@pytest.fixture(scope="module")
def kit_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Freshly built wheels of what an engine author installs, by import name."""
    return build_wheels(tmp_path_factory.mktemp("kit-wheels"), KIT_DISTRIBUTIONS)


@pytest.fixture(scope="module")
def dependency_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The contract's dependencies as wheel files, from this machine's usual index: what
    an app's index would give it (the engine's only dependency is the contract)."""
    out = tmp_path_factory.mktemp("dependencies")
    pyproject = tomllib.loads((APP_DISTRIBUTIONS["alkstore"] / "pyproject.toml").read_text())
    requirements = pyproject["project"]["dependencies"]
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:"),
            *("-d", str(out), *requirements),
        ],
        check=True,
        timeout=STEP_TIMEOUT_S,
    )
    return out


@pytest.fixture(scope="module")
def app_python(
    wheels: dict[str, Path], dependency_wheels: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The interpreter of a new venv holding only the two wheels and their dependencies."""
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
        "--find-links",
        dependency_wheels,
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


# -- the documented install lines, as written ----------------------------------------


def documented_commands(page: Path) -> list[str]:
    """The shell commands of ``page``'s ``sh`` blocks (continuations joined, comments cut)."""
    text = page.read_text(encoding="utf-8")
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#.*$", "", command).strip()
            if command:
                commands.append(" ".join(command.split()))
    return commands


def documented(page: Path, *must_hold: str) -> list[str]:
    found = [c for c in documented_commands(page) if all(part in c for part in must_hold)]
    assert found, f"{page.name}: no install line holding {must_hold}"
    return found


def docs_env(venv: Path) -> dict[str, str]:
    """This machine's environment (its package index included), the venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("VIRTUAL_ENV", None)
    return env


def sh(command: str, venv: Path, cwd: Path) -> None:
    done = subprocess.run(
        ["sh", "-c", command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=docs_env(venv),
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{command!r} failed:\n{done.stdout}\n{done.stderr}"


def fresh_venv(parent: Path) -> Path:
    venv = parent / "venv"
    run(sys.executable, "-m", "venv", venv)  # with the pip this Python ships
    return venv


def assert_cli_installed(venv: Path) -> None:
    out = run(venv / "bin" / "alkstore", "--help")
    assert "Usage: alkstore" in out
    run(venv / "bin" / "python", "-c", "import alkstore_sqlite")


@pytest.mark.parametrize("page", INSTALL_DOCS, ids=lambda page: page.name)
def test_the_documented_wheel_line_installs_the_cli(
    page: Path, wheels: dict[str, Path], tmp_path: Path
) -> None:
    (line,) = documented(page, "pip install", "[cli]", "alkstore_sqlite-")
    dist = tmp_path / "dist"
    dist.mkdir()
    for wheel in wheels.values():
        shutil.copy(wheel, dist)
    venv = fresh_venv(tmp_path)
    sh(line, venv, cwd=tmp_path)
    assert_cli_installed(venv)


@pytest.mark.parametrize("page", INSTALL_DOCS, ids=lambda page: page.name)
def test_the_documented_postgres_lines_are_the_sqlite_lines_with_the_engine_swapped(
    page: Path,
) -> None:
    commands = documented_commands(page)
    postgres = [c for c in commands if "pip install" in c and "postgres" in c]
    assert postgres
    for command in postgres:
        as_sqlite = command.replace("alkstore_postgres-", "alkstore_sqlite-").replace(
            "alkstore-postgres @ git+<repo-url>#subdirectory=engines/postgres",
            "alkstore-sqlite @ git+<repo-url>#subdirectory=engines/sqlite",
        )
        assert as_sqlite in commands


@pytest.mark.parametrize("page", INSTALL_DOCS, ids=lambda page: page.name)
def test_the_documented_git_lines_install_from_a_local_clone(page: Path, tmp_path: Path) -> None:
    upgrade = documented(page, "pip install --upgrade pip")
    (line,) = documented(page, "pip install", "[cli]", "git+<repo-url>", "engines/sqlite")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=60)
    venv = fresh_venv(tmp_path)
    for command in [*upgrade, line.replace("<repo-url>", f"file://{clone}")]:
        sh(command, venv, cwd=tmp_path)
    assert_cli_installed(venv)


# -- the engine author's lines ------------------------------------------------------


def dist_of(wheels: dict[str, Path], parent: Path) -> None:
    """``parent/dist``, holding ``wheels``, as ``nox -s build`` leaves it."""
    dist = parent / "dist"
    dist.mkdir()
    for wheel in wheels.values():
        shutil.copy(wheel, dist)


def test_the_guides_wheel_lines_install_the_kit_which_certifies_an_engine_outside_the_repo(
    kit_wheels: dict[str, Path], tmp_path: Path
) -> None:
    (kit_line,) = documented(ENGINE_GUIDE, "pip install", "dist/alkstore_conformance-")
    (engine_line,) = documented(ENGINE_GUIDE, "pip install -e .")
    dist_of(kit_wheels, tmp_path)
    venv = fresh_venv(tmp_path)
    sh(kit_line, venv, cwd=tmp_path)
    engine = copy_example_engine(tmp_path / "elsewhere")
    sh(engine_line, venv, cwd=engine)

    out = run(
        venv / "bin" / "alkstore-conformance",
        *("run", "--engine", NAME, "--property", "ENGINE-PROVIDER-SURFACE"),
        *("--property", "QUEUE-CLAIM-ORDER", "-n", "0", "--report", "report.json"),
        cwd=engine,
    )

    assert "certified: false (mode check)" in out
    report = json.loads((engine / "report.json").read_text(encoding="utf-8"))
    assert report["engine"]["distribution"] == {"name": DISTRIBUTION, "version": "0.1.0"}
    assert {p["id"]: p["status"] for p in report["properties"]} == {
        "ENGINE-PROVIDER-SURFACE": "pass",
        "QUEUE-CLAIM-ORDER": "pass",
    }
    assert Path(report["environment"]["executable"]).is_relative_to(venv)


def test_the_guides_selftest_line_installs_the_kits_broken_engines(
    kit_wheels: dict[str, Path], tmp_path: Path
) -> None:
    (kit_line,) = documented(ENGINE_GUIDE, "pip install", "dist/alkstore_conformance-")
    (selftest_line,) = documented(ENGINE_GUIDE, "pip install", "dist/alkstore_sqlite-")
    dist_of(kit_wheels, tmp_path)
    venv = fresh_venv(tmp_path)
    for line in (kit_line, selftest_line):
        sh(line, venv, cwd=tmp_path)

    out = run(
        venv / "bin" / "python",
        "-c",
        "import alkstore; print(alkstore.load_engine('double-claim', "
        "'alkstore.engines.selftest').name)",
    )

    assert out.strip() == "selftest-double-claim"


def test_the_guides_git_lines_install_the_kit_from_a_local_clone(tmp_path: Path) -> None:
    upgrade = documented(ENGINE_GUIDE, "pip install --upgrade pip")
    (line,) = documented(ENGINE_GUIDE, "pip install", "git+<repo-url>", "=conformance")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=60)
    venv = fresh_venv(tmp_path)
    for command in [*upgrade, line.replace("<repo-url>", f"file://{clone}")]:
        sh(command, venv, cwd=tmp_path)

    out = run(venv / "bin" / "alkstore-conformance", "--version")

    assert out.strip() == "alkstore-conformance 0.1.0"
    run(venv / "bin" / "python", "-c", "import alkstore_conformance.hooks")
