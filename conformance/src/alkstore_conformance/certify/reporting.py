"""The controller's reporter: the verdict, the per-property table and the JSON report.

The report's shape is ``report.schema.json`` (shipped beside this module,
documented in ``docs/conformance-report.md``); ``SCHEMA_VERSION`` changes
whenever a field is removed or changes meaning.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import pytest

from alkstore import CONTRACT_VERSION

from .. import __version__
from .budget import DEFAULT_TIME_BUDGET_S, TimeBudgets
from .distribution import engine_distribution, entry_point_value
from .modes import profile_settings
from .results import (
    ERROR,
    FAIL,
    PropertyResult,
    format_table,
    property_entry,
    summary_counts,
)
from .state import KitState

SCHEMA_VERSION = "1"
SCHEMA_FILE = "report.schema.json"
_COLLECTION_ERROR_LIMIT = 4000


def report_schema() -> dict[str, Any]:
    """The JSON Schema every report validates against."""
    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@dataclass(frozen=True)
class Verdict:
    certified: bool
    reasons: list[str]
    """Why the run is not certified (empty when it is)."""
    failed: bool
    """Some property failed or errored, or the certification did not hold: exit non-zero."""


def verdict(
    state: KitState,
    results: list[PropertyResult],
    collection_errors: list[dict[str, str]],
    exitstatus: int,
) -> Verdict:
    reasons: list[str] = []
    broken = [r.prop.id for r in results if r.status in (FAIL, ERROR)]
    if broken:
        reasons.append(f"{len(broken)} properties failed or errored: {', '.join(broken)}")
    not_run = state.results.not_run()
    if not_run:
        reasons.append(f"{len(not_run)} manifest properties did not run: {', '.join(not_run)}")
    if collection_errors:
        reasons.append(f"{len(collection_errors)} suite modules failed to collect")
    if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) or (
        exitstatus == pytest.ExitCode.TESTS_FAILED and not broken
    ):
        reasons.append(f"pytest exited with status {exitstatus}")
    seeds = state.results.seeds
    if seeds and seeds != {state.seed}:
        reasons.append(f"tests ran with seeds {sorted(seeds)}, not the run's seed {state.seed}")
    certify = state.mode.certify
    if not certify:
        reasons.append("a check, not a certification: run with --certify")
    return Verdict(
        certified=certify and not reasons,
        reasons=reasons,
        failed=bool(broken) or (certify and bool(reasons)),
    )


class Reporter:
    """Registered as a plugin on the controller (or the only process) when active."""

    def __init__(self, state: KitState) -> None:
        self._state = state
        self._started_at = datetime.now(UTC)
        self._started = time.monotonic()
        self._collection_errors: list[dict[str, str]] = []
        self._verdict: Verdict | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._state.results.record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            text = report.longreprtext
            self._collection_errors.append(
                {"nodeid": report.nodeid, "message": text[-_COLLECTION_ERROR_LIMIT:]}
            )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self._state
        results = state.results.results()
        decided = verdict(state, results, self._collection_errors, int(exitstatus))
        self._verdict = decided
        if decided.failed and session.exitstatus == pytest.ExitCode.OK:
            # An unexpected skip, or a certification that did not hold: pytest saw no failure.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        path = state.report_path
        if path is None:
            return
        report = build_report(
            session.config,
            state,
            decided,
            int(session.exitstatus),
            collection_errors=self._collection_errors,
            started_at=self._started_at,
            duration_s=time.monotonic() - self._started,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        if config.option.collectonly:
            return
        state = self._state
        results = state.results.results()
        provider = state.provider
        terminalreporter.write_sep(
            "=", f"alkstore conformance: {provider.name} {provider.version}, per property"
        )
        for line in format_table(results):
            terminalreporter.write_line(line)
        counts = summary_counts(results)
        summary = ", ".join(f"{n} {status}" for status, n in counts.items())
        not_run = state.results.not_run()
        terminalreporter.write_line(
            f"{len(results)} properties: {summary}"
            + (f"; {len(not_run)} not run" if not_run else "")
            + f"; hypothesis seed {state.seed}"
        )
        lacking = state.not_applicable_profiles()
        if lacking:
            terminalreporter.write_line(f"not_applicable profiles: {', '.join(lacking)}")
        decided = self._verdict
        if decided is not None:
            mode = state.mode
            label = f"{mode.name}{' (reduced)' if mode.reduced else ''}"
            terminalreporter.write_line(
                f"certified: {'true' if decided.certified else 'false'} (mode {label})",
                bold=True,
                green=decided.certified,
                red=mode.certify and not decided.certified,
            )
            if mode.certify:
                for reason in decided.reasons:
                    terminalreporter.write_line(f"  not certified: {reason}")
        if state.report_path is not None:
            terminalreporter.write_line(f"report written to {state.report_path}")


def build_report(
    config: pytest.Config,
    state: KitState,
    decided: Verdict,
    exitstatus: int,
    *,
    collection_errors: list[dict[str, str]],
    started_at: datetime,
    duration_s: float,
) -> dict[str, Any]:
    """The JSON report (``report.schema.json``)."""
    import hypothesis

    results = state.results.results()
    provider = state.provider
    mode = state.mode
    return {
        "schema_version": SCHEMA_VERSION,
        "suite": {
            "name": "alkstore-conformance",
            "version": __version__,
            "contract_version": CONTRACT_VERSION,
            "manifest_sha256": state.manifest.sha256,
            "properties": len(state.manifest),
        },
        "engine": {
            "reference": state.engine_name,
            "group": state.engine_group,
            "entry_point": entry_point_value(state.engine_name, state.engine_group),
            "distribution": engine_distribution(state.engine_name, state.engine_group, provider),
            "name": provider.name,
            "version": provider.version,
            "contract_version": provider.contract_version,
            "capabilities": _capabilities(provider.capabilities),
            "profiles": sorted(state.engine_profiles()),
            "not_applicable_profiles": state.not_applicable_profiles(),
            "backend": state.results.backend,
        },
        "environment": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "executable": sys.executable,
            "pytest": pytest.__version__,
            "hypothesis": hypothesis.__version__,
            "xdist_workers": getattr(config.option, "numprocesses", None) or 0,
        },
        "mode": mode.name,
        "reduced": mode.reduced,
        "certified": decided.certified,
        "verdict_reasons": decided.reasons,
        "hypothesis": {
            "profile": mode.hypothesis_profile,
            **profile_settings(mode.hypothesis_profile),
            "seed": state.seed,
            "seeds_used": sorted(state.results.seeds),
        },
        "trials": {"per_concurrency_test": mode.trials, "minimum": mode.minimum_trials},
        "time_budget": {
            "default_s": DEFAULT_TIME_BUDGET_S,
            "override_s": state.budgets.override_s,
            "enforced": TimeBudgets.enforceable(),
        },
        "selected_properties": sorted(state.selected) if state.selected is not None else None,
        "started_at": started_at.isoformat(timespec="seconds"),
        "duration_s": round(duration_s, 3),
        "exit_status": exitstatus,
        "summary": summary_counts(results),
        "properties": [property_entry(result, state.budgets.of(result.prop)) for result in results],
        "not_run": state.results.not_run(),
        "collection_errors": collection_errors,
    }


def _capabilities(capabilities: object) -> dict[str, bool]:
    if dataclasses.is_dataclass(capabilities) and not isinstance(capabilities, type):
        return {
            f.name: getattr(capabilities, f.name) is True for f in dataclasses.fields(capabilities)
        }
    profiles = getattr(capabilities, "profiles", None)
    return dict.fromkeys(sorted(profiles()), True) if callable(profiles) else {}
