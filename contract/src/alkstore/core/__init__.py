"""The shared reference implementation of the contract over an engine ``Driver``."""

from .locks import CoreLock
from .queues import CoreJobHandle, CoreOutbox, CoreQueue
from .store import DEFAULT_REPOLL_S, CoreStore
from .transaction import CoreTransaction
from .wake import WakeHub

__all__ = [
    "DEFAULT_REPOLL_S",
    "CoreJobHandle",
    "CoreLock",
    "CoreOutbox",
    "CoreQueue",
    "CoreStore",
    "CoreTransaction",
    "WakeHub",
]
