"""Broken waits on several queues (contract §12.1): ``CoreStore`` subclasses.

``claim_wait_any`` is the core's, not an engine's, so these mutants replace
the store rather than a statement: each feeds the core's own waiting loop
(``alkstore.core.claiming.claim_waiting``) a subtly wrong set of queues and
keeps everything else, argument checks included.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from alkstore.api import JobHandle, Outbox, Queue
from alkstore.core import CoreStore
from alkstore.core.claiming import claim_waiting
from alkstore.core.queues import CoreQueue
from alkstore.core.waiting import Deadline
from alkstore.names import validate_identifier
from alkstore.options import check_type
from alkstore.stop import StopToken
from alkstore.timeconv import Duration


class FirstQueueOnlyStore(CoreStore):
    """Accepts the whole list, then claims from (and waits on) its first queue only."""

    def _own_queues(self, queues: object) -> list[CoreQueue]:
        return super()._own_queues(queues)[:1]


class _Unheard:
    """A queue whose wakes never reach the waiter: it is registered under the
    first queue's topic and has no timer of its own, so only the core's re-poll
    safety net brings its work in. SQLite wakes every waiter on any commit, so a
    wrong topic alone would go unseen here; the queue is therefore looked at on
    entry and then at most once per re-poll interval, whatever woke the loop,
    as it would be on an engine whose wakes carry their topic."""

    def __init__(self, queue: CoreQueue, topic: str, repoll_s: float) -> None:
        self._queue = queue
        self.topic = topic
        self._repoll_s = repoll_s
        self._looked_at: float | None = None

    def claim_for_wait(self, worker_id: str, wait_s: float | None) -> JobHandle | None:
        now = time.monotonic()
        if self._looked_at is not None and now - self._looked_at < self._repoll_s:
            return None
        self._looked_at = now
        return self._queue.claim_for_wait(worker_id, wait_s)

    def next_wake_at(self, wait_s: float | None) -> int | None:
        return None


class FirstTopicWaitStore(CoreStore):
    """Claims from every queue of the list but waits on the first one's wake
    topic only: work arriving elsewhere is found late, by the re-poll."""

    def claim_wait_any(
        self,
        queues: Sequence[Queue | Outbox],
        worker_id: str,
        timeout: Duration | None = None,
        stop: StopToken | None = None,
    ) -> JobHandle | None:
        first, *others = self._own_queues(queues)
        validate_identifier(worker_id, "worker_id")
        if stop is not None:
            check_type(stop, StopToken, "stop")
        context = self._context
        unheard = [_Unheard(queue, first.topic, context.repoll_s) for queue in others]
        return claim_waiting(context, [first, *unheard], worker_id, Deadline(timeout), stop)
