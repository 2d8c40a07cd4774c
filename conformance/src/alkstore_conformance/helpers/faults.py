"""Deterministic crash points: a driver proxy that kills its own process at statement N.

A crash property must not depend on where a random kill happens to land. The
kit opens a store through the engine's optional ``open_with_driver_wrapper``
hook (``alkstore_conformance.hooks``) with ``StatementCounter.wrap``: every
``alkstore.driver.Driver`` call then passes through a proxy. Once the
operation under test ``arm()``s the counter, each *statement* method call
(every driver method but the transaction plumbing in ``PLUMBING``) is
counted, and the process SIGKILLs itself right before or right after
statement ``N`` returns: inside the engine's unit of work, before the unit ends
(what the engine had committed by then, statement by statement in autocommit,
stays). A statement method is one point: a crash between two SQL statements of
one method is out of reach here, so the properties that need it (a long
``ack_batch`` committed in parts) watch with a reader instead.

A test enumerates every crash point of an operation: it first runs the
operation once without a crash to count its statements, then once per
statement with a crash after it. (A crash *before* statement ``N`` leaves the
database as a crash after statement ``N - 1`` does; ``before`` exists for an
operation whose first statement is where the interest lies.)
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from alkstore.driver import Driver

PLUMBING = frozenset(
    {
        "write",
        "read",
        "transaction",
        "attach",
        "native_connection",
        "prefer_one_commit",
        "start_watching",
        "close",
    }
)
"""Driver methods that open, join or end transactions (or say how a unit would
like to commit): not statements, never counted."""


@dataclass(frozen=True, slots=True)
class CrashPoint:
    """Kill the process ``when`` the ``statement``-th armed statement runs (1-based)."""

    statement: int
    when: Literal["before", "after"] = "after"

    def __post_init__(self) -> None:
        if self.statement < 1:
            raise ValueError(f"statements count from 1, got {self.statement}")


def _die() -> None:
    # SIGKILL: no cleanup, no rollback, no atexit -- what a power cut leaves.
    os.kill(os.getpid(), signal.SIGKILL)


class StatementCounter:
    """Counts armed statement calls through ``wrap``-ped drivers; crashes at ``crash``."""

    def __init__(self, crash: CrashPoint | None = None, *, die: Callable[[], None] = _die) -> None:
        self.crash = crash
        self.count = 0
        self.calls: list[str] = []
        self._armed = False
        self._lock = threading.Lock()
        self._die = die

    def arm(self) -> None:
        """Start counting: the operation under test begins now."""
        with self._lock:
            self._armed = True

    def wrap(self, driver: Driver[Any]) -> Driver[Any]:
        proxy: Driver[Any] = CountingDriver(driver, self)
        return proxy

    def call(self, name: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if not self._armed:
                number = 0
            else:
                self.count += 1
                self.calls.append(name)
                number = self.count
        crash = self.crash
        hit = crash is not None and number == crash.statement
        if hit and crash is not None and crash.when == "before":
            self._die()
        result = method(*args, **kwargs)
        if hit and crash is not None and crash.when == "after":
            self._die()
        return result


class CountingDriver:
    """A transparent proxy over any driver: statement methods go through the counter.

    Attribute lookups are forwarded, so ``hasattr(proxy, "stream_append")`` answers
    as the engine's own driver does (the core finds optional profiles that way)."""

    def __init__(self, inner: Any, counter: StatementCounter) -> None:
        self._inner = inner
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in PLUMBING or name.startswith("_") or not callable(attribute):
            return attribute
        counter = self._counter

        def counted(*args: Any, **kwargs: Any) -> Any:
            return counter.call(name, attribute, *args, **kwargs)

        counted.__name__ = name
        return counted

    def __repr__(self) -> str:
        return f"CountingDriver({self._inner!r})"
