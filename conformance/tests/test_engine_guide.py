"""The engine author's guide states what the code requires, and stays so: its
generated blocks are current (``tools/generate_guide.py --check``), every driver
method and announcing statement is listed, every section an error message names
exists, and every statement of the contract version is ``CONTRACT_VERSION``."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import alkstore._guide as core_guide
import alkstore.driver as seam
from alkstore import CONTRACT_VERSION, Capabilities
from alkstore_conformance.certify import guide as kit_guide
from alkstore_conformance.driver_suite import SUITES

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "certify-your-engine.md"
TOOL = ROOT / "tools" / "generate_guide.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_guide", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def _block(name: str) -> str:
    match = re.search(
        rf"<!-- generated: {name} -->\n(.*?)<!-- end generated -->", _guide(), re.DOTALL
    )
    assert match is not None, f"the guide has no generated block {name!r}"
    return match.group(1)


def test_the_generated_blocks_and_every_version_statement_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--check", "--static"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_every_method_of_the_driver_protocols_is_listed() -> None:
    listed = re.findall(r"^- `(\w+)\(", _block("driver-methods"), re.MULTILINE)
    protocols = [
        seam.Driver,
        *seam.OPTIONAL_DRIVERS,
        *seam.PROFILE_DRIVERS.values(),
    ]
    expected = [name for protocol in protocols for name in seam.protocol_methods(protocol)]
    assert listed == expected
    for protocol in protocols:
        assert f"**`{protocol.__name__}`**" in _block("driver-methods")


def test_the_announcing_statements_listed_are_those_the_core_expects() -> None:
    listed = re.findall(r"^- `(\w+)` announces", _block("announces"), re.MULTILINE)
    assert listed == list(seam.ANNOUNCES)
    in_methods = re.findall(r"^- `(\w+)\(.*\*Announces", _block("driver-methods"), re.MULTILINE)
    assert sorted(in_methods) == sorted(seam.ANNOUNCES)


def test_the_driver_suite_checks_every_announcing_statement() -> None:
    tests = {name for suite in SUITES for name in dir(suite) if name.startswith("test_")}
    unchecked = [
        name
        for name in seam.ANNOUNCES
        if not any(test.startswith(f"test_{name}_announces") for test in tests)
    ]
    assert unchecked == []


def test_every_capabilities_field_is_in_the_profiles_table() -> None:
    listed = re.findall(r"^\| `(\w+)` \|", _block("capabilities"), re.MULTILINE)
    assert listed == [field.name for field in dataclasses.fields(Capabilities)]


def test_every_section_an_error_names_is_a_heading_of_the_guide() -> None:
    headings = {
        re.sub(r"^\d+\. ", "", line.lstrip("#").strip())
        for line in _guide().splitlines()
        if line.startswith("#")
    }
    named = {*core_guide.SECTIONS, *kit_guide.SECTIONS}
    assert named - headings == set()
    assert core_guide.GUIDE == kit_guide.GUIDE == GUIDE.relative_to(ROOT).as_posix()


def test_every_statement_of_the_contract_version_is_contract_version(tool: ModuleType) -> None:
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    # The header, §1.1's contract_version and §9.1's table are found by the patterns.
    assert len(list(tool.version_mentions(contract))) >= 3
    stated = {
        (path.name, match.group("version"))
        for path in tool.version_files()
        for match in tool.version_mentions(path.read_text(encoding="utf-8"))
    }
    assert stated
    assert {version for _, version in stated} == {CONTRACT_VERSION}


def test_a_version_bump_is_one_value(tool: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool, "CONTRACT_VERSION", "9.9")
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    bumped = tool.with_current_version(contract)
    assert {m.group("version") for m in tool.version_mentions(bumped)} == {"9.9"}
    assert "Contract version: **9.9**" in bumped
    assert '"9.9" today' in tool.render_provider()
