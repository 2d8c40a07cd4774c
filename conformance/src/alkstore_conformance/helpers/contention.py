"""Contention and outages (contract §8.4, §8.5): the engine's hooks, and timed calls.

The properties hold a store's write path (``hold_write_path``) or cut its
database off (``outage_switch``) for a few seconds, run calls meanwhile and
judge when each returned and how. They are about bounds, never speed: a call
with a timeout must be back within that timeout plus ``SLACK_S``, generous on a
shared, noisy machine and still far below the hold an unbounded wait would sit
out; several such calls run at once and their median is judged.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from alkstore import EngineProvider, EngineUnavailable, JobHandle, QueueConsumer, Store

from ..hooks import (
    HOLD_WRITE_PATH_HOOK,
    OUTAGE_SWITCH_HOOK,
    HoldWritePathProvider,
    OutageSwitchProvider,
)
from .common import unique_name

HOLD_S = 4.0
"""The longest a hold or an outage lasts (the hooks let go by themselves then): a
call that waits for the holder regardless of its own timeout is back only after it."""
WAIT_S = 0.5
"""The timeout of the waiting calls made under a hold or an outage."""
SLACK_S = 1.5
"""What a call may take beyond its timeout (or beyond the engine's limit, or the end
of a hold) before the kit calls it unbounded."""
SAMPLES = 3
"""Waiting calls made at once; their median is judged."""
GENEROUS_S = 30.0
"""Bound on joining threads and on what must happen eventually."""


def require_hold_write_path(engine: EngineProvider) -> HoldWritePathProvider:
    """The engine's hook, or skip as not_applicable."""
    if not isinstance(engine, HoldWritePathProvider):
        pytest.skip(
            f"not_applicable: engine provides no {HOLD_WRITE_PATH_HOOK}(spec, seconds) hook, "
            "so the kit cannot hold what its writes need"
        )
    return engine


def require_outage_switch(engine: EngineProvider) -> OutageSwitchProvider:
    """The engine's hook, or skip as not_applicable."""
    if not isinstance(engine, OutageSwitchProvider):
        pytest.skip(
            f"not_applicable: engine provides no {OUTAGE_SWITCH_HOOK}(spec) hook, "
            "so the kit cannot make its database unavailable"
        )
    return engine


@dataclass(frozen=True, slots=True)
class Timed:
    """One call's outcome: its value or the exception it raised, and when it ended."""

    name: str
    value: Any
    error: BaseException | None
    started: float
    finished: float

    @property
    def elapsed(self) -> float:
        return self.finished - self.started

    def describe(self) -> str:
        outcome = (
            f"raised {type(self.error).__name__}: {self.error}"
            if self.error is not None
            else f"returned {self.value!r}"
        )
        return f"{self.name} {outcome} after {self.elapsed:.2f} s"


class Running:
    """Calls started at once, each in a thread of its own; ``join`` times them."""

    def __init__(self, calls: Mapping[str, Callable[[], Any]]) -> None:
        self._results: dict[str, Timed] = {}
        self._names = list(calls)
        start = threading.Barrier(len(calls))
        self._threads = [
            threading.Thread(
                target=self._run, args=(name, call, start), name=f"alkstore-kit-{name}", daemon=True
            )
            for name, call in calls.items()
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, name: str, call: Callable[[], Any], start: threading.Barrier) -> None:
        start.wait(GENEROUS_S)
        started = time.monotonic()
        value: Any = None
        error: BaseException | None = None
        try:
            value = call()
        except BaseException as exc:
            error = exc
        self._results[name] = Timed(name, value, error, started, time.monotonic())

    def join(self, timeout: float = GENEROUS_S) -> list[Timed]:
        give_up_at = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, give_up_at - time.monotonic()))
        hung = [t.name for t in self._threads if t.is_alive()]
        assert not hung, f"{hung} had not returned after {timeout:.0f} s"
        return [self._results[name] for name in self._names]


def samples(call: Callable[[int], Any], count: int = SAMPLES) -> dict[str, Callable[[], Any]]:
    """``count`` calls ``call(n)``, named by their number."""
    return {f"call-{n}": functools.partial(call, n) for n in range(count)}


def check_waits_bounded(waits: list[Timed], timeout: float, doing: str) -> None:
    """Waiting calls never raise (an outage or a holder is waited out until the
    deadline), and their median is back within ``timeout`` plus ``SLACK_S``."""
    described = "; ".join(w.describe() for w in waits)
    raised = [w for w in waits if w.error is not None]
    assert not raised, (
        f"{doing}: a waiting call raised instead of returning at its deadline: {described}"
    )
    median = statistics.median(w.elapsed for w in waits)
    assert median <= timeout + SLACK_S, (
        f"{doing}: waiting calls with timeout={timeout:g} s took a median {median:.2f} s "
        f"(allowed {timeout + SLACK_S:g} s): {described}"
    )


def check_raised_unavailable_or_returned(timed: Timed) -> None:
    """The call completed, or raised the contract's ``EngineUnavailable``: never a
    driver's own exception, nor any other."""
    error = timed.error
    assert error is None or isinstance(error, EngineUnavailable), (
        f"{timed.describe()}: only EngineUnavailable may tell that the database cannot "
        "be used right now (contract §8.4)"
    )


def writes_of(
    engine: EngineProvider, store: Store, queue: QueueConsumer, handle: JobHandle
) -> dict[str, Callable[[], Any]]:
    """The writes a blocked store is tried with, by name: an enqueue, a batch, an ack
    of ``handle``, and a transaction and a lock when the engine has those profiles."""
    writes: dict[str, Callable[[], Any]] = {
        "enqueue": lambda: queue.enqueue({"n": "enqueued"}),
        "enqueue_many": lambda: queue.enqueue_many([{"n": "batch-0"}, {"n": "batch-1"}]),
        "ack": handle.ack,
    }
    if engine.capabilities.transactions:

        def transact() -> None:
            with store.transaction() as tx:
                tx.enqueue(queue.name, {"n": "tx-0"})
                tx.enqueue(queue.name, {"n": "tx-1"})

        writes["transaction"] = transact
    if engine.capabilities.locks:
        writes["lock.acquire"] = lambda: store.lock(unique_name("lock")).acquire("owner", 30)
    return writes
