"""Each suite test's time budget: a broken engine fails, never hangs (contract §10.7).

A test that waits on something a broken engine never does (a page that is never
empty, a ``claim_wait`` that ignores its timeout, a lock wait without a limit)
would otherwise end as a silent runner timeout with no report. So every suite
test has a budget -- ``DEFAULT_TIME_BUDGET_S``, a property's ``time_budget_s``
in the manifest, or the run's ``--time-budget`` -- and a test past it is
interrupted and recorded as failing (an error in setup or teardown, as any
failure there is), with where it was waiting.

The mechanism is ``signal.setitimer(ITIMER_REAL)`` armed in the main thread
around each phase of a test, whose SIGALRM handler raises ``OverBudget`` into
whatever the test is blocked in. Why this one:

- The blocking waits of a test run on its main thread (``Thread.join``,
  ``Event.wait``, ``Queue.get``, ``time.sleep``, socket reads, an engine's own
  condition waits). A signal interrupts each of them in place, and the handler's
  exception unwinds the test through its ``with`` blocks and ``finally``
  clauses, so its stores, threads and child processes are cleaned up as after
  any failure. A watchdog thread cannot do that: it can only flag the main
  thread (``PyThreadState_SetAsyncExc``, ``_thread.interrupt_main``), which
  does not wake a blocked system call, and routing every wait of the suite
  through one deadline-aware helper would miss the waits inside an engine.
- pytest-timeout's thread method dumps every stack and ends the whole process
  (no report); its signal method is this mechanism, but without per-property
  budgets from the manifest, the report's record of what was being waited for,
  or the reaping of child processes, and it would fight a user's own
  pytest-timeout configuration over the one SIGALRM timer.

``OverBudget`` derives from pytest's ``OutcomeException`` (as ``pytest.fail``'s
exception does), not from ``Exception``: an engine's or a test's ``except
Exception`` cannot swallow it, Hypothesis does not take it for a falsifying
example to shrink (re-running a hang), and pytest's setup and teardown still
run every finalizer after it. The timer re-fires every ``REPEAT_S`` while the
phase lasts, for a test that swallowed the first. Teardown has a budget of its
own (``TEARDOWN_BUDGET_S``), so cleanup runs even after a test used all of its
budget; after a test went over budget, the process's remaining
``multiprocessing`` children are terminated, so none outlives the test.

Where there is no ``setitimer`` (Windows) or pytest does not run tests in the
main thread, budgets are not enforced; the report says so. A call blocked inside
C code that never returns to Python (a driver's own network wait) is interrupted
when it does.
"""

from __future__ import annotations

import linecache
import multiprocessing
import signal
import sysconfig
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from _pytest.outcomes import OutcomeException

from .manifest import Manifest, Property
from .results import PROPERTY_KEY

DEFAULT_TIME_BUDGET_S = 300
"""A test's budget unless the manifest gives its property one (``time_budget_s``):
several times what the slowest test of the reference engines takes on a loaded CI
machine, so only a wait that is not going to end reaches it."""

TEARDOWN_BUDGET_S = 60.0
"""Teardown's own budget: closing stores and joining helpers, after any call."""

REPEAT_S = 30.0
"""After the first interruption, the timer fires again this often until the phase ends."""

REAP_JOIN_S = 5.0

BUDGET_EXCEEDED = "ran past its time budget"
"""What every over-budget failure says (the kit's own tests look for it)."""

_KIT_ROOT = Path(__file__).resolve().parents[1]
_PACKAGE_ROOT = _KIT_ROOT.parent
_SUITE_PARTS = ("suite", "helpers")
_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


class OverBudget(OutcomeException):
    """Raised into a suite test that ran past its time budget."""

    __module__ = "alkstore_conformance"


@dataclass(frozen=True, slots=True)
class TimeBudgets:
    """The budgets of a run: the manifest's, unless ``--time-budget`` overrides them all."""

    override_s: float | None = None
    """``--time-budget``: every test's budget (``0``: none)."""

    def of(self, prop: Property) -> float | None:
        """The budget of each test of ``prop`` in seconds (``None``: no budget)."""
        if self.override_s is not None:
            return self.override_s or None
        return float(prop.time_budget_s or DEFAULT_TIME_BUDGET_S)

    @staticmethod
    def enforceable() -> bool:
        """Whether this process can interrupt a test (POSIX, tests on the main thread)."""
        on_main_thread = threading.current_thread() is threading.main_thread()
        return hasattr(signal, "setitimer") and on_main_thread


class BudgetKeeper:
    """The plugin that arms each suite test's budget (registered in every test process)."""

    def __init__(self, budgets: TimeBudgets, manifest: Manifest) -> None:
        self._budgets = budgets
        self._manifest = manifest
        self._deadline: float | None = None
        self._budget_s: float | None = None
        self._exceeded: set[str] = set()
        self._current: tuple[str, str, float] | None = None
        """``(nodeid, phase, budget)`` of the armed phase, for the handler's message."""

    def _budget_of(self, item: pytest.Item) -> float | None:
        property_id = dict(item.user_properties).get(PROPERTY_KEY)
        if not isinstance(property_id, str) or property_id not in self._manifest:
            return None  # not a suite test
        return self._budgets.of(self._manifest[property_id])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        self._budget_s = self._budget_of(item)
        self._deadline = None if self._budget_s is None else time.monotonic() + self._budget_s
        return (yield from self._phase(item, "setup", self._remaining()))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        return (yield from self._phase(item, "call", self._remaining()))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, Any]:
        budget = None if self._budget_s is None else TEARDOWN_BUDGET_S
        try:
            return (yield from self._phase(item, "teardown", budget))
        finally:
            if item.nodeid in self._exceeded:
                self._exceeded.discard(item.nodeid)
                reap_children()

    def _remaining(self) -> float | None:
        if self._deadline is None:
            return None
        # At least a moment: a phase that starts past the deadline is interrupted at once.
        return max(self._deadline - time.monotonic(), 0.001)

    def _phase(
        self, item: pytest.Item, phase: str, seconds: float | None
    ) -> Generator[None, Any, Any]:
        if seconds is None or not _can_arm():
            return (yield)
        assert self._budget_s is not None
        self._current = (item.nodeid, phase, self._budget_s if phase != "teardown" else seconds)
        previous = signal.signal(signal.SIGALRM, self._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_S)
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            self._current = None

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        current = self._current
        if current is None:  # pragma: no cover - disarmed between the signal and its handler
            return
        nodeid, phase, budget = current
        self._exceeded.add(nodeid)
        raise OverBudget(over_budget_message(nodeid, phase, budget, frame))


def _can_arm() -> bool:
    if not TimeBudgets.enforceable():
        return False
    # Someone else's timer (pytest-timeout's signal method, a test of its own) is left alone.
    handler = signal.getsignal(signal.SIGALRM)
    if handler not in (signal.SIG_DFL, signal.SIG_IGN, None):
        return False
    return signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def over_budget_message(nodeid: str, phase: str, budget_s: float, frame: FrameType | None) -> str:
    """Why the test was interrupted, and what it was waiting for: the innermost frame,
    the innermost one of the engine (or of the contract's core) if that is another,
    and the line of the suite (or of a kit helper) that made the call."""
    where = f"{nodeid} {BUDGET_EXCEEDED} of {budget_s:g} s in {phase}"
    frames = _stack(frame)
    if not frames:
        return where
    innermost = frames[0]
    engine = next((f for f in frames if _is_engine_file(f.f_code.co_filename)), None)
    suite = next((f for f in frames if _is_suite_file(f.f_code.co_filename)), None)
    parts = [f"{where}: it was waiting in {_describe(innermost)}"]
    if engine is not None and engine is not innermost:
        parts.append(f"in the engine's {_describe(engine)}")
    if suite is not None and suite is not innermost:
        parts.append(f"called from the suite's {_describe(suite)}")
    return "; ".join(parts) + (
        " (raise the property's time_budget_s in the manifest, or pass --time-budget, "
        "only if the wait was going to end)"
    )


def _stack(frame: FrameType | None) -> list[FrameType]:
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _is_suite_file(filename: str) -> bool:
    """The suite's tests and the helpers they share (not the kit's plugin or mutants)."""
    path = Path(filename).resolve()
    return any(path.is_relative_to(_KIT_ROOT / part) for part in _SUITE_PARTS)


def _is_engine_file(filename: str) -> bool:
    """Code neither of the standard library, nor of the suite, nor of this plugin: the
    engine and the contract's core (the innermost such frame is the engine's call)."""
    path = Path(filename).resolve()
    kit_own = _is_suite_file(filename) or path.is_relative_to(Path(__file__).parent)
    return not (path.is_relative_to(_STDLIB) or kit_own)


def _describe(frame: FrameType) -> str:
    filename = frame.f_code.co_filename
    path = Path(filename)
    shown = (
        path.resolve().relative_to(_PACKAGE_ROOT).as_posix()
        if path.resolve().is_relative_to(_PACKAGE_ROOT)
        else "/".join(path.parts[-3:])
    )
    line = linecache.getline(filename, frame.f_lineno).strip()
    source = f": `{line}`" if line else ""
    return f"{frame.f_code.co_name} ({shown}:{frame.f_lineno}{source})"


def reap_children() -> list[int]:
    """Terminate (then kill) this process's live ``multiprocessing`` children; their pids.

    Called after a test went over budget: its cleanup may have been cut short, and
    no child process may outlive the test that started it."""
    reaped: list[int] = []
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(REAP_JOIN_S)
        if child.is_alive():
            child.kill()
            child.join(REAP_JOIN_S)
        if child.pid is not None:
            reaped.append(child.pid)
    return reaped
