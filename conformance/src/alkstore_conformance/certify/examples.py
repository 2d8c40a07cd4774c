"""How many Hypothesis examples each suite test executed (for the report).

Hypothesis hands its run statistics of every ``@given`` test (stateful machines
included) to the callback in ``hypothesis.statistics.collector``; its own pytest
plugin sets one around each test. The kit chains a callback inside it, counts
the test cases of every phase, and attaches the count to the test's reports.
The statistics format is Hypothesis's, not a promise, so anything unexpected
counts as "unknown" (``None`` in the report) and never fails a test.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from .results import EXAMPLES_KEY


def executed_examples(stats: Any) -> int | None:
    """Test cases run in every phase of one Hypothesis run, or None if unreadable."""
    if not isinstance(stats, dict):
        return None
    total = 0
    for key, phase in stats.items():
        if isinstance(key, str) and key.endswith("-phase") and isinstance(phase, dict):
            cases = phase.get("test-cases")
            if isinstance(cases, list):
                total += len(cases)
    return total


class ExampleCounter:
    """Registered on every process that runs tests while the kit is active."""

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        # trylast: the innermost wrapper, inside the one where Hypothesis sets its collector.
        try:
            from hypothesis.statistics import collector
        except ImportError:  # pragma: no cover - hypothesis is a dependency
            return (yield)
        counts: list[int] = []
        # Hypothesis types the variable by its default (None): it holds a callback or None.
        stats_collector: Any = collector
        previous: Callable[[Any], None] | None = stats_collector.value

        def note(stats: Any) -> None:
            executed = executed_examples(stats)
            if executed is not None:
                counts.append(executed)
            if previous is not None:
                previous(stats)

        with stats_collector.with_value(note):
            try:
                return (yield)
            finally:
                if counts:
                    item.user_properties.append((EXAMPLES_KEY, sum(counts)))
