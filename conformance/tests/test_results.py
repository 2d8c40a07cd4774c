"""Per-property statuses from test reports (pass | fail | error | not_applicable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alkstore_conformance.certify.manifest import load_manifest
from alkstore_conformance.certify.results import (
    BACKEND_KEY,
    EXAMPLES_KEY,
    NEEDS_KEY,
    PROPERTY_KEY,
    SEED_KEY,
    TRIAL_KEY,
    ResultBook,
    falsifying_example,
    format_table,
    property_entry,
)

PROP = "QUEUE-CANCEL"
OTHER = "QUEUE-ACK-BATCH"
OPTIONAL = "LOCK-RENEW"
NOT_APPLICABLE_SKIP = ("x.py", 1, "Skipped: not_applicable: engine lacks profile locks")


@dataclass
class FakeReport:
    nodeid: str
    when: str
    outcome: str
    property_id: str = PROP
    duration: float = 0.5
    longrepr: Any = None
    longreprtext: str = ""
    user_properties: list[tuple[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.user_properties = [(PROPERTY_KEY, self.property_id), (SEED_KEY, "42")]


def _book(*reports: FakeReport) -> ResultBook:
    book = ResultBook(load_manifest())
    for report in reports:
        book.record(report)
    return book


def _passed(nodeid: str, prop: str = PROP) -> list[FakeReport]:
    return [FakeReport(nodeid, when, "passed", prop) for when in ("setup", "call", "teardown")]


def _status(book: ResultBook, prop: str = PROP) -> str:
    (result,) = [r for r in book.results() if r.prop.id == prop]
    return result.status


def test_all_tests_passing_is_pass() -> None:
    book = _book(*_passed("a"), *_passed("b"))
    assert _status(book) == "pass"
    assert book.seeds == {"42"}


def test_a_failing_call_is_fail() -> None:
    failing = FakeReport("b", "call", "failed", longreprtext="AssertionError: boom")
    book = _book(*_passed("a"), FakeReport("b", "setup", "passed"), failing)
    assert _status(book) == "fail"


def test_a_failing_setup_is_error() -> None:
    book = _book(*_passed("a"), FakeReport("b", "setup", "failed", longreprtext="provision"))
    assert _status(book) == "error"


def test_a_failing_teardown_after_a_passing_call_is_error() -> None:
    reports = _passed("a")
    reports[2] = FakeReport("a", "teardown", "failed", longreprtext="close failed")
    assert _status(_book(*reports)) == "error"


def test_only_not_applicable_skips_is_not_applicable() -> None:
    book = _book(FakeReport("a", "setup", "skipped", OPTIONAL, longrepr=NOT_APPLICABLE_SKIP))
    assert _status(book, OPTIONAL) == "not_applicable"


def test_a_core_property_with_only_not_applicable_tests_is_error() -> None:
    book = _book(FakeReport("a", "setup", "skipped", PROP, longrepr=NOT_APPLICABLE_SKIP))
    assert _status(book) == "error"
    (result,) = book.results()
    assert "never not_applicable" in property_entry(result, None)["reason"]


def test_a_worker_or_async_property_requiring_an_absent_profile_is_not_applicable() -> None:
    skip = ("x.py", 1, "Skipped: not_applicable: engine lacks profile transactions")
    book = _book(FakeReport("a", "setup", "skipped", "ASYNC-TX-ATOMIC", longrepr=skip))
    assert _status(book, "ASYNC-TX-ATOMIC") == "not_applicable"
    (result,) = book.results()
    entry = property_entry(result, 300.0)
    assert (entry["requires"], entry["time_budget_s"]) == (["transactions"], 300.0)
    assert entry["covering_tests"][0]["not_applicable_because"] == (
        "engine lacks profile transactions"
    )


def test_not_applicable_beside_a_pass_is_pass() -> None:
    skip = ("x.py", 1, "Skipped: not_applicable: engine lacks profile multi_process")
    book = _book(*_passed("a"), FakeReport("b", "setup", "skipped", longrepr=skip))
    assert _status(book) == "pass"


def test_any_other_skip_is_error() -> None:
    skip = ("x.py", 1, "Skipped: flaky on this machine")
    book = _book(*_passed("a"), FakeReport("b", "call", "skipped", longrepr=skip))
    assert _status(book) == "error"
    (result,) = book.results()
    entry = property_entry(result, None)
    assert "flaky on this machine" in entry["failures"][0]["message"]


def test_fail_outranks_error() -> None:
    book = _book(
        FakeReport("a", "setup", "failed"),
        FakeReport("b", "setup", "passed"),
        FakeReport("b", "call", "failed"),
    )
    assert _status(book) == "fail"


def test_results_follow_the_manifest_and_list_what_did_not_run() -> None:
    book = _book(*_passed("b", OTHER), *_passed("a", PROP))
    order = list(load_manifest())
    assert [r.prop.id for r in book.results()] == sorted([PROP, OTHER], key=order.index)
    assert PROP not in book.not_run()
    assert len(book.not_run()) == len(order) - 2


def test_reports_of_non_suite_tests_are_ignored() -> None:
    stray = FakeReport("x", "call", "failed")
    stray.user_properties = []
    assert _book(stray).results() == []


def test_falsifying_example_loses_pytests_error_margin() -> None:
    text = (
        "E   AssertionError\n"
        "E   Falsifying example: test_x(\n"
        "E       jobs=[(0, 1)],\n"
        "E   )\n"
        "E   \n"
        "E   You can reproduce this example by ...\n"
    )
    assert falsifying_example(text) == "Falsifying example: test_x(\n    jobs=[(0, 1)],\n)"


def test_falsifying_example_is_extracted() -> None:
    text = (
        "E   AssertionError\n"
        "Falsifying example: test_x(\n    store=...,\n    jobs=[(0, 1)],\n)\n"
        "\nYou can reproduce this example by temporarily adding @reproduce_failure\n"
    )
    assert falsifying_example(text) == (
        "Falsifying example: test_x(\n    store=...,\n    jobs=[(0, 1)],\n)"
    )
    assert falsifying_example("plain failure") is None


def test_table_has_one_row_per_property() -> None:
    book = _book(*_passed("a"), *_passed("b", OTHER))
    lines = format_table(book.results())
    order = list(load_manifest())
    assert lines[0].split() == ["property", "status", "tests", "duration"]
    assert [line.split()[:3] for line in lines[1:]] == [
        [prop, "pass", "1"] for prop in sorted([PROP, OTHER], key=order.index)
    ]


def _with(report: FakeReport, *extra: tuple[str, Any]) -> FakeReport:
    report.user_properties.extend(extra)
    return report


def test_examples_and_trials_are_summed_per_property() -> None:
    book = _book(
        *_passed("a"),
        _with(FakeReport("b", "call", "passed"), (EXAMPLES_KEY, 25)),
        _with(FakeReport("c", "call", "passed"), (EXAMPLES_KEY, 7)),
        _with(FakeReport("t[trial1]", "call", "passed"), (TRIAL_KEY, {"trial": 1, "seed": 9})),
        _with(FakeReport("t[trial2]", "call", "passed"), (TRIAL_KEY, {"trial": 2, "seed": 4})),
    )
    (result,) = book.results()
    entry = property_entry(result, None)
    assert (entry["examples"], entry["trials"], entry["tests"]) == (32, 2, 5)
    by_node = {t["nodeid"]: t for t in entry["covering_tests"]}
    assert (by_node["t[trial2]"]["trial"], by_node["t[trial2]"]["trial_seed"]) == (2, 4)
    assert by_node["a"]["examples"] is None


def test_properties_without_hypothesis_or_trials_say_none() -> None:
    (result,) = _book(*_passed("a")).results()
    entry = property_entry(result, None)
    assert (entry["examples"], entry["trials"]) == (None, None)


def test_the_first_backend_description_is_kept() -> None:
    book = _book(
        _with(FakeReport("a", "setup", "passed"), (BACKEND_KEY, {"server": "1"})),
        _with(FakeReport("b", "setup", "passed"), (BACKEND_KEY, {"server": "2"})),
    )
    assert book.backend == {"server": "1"}


def test_the_profiles_a_test_needs_reach_its_entry() -> None:
    reports = _passed("a", OPTIONAL)
    for report in reports:
        report.user_properties.append((NEEDS_KEY, ["locks", "transactions"]))
    (result,) = _book(*reports).results()
    assert property_entry(result, None)["covering_tests"][0]["needs"] == ["locks", "transactions"]
