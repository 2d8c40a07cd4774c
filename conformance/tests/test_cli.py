"""``alkstore-conformance run``: arguments, and whole runs against the reference engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit_runs import RunIn, output, report_problems

from alkstore_conformance.certify.cli import RunOptions, parse, pytest_args

REFERENCE_ENGINE = "sqlite"


def test_parse_reads_the_options_and_passes_the_rest_to_pytest() -> None:
    options, extra = parse(
        ["run", "--engine", "sqlite", "--report", "r.json", "-k", "locks", "--", "-x", "--lf"]
    )
    assert options == RunOptions(engine="sqlite", report=Path("r.json"))
    assert extra == ["-k", "locks", "-x", "--lf"]


def test_pytest_args_run_the_installed_suite_with_xdist() -> None:
    args = pytest_args(RunOptions(engine="pkg.mod:provider", report=Path("r.json")), ["-x"])
    assert args[:2] == ["--pyargs", "alkstore_conformance.suite"]
    assert args[args.index("--engine") + 1] == "pkg.mod:provider"
    assert args[args.index("-n") + 1] == "auto"
    assert args[args.index("--alkstore-report") + 1] == "r.json"
    assert args[-1] == "-x"


def test_parse_reads_the_certification_options() -> None:
    certify = ["--certify", "--reduced", "--trials", "4"]
    properties = ["--property", "TX-COMMIT", "--property", "LOCK-RENEW"]
    options, extra = parse(["run", "--engine", "memory", *certify, *properties])
    assert options == RunOptions(
        engine="memory",
        certify=True,
        reduced=True,
        trials=4,
        properties=("TX-COMMIT", "LOCK-RENEW"),
    )
    assert extra == []


def test_pytest_args_carry_the_certification_options_to_the_plugin() -> None:
    options = RunOptions(engine="x", certify=True, reduced=True, trials=4, properties=("A-B",))
    args = pytest_args(options)
    assert {"--alkstore-certify", "--alkstore-reduced"} <= set(args)
    assert args[args.index("--alkstore-trials") + 1] == "4"
    assert args[args.index("--alkstore-property") + 1] == "A-B"
    assert "--alkstore-certify" not in pytest_args(RunOptions(engine="x"))


def test_an_unknown_property_is_a_usage_error(run_in: RunIn) -> None:
    result = run_in.cli("run", "--engine", "sqlite", "--property", "QUEUE-NOPE", "-n", "0")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--property names no manifest property: QUEUE-NOPE" in output(result)


def test_zero_workers_runs_without_xdist() -> None:
    args = pytest_args(RunOptions(engine="sqlite", workers="0"))
    assert "-n" not in args
    assert "--dist" not in args


def test_workers_steal_work_unless_the_run_names_its_own_distribution() -> None:
    args = pytest_args(RunOptions(engine="sqlite", workers="4"))
    assert args[args.index("--dist") + 1] == "worksteal"
    own = pytest_args(RunOptions(engine="sqlite", workers="4"), ["--dist=loadfile"])
    assert own.count("--dist") == 0
    assert own[-1] == "--dist=loadfile"


def test_run_without_an_engine_is_refused(run_in: RunIn) -> None:
    result = run_in.cli("run")
    assert result.returncode == 2
    assert "--engine" in result.stderr


def test_run_with_an_unknown_engine_exits_with_pytests_usage_error(run_in: RunIn) -> None:
    result = run_in.cli("run", "--engine", "no-such-engine")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "no-such-engine" in output(result)


def test_run_passes_and_writes_the_report(run_in: RunIn) -> None:
    result = run_in.cli(
        "run",
        "--engine",
        REFERENCE_ENGINE,
        "--report",
        "report.json",
        "-n",
        "2",
        "--",
        "-k",
        "test_lifecycle or test_locks",
    )
    assert result.returncode == 0, output(result)
    assert "per property" in result.stdout
    report = run_in.report()
    assert report["engine"]["name"] == REFERENCE_ENGINE
    assert report["suite"]["name"] == "alkstore-conformance"
    assert report["exit_status"] == 0
    assert report["properties"]
    assert {p["status"] for p in report["properties"]} == {"pass"}
    assert report["hypothesis"]["seeds_used"] == [report["hypothesis"]["seed"]]
    assert report["environment"]["xdist_workers"] == 2
    # Without --certify a run checks; it never certifies.
    assert (report["mode"], report["certified"]) == ("check", False)
    assert "certified: false (mode check)" in result.stdout
    assert report_problems(report) == []


def test_run_exits_with_pytests_code_when_a_test_fails(run_in: RunIn) -> None:
    result = run_in.cli(
        "run",
        "--engine",
        "kit_engines:wrong_contract_version",
        "-n",
        "0",
        "--report",
        "r.json",
        "--",
        "-k",
        "test_provider_names_itself",
    )
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output(result)
    (entry,) = run_in.report("r.json")["properties"]
    assert (entry["id"], entry["status"]) == ("ENGINE-PROVIDER-SURFACE", "fail")
    assert "contract_version" in entry["failures"][0]["message"]
