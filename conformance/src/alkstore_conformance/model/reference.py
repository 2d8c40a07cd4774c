"""The reference model: every profile's operations over one ``ModelState``."""

from __future__ import annotations

from .ops import OpsModel
from .queues import QueuesModel
from .scheduler import SchedulerModel
from .streams import StreamsModel
from .transactions import TransactionsModel


class ReferenceModel(QueuesModel, TransactionsModel, OpsModel, SchedulerModel, StreamsModel):
    """The contract's queues, outbox, transactional enqueue, scheduler, locks and
    streams, in memory."""
