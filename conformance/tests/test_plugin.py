"""The plugin: inert without --engine; with it, header, seed, profiles, not_applicable."""

from __future__ import annotations

from typing import Any

import pytest
from kit_runs import RunIn, output

from alkstore_conformance.certify.manifest import ALWAYS_APPLICABLE, load_manifest
from alkstore_conformance.certify.plugin import _long_first
from alkstore_conformance.suite.test_stateful import MODEL_SHARDS

PLAIN_TEST = """
import hypothesis

def test_plain():
    # Hypothesis' own choice ("default", or "ci" when CI is set): never one of ours.
    assert not hypothesis.settings.get_current_profile_name().startswith("alkstore")
"""


def test_plugin_is_inert_without_an_engine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    text = result.stdout.str()
    assert "alkstore-conformance: hypothesis profile" not in text
    assert "via --engine" not in text
    assert "per property" not in text


def test_suite_without_an_engine_is_a_usage_error(run_in: RunIn) -> None:
    result = run_in.pytest("--pyargs", "alkstore_conformance.suite", "--collect-only", "-q")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "pass --engine NAME" in output(result)


def test_unknown_engine_is_a_usage_error_naming_installed_engines(run_in: RunIn) -> None:
    result = run_in.pytest("--pyargs", "alkstore_conformance.suite", "--engine", "no-such-engine")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "no alkstore engine named 'no-such-engine'; installed engines:" in output(result)


def test_header_names_the_engine_and_the_seed(run_in: RunIn) -> None:
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "kit_engines:stub",
        "--collect-only",
        "--hypothesis-seed=1234",
    )
    assert result.returncode == 0, output(result)
    assert "engine stub 0 (contract 1) via --engine kit_engines:stub" in result.stdout
    assert "hypothesis profile alkstore-dev, seed 1234" in result.stdout
    assert "--hypothesis-seed=1234" in result.stdout


def test_hypothesis_profile_can_be_chosen(run_in: RunIn) -> None:
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "kit_engines:stub",
        "--collect-only",
        "--hypothesis-profile",
        "alkstore-ci",
    )
    assert result.returncode == 0, output(result)
    assert "hypothesis profile alkstore-ci, seed" in result.stdout


def test_missing_profile_is_reported_not_applicable(run_in: RunIn) -> None:
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "kit_engines:ReferenceWithoutLocks",
        "-k",
        "test_locks or lock_calls_after_close",
        "--alkstore-report",
        "report.json",
        "-q",
        "-rs",
    )
    report = run_in.report()
    statuses = {p["id"]: p["status"] for p in report["properties"]}
    assert {pid: s for pid, s in statuses.items() if pid.startswith("LOCK-")} == {
        "LOCK-ACQUIRE-EXCLUSIVE": "not_applicable",
        "LOCK-REACQUIRE-RENEWS": "not_applicable",
        "LOCK-RENEW": "not_applicable",
        "LOCK-RELEASE": "not_applicable",
        "LOCK-HOLDER": "not_applicable",
    }
    assert "not_applicable: engine lacks profile locks" in result.stdout
    assert "locks" not in report["engine"]["profiles"]
    assert "locks" in report["engine"]["not_applicable_profiles"]
    # STORE-CLOSED is core: its only test selected here needs locks, and the core is
    # never not_applicable -- so the run errs instead of passing vacuously.
    (store_closed,) = [p for p in report["properties"] if p["id"] == "STORE-CLOSED"]
    assert store_closed["status"] == "error"
    assert "never not_applicable" in store_closed["reason"]
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output(result)


def _profile_ids(profile: str) -> list[str]:
    ids = [prop.id for prop in load_manifest().values() if prop.profile == profile]
    assert ids, f"the manifest has no {profile} property"
    return ids


def _report_of(run_in: RunIn, engine: str, property_ids: list[str]) -> dict[str, Any]:
    """Run only ``property_ids`` on ``engine``; the report (it must succeed)."""
    selection = [
        arg for property_id in property_ids for arg in ("--alkstore-property", property_id)
    ]
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        engine,
        *selection,
        "--alkstore-report",
        "report.json",
        "-q",
    )
    assert result.returncode == 0, output(result)
    report: dict[str, Any] = run_in.report()
    return report


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {p["id"]: p["status"] for p in report["properties"]}


@pytest.mark.parametrize(
    ("profile", "engine"),
    [
        ("ops", "kit_engines:ReferenceWithoutOps"),
        ("snooze", "kit_engines:ReferenceWithoutSnooze"),
        ("unique", "kit_engines:ReferenceWithoutUnique"),
        ("periodic", "kit_engines:ReferenceWithoutPeriodic"),
        ("limits", "kit_engines:ReferenceWithoutLimits"),
        ("key_limits", "kit_engines:ReferenceWithoutKeyLimits"),
        ("results", "kit_engines:ReferenceWithoutResults"),
        ("workers", "kit_engines:ReferenceWithoutWorkers"),
        ("dependencies", "kit_engines:ReferenceWithoutDependencies"),
        ("metadata", "kit_engines:ReferenceWithoutMetadata"),
    ],
    ids=lambda value: value.rsplit("Without", 1)[-1].lower() if ":" in value else value,
)
def test_an_engine_without_a_profile_has_every_property_of_it_not_applicable(
    run_in: RunIn, profile: str, engine: str
) -> None:
    ids = _profile_ids(profile)
    assert ids, f"the manifest lists no {profile} property"
    report = _report_of(run_in, engine, ids)
    assert _statuses(report) == dict.fromkeys(ids, "not_applicable")
    assert profile in report["engine"]["not_applicable_profiles"]


def test_a_1_1_engine_certifies_its_scheduler_with_every_cron_property_not_applicable(
    run_in: RunIn,
) -> None:
    cron = _profile_ids("cron")
    scheduler = _profile_ids("scheduler")
    report = _report_of(run_in, "kit_engines:MemoryWithoutCron", cron + scheduler)
    statuses = _statuses(report)
    assert {p: statuses[p] for p in cron} == dict.fromkeys(cron, "not_applicable")
    # The memory engine is one process: its multi-process properties are not applicable.
    assert {statuses[p] for p in scheduler} == {"pass", "not_applicable"}
    assert [p for p in scheduler if statuses[p] == "pass"] != []
    assert "cron" in report["engine"]["not_applicable_profiles"]


def test_an_engine_cannot_opt_out_of_the_queue_core(run_in: RunIn) -> None:
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "kit_engines:ReferenceClaimingNoProfiles",
        "-k",
        "test_provisioned_store_starts_empty or test_a_lock_is_exclusive_across_stores",
        "--alkstore-report",
        "report.json",
    )
    assert result.returncode == 0, output(result)
    report = run_in.report()
    statuses = {p["id"]: p["status"] for p in report["properties"]}
    assert statuses == {
        "ENGINE-PROVISION-ISOLATED": "pass",
        "LOCK-ACQUIRE-EXCLUSIVE": "not_applicable",
    }
    # The core, and what is built on it alone (the worker, ...), come with every engine.
    assert report["engine"]["profiles"] == sorted(ALWAYS_APPLICABLE)
    assert ALWAYS_APPLICABLE.isdisjoint(report["engine"]["not_applicable_profiles"])


def test_engine_is_looked_up_in_the_given_group(run_in: RunIn) -> None:
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "sqlite",
        "--engine-group",
        "alkstore.engines.nothing-here",
        "--collect-only",
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "no alkstore engine named 'sqlite'; installed engines: none" in output(result)


def test_capabilities_other_than_the_contracts_dataclass_are_a_usage_error(
    run_in: RunIn,
) -> None:
    result = run_in.pytest(
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "kit_engines:capabilities_as_a_dict",
        "--collect-only",
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "capabilities must be an alkstore.Capabilities, got dict" in output(result)


def test_the_tests_of_properties_with_a_time_budget_of_their_own_are_collected_first(
    run_in: RunIn,
) -> None:
    # One process, one share: the long ones start at once, never last.
    assert load_manifest()["QUEUE-MODEL-AGREEMENT"].time_budget_s is not None
    result = run_in.pytest(
        *("--pyargs", "alkstore_conformance.suite", "--engine", "kit_engines:stub"),
        *("--collect-only", "-q"),
    )
    assert result.returncode == 0, output(result)
    nodeids = [line for line in result.stdout.splitlines() if "::" in line]
    shards = [nodeid for nodeid in nodeids if "test_stateful.py::TestQueueModelAgreement" in nodeid]
    assert len(shards) == MODEL_SHARDS
    assert nodeids[:MODEL_SHARDS] == shards
    rest = [nodeid.partition("::")[0] for nodeid in nodeids[MODEL_SHARDS:]]
    files = list(dict.fromkeys(rest))
    assert len(files) > 10
    assert files == sorted(files)  # every other test where pytest collected it


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def _worksteal_shares(count: int, workers: int) -> list[range]:
    """The consecutive shares xdist's work-stealing scheduler first deals ``workers``."""
    shares, start = [], 0
    for number in range(workers):
        size = (count - start) // (workers - number)
        shares.append(range(start, start + size))
        start += size
    return shares


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_each_workers_first_share_starts_with_a_long_test(workers: int) -> None:
    manifest = load_manifest()
    short = next(pid for pid, prop in manifest.items() if prop.time_budget_s is None)
    items: list[Any] = [_Item(f"short{n}") for n in range(23)]
    items[5:5] = [_Item(f"long{n}") for n in range(MODEL_SHARDS)]
    declared = {
        item.nodeid: ["QUEUE-MODEL-AGREEMENT" if item.nodeid.startswith("long") else short]
        for item in items
    }
    _long_first(items, declared, manifest, workers)
    order = [item.nodeid for item in items]
    assert sorted(order) == sorted(declared)  # nothing lost, nothing twice
    shares = _worksteal_shares(len(order), workers)
    heads = [order[share.start] for share in shares]
    assert all(head.startswith("long") for head in heads), order
    for share in shares:  # a share's long tests first, then the rest in collection order
        names = [order[n] for n in share]
        longs = [name for name in names if name.startswith("long")]
        assert names[: len(longs)] == longs
    shorts = [name for name in order if name.startswith("short")]
    assert shorts == sorted(shorts, key=lambda name: int(name[5:]))
