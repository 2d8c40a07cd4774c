"""Per-property results: what the terminal table and the JSON report say.

Statuses (contract §10): ``pass | fail | error | not_applicable``. A test's
status comes from its phases (a failing call is ``fail``; a failing setup or
teardown, or a skip that is not a not-applicable profile, is ``error``); a
property's status is the worst of its tests', where a property with only
not-applicable tests is ``not_applicable`` -- unless every profile it needs
(its own and the manifest's ``requires``) is one no engine may lack (the queue
core, the worker, the async surface): then it is ``error``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .manifest import ALWAYS_APPLICABLE, Manifest, Property

PASS = "pass"
FAIL = "fail"
ERROR = "error"
NOT_APPLICABLE = "not_applicable"
STATUSES = (PASS, FAIL, ERROR, NOT_APPLICABLE)

NOT_APPLICABLE_PREFIX = "not_applicable:"
"""Skip reasons starting with this are the only skips the suite allows."""

PROPERTY_KEY = "alkstore_property"
SEED_KEY = "alkstore_seed"
EXAMPLES_KEY = "alkstore_examples"
TRIAL_KEY = "alkstore_trial"
BACKEND_KEY = "alkstore_backend"
NEEDS_KEY = "alkstore_needs"
"""``user_properties`` keys a worker attaches to each test's reports: the property,
the run's seed, Hypothesis examples executed, ``{"trial", "of", "seed"}`` of a
repeated concurrency test, (once per process) the provider's backend description, and
the profiles the test needs."""

CORE_NOT_APPLICABLE = (
    "the queue core is never not_applicable, yet every test of this property was "
    "skipped as not_applicable"
)

_FAILURE_TEXT_LIMIT = 6000
_ERROR_MARGIN = re.compile(r"E *")
_SEVERITY = {FAIL: 3, ERROR: 2, PASS: 1, NOT_APPLICABLE: 0}


@dataclass
class CaseRecord:
    """One test's phases folded into a status."""

    nodeid: str
    property_id: str
    duration_s: float = 0.0
    failed_call: bool = False
    errored: bool = False
    passed_call: bool = False
    not_applicable: bool = False
    failure: str | None = None
    examples: int | None = None
    trial: int | None = None
    trial_seed: int | None = None
    not_applicable_because: str | None = None
    """What the engine lacks, when the test was skipped as not_applicable."""
    needs: tuple[str, ...] = ()
    """Every profile the test needs: its property's (own and ``requires``), then its
    ``requires`` marks'."""

    def add(self, when: str, outcome: str, duration: float, text: str, skip_reason: str) -> None:
        self.duration_s += duration
        if outcome == "failed":
            if when == "call":
                self.failed_call = True
            else:
                self.errored = True
            self.failure = self.failure or f"[{when}] {text}"
        elif outcome == "skipped":
            if skip_reason.startswith(NOT_APPLICABLE_PREFIX):
                self.not_applicable = True
                reason = skip_reason.removeprefix(NOT_APPLICABLE_PREFIX).strip()
                self.not_applicable_because = self.not_applicable_because or reason
            else:
                self.errored = True
                if self.failure is None:
                    self.failure = (
                        f"[{when}] skipped without a not_applicable reason: {skip_reason}"
                    )
        elif when == "call":
            self.passed_call = True

    @property
    def status(self) -> str:
        if self.failed_call:
            return FAIL
        if self.errored:
            return ERROR
        if self.not_applicable:
            return NOT_APPLICABLE
        return PASS if self.passed_call else ERROR


@dataclass
class PropertyResult:
    prop: Property
    tests: list[CaseRecord] = field(default_factory=list)

    @property
    def status(self) -> str:
        worst = max((t.status for t in self.tests), key=_SEVERITY.__getitem__)
        if worst == NOT_APPLICABLE and ALWAYS_APPLICABLE.issuperset(self.prop.profiles):
            return ERROR
        return worst

    @property
    def reason(self) -> str | None:
        """Why the property has its status when no single test says so."""
        if self.status == ERROR and all(t.status == NOT_APPLICABLE for t in self.tests):
            return CORE_NOT_APPLICABLE
        return None

    @property
    def examples(self) -> int | None:
        """Hypothesis examples executed across the property's tests (None: none used it)."""
        counted = [t.examples for t in self.tests if t.examples is not None]
        return sum(counted) if counted else None

    @property
    def trials(self) -> int | None:
        """Trials run of the property's repeated concurrency tests (None: it has none)."""
        trials = [t.trial for t in self.tests if t.trial is not None]
        return max(trials) if trials else None

    @property
    def duration_s(self) -> float:
        return sum(t.duration_s for t in self.tests)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for test in self.tests:
            counts[test.status] += 1
        return counts


class ResultBook:
    """Collects test reports (from this process or xdist workers) by property."""

    def __init__(self, manifest: Manifest) -> None:
        self._manifest = manifest
        self._tests: dict[str, CaseRecord] = {}
        self.seeds: set[str] = set()
        self.backend: dict[str, Any] | None = None

    def record(self, report: Any) -> None:
        """Fold in one ``pytest.TestReport`` (duck-typed so it is testable alone)."""
        user = dict(getattr(report, "user_properties", ()) or ())
        property_id = user.get(PROPERTY_KEY)
        if not isinstance(property_id, str):
            return  # not a suite test
        if SEED_KEY in user:
            self.seeds.add(str(user[SEED_KEY]))
        record = self._tests.get(report.nodeid)
        if record is None:
            record = self._tests[report.nodeid] = CaseRecord(report.nodeid, property_id)
        if isinstance(user.get(EXAMPLES_KEY), int):
            record.examples = user[EXAMPLES_KEY]
        trial = user.get(TRIAL_KEY)
        if isinstance(trial, dict):
            record.trial, record.trial_seed = trial.get("trial"), trial.get("seed")
        needs = user.get(NEEDS_KEY)
        if isinstance(needs, (list, tuple)):
            record.needs = tuple(str(profile) for profile in needs)
        if self.backend is None and isinstance(user.get(BACKEND_KEY), dict):
            self.backend = user[BACKEND_KEY]
        text = report.longreprtext if report.outcome == "failed" else ""
        record.add(report.when, report.outcome, report.duration, text, _skip_reason(report))

    def results(self) -> list[PropertyResult]:
        """Properties with at least one recorded test, in manifest order."""
        grouped: dict[str, PropertyResult] = {}
        for record in self._tests.values():
            prop = self._manifest.get(record.property_id)
            if prop is None:
                continue
            grouped.setdefault(prop.id, PropertyResult(prop)).tests.append(record)
        return [grouped[pid] for pid in self._manifest if pid in grouped]

    def not_run(self) -> list[str]:
        ran = {record.property_id for record in self._tests.values()}
        return [pid for pid in self._manifest if pid not in ran]


def _skip_reason(report: Any) -> str:
    if report.outcome != "skipped":
        return ""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def falsifying_example(text: str) -> str | None:
    """The Hypothesis 'Falsifying example' block of a failure, if any, without
    the margin pytest puts before error lines (``E   ``)."""
    start = text.find("Falsifying example")
    if start < 0:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    margin = text[line_start:start]
    if not _ERROR_MARGIN.fullmatch(margin):
        margin = ""
    block: list[str] = []
    for line in text[line_start:].splitlines():
        if margin and line.rstrip() == margin.rstrip():
            line = ""  # a blank error line, trailing spaces trimmed
        line = line.removeprefix(margin) if margin else line
        if block and not line.strip():
            break
        block.append(line)
    return "\n".join(block)


def summary_counts(results: Iterable[PropertyResult]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for result in results:
        counts[result.status] += 1
    return counts


def property_entry(result: PropertyResult, time_budget_s: float | None) -> dict[str, Any]:
    """One property of the JSON report (``report.schema.json``, ``$defs/property``);
    ``time_budget_s`` is what each of its tests was given (``None``: no budget)."""
    prop = result.prop
    failures = [
        {
            "test": t.nodeid,
            "status": t.status,
            "falsifying_example": falsifying_example(t.failure or ""),
            "message": _tail(t.failure or ""),
        }
        for t in result.tests
        if t.status in (FAIL, ERROR)
    ]
    return {
        "id": prop.id,
        "title": prop.title,
        "contract": prop.contract,
        "profile": prop.profile,
        "requires": list(prop.requires),
        "time_budget_s": time_budget_s,
        "status": result.status,
        "reason": result.reason,
        "tests": len(result.tests),
        "counts": result.counts(),
        "examples": result.examples,
        "trials": result.trials,
        "duration_s": round(result.duration_s, 3),
        "covering_tests": [_test_entry(t) for t in sorted(result.tests, key=_by_nodeid)],
        "failures": failures,
    }


def _by_nodeid(test: CaseRecord) -> str:
    return test.nodeid


def _test_entry(test: CaseRecord) -> dict[str, Any]:
    return {
        "nodeid": test.nodeid,
        "status": test.status,
        "duration_s": round(test.duration_s, 3),
        "examples": test.examples,
        "trial": test.trial,
        "trial_seed": test.trial_seed,
        "not_applicable_because": test.not_applicable_because,
        "needs": list(test.needs),
    }


def _tail(text: str) -> str:
    return text if len(text) <= _FAILURE_TEXT_LIMIT else "…" + text[-_FAILURE_TEXT_LIMIT:]


def format_table(results: list[PropertyResult]) -> list[str]:
    """The terminal summary's per-property table."""
    width = max([len("property"), *(len(r.prop.id) for r in results)])
    lines = [f"{'property':<{width}}  {'status':<14}  {'tests':>5}  {'duration':>9}"]
    for result in results:
        lines.append(
            f"{result.prop.id:<{width}}  {result.status:<14}  {len(result.tests):>5}  "
            f"{result.duration_s:>8.2f}s"
        )
    return lines
