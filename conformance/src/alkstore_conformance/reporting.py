"""The controller's reporter: per-property terminal table and the JSON report."""

from __future__ import annotations

import json
import platform
import sys
from typing import Any

import pytest

from alkstore import CONTRACT_VERSION

from . import __version__
from .results import format_table, property_entry, summary_counts
from .state import KitState


class Reporter:
    """Registered as a plugin on the controller (or the only process) when active."""

    def __init__(self, state: KitState) -> None:
        self._state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._state.results.record(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        path = self._state.report_path
        if path is None:
            return
        report = build_report(session.config, self._state, int(exitstatus))
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
        if state.report_path is not None:
            terminalreporter.write_line(f"report written to {state.report_path}")


def build_report(config: pytest.Config, state: KitState, exitstatus: int) -> dict[str, Any]:
    import hypothesis

    results = state.results.results()
    provider = state.provider
    return {
        "suite": {"name": "alkstore-conformance", "version": __version__},
        "contract_version": CONTRACT_VERSION,
        "engine": {
            "reference": state.engine_name,
            "group": state.engine_group,
            "name": provider.name,
            "version": provider.version,
            "contract_version": provider.contract_version,
            "profiles": sorted(state.engine_profiles()),
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
        "hypothesis": {
            "profile": state.hypothesis_profile,
            "seed": state.seed,
            "seeds_used": sorted(state.results.seeds),
        },
        # --certify (no skips, the long profile, minimum trials) is not implemented yet.
        "certify": False,
        "certified": False,
        "exit_status": exitstatus,
        "summary": summary_counts(results),
        "properties": [property_entry(result) for result in results],
        "not_run": state.results.not_run(),
    }
