"""The reference model: every profile's operations over one ``ModelState``."""

from __future__ import annotations

from .ops import OpsModel
from .queues import QueuesModel
from .scheduler import SchedulerModel
from .streams import StreamsModel
from .transactions import TransactionsModel
from .unique import UniqueModel
from .workers import WorkersModel


class ReferenceModel(
    TransactionsModel,
    QueuesModel,
    OpsModel,
    SchedulerModel,
    StreamsModel,
    UniqueModel,
    WorkersModel,
):
    """The contract's queues, outbox, transactional enqueue, scheduler, locks,
    streams, unique jobs and the worker registry, in memory."""
