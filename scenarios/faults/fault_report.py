"""Figures of the fault scenarios and the table ``run.py`` prints.

Every scenario returns a ``ScenarioResult``: a list of figures, each either
informational (``count``) or a figure that must be zero (``must_be_zero``);
a non-zero value of the latter fails the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    value: int | float | str
    failing: bool = False
    """This value fails the run (a loss, a duplicate, an unexpected error...)."""


def count(label: str, value: int | float | str) -> Figure:
    """A figure for reading: it never fails the run."""
    return Figure(label, value)


def must_be_zero(label: str, value: int) -> Figure:
    """A figure the run requires to be 0."""
    return Figure(label, value, failing=value != 0)


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    scenario: str
    engine: str
    figures: tuple[Figure, ...]
    seconds: float
    notes: tuple[str, ...] = ()
    """Details of what failed (which rows, which error types), one line each."""

    @property
    def failed(self) -> bool:
        return any(figure.failing for figure in self.figures)

    def value(self, label: str) -> int | float | str:
        """The figure called ``label`` (tests read figures by name)."""
        for figure in self.figures:
            if figure.label == label:
                return figure.value
        raise KeyError(label)


def failure(scenario: str, engine: str, seconds: float, error: BaseException) -> ScenarioResult:
    """A scenario that could not run to the end: one failing figure and the error."""
    return ScenarioResult(
        scenario,
        engine,
        (Figure("scenario crashed", 1, failing=True),),
        seconds,
        (f"{type(error).__name__}: {error}",),
    )


def render(results: Sequence[ScenarioResult]) -> str:
    """One table per scenario: rows are figures, columns are engines; ``!`` marks a failure."""
    blocks: list[str] = []
    for scenario in dict.fromkeys(r.scenario for r in results):
        runs = [r for r in results if r.scenario == scenario]
        blocks.append(_render_one(scenario, runs))
    return "\n\n".join(blocks)


def _render_one(scenario: str, runs: Sequence[ScenarioResult]) -> str:
    labels = list(dict.fromkeys(f.label for run in runs for f in run.figures))
    cells: dict[tuple[str, str], str] = {}
    for run in runs:
        for figure in run.figures:
            cells[(figure.label, run.engine)] = _cell(figure)
        cells[("seconds", run.engine)] = f"{run.seconds:.1f}"
    labels.append("seconds")
    engines = [run.engine for run in runs]
    width = max(len(label) for label in [scenario, *labels])
    columns = [max(12, len(e), *(len(cells.get((lb, e), "")) for lb in labels)) for e in engines]
    header = f"{scenario:<{width}}  " + "  ".join(
        f"{e:>{w}}" for e, w in zip(engines, columns, strict=True)
    )
    lines = [header, "-" * len(header)]
    for label in labels:
        row = "  ".join(
            f"{cells.get((label, e), '-'):>{w}}" for e, w in zip(engines, columns, strict=True)
        )
        lines.append(f"{label:<{width}}  {row}")
    for run in runs:
        lines.extend(f"  {run.engine}: {note}" for note in run.notes)
    verdicts = ", ".join(f"{r.engine} {'FAILED' if r.failed else 'ok'}" for r in runs)
    lines.append(f"verdict: {verdicts}")
    return "\n".join(lines)


def _cell(figure: Figure) -> str:
    value = figure.value
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{text} !" if figure.failing else text
