"""alkstore: the contract for durable background work.

Open a store with ``alkstore.open(url)``; the URL scheme picks an engine
registered under the entry-point group ``alkstore.engines``.
"""

from . import backoff, testing
from .api import (
    AckAndClaim,
    JobHandle,
    Lock,
    Outbox,
    Queue,
    QueueConsumer,
    Store,
    Stream,
    Subscription,
    Transaction,
)
from .backoff import retry_delay
from .clock import Clock, OffsetClock, RealtimeClock, SystemClock
from .constants import (
    BACKOFF_CAP_S,
    CATCH_UP_CAP,
    CONTRACT_VERSION,
    MAX_NAME_LENGTH,
    MAX_UNIQUE_KEY_CHARS,
    RESERVED_PREFIX,
    SCHEDULER_LEASE_S,
    SCHEDULER_LOCK,
)
from .engine import (
    ENGINE_GROUP,
    AsyncNativeProvider,
    Capabilities,
    EngineProvider,
    EngineSpec,
    installed_engines,
    load_engine,
    open,
)
from .errors import (
    AlkstoreError,
    EngineMisconfigured,
    EngineNotFound,
    EngineUnavailable,
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    LeadershipLost,
    PayloadError,
    ProfileUnavailable,
    ReservedName,
    StoreClosed,
)
from .names import outbox_queue_name, validate_name
from .options import (
    DEFAULT_QUEUE_OPTS,
    OUTBOX_QUEUE_OPTS,
    EnqueueOpts,
    QueueOpts,
    ScheduleOpts,
    Unique,
)
from .spec import parse_spec
from .stop import StopToken
from .values import (
    Enqueued,
    Job,
    JobError,
    JobState,
    LockInfo,
    QueueStats,
    Schedule,
    StreamEvent,
    SweepResult,
    TickResult,
)

__version__ = "0.1.0"

__all__ = [
    "BACKOFF_CAP_S",
    "CATCH_UP_CAP",
    "CONTRACT_VERSION",
    "DEFAULT_QUEUE_OPTS",
    "ENGINE_GROUP",
    "MAX_NAME_LENGTH",
    "MAX_UNIQUE_KEY_CHARS",
    "OUTBOX_QUEUE_OPTS",
    "RESERVED_PREFIX",
    "SCHEDULER_LEASE_S",
    "SCHEDULER_LOCK",
    "AckAndClaim",
    "AlkstoreError",
    "AsyncNativeProvider",
    "Capabilities",
    "Clock",
    "EngineMisconfigured",
    "EngineNotFound",
    "EngineProvider",
    "EngineSpec",
    "EngineUnavailable",
    "EnqueueOpts",
    "Enqueued",
    "InvalidName",
    "InvalidOptions",
    "InvalidSpec",
    "Job",
    "JobError",
    "JobHandle",
    "JobState",
    "LeadershipLost",
    "Lock",
    "LockInfo",
    "OffsetClock",
    "Outbox",
    "PayloadError",
    "ProfileUnavailable",
    "Queue",
    "QueueConsumer",
    "QueueOpts",
    "QueueStats",
    "RealtimeClock",
    "ReservedName",
    "Schedule",
    "ScheduleOpts",
    "StopToken",
    "Store",
    "StoreClosed",
    "Stream",
    "StreamEvent",
    "Subscription",
    "SweepResult",
    "SystemClock",
    "TickResult",
    "Transaction",
    "Unique",
    "backoff",
    "installed_engines",
    "load_engine",
    "open",
    "outbox_queue_name",
    "parse_spec",
    "retry_delay",
    "testing",
    "validate_name",
]
