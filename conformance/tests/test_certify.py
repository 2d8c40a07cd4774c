"""``--certify``: repeated trials, the long profile, no skips, setup errors, the verdict."""

from __future__ import annotations

from typing import Any

import pytest
from kit_runs import RunIn, output, report_problems

REFERENCE_ENGINE = "sqlite"
ONE_CORE_TEST = "test_provisioned_store_starts_empty"


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {p["id"]: p["status"] for p in report["properties"]}


def test_certify_repeats_each_concurrency_test_with_fresh_recorded_seeds(run_in: RunIn) -> None:
    result = run_in.cli(
        "run",
        "--engine",
        REFERENCE_ENGINE,
        "--certify",
        "--reduced",
        "--property",
        "STORE-OPEN-IDEMPOTENT",
        "--report",
        "report.json",
        "-n",
        "0",
    )
    report = run_in.report()
    assert report_problems(report) == []
    assert (report["mode"], report["reduced"], report["trials"]["per_concurrency_test"]) == (
        "certify",
        True,
        2,
    )
    (prop,) = report["properties"]
    assert (prop["id"], prop["status"], prop["trials"]) == ("STORE-OPEN-IDEMPOTENT", "pass", 2)
    trials = sorted((t["nodeid"].split("[")[0], t["trial"]) for t in prop["covering_tests"])
    assert [trial for _, trial in trials] == [1, 2, 1, 2]
    seeds = [t["trial_seed"] for t in prop["covering_tests"]]
    assert len(set(seeds)) == len(seeds), "every trial has its own seed"
    # One property of many ran: a certification of part of the suite certifies nothing.
    assert report["certified"] is False
    assert any("did not run" in reason for reason in report["verdict_reasons"])
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output(result)
    assert "certified: false (mode certify (reduced))" in result.stdout


def test_trial_seeds_are_reproduced_by_the_run_seed(run_in: RunIn) -> None:
    def trial_seeds(report_name: str) -> list[int]:
        run_in.cli(
            "run",
            "--engine",
            REFERENCE_ENGINE,
            "--property",
            "STORE-OPEN-IDEMPOTENT",
            "--trials",
            "2",
            "--report",
            report_name,
            "-n",
            "0",
            "--",
            "-k",
            "threads",
            "--hypothesis-seed=1234",
        )
        (prop,) = run_in.report(report_name)["properties"]
        return sorted(t["trial_seed"] for t in prop["covering_tests"])

    first = trial_seeds("one.json")
    assert len(first) == 2
    assert trial_seeds("two.json") == first


def test_a_full_certification_refuses_a_short_hypothesis_profile(run_in: RunIn) -> None:
    result = run_in.cli(
        "run", "--engine", REFERENCE_ENGINE, "--certify", "--", "--hypothesis-profile=alkstore-dev"
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "add --reduced for a shorter certification" in output(result)


def test_first_open_races_take_their_store_from_provision_unopened(run_in: RunIn) -> None:
    result = run_in.cli(
        "run",
        "--engine",
        "kit_engines:ReferenceReusingStores",
        "--property",
        "STORE-OPEN-IDEMPOTENT",
        "--report",
        "report.json",
        "-n",
        "0",
    )
    assert result.returncode == pytest.ExitCode.OK, output(result)
    assert _statuses(run_in.report()) == {"STORE-OPEN-IDEMPOTENT": "pass"}


def test_a_skip_during_setup_is_an_error_never_a_pass(run_in: RunIn) -> None:
    result = run_in.cli(
        "run",
        "--engine",
        "kit_engines:ReferenceWhoseProvisionSkips",
        "--certify",
        "--reduced",
        "--report",
        "report.json",
        "-n",
        "0",
        "--",
        "-k",
        ONE_CORE_TEST,
    )
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output(result)
    report = run_in.report()
    assert _statuses(report) == {"ENGINE-PROVISION-ISOLATED": "error"}
    (failure,) = report["properties"][0]["failures"]
    assert "skipped without a not_applicable reason: no store today" in failure["message"]
    assert report["certified"] is False


def test_a_provisioning_failure_is_an_error_never_a_skip(run_in: RunIn) -> None:
    result = run_in.cli(
        "run",
        "--engine",
        "kit_engines:ReferenceWhoseProvisionFails",
        "--report",
        "report.json",
        "-n",
        "0",
        "--",
        "-k",
        ONE_CORE_TEST,
    )
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output(result)
    report = run_in.report()
    assert _statuses(report) == {"ENGINE-PROVISION-ISOLATED": "error"}
    assert "the database server is on fire" in report["properties"][0]["failures"][0]["message"]
    assert report_problems(report) == []


@pytest.mark.parametrize(
    ("engine", "backend"),
    [
        (
            "kit_engines:DescribedReference",
            {"driver": "sqlite3", "provisioned": "a temp file", "url_scheme": "sqlite:"},
        ),
        (
            "kit_engines:BrokenDescription",
            {"error": "describe_backend(spec) failed: OSError: cannot ask the server"},
        ),
    ],
    ids=["described", "hook-fails"],
)
def test_the_report_records_the_providers_backend_description(
    run_in: RunIn, engine: str, backend: dict[str, str]
) -> None:
    result = run_in.cli(
        "run", "--engine", engine, "--report", "report.json", "-n", "0", "--", "-k", ONE_CORE_TEST
    )
    assert result.returncode == 0, output(result)
    report = run_in.report()
    assert report["engine"]["backend"] == backend
    assert report["engine"]["distribution"] is None  # kit_engines is no installed package
    assert report_problems(report) == []
