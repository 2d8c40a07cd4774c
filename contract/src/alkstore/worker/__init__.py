"""The worker runtime (contract §12): handlers for the jobs of several queues.

```python
from alkstore.worker import Worker, Retry, Snooze, Fail

worker = Worker(store, name="web-1")

@worker.task("emails", concurrency=4)
def send(job): ...            # return = ack

worker.run()                  # blocks; SIGTERM/SIGINT = graceful stop
```

Pure contract surface: it runs on any certified engine.
"""

from __future__ import annotations

from .grouping import MAX_ACK_GROUP
from .maintenance import DEFAULT_MAINTENANCE_EVERY, MAINTENANCE_QUEUE, MAINTENANCE_SCHEDULE
from .observe import OUTCOMES, WorkerObserver
from .outcomes import Fail, Retry, Snooze
from .runs import JobContext
from .runtime import (
    DEFAULT_ACK_GROUP_MIN_SLOTS,
    DEFAULT_ACK_WINDOW_S,
    DEFAULT_SHUTDOWN_GRACE_S,
    MAX_ACK_WINDOW_S,
    Worker,
)
from .tasks import MAX_CONCURRENCY, Task

__all__ = [
    "DEFAULT_ACK_GROUP_MIN_SLOTS",
    "DEFAULT_ACK_WINDOW_S",
    "DEFAULT_MAINTENANCE_EVERY",
    "DEFAULT_SHUTDOWN_GRACE_S",
    "MAINTENANCE_QUEUE",
    "MAINTENANCE_SCHEDULE",
    "MAX_ACK_GROUP",
    "MAX_ACK_WINDOW_S",
    "MAX_CONCURRENCY",
    "OUTCOMES",
    "Fail",
    "JobContext",
    "Retry",
    "Snooze",
    "Task",
    "Worker",
    "WorkerObserver",
]
