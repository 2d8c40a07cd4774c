"""A run of named properties collects only the suite modules declaring them."""

from __future__ import annotations

import json

import pytest
from kit_runs import RunIn, output

from alkstore_conformance import SUITE_PACKAGE
from alkstore_conformance.certify.cli import RunOptions, pytest_args
from alkstore_conformance.certify.manifest import load_manifest
from alkstore_conformance.certify.selection import modules_naming, suite_targets

DUMP_PLUGIN = """
import json

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    declared = {}
    for item in items:
        for mark in item.iter_markers("property"):
            declared.setdefault(mark.args[0], set()).add(item.path.stem)
    with open("declared.json", "w", encoding="utf-8") as out:
        json.dump({key: sorted(value) for key, value in declared.items()}, out)
"""
"""A plugin writing, for each property, the suite modules collection declares it in."""


def test_every_module_collection_declares_a_property_in_names_it(run_in: RunIn) -> None:
    (run_in.cwd / "dump_declared.py").write_text(DUMP_PLUGIN, encoding="utf-8")
    result = run_in.pytest(
        "-p", "dump_declared", "--pyargs", SUITE_PACKAGE, "--engine", "kit_engines:stub",
        "--collect-only", "-q",
    )  # fmt: skip
    assert result.returncode == 0, output(result)
    declared = json.loads((run_in.cwd / "declared.json").read_text(encoding="utf-8"))
    assert set(declared) == set(load_manifest())
    missed = {
        property_id: sorted(set(modules) - set(modules_naming(property_id)))
        for property_id, modules in declared.items()
        if not set(modules) <= set(modules_naming(property_id))
    }
    assert missed == {}


def test_a_run_of_named_properties_collects_only_their_modules() -> None:
    targets = suite_targets(["DEPS-FAN-IN", "QUEUE-CANCEL"])
    assert targets == [
        f"{SUITE_PACKAGE}.test_cancel_and_ack",
        f"{SUITE_PACKAGE}.test_dependencies",
    ]
    args = pytest_args(RunOptions(engine="sqlite", properties=("QUEUE-CANCEL",)))
    assert args[:2] == ["--pyargs", f"{SUITE_PACKAGE}.test_cancel_and_ack"]


def test_a_property_no_module_names_collects_the_whole_suite() -> None:
    assert suite_targets(["DEPS-FAN-IN", "NO-SUCH-PROPERTY"]) == [SUITE_PACKAGE]
    assert suite_targets([]) == [SUITE_PACKAGE]


@pytest.mark.parametrize(
    "options",
    [
        RunOptions(engine="sqlite", properties=("QUEUE-CANCEL",), certify=True),
        RunOptions(engine="sqlite", properties=("QUEUE-CANCEL",), profiles=("queues",)),
        RunOptions(engine="sqlite"),
    ],
    ids=["certify", "profiles", "everything"],
)
def test_a_certification_or_a_run_of_profiles_collects_the_whole_suite(
    options: RunOptions,
) -> None:
    assert pytest_args(options)[:2] == ["--pyargs", SUITE_PACKAGE]
