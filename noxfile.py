"""Developer and CI entry points.

    nox -s conformance [-- --engine NAME ...]   the conformance kit against one engine
                       [--install PATH]         (one outside this repository: installed first)
    nox -s tests                                 every unit test + the kit on every reference engine
                                                 (PostgreSQL also behind PgBouncer)
    nox -s lint                                  ruff + mypy
    nox -s bench                                 benchmarks, both engines side by side
    nox -s faults [-- --quick]                   fault runs on both engines (crash storm,
                                                 atomicity under SIGKILL, hostile input;
                                                 PostgreSQL: failover to a standby)
    nox -s docs                                  the docs site, warnings as errors
    nox -s generate [-- --check]                 regenerate the async surface from api.py
    nox -s build                                 sdists + wheels into dist/, twine-checked

Sessions that need PostgreSQL use ``ALKSTORE_PG_DSN`` when it is set, else a
Docker daemon via testcontainers, else the local server binaries (a throwaway
cluster in a temp dir, always stopped at the end of the session).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import nox

ROOT = Path(__file__).parent
CONTRACT = "contract"
SQLITE = "engines/sqlite"
POSTGRES = "engines/postgres"
KIT = "conformance"
MEMORY = "scenarios/third_party_engine"
REFERENCE_ENGINES = ("sqlite", "postgresql")
PARALLEL = ("-n", "4", "--dist", "worksteal")
"""xdist workers of a package's tests that mostly wait (deadlines, lapses, wake-ups, child
processes): four share two cores. An idle worker takes tests queued on a busy one: with
xdist's default, the kit's own tests ended with the fourteen profiles-off runs (~28 s
each) queued on one worker while three stood idle (657 s; 390 s stealing)."""
SCENARIOS = (
    "scenarios/test_scenarios.py",
    "scenarios/test_async_sqlalchemy_app.py",
    "scenarios/test_cli.py",
    "scenarios/test_otel.py",  # alkstore.otel on every engine (the SDK's in-memory exporter)
    "scenarios/test_worker_cli.py",
    "scenarios/benchmarks/test_bench_smoke.py",
    "scenarios/test_docs_examples.py",
    "scenarios/test_install.py",
    "scenarios/test_engine_outside_repo.py",
)
FAULTS = (
    "scenarios/faults/test_faults.py",
    "scenarios/faults/test_failover.py",
    "scenarios/faults/test_pressure.py",
)
UNIT_TEST_RUNS: tuple[tuple[str, ...], ...] = (
    # Each run's pytest arguments: one run per package (each has its own conftest and
    # helpers).
    ("contract/tests", *PARALLEL),  # 42 s alone at 23% CPU; 20 s on four workers
    ("engines/sqlite/tests", *PARALLEL),
    # A database per xdist worker; the tests of plans a session keeps run alone, since
    # other workers' DDL can reset every session's plan cache.
    ("engines/postgres/tests", "-m", "not kept_plans", "-n", "3", "--dist", "worksteal"),
    ("engines/postgres/tests", "-m", "kept_plans"),
    # The kit's own tests are mostly whole kit runs in subprocesses (one per mutant).
    ("conformance/tests", *PARALLEL),
    (f"{MEMORY}/tests", *PARALLEL, "--dist", "loadfile"),  # one certification, one worker
    # The scenarios in one run, each file on one worker (module fixtures build wheels,
    # start servers and browsers once).
    (*SCENARIOS, *PARALLEL, "--dist", "loadfile"),
    # The web dashboard in Chromium (Selenium; .ci/run installs both), on its own: its
    # pages refresh live, and under other runs' load a test met an element replaced.
    ("scenarios/browser",),
    # Fault runs time their storms: on their own, one after the other.
    FAULTS,
)
POSTGRES_ENGINES = {"postgresql", "postgres"}
PGBOUNCER_ENGINE = "alkstore_postgres.testing.behind_pgbouncer:ENGINE"
"""The PostgreSQL engine with every store behind a real PgBouncer in transaction pooling
mode (``pooler="transaction"``, LISTEN on a direct ``listen_url``): issue 27."""

KIT_WORKERS = ("-n", "4")
"""xdist workers of the kit's runs in the tests session: its tests mostly wait (deadlines,
lapses, wake-ups), so four share two cores (SQLite's reduced certification 124 s at two
workers, 76 s at four; PostgreSQL's 225 s and 162 s; six gained nothing)."""

KIT_REFERENCE_ENGINE = "sqlite"
"""The engine the kit's selftest compares its mutants with (each is it with one bug)."""
KIT_REFERENCE_REPORT_ENV = "ALKSTORE_KIT_REFERENCE_REPORT"
"""Read by conformance/tests/test_selftest_mutants.py: that engine's report to reuse."""

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
"""Every session's processes write bytecode, pytest's rewritten test modules included:
with it set (this machine's shells set it), each of the hundreds of pytest processes a
tests session starts (every kit run and each of its xdist workers) compiled the whole
suite again: 7.0 s of CPU for a one-property kit run against 2.4-2.7 s. (The kit's own
tests mostly wait, so their wall time hardly moved: 745 s before, 768 s after.)"""

nox.options.sessions = ["conformance"]
nox.options.reuse_existing_virtualenvs = True


def _install_all(session: nox.Session, *extra: str) -> None:
    # The contract with its CLI (click, rich), metrics (prometheus_client) and dashboard
    # (Starlette, Jinja2, uvicorn) extras: the operator CLI, the worker's metrics and
    # the web dashboard are tested too.
    packages = (f"{CONTRACT}[cli,metrics,dashboard,otel]", SQLITE, POSTGRES, KIT, MEMORY)
    session.install(
        *(arg for path in packages for arg in ("-e", path)),
        "sqlalchemy",
        "greenlet",  # SQLAlchemy's asyncio extension needs it (the async SQLAlchemy scenario)
        "jsonschema",
        "filelock",  # the kit's own tests share one long run between xdist workers
        "fastapi",  # the async guide's FastAPI lifespan example (scenarios/test_docs_examples.py)
        "httpx",  # fastapi.testclient needs it
        "nox",  # scenarios/test_engine_outside_repo.py runs `nox -s conformance -- --install`
        # scenarios/browser drives Debian's chromium through /usr/bin/chromedriver: the
        # driver path is explicit, so Selenium Manager never downloads one.
        "selenium",
        "opentelemetry-sdk",  # alkstore.otel's tests record spans with its in-memory exporter
        *extra,
    )


def _server_module(name: str = "server") -> Any:
    # The provisioner (and the PgBouncer fixture) is stdlib-only, so the nox process
    # can load it from source.
    path = ROOT / POSTGRES / "src" / "alkstore_postgres" / "testing" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_alkstore_pg_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def _postgres(session: nox.Session) -> Iterator[dict[str, str]]:
    """One PostgreSQL for the whole session, exported to every test process."""
    with _server_module().provision_server() as server:
        session.log(f"PostgreSQL via {server.route}: {server.server_version or 'external'}")
        yield {"ALKSTORE_PG_DSN": server.dsn}


def _require_pgbouncer(session: nox.Session) -> None:
    """Fail at once, saying how to install it, when no pgbouncer binary is found."""
    module = _server_module("pgbouncer")
    try:
        session.log(f"PgBouncer: {module.find_pgbouncer()}")
    except module.PgBouncerNotFoundError as exc:
        session.error(str(exc))


def _engine_from(posargs: list[str]) -> tuple[str, list[str], list[str]]:
    """``--engine NAME`` (default sqlite), every ``--install SPEC``, and the rest."""
    args = list(posargs)
    engine = "sqlite"
    installs: list[str] = []
    rest: list[str] = []
    while args:
        arg = args.pop(0)
        if arg == "--":  # the kit's pytest arguments: passed on untouched
            rest += [arg, *args]
            break
        option, equals, value = arg.partition("=")
        if option in ("--engine", "--install") and not equals and args:
            value = args.pop(0)
        elif option not in ("--engine", "--install") or not equals:
            rest.append(arg)
            continue
        if option == "--engine":
            engine = value
        else:
            installs.append(value)
    return engine, installs, rest


def _install_engines(session: nox.Session, installs: list[str]) -> None:
    """Each ``--install``: a directory (relative to where nox was invoked) editable,
    anything else as a pip requirement (a wheel, ``name @ git+...``, an index name)."""
    for spec in installs:
        path = Path(session.invoked_from, spec)
        if path.is_dir():
            session.install("-e", str(path.resolve()))
        else:
            session.install(spec)


@nox.session
def conformance(session: nox.Session) -> None:
    """Run the conformance kit against one engine (default: sqlite).

    ``-- --engine NAME --install PATH`` certifies an engine kept outside this
    repository: PATH (a directory, installed editable, or any pip requirement;
    repeatable) is installed into the session first. Every other argument goes to
    ``alkstore-conformance run`` (``--certify``, ``--server URL``, ...)."""
    _install_all(session)
    engine, installs, rest = _engine_from(session.posargs)
    _install_engines(session, installs)
    needs_pg = engine in POSTGRES_ENGINES or engine == PGBOUNCER_ENGINE
    with _postgres(session) if needs_pg else nullcontext({}) as env:
        session.run("alkstore-conformance", "run", "--engine", engine, *rest, env=env)


def _certify(session: nox.Session, engine: str, env: dict[str, str]) -> Path:
    """A reduced certification of ``engine``, then the same queue core, transaction and
    wake properties once more through alkstore.aio (issue 14: about a minute per engine).
    Returns the certification's report."""
    report = ROOT / "reports" / f"{engine}-conformance-report.json"
    certify = ("--certify", "--reduced", *KIT_WORKERS)
    run = ("alkstore-conformance", "run", "--engine", engine)
    session.run(*run, *certify, "--report", str(report), env=env)
    session.run(
        *run,
        "--via",
        "aio",
        *("--profile", "queues", "--profile", "transactions", "--profile", "attach"),
        *KIT_WORKERS,
        "--report",
        str(report.with_name(f"{engine}-aio-conformance-report.json")),
        env=env,
    )
    return report


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's unit tests and the kit against every reference engine (and the
    PostgreSQL engine once more behind PgBouncer)."""
    _install_all(session)
    _require_pgbouncer(session)  # the PostgreSQL engine's tests and the kit start one
    with _postgres(session) as env:
        # SQLite's certification first: the kit's own tests read its report as the
        # reference engine's run of every property a mutant names, instead of running
        # them again (about 90 s of the kit's tests).
        reference = _certify(session, KIT_REFERENCE_ENGINE, env)
        env = {**env, KIT_REFERENCE_REPORT_ENV: str(reference)}
        for run in UNIT_TEST_RUNS:
            session.run("pytest", "-q", "-p", "no:cacheprovider", *run, env=env)
        for engine in REFERENCE_ENGINES:
            if engine != KIT_REFERENCE_ENGINE:
                _certify(session, engine, env)
        # Every profile once more through a real PgBouncer in transaction pooling mode,
        # started by the provider in front of the session's server (issue 27).
        session.run(
            "alkstore-conformance",
            "run",
            "--engine",
            PGBOUNCER_ENGINE,
            "--certify",
            "--reduced",
            *KIT_WORKERS,
            "--report",
            str(ROOT / "reports" / "postgresql-pgbouncer-conformance-report.json"),
            env=env,
        )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint + format check) and mypy --strict."""
    _install_all(session, "ruff", "mypy")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", "--strict", "contract/src/alkstore")
    session.run(
        "mypy",
        "engines/sqlite/src/alkstore_sqlite",
        "engines/postgres/src/alkstore_postgres",
        "conformance/src/alkstore_conformance",
        f"{MEMORY}/src/alkstore_memory",
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks of both reference engines beside plain-driver baselines, in one run.

    ``-- --quick`` for a smoke run; ``-- --sustained 300`` for the sustained
    PostgreSQL run only (writes reports/sustained-postgres.png); ``--
    --sustained-worker 300`` for the same with the real worker and grouped acks
    (writes reports/sustained-worker.png).
    """
    # matplotlib: the sustained run's plot; pgqueuer (on asyncpg): the P1/P3 peer rows.
    _install_all(session, "matplotlib", "pgqueuer[asyncpg]")
    with _postgres(session) as env:
        session.run("python", "scenarios/benchmarks/run.py", *session.posargs, env=env)


@nox.session
def docs(session: nox.Session) -> None:
    """The docs site (mkdocs + mkdocstrings API reference) into site/; warnings fail it."""
    # ruff lets mkdocstrings format the rendered signatures.
    session.install("mkdocs", "mkdocs-material", "mkdocstrings[python]", "ruff")
    session.install(*(arg for path in (CONTRACT, SQLITE, POSTGRES, KIT) for arg in ("-e", path)))
    quiet = {"NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's end-of-life banner
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", env=quiet)


@nox.session(venv_backend="none")
def generate(session: nox.Session) -> None:
    """alkstore.aio's generated module and the kit's via-aio facade, from alkstore/api.py
    (``-- --check``: fail if either is stale). The generator needs only the stdlib."""
    session.run(sys.executable, "tools/generate_surface.py", *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Sdists and wheels of every published distribution into dist/, checked by twine."""
    import zipfile  # only this session reads wheels

    session.install("build", "twine")
    dist = ROOT / "dist"
    dist.mkdir(exist_ok=True)
    for stale in dist.iterdir():  # an older version would also match `pip install dist/x-*.whl`
        stale.unlink()
    for path in (CONTRACT, SQLITE, POSTGRES, KIT):
        session.run("python", "-m", "build", "--outdir", str(dist), path)
    artifacts = sorted(dist.iterdir())
    session.run("twine", "check", "--strict", *map(str, artifacts))
    for wheel in (a for a in artifacts if a.suffix == ".whl"):
        if not any(n.endswith("/py.typed") for n in zipfile.ZipFile(wheel).namelist()):
            session.error(f"{wheel.name} lacks its py.typed marker")
    session.log("built: " + ", ".join(a.name for a in artifacts))


@nox.session
def faults(session: nox.Session) -> None:
    """Fault runs on both engines: crash storm, atomicity under SIGKILL, hostile input,
    long jobs killed; on PostgreSQL, backends terminated, every connection slot taken,
    old snapshots under load (plotted: matplotlib) and a failover to a standby too.

    PostgreSQL runs on a private throwaway server (local server binaries), which
    the crash storm restarts mid-run, and the failover on a primary and standby of
    its own; never on ``ALKSTORE_PG_DSN``'s server.
    """
    _install_all(session, "matplotlib")
    session.run("python", "scenarios/faults/run.py", *session.posargs)
