"""The manifest/test cross-check: unit level, and on the shipped suite."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit_runs import RunIn, output

from alkstore_conformance.certify import plugin
from alkstore_conformance.certify.crosscheck import declaration_problems, dependency_problems
from alkstore_conformance.certify.manifest import load_manifest, parse_manifest

MANIFEST = parse_manifest(
    '[[property]]\nid = "QUEUE-A"\ntitle = "a"\ncontract = "§2"\nprofile = "queues"\n'
    '[[property]]\nid = "QUEUE-B"\ntitle = "b"\ncontract = "§2"\nprofile = "queues"\n'
)


def test_matching_declarations_have_no_problems() -> None:
    declared = {"t.py::one": ["QUEUE-A"], "t.py::two": ["QUEUE-B"], "t.py::three": ["QUEUE-A"]}
    assert declaration_problems(declared, MANIFEST, complete=True) == []


def test_a_test_without_a_property_is_a_problem() -> None:
    problems = declaration_problems({"t.py::bare": []}, MANIFEST, complete=False)
    assert problems == ['t.py::bare: declares no property; add @pytest.mark.property("ID")']


def test_a_test_with_two_properties_is_a_problem() -> None:
    problems = declaration_problems({"t.py::t": ["QUEUE-A", "QUEUE-B"]}, MANIFEST, complete=False)
    assert len(problems) == 1
    assert "exactly one" in problems[0]


def test_an_unknown_property_is_a_problem() -> None:
    problems = declaration_problems({"t.py::t": ["QUEUE-NOPE"]}, MANIFEST, complete=False)
    assert problems == ["t.py::t: property 'QUEUE-NOPE' is not in the manifest"]


def test_a_property_without_a_test_is_a_problem_only_for_the_whole_suite() -> None:
    declared = {"t.py::one": ["QUEUE-A"]}
    assert declaration_problems(declared, MANIFEST, complete=False) == []
    assert declaration_problems(declared, MANIFEST, complete=True) == [
        "manifest property QUEUE-B has no test"
    ]


ASYNC_TX = parse_manifest(
    '[[property]]\nid = "ASYNC-X"\ntitle = "x"\ncontract = "§13"\nprofile = "async"\n'
    '[[property]]\nid = "ASYNC-Y"\ntitle = "y"\ncontract = "§13"\nprofile = "async"\n'
    'requires = ["transactions"]\n'
)


def test_a_profile_every_test_of_a_property_needs_must_be_declared() -> None:
    declared = {"t.py::one": ["ASYNC-X"], "t.py::two": ["ASYNC-X"]}
    needs = {"t.py::one": ["async", "transactions"], "t.py::two": ["async", "transactions", "sql"]}
    assert dependency_problems(declared, needs, ASYNC_TX) == [
        "manifest property ASYNC-X: every test needs transactions; "
        'declare it: requires = ["transactions"]'
    ]


def test_a_profile_only_some_tests_need_stays_a_mark_on_those_tests() -> None:
    declared = {"t.py::one": ["ASYNC-X"], "t.py::two": ["ASYNC-X"]}
    needs = {"t.py::one": ["async", "transactions"], "t.py::two": ["async"]}
    assert dependency_problems(declared, needs, ASYNC_TX) == []


def test_a_declared_dependency_is_no_problem() -> None:
    declared = {"t.py::one": ["ASYNC-Y"]}
    needs = {"t.py::one": ["async", "transactions"]}
    assert dependency_problems(declared, needs, ASYNC_TX) == []


def test_the_shipped_suite_agrees_with_the_manifest(run_in: RunIn) -> None:
    result = run_in.pytest(
        "--collect-only",
        "-q",
        "--pyargs",
        "alkstore_conformance.suite",
        "--engine",
        "kit_engines:stub",
    )
    assert result.returncode == 0, output(result)
    assert "tests collected" in result.stdout or " collected" in result.stdout


@pytest.fixture
def scratch_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the plugin's notion of "the suite" at a scratch directory (in-process runs)."""
    suite = pytester.mkpydir("scratch_suite")
    monkeypatch.setattr(plugin, "_SUITE_DIR", suite)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    return suite


def _write(suite: Path, body: str) -> None:
    (suite / "test_scratch.py").write_text("import pytest\n\n" + body, encoding="utf-8")


def test_collection_fails_for_a_suite_test_without_a_property(
    pytester: pytest.Pytester, scratch_suite: Path
) -> None:
    _write(scratch_suite, "def test_bare():\n    assert True\n")
    result = pytester.runpytest_inprocess("--engine", "kit_engines:stub", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_bare: declares no property*"])


def test_collection_fails_for_an_unknown_property(
    pytester: pytest.Pytester, scratch_suite: Path
) -> None:
    _write(
        scratch_suite,
        '@pytest.mark.property("QUEUE-NOT-A-THING")\ndef test_odd():\n    assert True\n',
    )
    result = pytester.runpytest_inprocess("--engine", "kit_engines:stub", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'QUEUE-NOT-A-THING' is not in the manifest*"])


def test_collection_fails_for_a_manifest_property_without_a_test(
    pytester: pytest.Pytester, scratch_suite: Path
) -> None:
    first = next(iter(load_manifest()))
    _write(scratch_suite, f'@pytest.mark.property("{first}")\ndef test_one():\n    assert True\n')
    result = pytester.runpytest_inprocess("--engine", "kit_engines:stub", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*manifest property * has no test*"])
    assert f"manifest property {first} has no test" not in "\n".join(result.stderr.lines)
