"""What the suite's wake properties share (contract §2.14, §1.6).

* How prompt is prompt: bounds relative to the core's safety-net re-poll
  (``alkstore.core.DEFAULT_REPOLL_S``), never an absolute speed. A waiter that
  hears no wake still finds the work at its next re-poll; a wake is prompt when
  it comes well before that.
* A waiter blocked in ``claim_wait`` elsewhere: in another process when the
  engine has ``multi_process``, else on another store of this process (the
  memory engine's stand-in for another process). Either way it only hears of
  work through the engine's wakes, never through this store's in-process hub.
* A count of the wakes an engine reports to one store (``WakeCounter``): what the
  isolation property watches to see that one store's commits never reach the
  waiters of another.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from alkstore import EngineProvider, EngineSpec, Store
from alkstore.core import DEFAULT_REPOLL_S
from alkstore.driver import Driver, WakeSink

from .fixtures import StoreFactory
from .profile_processes import claim_waiter_on_commands
from .profiles import Children, Outcome, in_thread

REPOLL_S = DEFAULT_REPOLL_S
"""The safety-net re-poll a waiter that hears no wake falls back on."""
SAMPLES = 3
"""Wake latencies are medians of this many samples: one slow sample on a busy
machine does not fail a property, a missing wake fails every sample."""
PROMPT_S = REPOLL_S / 4
"""The median lateness allowed: a quarter of the re-poll interval."""
WAIT_PHASE_S = (0.3 * REPOLL_S, 0.7 * REPOLL_S)
"""How long after a waiter starts waiting the work becomes available, drawn per
sample: a waiter that only re-polls is then at least 0.3 of the interval late on
every sample, and a re-poll cannot happen to line up with the work."""
LAPSE_AFTER_S = 2
"""The visibility timeout of claims a test lets lapse: long enough to start waiting
before the deadline at any phase."""
EARLY_TOLERANCE_S = 0.05
"""How much earlier than its deadline a lapsed claim may be seen taken (clock rounding)."""
GENEROUS_S = 30 * REPOLL_S
"""The timeout of a wait that must end with a job: a safety net, never a measure."""
JOIN_S = GENEROUS_S + 15
"""A waiting thread's bound: past its own timeout, so it never fails the join first."""


def median_ms(lateness: list[float]) -> str:
    """The failure message of a latency bound: the median and every sample."""
    return (
        f"median {statistics.median(lateness) * 1000:.0f} ms of {[round(x, 3) for x in lateness]}"
    )


def sleep_until(instant: float) -> None:
    time.sleep(max(0.0, instant - time.time()))


# -- a waiter blocked elsewhere -----------------------------------------------------------


class ClaimWaiter(Protocol):
    """A ``claim_wait`` on one queue, elsewhere; one wait at a time."""

    def wait(self) -> None:
        """Begin one ``claim_wait`` (returns at once); the waiter acks what it claims."""
        ...

    def claimed(self) -> tuple[int | None, float]:
        """The id that wait claimed (``None``: it timed out) and the ``time.time()``
        at which it returned."""
        ...


class _WaiterInAnotherProcess:
    def __init__(self, children: Children, commands: Any) -> None:
        self._children = children
        self._commands = commands

    def wait(self) -> None:
        self._commands.put("wait")

    def claimed(self) -> tuple[int | None, float]:
        job_id, returned = self._children.expect("claimed")
        return (job_id, returned)


class _WaiterOnAnotherStore:
    def __init__(self, store: Store, queue_name: str) -> None:
        self._queue = store.queue(queue_name)
        self._waiting: Outcome[tuple[int | None, float]] | None = None

    def wait(self) -> None:
        assert self._waiting is None or self._waiting.done(), "one wait at a time"
        self._waiting = in_thread(self._claim_wait, "alkstore-kit-waiter")

    def _claim_wait(self) -> tuple[int | None, float]:
        handle = self._queue.claim_wait("waiter", timeout=GENEROUS_S)
        returned = time.time()
        if handle is None:
            return (None, returned)
        handle.ack()
        return (handle.id, returned)

    def claimed(self) -> tuple[int | None, float]:
        assert self._waiting is not None, "claimed() before wait()"
        return self._waiting.join(JOIN_S)


@contextmanager
def claim_waiter_elsewhere(
    engine: EngineProvider,
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    open_store: StoreFactory,
    queue_name: str,
) -> Iterator[ClaimWaiter]:
    """A waiter on ``queue_name`` of the test's store: in a child process when the
    engine has ``multi_process``, else on a store of its own in this process."""
    if not engine.capabilities.multi_process:
        yield _WaiterOnAnotherStore(open_store(), queue_name)
        return
    with Children(GENEROUS_S) as children:
        commands = children.context.Queue()
        children.start(
            claim_waiter_on_commands,
            engine_name,
            engine_group,
            engine_spec,
            queue_name,
            commands,
            children.results,
            GENEROUS_S,
        )
        children.expect("ready")
        yield _WaiterInAnotherProcess(children, commands)
        commands.put(None)
        children.expect("done")


# -- counting the wakes an engine reports --------------------------------------------------


class _CountingSink:
    """A store's wake sink as its driver sees it: every report counted, then passed on."""

    def __init__(self, inner: WakeSink, counted: Callable[[], None]) -> None:
        self._inner = inner
        self._counted = counted

    def notify(self, topic: str) -> None:
        self._counted()
        self._inner.notify(topic)

    def notify_all(self) -> None:
        self._counted()
        self._inner.notify_all()

    def has_waiters(self) -> bool:
        return self._inner.has_waiters()

    def deliver(self, channel: str, payload: str) -> None:
        self._counted()
        self._inner.deliver(channel, payload)


class _SinkCountingDriver:
    """A transparent proxy over a driver whose ``start_watching`` hands the engine a
    counting sink (one per sink of the store's, so the engine sees the same sink on
    every call, as it would unwrapped)."""

    def __init__(self, inner: Any, counter: WakeCounter) -> None:
        self._inner = inner
        self._counter = counter
        self._sinks: dict[int, _CountingSink] = {}

    def start_watching(self, sink: WakeSink) -> None:
        counting = self._sinks.get(id(sink))
        if counting is None:
            counting = self._sinks[id(sink)] = _CountingSink(sink, self._counter.count_one)
        self._inner.start_watching(counting)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"SinkCountingDriver({self._inner!r})"


class WakeCounter:
    """How many wakes (``notify``, ``notify_all``) and messages (``deliver``) an
    engine reported to the stores opened over ``wrap``: what its watcher, listener or
    shared registry told them of commits, however they were made. A store's own
    in-process wakes (those the core gives its own waiters after its own writes)
    never pass through here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    def count_one(self) -> None:
        with self._lock:
            self._count += 1

    def wrap(self, driver: Driver[Any]) -> Driver[Any]:
        proxy: Driver[Any] = _SinkCountingDriver(driver, self)
        return proxy
