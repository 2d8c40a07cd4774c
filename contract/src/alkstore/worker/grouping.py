"""Grouped outcomes (contract §12.10): the acks, retries and fails of runs that
finished within a short window, written in one transaction, so a busy worker
commits once per group rather than once per job.

The group's acks are one ``tx.ack_all`` (§3.10: one statement), its retries one
``tx.retry_all`` and its fails one ``tx.fail_all`` (§3.11): every outcome guarded by
its own claim ``(id, attempts)``, so a claim that lapsed while its outcome waited is
refused alone and the others commit. A run's slot stays taken until its group
is written, so a graceful stop's drain waits for the last group, and the
dispatcher then claims for every freed slot in one batch. A group the store could
not take is written again outcome by outcome, as §12.9 has it for any outcome.
Snoozes and releases are not grouped: each is written on its own, as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeGuard

from ..api import JobHandle, Store, Transaction
from ..errors import AlkstoreError, EngineUnavailable
from .observe import said_of
from .outcomes import Ack, Failed, Outcome, RetryLater
from .runs import JobRun

MAX_ACK_GROUP = 100
"""The most outcomes one group writes: a group this large is written without
waiting for its window to end."""

Grouped = Ack | RetryLater | Failed
"""The outcomes a group carries: the ones a transaction can write (``tx.ack``,
``tx.retry``, ``tx.fail``)."""

Written = Callable[[JobRun, Grouped, str], None]
"""Told, for each outcome of a group once it is written, what happened (as
``settle.write`` says it); it logs the outcome and frees the run's slot."""
Alone = Callable[[JobRun, Grouped, EngineUnavailable | None], str]
"""Writes one outcome on its own: again after its group raised
``EngineUnavailable`` (§12.9), afresh after the group rolled back for another error."""


def carried(outcome: Outcome) -> TypeGuard[Grouped]:
    """Whether ``outcome`` is one a group carries."""
    return isinstance(outcome, Ack | RetryLater | Failed)


class OutcomeGroups:
    """Collects finished runs' outcomes and writes them, a group at a time, on a
    thread of its own: a group is written ``window_s`` after its first outcome, or at
    once when ``MAX_ACK_GROUP`` are waiting, or as soon as every run holding a slot
    (``holding()``) is waiting in it (no run is left that could join the group), or
    when the worker closes it."""

    def __init__(
        self,
        store: Store,
        window_s: float,
        written: Written,
        alone: Alone,
        holding: Callable[[], int],
    ) -> None:
        self._store = store
        self._window_s = window_s
        self._holding = holding
        self._written = written
        self._alone = alone
        self._waiting: list[tuple[JobRun, Grouped]] = []
        self._changed = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="alkstore-acks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, run: JobRun, outcome: Grouped) -> None:
        """Write ``outcome`` for ``run`` with its group (or at once, once closing)."""
        with self._changed:
            if not self._closing:
                self._waiting.append((run, outcome))
                self._changed.notify()
                return
        self._write([(run, outcome)])  # after close: nothing else would write it

    def close(self) -> None:
        """Write what is waiting, now, and stop the thread."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closing:
                    self._changed.wait()
                if not self._waiting:
                    return  # closing, and nothing is left to write
                ends = time.monotonic() + self._window_s
                while len(self._waiting) < MAX_ACK_GROUP and not self._closing:
                    if len(self._waiting) >= self._holding():
                        break  # every run holding a slot waits here: none is left to join
                    left = ends - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                group = self._waiting[:MAX_ACK_GROUP]
                del self._waiting[:MAX_ACK_GROUP]
            self._write(group)

    def _write(self, group: list[tuple[JobRun, Grouped]]) -> None:
        said: list[str] = []
        try:
            with self._store.transaction() as tx:
                if _acks_only_without_waiting(group):
                    _commit_without_waiting(tx)  # §12.11: a transaction of acks only
                lost = _refused_in(tx, group)  # a statement per kind (§3.10, §3.11)
                said = [
                    said_of(_NAMES[type(outcome)], id(run.handle) not in lost, run.handle)
                    for run, outcome in group
                ]
        except EngineUnavailable as error:
            # The commit may have landed before the error (in doubt): each outcome is
            # written again on its own, refused and confirmed (§12.9) if it did.
            said = [self._alone(run, outcome, error) for run, outcome in group]
        except AlkstoreError:
            # The group rolled back whole before its commit (a result the store
            # refuses, say): each is written afresh, and only the one at fault fails.
            said = [self._alone(run, outcome, None) for run, outcome in group]
        for (run, outcome), outcome_said in zip(group, said, strict=True):
            self._written(run, outcome, outcome_said)


def _acks_only_without_waiting(group: list[tuple[JobRun, Grouped]]) -> bool:
    """Whether every outcome of ``group`` is an ack that need not wait for the disk:
    only such a transaction may commit without waiting (§12.11); a retry or a fail in
    the group makes its commit durable, the acks in it with it."""
    return all(isinstance(outcome, Ack) and not outcome.durable for _, outcome in group)


def _commit_without_waiting(tx: Transaction) -> None:
    """Ask that ``tx`` commit without waiting for the disk (§12.11). The core's
    transactions can, and so can a wrapper that hands their calls on (the traced
    transactions of ``alkstore.otel.instrument``); a transaction without the request
    commits durably, as every engine's may."""
    ask = getattr(tx, "commit_acks_without_waiting", None)
    if callable(ask):
        ask()


def _refused_in(tx: Transaction, group: list[tuple[JobRun, Grouped]]) -> set[int]:
    """Write the outcomes of ``group`` in ``tx``: its acks with one ``tx.ack_all``, its
    retries with one ``tx.retry_all``, its fails with one ``tx.fail_all``, each under
    its own claim; the ``id`` of each handle refused (its claim lapsed while the
    outcome waited: the transaction carries on without it)."""
    acks = [(run.handle, o) for run, o in group if isinstance(o, Ack)]
    retries = [(run.handle, o) for run, o in group if isinstance(o, RetryLater)]
    fails = [(run.handle, o) for run, o in group if isinstance(o, Failed)]
    lost: list[JobHandle] = []
    if acks:
        lost += tx.ack_all([h for h, _ in acks], [o.result for _, o in acks])
    if retries:
        errors, delays = [o.error for _, o in retries], [o.delay_s for _, o in retries]
        lost += tx.retry_all([h for h, _ in retries], errors, delays)
    if fails:
        lost += tx.fail_all([h for h, _ in fails], [o.error for _, o in fails])
    return {id(handle) for handle in lost}


_NAMES: dict[type, str] = {Ack: "ack", RetryLater: "retry", Failed: "fail"}
