"""Grouped acks (contract §12.10): the acks of runs that finished within a short
window, written in one transaction, so a busy worker commits once per group
rather than once per job.

Each ack in the group is ``tx.ack``: guarded by its own claim ``(id, attempts)``,
so a claim that lapsed while its ack waited is refused alone and the others
commit. A run's slot stays taken until its group is written, so a graceful stop's
drain waits for the last group, and the dispatcher then claims for every freed
slot in one batch. A group the store could not take is written again ack by ack,
as §12.9 has it for any outcome.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..api import Store
from ..core.transaction import CoreTransaction
from ..errors import AlkstoreError, EngineUnavailable, StaleHandle
from .observe import refused
from .outcomes import Ack
from .runs import JobRun

MAX_ACK_GROUP = 100
"""The most acks one group writes: a group this large is written without waiting
for its window to end."""

Written = Callable[[JobRun, Ack, str], None]
"""Told, for each ack of a group once it is written, what happened (as
``settle.write`` says it); it logs the outcome and frees the run's slot."""
Alone = Callable[[JobRun, Ack, EngineUnavailable | None], str]
"""Writes one ack on its own: again after its group raised ``EngineUnavailable``
(§12.9), afresh after the group rolled back for another error."""


class AckGroups:
    """Collects finished runs' acks and writes them, a group at a time, on a thread
    of its own: a group is written ``window_s`` after its first ack, or at once when
    ``MAX_ACK_GROUP`` are waiting, or as soon as every run holding a slot
    (``holding()``) is waiting in it (no run is left that could join the group),
    or when the worker closes it."""

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
        self._waiting: list[tuple[JobRun, Ack]] = []
        self._changed = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="alkstore-acks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, run: JobRun, ack: Ack) -> None:
        """Write ``ack`` for ``run`` with its group (or at once, once closing)."""
        with self._changed:
            if not self._closing:
                self._waiting.append((run, ack))
                self._changed.notify()
                return
        self._write([(run, ack)])  # after close: nothing else would write it

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

    def _write(self, group: list[tuple[JobRun, Ack]]) -> None:
        said: list[str] = []
        try:
            with self._store.transaction() as tx:
                if not group[0][1].durable and isinstance(tx, CoreTransaction):
                    tx.commit_acks_without_waiting()  # §12.11: a transaction of acks only
                for run, ack in group:
                    try:
                        tx.ack(run.handle, ack.result)
                    except StaleHandle:
                        said.append(refused("ack"))
                    else:
                        said.append("ack")
        except EngineUnavailable as error:
            # The commit may have landed before the error (in doubt): each ack is
            # written again on its own, refused and confirmed (§12.9) if it did.
            said = [self._alone(run, ack, error) for run, ack in group]
        except AlkstoreError:
            # The group rolled back whole before its commit (a result the store
            # refuses, say): each is written afresh, and only the one at fault fails.
            said = [self._alone(run, ack, None) for run, ack in group]
        for (run, ack), outcome in zip(group, said, strict=True):
            self._written(run, ack, outcome)
