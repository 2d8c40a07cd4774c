"""A broken payload size bound (contract §0.7): a ``CoreStore`` subclass.

The bound is checked where a payload is encoded, which is the core's, so this
mutant replaces the store's queues rather than a statement. Its bug is the
shortcut a hand-rolled batch takes: ``enqueue_many`` enqueues its payloads one
by one, so the jobs before an oversize payload are written, and stay, when the
oversize one is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alkstore.core import CoreStore
from alkstore.core.queues import CoreQueue
from alkstore.options import EnqueueOpts, QueueOpts


class _OneByOneQueue(CoreQueue):
    def enqueue_many(self, payloads: Sequence[Any], opts: EnqueueOpts | None = None) -> list[int]:
        return [self.enqueue(payload, opts) for payload in payloads]


class EnqueueManyOneByOneStore(CoreStore):
    """``enqueue_many`` writes the jobs ahead of a payload it refuses."""

    def queue(self, name: str, opts: QueueOpts | None = None) -> Any:
        core = super().queue(name, opts)
        return _OneByOneQueue(core._context, core.name, core.opts)
