"""The one step every run ends with, whichever executor ran its handler.

``Settler.settle`` writes the run's ``Outcome`` (or discards it, for a lost
claim), logs it, and hands the run's slot on: to the next job of its queue,
claimed in the same write when the outcome is an ack (``ack_and_claim``: one
write per job on a busy queue) or just after it otherwise, or back to the
dispatcher. An async handler's run is settled by the same step, on the async
store's threads (``AsyncStore.call``), never on the loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ..api import JobHandle, Queue
from ..constants import MAX_ERROR_LENGTH
from ..core.checks import check_error
from ..core.queues import CoreJobHandle
from ..errors import AlkstoreError, EngineUnavailable
from ..values import Job, JobState
from .grouping import Grouped, OutcomeGroups, carried
from .heartbeats import Heartbeats
from .observe import CLAIM_LOST, Observers, outcome_label, refused, said_of
from .outcome_log import OutcomeLog
from .outcomes import RELEASED, Abandoned, Ack, Failed, Outcome, Released, RetryLater, Snoozed
from .runs import JobRun, RunState
from .slots import Slots

SETTLE_RETRY_PAUSE_S = 0.5
"""How long a worker waits between two writes of an outcome the store could not take."""

CONFIRMED: str = " (confirmed: an earlier write had committed)"
"""What an outcome log line's first words end with when an outcome written again was
refused and the job, read back, shows this claim's outcome applied (§12.9)."""

Reread = Callable[[], Job | None]
"""Reads a job back (its queue's ``get_job``), to tell what a refused write means."""


def write(
    handle: JobHandle,
    outcome: Outcome,
    claim_for: str | None = None,
    give_up: threading.Event | None = None,
    reread: Reread | None = None,
) -> tuple[str, JobHandle | None]:
    """Write ``outcome`` for ``handle``'s job; what happened, as the log says it.

    With ``claim_for`` (a worker id), an ack also claims the queue's next job
    for that worker in the same write; the job claimed, if any, is returned.
    With ``give_up``, a write the store could not take (``EngineUnavailable``) is
    made again, every ``SETTLE_RETRY_PAUSE_S``, until the store answers, the
    claim's visibility timeout has passed since, or ``give_up`` is set (§12.9).
    A write made again and refused is confirmed through ``reread`` when the job
    shows this very claim's outcome applied.
    """
    try:
        return _write_once(handle, outcome, claim_for)
    except EngineUnavailable as error:
        unavailable = error
    except AlkstoreError as error:
        return _not_confirmed(error), None
    if give_up is None:
        return _not_confirmed(unavailable), None
    return write_again(handle, outcome, unavailable, give_up, reread), None


def write_again(
    handle: JobHandle,
    outcome: Outcome,
    unavailable: EngineUnavailable,
    give_up: threading.Event,
    reread: Reread | None,
) -> str:
    """``write``'s part after a write of ``outcome`` raised ``unavailable``: the
    outcome written again, and what happened, as the log says it (§12.9)."""
    # Safe to repeat: every outcome is guarded by the claim ``(id, attempts)``, so
    # once one write has committed, the claim is over and the next is refused.
    until = time.monotonic() + handle.job.visibility_timeout_s
    while not give_up.wait(SETTLE_RETRY_PAUSE_S) and time.monotonic() < until:
        try:
            said, _ = _write_once(handle, outcome, None)
        except EngineUnavailable:
            continue
        except AlkstoreError as error:
            return _not_confirmed(error)
        if said.endswith(CLAIM_LOST):
            # The first write committed after all, or the claim lapsed meanwhile.
            applied = _applied(handle, outcome, reread)
            if applied is not None:
                return applied + CONFIRMED
            return _not_confirmed(unavailable, "written again: refused")
        return said
    return _not_confirmed(unavailable)


def _not_confirmed(error: AlkstoreError, then: str = "") -> str:
    # The write (and a claim made with it) may have committed before the error:
    # unless it did, the claim lapses and the job runs again elsewhere.
    return f"not confirmed ({type(error).__name__}: {error}{'; ' + then if then else ''})"


def _applied(handle: JobHandle, outcome: Outcome, reread: Reread | None) -> str | None:
    """What ``outcome``, written for ``handle``'s claim, did, if the job read back
    shows it applied (as ``_write_once`` says it), or ``None`` when it cannot tell.

    A claim is ``(id, attempts)`` and every claim counts an attempt, so a row still
    at this claim's attempt and no longer processing was ended by this claim's
    outcome, or by its lapse (§2), and each outcome leaves a mark a lapse cannot:
    completed; pending again on the same budget; dead with this outcome's error;
    pending with one more snooze, or one more attempt of budget. An acked job that
    was deleted (no retention) cannot be told from a cancelled one, and a retry past
    the budget from a lapse past it, so neither is confirmed.
    """
    if reread is None:
        return None
    try:
        now = reread()
    except AlkstoreError:
        return None
    was = handle.job
    if now is None or now.attempts != was.attempts or now.state is JobState.PROCESSING:
        return None
    budget = now.max_attempts - was.max_attempts  # release and snooze give one back
    kept = (now.state, budget, now.snoozes - was.snoozes)
    match outcome:
        case Ack():
            return "ack" if now.state is JobState.COMPLETED else None
        case RetryLater() if kept == (JobState.PENDING, 0, 0):
            return "retry"  # a lapse never puts a job back to pending
        case Failed(error) if now.state is JobState.DEAD:
            # A lapse past the budget is buried with an error of its own.
            return "fail" if now.last_error in _as_kept(error) else None
        case Snoozed() if kept == (JobState.PENDING, 1, 1):
            return "snooze"
        case Released() if kept == (JobState.PENDING, 1, 0):
            return "release"
    return None


def _as_kept(error: str) -> tuple[str, str]:
    # As the core hands it to the store (NULs stood in for), whole or cut to length.
    error = check_error(error)
    return error, error[:MAX_ERROR_LENGTH]


def _ack(handle: JobHandle, result: Any, durable: bool) -> bool:
    # An ack that need not wait for the disk (§12.11): asked of the core's handle,
    # which passes it on to an engine with the async_acks profile (others ignore it).
    if durable or not isinstance(handle, CoreJobHandle):
        return handle.ack(result)
    return handle.ack_durably(result, durable=False)


def _ack_and_claim(
    handle: JobHandle, worker_id: str, result: Any, durable: bool
) -> tuple[bool, list[JobHandle]]:
    if durable or not isinstance(handle, CoreJobHandle):
        acked, claimed = handle.ack_and_claim(worker_id, 1, result=result)
    else:  # the ack's commit only: the claim made with it stays durable
        acked, claimed = handle.ack_durably_and_claim(worker_id, 1, result, durable=False)
    return acked, list(claimed)


def _write_once(
    handle: JobHandle, outcome: Outcome, claim_for: str | None
) -> tuple[str, JobHandle | None]:
    match outcome:
        case Ack(result, durable) if claim_for is not None:
            acked, claimed = _ack_and_claim(handle, claim_for, result, durable)
            said = "ack" if acked else refused("ack")
            return said, claimed[0] if claimed else None
        case Ack(result, durable):
            name, written = "ack", _ack(handle, result, durable)
        case RetryLater(error, delay_s):
            name, written = "retry", handle.retry(error, delay_s)
        case Snoozed(delay_s):
            name, written = "snooze", handle.snooze(delay_s)
        case Failed(error):
            name, written = "fail", handle.fail(error)
        case Released():
            name, written = "release", handle.release()
        case Abandoned():
            return "abandoned", None
    return said_of(name, written, handle), None


class Settler:
    """The settle step of one worker's run (its id, queues, slots and outcome log)."""

    def __init__(
        self,
        worker_id: str,
        queues: Mapping[str, Queue],
        slots: Slots,
        heartbeats: Heartbeats,
        outcomes: OutcomeLog,
        stopping: threading.Event,
        observers: Observers,
        give_up: threading.Event,
    ) -> None:
        self._worker_id = worker_id
        self._give_up = give_up
        self._queues = queues
        self._slots = slots
        self._heartbeats = heartbeats
        self._outcomes = outcomes
        self._stopping = stopping
        self._observers = observers
        self._groups: OutcomeGroups | None = None
        self._durable_acks = True

    def settle(self, run: JobRun, outcome: Outcome) -> JobHandle | None:
        """End ``run`` with ``outcome``: write it, log it, and free its slot, or
        return the job claimed for that slot (the slot is then still held, for the
        caller to hand on). Writes nothing for a run a stop abandoned first."""
        claimed = None
        grouped = False
        try:
            if run.end(RunState.FINISHED):
                self._heartbeats.discard(run)
                if not self._durable_acks and isinstance(outcome, Ack):
                    outcome = Ack(outcome.result, durable=False)
                if self._groups is not None and carried(outcome) and not run.lost:
                    self._groups.add(run, outcome)  # its slot is freed once it is written
                    grouped = True
                else:
                    said, claimed = self._write(run, outcome)
                    self._log(run, outcome, said)
            if claimed is not None and self._stopping.is_set():
                # Claimed as the stop arrived: given back unused (no attempt
                # spent), rather than started now.
                write(claimed, RELEASED)
                claimed = None
        finally:
            if claimed is None and not grouped:
                self._slots.free(run)
        return claimed

    def acks_without_waiting(self) -> None:
        """Ack without waiting for the disk from now on (§12.11), before the first run."""
        self._durable_acks = False

    def group_outcomes(self, groups: OutcomeGroups) -> None:
        """Write acks, retries and fails with ``groups`` from now on (§12.10), before
        the first run."""
        self._groups = groups

    def group_written(self, run: JobRun, outcome: Grouped, said: str) -> None:
        """``run``'s outcome was written with its group: log it and free its slot."""
        try:
            self._log(run, outcome, said)
        finally:
            self._slots.free(run)

    def write_alone(
        self, run: JobRun, outcome: Grouped, unavailable: EngineUnavailable | None
    ) -> str:
        """``run``'s outcome written on its own: after its group raised ``unavailable``,
        written again as §12.9 has it; otherwise (the group rolled back) afresh."""
        reread = self._reread(run)
        if unavailable is not None:
            return write_again(run.handle, outcome, unavailable, self._give_up, reread)
        said, _ = write(run.handle, outcome, None, self._give_up, reread)
        return said

    def _reread(self, run: JobRun) -> Reread:
        return partial(self._queues[run.task.queue].get_job, run.handle.id)

    def _write(self, run: JobRun, outcome: Outcome) -> tuple[str, JobHandle | None]:
        # A cancelled async run's executor is going away: its slot goes back.
        chain = not isinstance(outcome, Abandoned) and not self._stopping.is_set()
        if run.lost:
            said = "lost"  # another worker may hold the job now: write nothing
        else:
            claim_for = self._worker_id if chain else None
            reread = self._reread(run)
            said, claimed = write(run.handle, outcome, claim_for, self._give_up, reread)
            if isinstance(outcome, Ack):
                return said, claimed  # an ack claims in its own write (or not at all)
        return said, self._claim_next(run) if chain else None

    def _claim_next(self, done: JobRun) -> JobHandle | None:
        """The next job of ``done``'s queue, claimed for its slot without waking
        the dispatcher (so no other queue loses a turn to a busy one)."""
        try:
            handles = self._queues[done.task.queue].claim_batch(self._worker_id, 1)
        except AlkstoreError:
            return None  # an outage: the dispatcher waits it out
        return handles[0] if handles else None

    def _log(self, run: JobRun, outcome: Outcome, said: str) -> None:
        asked_for = not (isinstance(outcome, RetryLater) and outcome.raised is not None)
        plain = said.removesuffix(CONFIRMED)
        expected = plain in ("ack", "snooze") or (plain == "retry" and asked_for)
        job = run.handle.job
        elapsed_s = run.elapsed_s()
        self._outcomes.note(
            logging.INFO if expected else logging.WARNING,
            said,
            job.queue,
            job.id,
            job.attempts,
            elapsed_s,
            outcome.why,
        )
        if self._observers:
            self._observers.run_finished(job, outcome_label(plain), elapsed_s)
