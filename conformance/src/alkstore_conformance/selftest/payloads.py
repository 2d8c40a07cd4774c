"""Broken payload size bounds (contract §0.7): ``CoreStore`` subclasses.

The bound is checked where a payload is encoded, which is the core's, so these
mutants replace the store rather than a statement. One takes the shortcut a
hand-rolled batch takes: ``enqueue_many`` enqueues its payloads one by one, so
the jobs before an oversize payload are written, and stay, when the oversize
one is refused. The other parses ``max_payload_bytes`` and never applies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alkstore.constants import MAX_PAYLOAD_BYTES
from alkstore.core import CoreStore
from alkstore.core.queues import CoreQueue
from alkstore.options import EnqueueOpts, QueueOpts
from alkstore.values import Enqueued


class _OneByOneQueue(CoreQueue):
    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None
    ) -> list[Enqueued]:
        return [self.enqueue(payload, opts) for payload in payloads]


class EnqueueManyOneByOneStore(CoreStore):
    """``enqueue_many`` writes the jobs ahead of a payload it refuses."""

    def queue(self, name: str, opts: QueueOpts | None = None) -> Any:
        core = super().queue(name, opts)
        return _OneByOneQueue(core._context, core.name, core.opts)


class IgnoresPayloadOptionStore(CoreStore):
    """Every store gets the contract's bound, whatever ``max_payload_bytes`` said."""

    def __init__(self, *args: Any, max_payload_bytes: int = MAX_PAYLOAD_BYTES, **kw: Any) -> None:
        super().__init__(*args, **kw)
