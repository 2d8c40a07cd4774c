"""An engine lacking any one optional profile still certifies (contract §10.2).

The memory engine (``alkstore_memory``, the example third-party engine) can
switch its profiles off (``alkstore_memory.without:<profile>``): its
capabilities then declare the profile absent and its stores refuse it with
``ProfileUnavailable``. So a property that needs the profile without saying so
in the manifest (``requires``), or a test that uses it without a ``requires``
mark, errors where it should be not_applicable.

Certifying the whole suite once per profile would cost sixteen full runs. The
tests below run what together covers the same ground, each test about once:

1. a certification of the whole suite with *every* optional profile off: each
   test that runs there needs no optional profile and uses none (it would meet
   ``ProfileUnavailable``), so it runs the same whichever profiles are off;
2. each test that run skipped for lacking one of the memory engine's profiles,
   run once with *only the profiles it needs* on (its report entry's ``needs``,
   and the profile it lacked when it checks for one itself): it must pass. Every
   profile it does not declare is off at once, so a use of any of them errors
   here as it would in a run with just that one off. (Tests that need the same
   profiles share one run.)
3. for each single profile off, the tests whose rules follow the engine's
   capabilities (the reference model's), which would not error on an undeclared
   profile but draw fewer steps, and one test of each property that needs the
   profile: the model passes, and those properties are not_applicable.

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
SHARDS = 6
"""Tests that share out the runs of step 2 (a few runs each), so that they spread over
the xdist workers of the kit's tests."""
RUN_WORKERS = "4"
"""xdist workers of a run of many tests: the memory engine's tests mostly wait
(deadlines, lapses, wake-ups) rather than compute (a run of 80 s used 17 s of CPU), so
four share two cores."""
SMALL_RUN = 40
"""A run of fewer tests than this starts no xdist workers (their start costs more)."""
LACKS = not_applicable_reason("").partition(":")[2].strip()
"""How a not_applicable test's ``not_applicable_because`` starts: the profile follows."""


def _lacked(test: dict[str, Any]) -> str | None:
    reason = test["not_applicable_because"]
    return None if reason is None else reason.removeprefix(LACKS).strip()


def _in_suite(nodeid: str) -> str:
    """A node id relative to the suite's directory, however the run's rootdir fell."""
    return nodeid.rpartition(f"{SUITE_DIR.parent.name}/{SUITE_DIR.name}/")[2]


def _without(on: frozenset[str]) -> str:
    """The memory engine with every optional profile off except ``on``."""
    off = [profile for profile in PROFILES if profile not in on]
    return f"{WITHOUT}:{'+'.join(off)}" if off else "memory"


def _certify_without_everything(run_in: RunIn) -> dict[str, Any]:
    report = "without-everything.json"
    result = run_in.cli(
        "run",
        "--engine",
        _without(frozenset()),
        "--certify",
        "--reduced",
        "--report",
        report,
        "-n",
        RUN_WORKERS,
        timeout=900,
    )
    data: dict[str, Any] = run_in.report(report)
    assert report_problems(data) == []
    statuses = {p["id"]: p["status"] for p in data["properties"]}
    broken = {pid: status for pid, status in statuses.items() if status in ("fail", "error")}
    assert broken == {}, f"without every profile: {broken}\n{output(result)[-6000:]}"
    assert result.returncode == 0, output(result)[-6000:]
    return data


def _run_tests(run_in: RunIn, engine: str, nodeids: list[str], report: str) -> dict[str, Any]:
    workers = RUN_WORKERS if len(nodeids) >= SMALL_RUN else "0"
    result = run_in.pytest(
        *(str(SUITE_DIR / nodeid) for nodeid in nodeids),
        "--engine",
        engine,
        "--alkstore-report",
        report,
        "-n",
        workers,
        "-q",
        timeout=900,
    )
    data: dict[str, Any] = run_in.report(report)
    assert report_problems(data) == [], output(result)[-6000:]
    ran = {_in_suite(test["nodeid"]) for p in data["properties"] for test in p["covering_tests"]}
    assert ran == set(nodeids), output(result)[-6000:]
    return data


def _tests(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(prop["id"], test) for prop in report["properties"] for test in prop["covering_tests"]]


def _broken(report: dict[str, Any], engine: str) -> str:
    """Every test neither pass nor not_applicable, with the failures' text."""
    broken = {
        test["nodeid"]: test["status"]
        for _, test in _tests(report)
        if test["status"] not in ("pass", "not_applicable")
    }
    if not broken:
        return ""
    failures = [f["message"][-3000:] for prop in report["properties"] for f in prop["failures"]]
    seed = report["hypothesis"]["seed"]
    return f"{engine} (seed {seed}): {broken}\n" + "\n".join(failures)


@pytest.fixture(scope="module")
def everything_off(once: Once) -> dict[str, Any]:
    """The certification with every optional profile off, made once per session."""
    report: dict[str, Any] = once("profiles-off-everything", _certify_without_everything)
    return report


def _needing_profiles(everything_off: dict[str, Any]) -> dict[frozenset[str], list[str]]:
    """Step 2's tests by the optional profiles each needs: those the run without every
    profile skipped for lacking one of the memory engine's (the rest need one it never
    has, or none), but not the capability-adaptive ones (step 3's)."""
    offered = set(PROFILES)
    groups: dict[frozenset[str], list[str]] = {}
    for property_id, test in _tests(everything_off):
        lacked = _lacked(test)
        if lacked not in offered or property_id in CAPABILITY_ADAPTIVE:
            continue
        needs = {*test["needs"], lacked} - ALWAYS_APPLICABLE
        if needs <= offered:
            groups.setdefault(frozenset(needs), []).append(_in_suite(test["nodeid"]))
    return groups


def _shard(groups: dict[frozenset[str], list[str]], shard: int) -> list[frozenset[str]]:
    """The groups one shard runs: dealt out largest first, so the shards even out."""
    ordered = sorted(groups, key=lambda on: (-len(groups[on]), sorted(on)))
    return ordered[shard::SHARDS]


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


def test_the_tests_needing_profiles_are_grouped_by_the_profiles_they_need(
    everything_off: dict[str, Any],
) -> None:
    groups = _needing_profiles(everything_off)
    tests = sum(len(nodeids) for nodeids in groups.values())
    assert len(groups) > len(PROFILES)
    assert tests > len(PROFILES) * 10
    for profile in PROFILES:  # every profile is needed by some test, so each is run on
        assert any(profile in on for on in groups), profile
    assert sum(len(_shard(groups, shard)) for shard in range(SHARDS)) == len(groups)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_tests_pass_with_only_the_profiles_they_need(
    run_in: RunIn, everything_off: dict[str, Any], shard: int
) -> None:
    """Each test of this shard's groups passes on the engine with only its profiles on.
    A test still skipped there for lacking a profile checks for one itself: it runs
    again with that one on too, until it runs (or lacks one the engine never has)."""
    groups = _needing_profiles(everything_off)
    pending = {on: groups[on] for on in _shard(groups, shard)}
    runs = 0
    while pending:
        on, nodeids = pending.popitem()
        runs += 1
        assert runs <= 4 * len(PROFILES), f"no end of profiles checked for: {nodeids}"
        engine = _without(on)
        report = _run_tests(run_in, engine, nodeids, f"only-{runs}.json")
        assert _broken(report, engine) == ""
        assert on.isdisjoint(report["engine"]["not_applicable_profiles"]), engine
        for _, test in _tests(report):
            lacked = _lacked(test)
            if test["status"] == "not_applicable" and lacked in PROFILES:
                assert lacked not in on, (engine, test["nodeid"])
                pending.setdefault(on | {lacked}, []).append(_in_suite(test["nodeid"]))


@pytest.mark.parametrize("profile", PROFILES)
def test_the_memory_engine_certifies_with_one_profile_switched_off(
    run_in: RunIn, everything_off: dict[str, Any], profile: str
) -> None:
    manifest = load_manifest()
    adaptive: list[str] = []
    one_per_property: dict[str, str] = {}
    for property_id, test in _tests(everything_off):
        nodeid = _in_suite(test["nodeid"])
        if property_id in CAPABILITY_ADAPTIVE:
            adaptive.append(nodeid)
        elif profile in manifest[property_id].profiles:
            one_per_property.setdefault(property_id, nodeid)
    assert adaptive
    assert one_per_property
    engine = f"{WITHOUT}:{profile}"
    one_off = _run_tests(run_in, engine, [*adaptive, *one_per_property.values()], "one-off.json")
    assert one_off["engine"]["not_applicable_profiles"].count(profile) == 1
    assert _broken(one_off, engine) == ""
    statuses = {prop["id"]: prop["status"] for prop in one_off["properties"]}
    assert {statuses[property_id] for property_id in CAPABILITY_ADAPTIVE} == {"pass"}
    assert {statuses[property_id] for property_id in one_per_property} == {"not_applicable"}
