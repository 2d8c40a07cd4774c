"""Waiting for a claim on one queue or several (contract §2 wake, §12).

``Queue.claim_wait`` is ``Store.claim_wait_any`` over one queue: one loop, so a
fix to waiting (lost wakes, outages, deadlines) reaches both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..api import JobHandle
from ..errors import EngineUnavailable
from ..stop import StopToken
from .context import StoreContext
from .waiting import Deadline, wait_budget


class Claimable(Protocol):
    """What the loop needs of a queue front end (``CoreQueue``)."""

    @property
    def topic(self) -> str: ...

    def claim_for_wait(self, worker_id: str, wait_s: float | None) -> JobHandle | None: ...

    def next_wake_at(self, wait_s: float | None) -> int | None: ...


def claim_waiting(
    context: StoreContext,
    queues: Sequence[Claimable],
    worker_id: str,
    deadline: Deadline,
    stop: StopToken | None,
) -> JobHandle | None:
    """The first claimable job of ``queues`` (tried in order), waiting for one.

    Arguments are already checked. ``None`` at the deadline or on ``stop``.
    """
    context.check_open()  # never start an engine's watcher on a closed store
    if stop is None or not stop.is_set():
        # Work already waiting is taken at once, without registering a waiter
        # or starting the engine's watcher; only empty queues pay for those
        # (and are checked again once the waiter is in place, so no wake is lost).
        try:
            handle = _claim_first(queues, worker_id, deadline)
        except EngineUnavailable:
            handle = None
        if handle is not None:
            return handle
    with context.hub.waiter(*(queue.topic for queue in queues)) as waiter:
        context.driver.start_watching(context.hub)
        if stop is not None:
            stop.add_callback(waiter.wake)
        try:
            while True:
                if stop is not None and stop.is_set():
                    return None
                waiter.clear()
                try:
                    # The engine may wait for a connection or a lock only as long
                    # as the caller's own timeout allows.
                    handle = _claim_first(queues, worker_id, deadline)
                    if handle is not None:
                        return handle
                    next_due = _earliest_wake(queues, deadline)
                except EngineUnavailable:
                    # A waiting worker outlives a database restart: it keeps
                    # re-polling, and at its deadline it has simply found no work.
                    if deadline.expired():
                        return None
                    next_due = None
                if deadline.expired():
                    return None
                waiter.wait(wait_budget(context.clock, deadline, next_due, context.repoll_s))
                context.check_open()
        finally:
            if stop is not None:
                stop.remove_callback(waiter.wake)


def _claim_first(
    queues: Sequence[Claimable], worker_id: str, deadline: Deadline
) -> JobHandle | None:
    for queue in queues:
        handle = queue.claim_for_wait(worker_id, deadline.wait_s())
        if handle is not None:
            return handle
    return None


def _earliest_wake(queues: Sequence[Claimable], deadline: Deadline) -> int | None:
    instants = [
        due for queue in queues if (due := queue.next_wake_at(deadline.wait_s())) is not None
    ]
    return min(instants, default=None)
