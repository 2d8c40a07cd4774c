"""Helpers for the suite's scheduler, streams and pub/sub properties (contract §5, §7).

Public API only, like the rest of the kit: a clock the test steps by hand, a
way to run a blocking call in a bounded thread, and a way to count what a
queue holds without knowing job ids.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, Generic, TypeVar

from alkstore import JobHandle, QueueConsumer

from .processes import child_context

T = TypeVar("T")

PARK_LIMIT_S = 120.0
"""A parked sleep gives up after this long, so a test that forgot it never hangs."""

DRAIN_ROUNDS = 100
DRAIN_BATCH = 1000


class SteppedClock:
    """A settable clock whose ``sleep`` parks until the test wakes the sleeper.

    On a ``FakeClock`` ``sleep`` advances time at once, so ``run_schedules``
    would race through fake hours while the test looks on. This clock parks
    each ``sleep`` instead: the test waits until the loop is parked
    (``wait_parked``), changes the world (time, locks, the stop token), then
    lets exactly one sleep return (``wake``), optionally advancing time by what
    the sleeper asked for, as a real sleep would.
    """

    def __init__(self, start: float) -> None:
        self._now = float(start)
        self._changed = threading.Condition()
        self._parked = 0
        self._wakes: list[bool] = []
        self._released = False

    def now(self) -> float:
        with self._changed:
            return self._now

    def set(self, t: float) -> None:
        with self._changed:
            if t < self._now:
                raise ValueError(f"a clock only moves forward: {t} < {self._now}")
            self._now = float(t)

    def sleep(self, seconds: float) -> None:
        with self._changed:
            self._parked += 1
            self._changed.notify_all()
            try:
                self._changed.wait_for(lambda: bool(self._wakes) or self._released, PARK_LIMIT_S)
                if self._wakes and self._wakes.pop(0):
                    self._now += max(seconds, 0.0)
            finally:
                self._parked -= 1
                self._changed.notify_all()

    def wait_parked(self, timeout: float) -> bool:
        """``True`` once a sleeper is parked with no wake pending for it."""
        with self._changed:
            return self._changed.wait_for(lambda: self._parked > len(self._wakes), timeout)

    def wake(self, *, advance: bool) -> None:
        """Let one parked sleep return; with ``advance`` time moves by what it asked."""
        with self._changed:
            self._wakes.append(advance)
            self._changed.notify_all()

    def release(self) -> None:
        """From now on every sleep returns at once (teardown: never leave a thread parked)."""
        with self._changed:
            self._released = True
            self._changed.notify_all()

    def __repr__(self) -> str:
        return f"SteppedClock({self._now!r})"


class Outcome(Generic[T]):
    """The result of a call running in a thread: ``join`` returns it or re-raises."""

    def __init__(self, call: Callable[[], T], name: str) -> None:
        self._result: list[T] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(call,), name=name, daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], T]) -> None:
        try:
            self._result.append(call())
        except BaseException as exc:
            self._error.append(exc)

    def join(self, timeout: float) -> T:
        """Wait (bounded) for the call; its result, or its exception raised here."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} did not return in {timeout} s"
        if self._error:
            raise self._error[0]
        return self._result[0]

    def done(self) -> bool:
        return not self._thread.is_alive()


def in_thread(call: Callable[[], T], name: str = "alkstore-kit") -> Outcome[T]:
    return Outcome(call, name)


def drain(queue: QueueConsumer, worker_id: str = "drainer") -> list[JobHandle]:
    """Claim every claimable job of ``queue`` (bounded): how a test counts what fired."""
    handles: list[JobHandle] = []
    for _ in range(DRAIN_ROUNDS):
        batch = queue.claim_batch(worker_id, DRAIN_BATCH)
        if not batch:
            return handles
        handles.extend(batch)
    raise AssertionError(f"{queue.name} still had jobs after {DRAIN_ROUNDS * DRAIN_BATCH}")


def payload_key(payload: Any) -> str:
    """A hashable, order-insensitive key for a JSON payload."""
    return json.dumps(payload, sort_keys=True)


def payload_counts(handles: list[JobHandle]) -> Counter[str]:
    """How many claimed jobs carry each payload."""
    return Counter(payload_key(handle.payload) for handle in handles)


class Children:
    """Child processes (``processes.child_process`` targets) and the queue
    they report on: the parent side of the kit's one child-process shape.

    A context manager: on exit every child is joined (bounded), and one still
    alive is terminated, so no test leaves a process behind."""

    def __init__(self, time_limit_s: float) -> None:
        self.time_limit_s = time_limit_s
        self.context = child_context()
        self.results: Any = self.context.Queue()
        self.processes: list[BaseProcess] = []

    def start(self, target: Callable[..., None], *args: Any, **kwargs: Any) -> BaseProcess:
        process = self.context.Process(target=target, args=args, kwargs=kwargs, daemon=True)
        process.start()
        self.processes.append(process)
        return process

    def expect(self, kind: str) -> Any:
        """The next report, which must be of ``kind``; a child's error fails the test."""
        got, value = self.results.get(timeout=self.time_limit_s)
        assert got == kind, f"a child reported {got!r} ({value!r}), expected {kind!r}"
        return value

    def __enter__(self) -> Children:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for process in self.processes:
            process.join(self.time_limit_s if exc is None else 5)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(5)
        self.results.close()
        self.results.join_thread()
