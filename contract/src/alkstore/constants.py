"""Contract constants (contract §9)."""

from __future__ import annotations

from typing import Final

CONTRACT_VERSION: Final = "1.1"
"""The contract version engines implementing this package declare."""

RESERVED_PREFIX: Final = "__alkstore"
"""Names starting with this are the engine's own and are refused from callers."""

MAX_NAME_LENGTH: Final = 200
"""The longest name, in characters (contract §0)."""

BACKOFF_CAP_S: Final = 3600
"""No computed retry delay exceeds one hour."""

CATCH_UP_CAP: Final = 64
"""At most this many missed boundaries of one schedule fire in one tick."""

CATCH_UP_POLICIES: Final = ("all", "latest", "none")
"""What a tick does with a schedule's missed boundaries (``ScheduleOpts.catch_up``,
contract §5.4): fire all of them (up to ``CATCH_UP_CAP``), only the latest, or only
those that came due less than ``MISFIRE_GRACE_S`` ago."""

MISFIRE_GRACE_S: Final = 60
"""How late a boundary of a ``catch_up="none"`` schedule may still fire: longer than
a leader handover (the 30 s lease lapsing, then a tick), so an ordinary failover
never drops a boundary."""

SCHEDULER_LOCK: Final = "__alkstore_scheduler"
"""The leadership lock ``run_schedules`` holds."""

OUTBOX_QUEUE_PREFIX: Final = "__alkstore_outbox:"
"""An outbox named ``n`` is backed by the queue ``OUTBOX_QUEUE_PREFIX + n``."""

MAX_SECONDS: Final = 2**40
"""Upper bound of any accepted duration or instant, so stamps fit every engine's int64."""

PRIORITY_RANGE: Final = (-(2**31), 2**31 - 1)
"""Priorities are 32-bit signed integers on every engine."""

MAX_PAYLOAD_DEPTH: Final = 64
"""Deepest nesting of lists and objects a payload may have (``[[1]]`` is 2 deep).
Deeper payloads are refused at enqueue: decoding one from a worker's already deep
stack could exhaust Python's recursion limit, and a row that cannot be decoded
must never reach a claimer."""

MAX_PAYLOAD_BYTES: Final = 1_048_576
"""Largest payload, in bytes of its JSON text encoded as UTF-8 (1 MiB); larger ones
are refused at enqueue. A job carries the description of work, not its data (a
file, a document: store it elsewhere and enqueue its key), and a claimer holds
whole batches in memory: ``MAX_BATCH`` jobs at this bound are 10 GiB. The bound
matches what peers' messages hold (SQS and Google Cloud Tasks: 1 MB, Kafka's
default: 1 MB). A store may lower it (engine option ``max_payload_bytes``), never
raise it: a later contract may raise the bound without breaking anyone."""

MAX_RESULT_BYTES: Final = 1_048_576
"""Largest job result (contract 1.2, the results profile), in bytes of its JSON text
encoded as UTF-8 (1 MiB), under the payload's encoder rules (§0.4, §0.5): a handler's
return value or ``ack(result=...)`` over it is refused with ``ResultError`` before
anything is written. A result is kept for its job's completed retention and read by
``get_job``: like a payload, it carries an answer, not a document."""

MAX_DEPENDENCIES: Final = 100
"""Most jobs one job may wait for (contract 1.2 §18, the dependencies profile):
``EnqueueOpts(after=...)`` names at most this many ids."""

MAX_ERROR_HISTORY: Final = 25
"""A job keeps the latest this many ``JobError``s (contract §11)."""

MAX_ERROR_LENGTH: Final = 65_536
"""Error strings are stored whole up to this many characters; longer ones keep their
first ``MAX_ERROR_LENGTH`` characters (contract §11)."""

ERROR_NUL_STAND_IN: Final = "\u2400"
"""What a NUL character of a ``retry``/``fail`` error is stored as (U+2400, the
symbol for null): PostgreSQL's text cannot hold NUL, and an error must read the
same on every engine."""

MAX_JOBS_PAGE: Final = 1000
"""Largest ``Queue.jobs`` page (contract §11)."""

MAX_REDRIVE: Final = 10_000
"""Largest ``Queue.redrive`` ``limit`` (contract §11)."""

MAX_BATCH: Final = 10_000
"""Largest ``claim_batch`` limit."""

MAX_WAIT_QUEUES: Final = 100
"""Most queues one ``Store.claim_wait_any`` waits on (contract §12)."""

MAX_SNOOZES: Final = 100
"""A job snoozes at most this many times (contract 1.2, the snooze profile): the
snooze after that dead-letters it with ``"max snoozes exceeded"``, since a snooze
spends no attempt and nothing else would ever stop it."""

MAX_UNIQUE_KEY_CHARS: Final = 255
"""The longest unique key, in characters (contract 1.2, the unique profile). A key is
indexed beside its queue's name on every engine: at most 255 characters (1,020 bytes
of UTF-8) stays far inside any B-tree's entry limit (PostgreSQL's is about 2.7 kB)
whatever the characters, and holds composite keys (``tenant:resource:action``) and
the keys derived from payloads (``payload:sha256:`` and 64 hex digits, 79)."""

MAX_CONCURRENCY_LIMIT: Final = 100_000
"""The largest concurrency limit of a queue (contract 1.2 §16, the limits profile):
far above any fleet's slots, so a larger number is a mistake (a unit mixed up, an
"unlimited" spelled as a huge number) and is refused; ``Queue.clear_limits`` removes a
limit."""

MAX_LIMIT_KEY_CHARS: Final = 255
"""The longest limit key (``EnqueueOpts.limit_key``, contract 1.2 §16.9, the key_limits
profile), in characters: a key is counted beside its queue's name on every engine, so
it is bounded as a unique key is (``MAX_UNIQUE_KEY_CHARS``)."""

MAX_METADATA_ENTRIES: Final = 16
"""The most entries a job's metadata holds (``EnqueueOpts.metadata``, contract 1.2
§20, the metadata profile): a few small strings carried with the job (a trace
context, a request id), not a second payload."""

MAX_METADATA_BYTES: Final = 4096
"""The longest a job's metadata is as the JSON object engines store (UTF-8, keys
sorted, no spaces), in bytes: 4 KiB (contract 1.2 §20)."""


MAX_RATE_LIMIT: Final = 100_000
"""The most claims a queue's rate limit lets start in one window (contract 1.2 §16)."""

MAX_RATE_WINDOW_S: Final = 86_400
"""The longest window of a queue's rate limit, in seconds: one day (contract 1.2 §16).
A rate over a longer span is a quota, not a rate: count it in the application."""

SCHEDULER_LEASE_S: Final = 30
"""TTL of the scheduler leadership lock; the leader renews it at least every third of it."""

DECLARATION_LEASE_S: Final = 300
"""How long a declared schedule (contract 1.2 §5.11, the periodic profile) outlives the
last renewal of its declaration; a running worker renews what it declares every third
of it. Five minutes: an app that stops declaring a schedule stops its fires within
that, and a worker paused or cut off for less than two renewals keeps its schedules."""

WORKER_LEASE_S: Final = 60
"""How long a registered worker (contract 1.2 §19, the workers profile) stays listed
after its last registration or heartbeat; a running worker heartbeats every third of
it. A minute: a worker that died drops out of ``store.workers()`` within it, and one
paused for less than two heartbeats stays listed."""

MAX_WORKER_QUEUES: Final = 1_000
"""The most queue names one worker registers (contract 1.2 §19)."""

MAX_HOST_CHARS: Final = 255
"""The longest host name a worker registers, in characters (a DNS name's limit)."""

THROUGHPUT_WINDOW_S: Final = 3600
"""How far back ``store.throughput()`` counts the jobs workers finished (contract 1.2
§19.6): the last hour, in minutes (``THROUGHPUT_BUCKET_S``) ending with the current one."""

THROUGHPUT_BUCKET_S: Final = 60
"""The width of one throughput count: a minute, aligned to the epoch."""

MAX_FINISHED_COUNT: Final = 1_000_000_000
"""The most finished jobs of one queue one heartbeat reports (contract 1.2 §19.6)."""
