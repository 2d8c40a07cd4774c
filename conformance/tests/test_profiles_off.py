"""An engine lacking any one optional profile still certifies (contract §10.2).

The memory engine (``alkstore_memory``, the example third-party engine) can
switch its profiles off (``alkstore_memory.without:<profile>``): its
capabilities then declare the profile absent and its stores refuse it with
``ProfileUnavailable``. So a property that needs the profile without saying so
in the manifest (``requires``), or a test that uses it without a ``requires``
mark, errors where it should be not_applicable.

Certifying the whole suite once per profile would cost seven full runs. The
tests below run what together covers the same ground:

1. a certification of the whole suite with *every* optional profile off: each
   test that runs there needs no optional profile and uses none (it would meet
   ``ProfileUnavailable``), so it runs the same whichever single profile is off;
2. for each single profile off (a test each, so that they spread over workers),
   a run of only the tests the first run skipped for lacking one of the memory
   engine's profiles (the tests whose outcome depends on which profiles an engine
   has), plus the reference model's, whose rules follow the engine's
   capabilities: every test that runs must be pass or not_applicable.

The rest of a certification is the first run's, and the full engine's
(``scenarios/third_party_engine/tests/test_certification.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kit_runs import Once, RunIn, output, report_problems

from alkstore_conformance.certify.manifest import ALWAYS_APPLICABLE, load_manifest
from alkstore_conformance.certify.state import not_applicable_reason
from alkstore_memory import MemoryEngine

WITHOUT = "alkstore_memory.without"
SUITE_DIR = Path(__file__).resolve().parents[1] / "src" / "alkstore_conformance" / "suite"
CAPABILITY_ADAPTIVE = ("QUEUE-MODEL-AGREEMENT",)
"""Properties whose tests read the engine's capabilities and run what they find."""
PROFILES = sorted(MemoryEngine.capabilities.profiles())
"""The memory engine's optional profiles: each is switched off in turn."""
RUN_WORKERS = "4"
"""xdist workers of each run: the memory engine's tests mostly wait (deadlines, lapses,
wake-ups) rather than compute (a run of 80 s used 17 s of CPU), so four share two cores."""
NOT_APPLICABLE = frozenset(not_applicable_reason(p).partition(":")[2].strip() for p in PROFILES)
"""The reasons a test is skipped for lacking one of them."""


def _certified(run_in: RunIn, result: Any, report: str) -> dict[str, Any]:
    data: dict[str, Any] = run_in.report(report)
    assert report_problems(data) == []
    statuses = {p["id"]: p["status"] for p in data["properties"]}
    broken = {pid: status for pid, status in statuses.items() if status in ("fail", "error")}
    assert broken == {}, f"without every profile: {broken}\n{output(result)[-6000:]}"
    assert result.returncode == 0, output(result)[-6000:]
    return data


def _tests_passed(run_in: RunIn, result: Any, report: str, profile: str) -> dict[str, Any]:
    """Every test pass or not_applicable. (Per test: a core property whose only tests
    picked here were not_applicable is an error of the selection, not of the engine.)"""
    data: dict[str, Any] = run_in.report(report)
    assert report_problems(data) == []
    broken = {
        test["nodeid"]: test["status"]
        for prop in data["properties"]
        for test in prop["covering_tests"]
        if test["status"] not in ("pass", "not_applicable")
    }
    failures = [f["message"][-3000:] for prop in data["properties"] for f in prop["failures"]]
    seed = data["hypothesis"]["seed"]
    assert broken == {}, f"without {profile} (seed {seed}): {broken}\n" + "\n".join(failures)
    return data


def _in_suite(nodeid: str) -> str:
    """A node id relative to the suite's directory, however the run's rootdir fell."""
    return nodeid.rpartition(f"{SUITE_DIR.parent.name}/{SUITE_DIR.name}/")[2]


def _certify_without_everything(run_in: RunIn) -> dict[str, Any]:
    report = "without-everything.json"
    result = run_in.cli(
        "run",
        "--engine",
        f"{WITHOUT}:{'+'.join(PROFILES)}",
        "--certify",
        "--reduced",
        "--report",
        report,
        "-n",
        RUN_WORKERS,
        timeout=900,
    )
    return _certified(run_in, result, report)


def _check_without(run_in: RunIn, profile: str, nodeids: list[str]) -> dict[str, Any]:
    report = f"without-{profile}.json"
    result = run_in.pytest(
        *(str(SUITE_DIR / nodeid) for nodeid in nodeids),
        "--engine",
        f"{WITHOUT}:{profile}",
        "--alkstore-report",
        report,
        "-n",
        RUN_WORKERS,
        "-q",
        timeout=900,
    )
    return _tests_passed(run_in, result, report, profile)


@pytest.fixture(scope="module")
def everything_off(once: Once) -> dict[str, Any]:
    """The certification with every optional profile off, made once per session."""
    report: dict[str, Any] = once("profiles-off-everything", _certify_without_everything)
    return report


def test_the_memory_engine_switches_off_each_of_its_optional_profiles() -> None:
    assert len(PROFILES) >= 7


def test_the_memory_engine_certifies_with_every_profile_switched_off(
    everything_off: dict[str, Any],
) -> None:
    manifest = load_manifest()
    assert everything_off["certified"] is True
    assert everything_off["not_run"] == []
    for prop in everything_off["properties"]:
        needs_only_the_core = ALWAYS_APPLICABLE.issuperset(manifest[prop["id"]].profiles)
        assert prop["status"] == ("pass" if needs_only_the_core else "not_applicable"), prop["id"]


def _depending_on_profiles(everything_off: dict[str, Any]) -> list[str]:
    """The tests the run without every profile skipped for lacking one (or whose
    rules follow the engine's capabilities): they alone depend on which is off."""
    return sorted(
        test["nodeid"]
        for prop in everything_off["properties"]
        for test in prop["covering_tests"]
        if test["not_applicable_because"] in NOT_APPLICABLE or prop["id"] in CAPABILITY_ADAPTIVE
    )


@pytest.mark.parametrize("profile", PROFILES)
def test_the_memory_engine_certifies_with_one_profile_switched_off(
    run_in: RunIn, everything_off: dict[str, Any], profile: str
) -> None:
    manifest = load_manifest()
    depends = _depending_on_profiles(everything_off)
    assert depends
    one_off = _check_without(run_in, profile, depends)
    assert one_off["engine"]["not_applicable_profiles"].count(profile) == 1
    ran = {_in_suite(test["nodeid"]) for p in one_off["properties"] for test in p["covering_tests"]}
    assert ran == set(depends)
    for prop in one_off["properties"]:
        if profile in manifest[prop["id"]].profiles:
            assert prop["status"] == "not_applicable", (profile, prop["id"])
