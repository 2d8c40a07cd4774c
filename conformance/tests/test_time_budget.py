"""The per-test time budget (contract §10.7): a test that would wait forever on a
broken engine fails at its budget, the run goes on to its report, and no process
of the run outlives it."""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid
from pathlib import Path

import pytest
from kit_runs import RunIn, output, report_problems

from alkstore_conformance.certify.budget import (
    BUDGET_EXCEEDED,
    DEFAULT_TIME_BUDGET_S,
    TimeBudgets,
    reap_children,
)
from alkstore_conformance.certify.cli import RunOptions, parse, pytest_args
from alkstore_conformance.certify.manifest import load_manifest
from alkstore_conformance.selftest import SELFTEST_GROUP

PROPERTY = "KIT-FAILS-NEVER-HANGS"
HANGING_TEST = "test_claim_wait_on_an_empty_queue_returns_at_its_timeout"
BUDGET_S = 5
MARKER = "ALKSTORE_KIT_BUDGET_RUN"
"""An environment variable every process of the run inherits: how its survivors are found."""


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes (other than this one) whose environment holds ``marker``."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if marker.encode() in environ:
            found.append(int(entry.name))
    return found


def test_a_test_that_never_returns_fails_at_its_budget_and_the_run_reports_it(
    run_in: RunIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, value)
    result = run_in.cli(
        "run",
        "--engine",
        "wait-ignores-timeout",
        "--engine-group",
        SELFTEST_GROUP,
        "--property",
        PROPERTY,
        "--time-budget",
        str(BUDGET_S),
        "--report",
        "report.json",
        "-n",
        "1",  # the budget holds in an xdist worker
        timeout=300,
    )
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output(result)
    report = run_in.report()
    assert report_problems(report) == []
    assert report["time_budget"] == {
        "default_s": DEFAULT_TIME_BUDGET_S,
        "override_s": BUDGET_S,
        "enforced": True,
    }
    (prop,) = report["properties"]
    assert (prop["id"], prop["status"], prop["time_budget_s"]) == (PROPERTY, "fail", BUDGET_S)
    # Only the wait the mutant never ends failed; the property's other tests passed.
    assert prop["counts"]["fail"] == 1
    assert prop["counts"]["pass"] == prop["tests"] - 1
    (failure,) = prop["failures"]
    assert failure["test"].endswith(HANGING_TEST)
    message = failure["message"]
    assert f"{BUDGET_EXCEEDED} of {BUDGET_S} s in call" in message
    assert "; in the engine's " in message
    assert f"called from the suite's {HANGING_TEST}" in message
    assert message.rstrip().endswith("OverBudget")
    assert _processes_with(f"{MARKER}={value}") == []


def test_budgets_are_the_manifests_unless_the_run_sets_one_for_every_test() -> None:
    manifest = load_manifest()
    model, plain = manifest["QUEUE-MODEL-AGREEMENT"], manifest[PROPERTY]
    assert model.time_budget_s is not None
    assert model.time_budget_s > DEFAULT_TIME_BUDGET_S
    assert TimeBudgets().of(model) == model.time_budget_s
    assert TimeBudgets().of(plain) == DEFAULT_TIME_BUDGET_S
    assert TimeBudgets(override_s=7).of(model) == 7
    assert TimeBudgets(override_s=0).of(plain) is None


def _sleep_long() -> None:
    time.sleep(600)


def test_reaping_ends_every_live_child_process() -> None:
    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=_sleep_long, daemon=True) for _ in range(2)]
    for child in children:
        child.start()
    reaped = reap_children()
    assert sorted(reaped) == sorted(child.pid for child in children if child.pid is not None)
    assert [child.is_alive() for child in children] == [False, False]


def test_the_cli_passes_the_time_budget_to_the_plugin() -> None:
    options, extra = parse(["run", "--engine", "sqlite", "--time-budget", "45"])
    assert (options, extra) == (RunOptions(engine="sqlite", time_budget=45.0), [])
    args = pytest_args(options)
    assert args[args.index("--alkstore-time-budget") + 1] == "45"
    assert "--alkstore-time-budget" not in pytest_args(RunOptions(engine="sqlite"))


@pytest.mark.parametrize("value", ["-1", "soon", "inf"])
def test_a_time_budget_that_is_not_a_number_of_seconds_is_refused(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(["run", "--engine", "sqlite", "--time-budget", value])
    assert exited.value.code == 2
    assert "--time-budget" in capsys.readouterr().err


def test_the_plugin_refuses_a_negative_time_budget(run_in: RunIn) -> None:
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "kit_engines:stub",
        "--alkstore-time-budget",
        "-3",
        "--collect-only",
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--time-budget is a number of seconds >= 0, got -3" in output(result)
