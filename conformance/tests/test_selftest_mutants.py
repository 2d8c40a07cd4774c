"""The kit proves it can fail: every mutant engine is caught by the property it names.

Each mutant (``alkstore_conformance.selftest``) is the SQLite engine with one bug.
The kit runs against it restricted to that property and must report ``fail`` --
an assertion of the suite, not a crash -- while the same property passes on the
real SQLite engine. A mutant that makes a test wait forever is caught by the
kit's time budget instead (``caught_by`` is ``BUDGET``): its run gets a short
budget, and the failure must be the budget's. Runs use the ``alkstore-selftest``
profile (no shrinking).
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest
from kit_runs import Once, RunIn, output, report_problems

from alkstore import ENGINE_GROUP, installed_engines, load_engine
from alkstore_conformance import __version__
from alkstore_conformance.certify.manifest import load_manifest
from alkstore_conformance.certify.modes import SELFTEST_PROFILE
from alkstore_conformance.selftest import BUDGET, MUTANTS, SELFTEST_GROUP

REFERENCE_ENGINE = "sqlite"
SHORT_BUDGET_S = 10
"""The time budget of a run against a mutant the budget catches: the properties such
mutants hang take well under a second each on the real engine."""
REFERENCE_WORKERS = "4"
"""xdist workers of the reference engine's run over every catching property."""
MUTANT_NAMES = sorted(MUTANTS)
CAUGHT_BY = sorted({mutant.catches for mutant in MUTANTS.values()})
REFERENCE_REPORT_ENV = "ALKSTORE_KIT_REFERENCE_REPORT"
"""A report of the reference engine's run over (at least) every catching property, made
from this same suite: read instead of running them again. The tests session sets it to
the SQLite certification it has just made, which runs every property: the kit's tests
then spend no 90 s of their own on the same runs."""


def _run(
    run_in: RunIn,
    engine: str,
    group: str,
    properties: list[str],
    *,
    first_failure: bool = False,
    budget_s: int | None = None,
    workers: str = "0",
) -> dict[str, object]:
    selection = [arg for property_id in properties for arg in ("--property", property_id)]
    if budget_s is not None:
        selection += ["--time-budget", str(budget_s)]
    # One failing test is what catching a mutant means; the rest of its tests
    # (each waiting out a broken engine's timeout) would only cost time.
    stop_early = ["--exitfirst"] if first_failure else []
    result = run_in.cli(
        "run",
        "--engine",
        engine,
        "--engine-group",
        group,
        *selection,
        "--report",
        "report.json",
        "-n",
        workers,
        "--",
        "--hypothesis-profile",
        SELFTEST_PROFILE,
        "-q",
        *stop_early,
    )
    report = run_in.report()
    assert report_problems(report) == []
    return {"returncode": result.returncode, "output": output(result), "report": report}


def _reference_statuses(run_in: RunIn) -> dict[str, str]:
    # The real engine's run is not stopped early, so its tests spread over workers
    # (they mostly wait: deadlines, lapses, wake-ups).
    ran = _run(run_in, REFERENCE_ENGINE, "alkstore.engines", CAUGHT_BY, workers=REFERENCE_WORKERS)
    report = ran["report"]
    assert isinstance(report, dict)
    return {p["id"]: p["status"] for p in report["properties"]}


def statuses_of_reference_report(report: dict[str, Any]) -> dict[str, str]:
    """Each catching property's status in ``report``, which must be the reference
    engine's run of this suite (same version, same manifest) over all of them."""
    assert report_problems(report) == []
    engine = report["engine"]
    expected_engine = (REFERENCE_ENGINE, ENGINE_GROUP)
    assert (engine["reference"], engine["group"]) == expected_engine, f"another engine: {engine}"
    suite = report["suite"]
    expected_suite = (__version__, load_manifest().sha256)
    assert (suite["version"], suite["manifest_sha256"]) == expected_suite, f"another suite: {suite}"
    statuses = {p["id"]: p["status"] for p in report["properties"]}
    missing = [property_id for property_id in CAUGHT_BY if property_id not in statuses]
    assert missing == [], f"the reference report did not run {missing}"
    return {property_id: statuses[property_id] for property_id in CAUGHT_BY}


@pytest.fixture(scope="module")
def reference_statuses(once: Once) -> dict[str, str]:
    """The real SQLite engine's status for every property that catches a mutant: from
    ``$ALKSTORE_KIT_REFERENCE_REPORT`` when set, else one run made once per session
    whichever xdist workers run the tests reading it."""
    path = os.environ.get(REFERENCE_REPORT_ENV)
    if path:
        return statuses_of_reference_report(json.loads(Path(path).read_text(encoding="utf-8")))
    statuses: dict[str, str] = once("selftest-reference", _reference_statuses)
    return statuses


def test_every_registered_mutant_names_a_manifest_property() -> None:
    assert installed_engines(SELFTEST_GROUP) == MUTANT_NAMES
    assert len(MUTANTS) >= 6
    manifest = load_manifest()
    for name, mutant in MUTANTS.items():
        assert mutant.catches in manifest, name
        assert load_engine(name, SELFTEST_GROUP) is mutant


@pytest.mark.parametrize("name", MUTANT_NAMES)
def test_mutant_is_caught_by_its_property(run_in: RunIn, name: str) -> None:
    mutant = MUTANTS[name]
    budget_s = SHORT_BUDGET_S if mutant.caught_by == BUDGET else None
    ran = _run(
        run_in, name, SELFTEST_GROUP, [mutant.catches], first_failure=True, budget_s=budget_s
    )
    report = ran["report"]
    assert isinstance(report, dict)
    (prop,) = report["properties"]
    assert (prop["id"], prop["status"]) == (mutant.catches, "fail"), ran["output"]
    assert ran["returncode"] == pytest.ExitCode.TESTS_FAILED
    # Caught by the suite's assertions (or its time budget), not by the mutant crashing.
    assert prop["failures"]
    assert all(f["status"] == "fail" for f in prop["failures"])
    endings = [f["message"].rstrip().splitlines()[-1] for f in prop["failures"]]
    assert any(line.endswith(mutant.caught_by) for line in endings), json.dumps(endings)


@pytest.mark.parametrize("name", MUTANT_NAMES)
def test_the_property_catching_a_mutant_passes_on_the_reference_engine(
    reference_statuses: dict[str, str], name: str
) -> None:
    assert reference_statuses[MUTANTS[name].catches] == "pass"


def _one_property_report(run_in: RunIn) -> dict[str, object]:
    ran = _run(run_in, REFERENCE_ENGINE, ENGINE_GROUP, [CAUGHT_BY[0]])
    report = ran["report"]
    assert isinstance(report, dict)
    return report


@pytest.fixture(scope="module")
def one_property_report(once: Once) -> dict[str, Any]:
    """The reference engine's report of a run over the first catching property only."""
    report: dict[str, Any] = once("selftest-one-property", _one_property_report)
    return report


def _with_every_catching_property(report: dict[str, Any]) -> dict[str, Any]:
    (ran,) = report["properties"]
    return {**report, "properties": [{**ran, "id": property_id} for property_id in CAUGHT_BY]}


def test_a_reference_report_gives_each_catching_propertys_status(
    one_property_report: dict[str, Any],
) -> None:
    report = _with_every_catching_property(one_property_report)
    status = one_property_report["properties"][0]["status"]
    assert statuses_of_reference_report(report) == dict.fromkeys(CAUGHT_BY, status)


def test_a_reference_report_missing_a_catching_property_is_refused(
    one_property_report: dict[str, Any],
) -> None:
    with pytest.raises(AssertionError, match="did not run"):
        statuses_of_reference_report(one_property_report)


@pytest.mark.parametrize(
    ("part", "field", "other"),
    [("engine", "reference", "postgresql"), ("suite", "manifest_sha256", "0" * 64)],
)
def test_a_reference_report_of_another_engine_or_manifest_is_refused(
    one_property_report: dict[str, Any], part: str, field: str, other: str
) -> None:
    report = _with_every_catching_property(one_property_report)
    report[part] = {**report[part], field: other}
    with pytest.raises(AssertionError, match=other):
        statuses_of_reference_report(report)


def test_the_tests_session_names_the_same_reference_engine_and_variable() -> None:
    # noxfile.py runs without the kit installed, so it spells both once more: here
    # they are held to this module's.
    noxfile = Path(__file__).resolve().parents[2] / "noxfile.py"
    assigned = {
        target.id: node.value.value
        for node in ast.parse(noxfile.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert assigned["KIT_REFERENCE_ENGINE"] == REFERENCE_ENGINE
    assert assigned["KIT_REFERENCE_REPORT_ENV"] == REFERENCE_REPORT_ENV


def test_mutants_leave_no_files_behind() -> None:
    # Mutants provision through the SQLite engine: the temp dir is removed afterwards.
    mutant = MUTANTS[MUTANT_NAMES[0]]
    with mutant.provision() as spec, mutant.open(spec.url, **spec.opts) as store:
        store.queue("q").enqueue({"n": 1})
        path = Path(spec.url.removeprefix("sqlite:///"))
        assert path.exists()
    assert not path.parent.exists()


@pytest.mark.parametrize("name", ["rate-window-off-by-one", "per-key-rate-per-queue"])
def test_the_model_based_property_catches_a_rate_counted_wrong(run_in: RunIn, name: str) -> None:
    # The reference model counts §16.6's and §16.11's sliding windows too: the stateful
    # machine, not only the rate's own property, tells a window one second short, and
    # a per-key rate counting every key's starts, from the contract's.
    ran = _run(run_in, name, SELFTEST_GROUP, ["QUEUE-MODEL-AGREEMENT"], first_failure=True)
    report = ran["report"]
    assert isinstance(report, dict)
    (prop,) = report["properties"]
    assert (prop["id"], prop["status"]) == ("QUEUE-MODEL-AGREEMENT", "fail"), ran["output"]
    endings = [f["message"].rstrip().splitlines()[-1] for f in prop["failures"]]
    assert all(f["status"] == "fail" for f in prop["failures"]), json.dumps(endings)
