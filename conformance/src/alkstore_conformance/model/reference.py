"""The reference model: every profile's operations over one ``ModelState``."""

from __future__ import annotations

from .ops import OpsModel
from .queues import QueuesModel
from .scheduler import SchedulerModel
from .streams import StreamsModel
from .transactions import TransactionsModel
from .unique import UniqueModel


class ReferenceModel(
    QueuesModel, TransactionsModel, OpsModel, SchedulerModel, StreamsModel, UniqueModel
):
    """The contract's queues, outbox, transactional enqueue, scheduler, locks,
    streams and unique jobs, in memory."""
