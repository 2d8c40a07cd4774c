"""The kit proves it can fail: deliberately broken engines (contract §10).

Each mutant is the SQLite reference engine with one bug, registered under the
entry-point group ``alkstore.engines.selftest`` and naming the manifest
property meant to catch it (``MutantEngine.catches``). The kit's own tests
(``conformance/tests/test_selftest_mutants.py``) run the suite against every
mutant, restricted to that property, and require it to fail -- while the same
property passes on the real engine::

    alkstore-conformance run --engine double-claim --engine-group alkstore.engines.selftest \\
        --property QUEUE-CLAIM-EXACTLY-ONCE

Needs the SQLite engine: ``pip install 'alkstore-conformance[selftest]'``.
"""

from __future__ import annotations

import dataclasses

from .async_acks import AsyncAckIgnoresClaimDriver
from .blind_spots import (
    ChunkedAckBatchDriver,
    ChunkedEnqueueDriver,
    NoTimerDriver,
    NulRestoringDriver,
    ReadThenWriteLockDriver,
    SplitFireDriver,
    TruncatingErrorDriver,
    TwoStepBuryDriver,
)
from .blocked_loop import LoopListeningEngine
from .chaining import ClaimsOnlyAfterAnAckStore
from .contention import (
    NestedWriteRawErrorDriver,
    NeverRecoversDriver,
    RawLockErrorDriver,
    WaitPastTimeoutDriver,
)
from .cron import GapSkippingStore, PolicyDroppingDriver, ZoneDroppingDriver
from .dependencies import (
    ClaimBeforeBuryDriver,
    DeadDependencyLeavesWaitingDriver,
    EdgesOneWayDriver,
    FanInAsDependencyDriver,
    RedriveLeavesDependentsDeadDriver,
    ReleaseInOwnCommitDriver,
    ReleaseOnFirstAckDriver,
    StaleRevivalDriver,
)
from .dialects import ChangedRowsDriver, CollatedNamesDriver
from .engine import BUDGET, MutantEngine
from .hangs import CursorIgnoredDriver, TimeoutIgnoredStore
from .isolation import LocksSharedByDirectoryDriver, WakesSharedByDirectoryDriver
from .key_limits import (
    PerKeyLimitIgnoredDriver,
    PerKeyRateCountedPerQueueDriver,
    UnfairKeyOrderDriver,
)
from .limits import (
    LapsedCountedForeverDriver,
    LimitPerProcessDriver,
    LimitReadOnceDriver,
    RateWindowShortDriver,
)
from .many_outcomes import (
    FailAllIgnoresDeadlineDriver,
    RetryAllCommitsEachDriver,
    RetryAllIgnoresDeadlineDriver,
)
from .metadata import MetadataDroppedOnRedriveDriver
from .operations import (
    BatchClaimIgnoresPauseDriver,
    BuryForgetsErrorDriver,
    LapsedAsProcessingDriver,
    NewestPagesAscendingDriver,
    OffsetPagesDriver,
    PauseInProcessDriver,
    PurgeIgnoresQueueDriver,
    ReadThenWriteRedriveDriver,
    RedriveKeepsDeadRowDriver,
    TwoStepRedriveDriver,
)
from .payloads import EnqueueManyOneByOneStore, IgnoresPayloadOptionStore
from .periodic import LapseIgnoringDriver, ResettingDeclarationDriver
from .queues import (
    AckIgnoresAttemptDriver,
    EscapingEnqueueDriver,
    LateHeartbeatDriver,
    LostAckDriver,
    NoJitterStore,
    PrefetchingClaimDriver,
    ReusedIdsDriver,
    SweepMissesProcessingDriver,
    UncappedBackoffDriver,
)
from .release import ReleaseCountsAttemptDriver
from .results import (
    AckAllCommitsEachDriver,
    AckAllGuardsFirstOnlyDriver,
    AckBatchDeletesKeptDriver,
    AckCommitsEarlyDriver,
    CompletedNeverSweptDriver,
    StaleAckAbortsDriver,
    TruncatedResultDriver,
    TxAckOutsideStore,
)
from .scheduler import AdvanceWithoutCompareDriver, NeverSkipsDriver
from .snooze import SnoozeCountsAttemptDriver, SnoozeUncountedDriver
from .tx_outcomes import (
    AckAllCountsJobsStore,
    RetryAllWritesAsItChecksStore,
    TxFinishedClaimsCachedStore,
    TxRetryIgnoresClaimStore,
)
from .unique import (
    CheckThenInsertUniqueDriver,
    PeriodNeverEndsDriver,
    UniqueForgetsProcessingDriver,
)
from .waiting import FirstQueueOnlyStore, FirstTopicWaitStore
from .wakes import (
    RedriveUnannouncedDriver,
    ReleaseUnannouncedDriver,
    ResumeUnannouncedDriver,
    RetryAllUnannouncedDriver,
    SlotFreedUnannouncedDriver,
    TimerIgnoresDeadlinesDriver,
)
from .watching import OwnCommitsOnlyWatcherStore
from .workers import (
    DeregisterKeepsWorkerDriver,
    LapsedWorkerListedDriver,
    ThroughputLastWriteWinsDriver,
)

SELFTEST_GROUP = "alkstore.engines.selftest"

DOUBLE_CLAIM = MutantEngine(
    "double-claim",
    catches="QUEUE-CLAIM-EXACTLY-ONCE",
    bug="claims from a stale prefetched list, so one job goes to two workers",
    driver=PrefetchingClaimDriver,
)
ACK_IGNORES_ATTEMPT = MutantEngine(
    "ack-ignores-attempt",
    catches="QUEUE-HANDLE-STALE-AFTER-RECLAIM",
    bug="ack ignores the claim's attempt, so a stale handle acks a later claim",
    driver=AckIgnoresAttemptDriver,
)
LOST_ACK = MutantEngine(
    "lost-ack",
    catches="QUEUE-HANDLE-AFTER-FINISH",
    bug="ack answers True and deletes nothing",
    driver=LostAckDriver,
)
SWEEP_MISSES_PROCESSING = MutantEngine(
    "sweep-misses-processing",
    catches="QUEUE-NO-STRANDED-ROWS",
    bug="sweep_expired dead-letters expired pending rows only; processing ones are stranded",
    driver=SweepMissesProcessingDriver,
)
NO_JITTER = MutantEngine(
    "backoff-no-jitter",
    catches="QUEUE-RETRY-BACKOFF",
    bug="every retry waits the top of the backoff range: no jitter",
    store=NoJitterStore,
)
UNCAPPED_BACKOFF = MutantEngine(
    "backoff-uncapped",
    catches="QUEUE-RETRY-BACKOFF",
    bug="retry delays follow the curve past the 3600 s cap",
    driver=UncappedBackoffDriver,
)
LATE_HEARTBEAT = MutantEngine(
    "late-heartbeat",
    catches="QUEUE-HANDLE-LAPSED-REFUSED",
    bug="heartbeat extends a lapsed claim, stealing the job back",
    driver=LateHeartbeatDriver,
)
REUSED_IDS = MutantEngine(
    "reused-ids",
    catches="QUEUE-IDS-NEVER-REUSED",
    bug="the id counter forgets ids above the highest live job, so ids come back",
    driver=ReusedIdsDriver,
)
ROLLBACK_KEEPS_JOBS = MutantEngine(
    "rollback-keeps-jobs",
    catches="TX-ROLLBACK",
    bug="jobs enqueued in a transaction are written anyway when it rolls back",
    driver=EscapingEnqueueDriver,
)
SCHEDULE_DOUBLE_FIRE = MutantEngine(
    "schedule-double-fire",
    catches="SCHED-NO-DOUBLE-FIRE",
    bug="a boundary advances without its compare-and-set, so two tickers both fire it",
    driver=AdvanceWithoutCompareDriver,
)
SCHEDULE_NO_CAP = MutantEngine(
    "schedule-ignores-cap",
    catches="SCHED-CATCH-UP-CAP",
    bug="a tick never skips past the catch-up cap: every missed boundary fires",
    driver=NeverSkipsDriver,
)
TRUNCATED_ERROR = MutantEngine(
    "truncated-error",
    catches="QUEUE-ERROR-WHOLE",
    bug="a failed job's last_error keeps only its first 4000 characters",
    driver=TruncatingErrorDriver,
)
CHUNKED_ENQUEUE = MutantEngine(
    "chunked-enqueue",
    catches="QUEUE-ENQUEUE-MANY-ATOMIC",
    bug="enqueue_many commits every 100 rows: readers see half a batch, a crash keeps one",
    driver=ChunkedEnqueueDriver,
)
CHUNKED_ACK_BATCH = MutantEngine(
    "chunked-ack-batch",
    catches="QUEUE-ACK-BATCH-SEEN-WHOLE",
    bug="ack_batch commits every 500 ids: a reader sees part of the batch acked",
    driver=ChunkedAckBatchDriver,
)
NO_TIMER = MutantEngine(
    "no-timer",
    catches="WAKE-DELAYED-JOB-PROMPT",
    bug="next_wake_at is always None: a delayed job is found by the 1 s re-poll only",
    driver=NoTimerDriver,
)
READ_THEN_WRITE_LOCK = MutantEngine(
    "read-then-write-lock",
    catches="LOCK-ACQUIRE-RACE",
    bug="acquire checks the lock in one transaction and takes it in the next: two winners",
    driver=ReadThenWriteLockDriver,
)
SPLIT_FIRE = MutantEngine(
    "split-fire",
    catches="SCHED-FIRE-CRASH-ATOMIC",
    bug="a schedule's advance commits before its job is inserted: a crash loses the job",
    driver=SplitFireDriver,
)
TWO_STEP_BURY = MutantEngine(
    "two-step-bury",
    catches="QUEUE-DEAD-MOVE-CRASH-ATOMIC",
    bug="fail deletes the live row and inserts the dead one in two commits",
    driver=TwoStepBuryDriver,
)
STATS_LAPSED_AS_PROCESSING = MutantEngine(
    "stats-lapsed-as-processing",
    catches="OPS-STATS-COUNTS",
    bug="stats count claimed rows by state alone: lapsed claims show as processing",
    driver=LapsedAsProcessingDriver,
)
REDRIVE_KEEPS_DEAD_ROW = MutantEngine(
    "redrive-keeps-dead-row",
    catches="OPS-REDRIVE",
    bug="redrive makes the new job and never deletes the dead row",
    driver=RedriveKeepsDeadRowDriver,
)
TWO_STEP_REDRIVE = MutantEngine(
    "two-step-redrive",
    catches="OPS-REDRIVE-CRASH-ATOMIC",
    bug="redrive commits the new jobs before deleting the dead rows: a crash keeps both",
    driver=TwoStepRedriveDriver,
)
READ_THEN_WRITE_REDRIVE = MutantEngine(
    "read-then-write-redrive",
    catches="OPS-REDRIVE-RACE",
    bug="redrive reads the dead rows in one transaction and redrives them in the next: "
    "two operators both redrive each row",
    driver=ReadThenWriteRedriveDriver,
)
PAUSE_IN_PROCESS = MutantEngine(
    "pause-in-process",
    catches="OPS-PAUSE-ACROSS-PROCESSES",
    bug="a pause lives in the opened store's memory: other processes keep claiming",
    driver=PauseInProcessDriver,
)
BATCH_CLAIM_IGNORES_PAUSE = MutantEngine(
    "batch-claim-ignores-pause",
    catches="OPS-PAUSE",
    bug="only the one-job claim checks the pause: claim_batch still hands out a paused queue",
    driver=BatchClaimIgnoresPauseDriver,
)
PURGE_IGNORES_QUEUE = MutantEngine(
    "purge-ignores-queue",
    catches="OPS-PURGE-DEAD",
    bug="purge_dead of named ids deletes them in any queue",
    driver=PurgeIgnoresQueueDriver,
)
OFFSET_PAGES = MutantEngine(
    "offset-pages",
    catches="OPS-JOBS-PAGES-UNDER-INSERTS",
    bug="jobs() pages by position: jobs finished behind the reader shift the next page",
    driver=OffsetPagesDriver,
)
NEWEST_PAGES_ASCENDING = MutantEngine(
    "newest-pages-ascending",
    catches="OPS-JOBS-NEWEST-FIRST",
    bug="jobs(before_id=) reads the cursor as a bound only: its page is the oldest jobs "
    "below it, oldest first, so a newest-first listing starts at the queue's oldest job",
    driver=NewestPagesAscendingDriver,
)
BURY_FORGETS_ERROR = MutantEngine(
    "bury-forgets-error",
    catches="OPS-ERROR-HISTORY",
    bug="the error history records retries only: the failure that killed a job is lost",
    driver=BuryForgetsErrorDriver,
)
WAIT_ANY_FIRST_QUEUE = MutantEngine(
    "wait-any-first-queue",
    catches="QUEUE-CLAIM-WAIT-ANY-TAKES-ANY",
    bug="claim_wait_any accepts every queue of its list but claims from the first only",
    store=FirstQueueOnlyStore,
)
WAIT_ANY_FIRST_TOPIC = MutantEngine(
    "wait-any-first-topic",
    catches="QUEUE-CLAIM-WAIT-ANY-PROMPT",
    bug="claim_wait_any waits on its first queue's wakes only: "
    "the other queues' work is found by the 1 s re-poll",
    store=FirstTopicWaitStore,
)
WATCHER_OWN_COMMITS_ONLY = MutantEngine(
    "watcher-own-commits-only",
    catches="WAKE-WATCHER-PROMPT",
    bug="wake_watcher waits on the store's own hub and never starts the engine's watch: "
    "another store's or process's enqueue never wakes it",
    store=OwnCommitsOnlyWatcherStore,
)
NUL_RESTORED = MutantEngine(
    "nul-restored",
    catches="QUEUE-ERROR-WHOLE",
    bug="last_error keeps a raw NUL instead of the contract's stand-in U+2400",
    driver=NulRestoringDriver,
)
RELEASE_COUNTS_ATTEMPT = MutantEngine(
    "release-counts-attempt",
    catches="QUEUE-RELEASE-UNCOUNTED",
    bug="release gives the claim back but keeps its attempt counted, so every cancelled "
    "async claim costs the job an attempt",
    driver=ReleaseCountsAttemptDriver,
)
ACK_AND_CLAIM_AFTER_ACK_ONLY = MutantEngine(
    "ack-and-claim-after-ack-only",
    catches="QUEUE-ACK-AND-CLAIM-LOST",
    bug="ack_and_claim claims only when its ack went through: a worker whose claim "
    "lapsed gets no next job from a full queue",
    store=ClaimsOnlyAfterAnAckStore,
)

# -- snooze (contract 1.2 §14) ---------------------------------------------------------
SNOOZE_COUNTS_ATTEMPT = MutantEngine(
    "snooze-counts-attempt",
    catches="SNOOZE-ATTEMPT-UNSPENT",
    bug="snooze puts the job back to wait but keeps its attempt counted, so a job that "
    "waits often dies 'max attempts exceeded' without ever failing",
    driver=SnoozeCountsAttemptDriver,
)
SNOOZE_UNCOUNTED = MutantEngine(
    "snooze-uncounted",
    catches="SNOOZE-BOUND",
    bug="snooze never counts the snooze, so MAX_SNOOZES never stops a job that snoozes forever",
    driver=SnoozeUncountedDriver,
)

# -- payload size bound (contract 1.2) ---------------------------------------------
ENQUEUE_MANY_PAST_OVERSIZE = MutantEngine(
    "enqueue-many-past-oversize",
    catches="PAYLOAD-SIZE-BOUND",
    bug="enqueue_many enqueues one payload at a time: the jobs before an oversize "
    "payload are written when it is refused",
    store=EnqueueManyOneByOneStore,
)
PAYLOAD_OPTION_IGNORED = MutantEngine(
    "payload-option-ignored",
    catches="PAYLOAD-SIZE-OPTION",
    bug="max_payload_bytes is accepted and never applied: a store opened with a lower "
    "bound takes payloads up to the contract's",
    store=IgnoresPayloadOptionStore,
)

# -- wakes on every path, isolation between stores (issue 23) ---------------------------
REDRIVE_UNANNOUNCED = MutantEngine(
    "redrive-unannounced",
    catches="WAKE-PROMPT-REDRIVE",
    bug="wakes carry their topic and redrive announces none: waiters in other processes "
    "find a redriven job at their 1 s re-poll",
    driver=RedriveUnannouncedDriver,
)
RESUME_UNANNOUNCED = MutantEngine(
    "resume-unannounced",
    catches="WAKE-PROMPT-RESUME",
    bug="wakes carry their topic and resume announces none: waiters in other processes "
    "find the resumed queue's jobs at their 1 s re-poll",
    driver=ResumeUnannouncedDriver,
)
RELEASE_UNANNOUNCED = MutantEngine(
    "release-unannounced",
    catches="WAKE-PROMPT-RELEASE",
    bug="wakes carry their topic and release announces none: waiters in other processes "
    "find a released job at their 1 s re-poll",
    driver=ReleaseUnannouncedDriver,
)
RETRY_ALL_UNANNOUNCED = MutantEngine(
    "retry-all-unannounced",
    catches="WAKE-PROMPT-RETRY-ALL-NOW",
    bug="wakes carry their topic and tx.retry_all's statement announces none: waiters in "
    "other processes find a job a worker's group retried at once at their 1 s re-poll",
    driver=RetryAllUnannouncedDriver,
)
TIMER_IGNORES_DEADLINES = MutantEngine(
    "timer-ignores-deadlines",
    catches="WAKE-PROMPT-LAPSED-CLAIM",
    bug="next_wake_at knows pending run_at only: a waiter finds a lapsed claim at its "
    "1 s re-poll, not at the claim's deadline",
    driver=TimerIgnoresDeadlinesDriver,
)
LOCKS_SHARED_BY_DIRECTORY = MutantEngine(
    "locks-shared-by-directory",
    catches="STORE-BESIDE-SHARES-NOTHING",
    bug="locks live in one table per directory: every store beside another takes and "
    "sees its locks",
    driver=LocksSharedByDirectoryDriver,
)
WAKES_SHARED_BY_DIRECTORY = MutantEngine(
    "wakes-shared-by-directory",
    catches="STORE-BESIDE-NO-CROSS-WAKES",
    bug="the watcher is keyed by the directory, not the file: commits to one store wake "
    "the waiters of every store beside it",
    driver=WakesSharedByDirectoryDriver,
)

# -- outages and time limits under contention (contract §8.4, §8.5) ---------------------
WAIT_PAST_TIMEOUT = MutantEngine(
    "wait-past-timeout",
    catches="CONTENTION-WAITS-BOUNDED",
    bug="every call waits for locks up to busy_timeout_s, whatever the caller's timeout: "
    "claim_wait behind a held write lock sits the holder out",
    driver=WaitPastTimeoutDriver,
)
RAW_LOCK_ERROR = MutantEngine(
    "raw-lock-error",
    catches="OUTAGE-CALLS-UNAVAILABLE",
    bug="a write that cannot get the database raises sqlite3.OperationalError, "
    "not EngineUnavailable",
    driver=RawLockErrorDriver,
)
NESTED_WRITE_RAW_ERROR = MutantEngine(
    "nested-write-raw-error",
    catches="TX-WRITE-BESIDE",
    bug="a write beside the thread's own open transaction is refused with a bare "
    "RuntimeError, not WriteWouldDeadlock",
    driver=NestedWriteRawErrorDriver,
)
NEVER_RECOVERS = MutantEngine(
    "never-recovers",
    catches="OUTAGE-RECOVERS",
    bug="once a write found the database unavailable, every later write fails too",
    driver=NeverRecoversDriver,
)

# -- cron schedules (contract 1.2 §5, the cron profile) -------------------------------
CRON_IN_UTC = MutantEngine(
    "cron-in-utc",
    catches="SCHED-CRON-IN-ZONE",
    bug="the schedule upsert never stores the zone, so after its first fire a schedule "
    "in Europe/Berlin fires on UTC's wall clock",
    driver=ZoneDroppingDriver,
)
DST_GAP_SKIPPED = MutantEngine(
    "dst-gap-skipped",
    catches="SCHED-CRON-DST",
    bug="boundaries whose local time the spec does not name are dropped: a local time "
    "that does not exist (02:30 on spring-forward day) never fires",
    store=GapSkippingStore,
)
CATCH_UP_IGNORED = MutantEngine(
    "catch-up-ignored",
    catches="SCHED-CATCH-UP-POLICY",
    bug="the schedule upsert never stores the catch-up policy, so every schedule "
    "replays every boundary it missed",
    driver=PolicyDroppingDriver,
)

# -- declared schedules (contract 1.2 §5.11, the periodic profile) ---------------------
DECLARATION_RESETS_BOUNDARY = MutantEngine(
    "declaration-resets-boundary",
    catches="PERIODIC-UPSERT-ONCE",
    bug="every declaration restarts the schedule's boundary, so each worker of a fleet "
    "that starts pushes the next fire one interval further away",
    driver=ResettingDeclarationDriver,
)
LAPSED_DECLARATION_FIRES = MutantEngine(
    "lapsed-declaration-fires",
    catches="PERIODIC-LEASE-LAPSES",
    bug="a tick ignores the declaration lease: a schedule nobody declares any more fires forever",
    driver=LapseIgnoringDriver,
)

# -- unique jobs (contract 1.2 §15) ---------------------------------------------------
CHECK_THEN_INSERT_UNIQUE = MutantEngine(
    "check-then-insert-unique",
    catches="UNIQUE-CONCURRENT",
    bug="a unique enqueue reads whether the key is held, then inserts past the unique "
    "index: enqueuers racing one key each make a job",
    driver=CheckThenInsertUniqueDriver,
)
UNIQUE_FORGETS_PROCESSING = MutantEngine(
    "unique-forgets-processing",
    catches="UNIQUE-STATES",
    bug="a claim gives the job's key up, as if only pending jobs held keys: a duplicate "
    "is enqueued while the first job runs",
    driver=UniqueForgetsProcessingDriver,
)
UNIQUE_PERIOD_NEVER_ENDS = MutantEngine(
    "unique-period-never-ends",
    catches="UNIQUE-PERIOD",
    bug="a unique job's period is dropped: its key stays held as long as it waits",
    driver=PeriodNeverEndsDriver,
)

# -- queue limits (contract 1.2 §16) -----------------------------------------------
LIMIT_PER_PROCESS = MutantEngine(
    "limit-per-process",
    catches="LIMITS-ACROSS-PROCESSES",
    bug="a claim counts only the claims of its own process against the limit: every "
    "process takes the whole limit for itself",
    driver=LimitPerProcessDriver,
)
LAPSED_COUNTED_FOREVER = MutantEngine(
    "lapsed-counted-forever",
    catches="LIMITS-SLOTS-FREED",
    bug="a claim counts every claimed row against the limit, lapsed ones too: a lapsed "
    "claim never frees its slot",
    driver=LapsedCountedForeverDriver,
)
LIMIT_READ_ONCE = MutantEngine(
    "limit-read-once",
    catches="LIMITS-CHANGED-AT-RUNTIME",
    bug="a store reads the queues' limits at its first claim and never again: a limit "
    "set, changed or cleared later elsewhere is not honoured",
    driver=LimitReadOnceDriver,
)

RATE_WINDOW_SHORT = MutantEngine(
    "rate-window-off-by-one",
    catches="LIMITS-RATE-WINDOW",
    bug="a rate limit's window is one second short: a claim started at now - per + 1 "
    "no longer counts, so rate + 1 claims start within per seconds",
    driver=RateWindowShortDriver,
)
SLOT_FREED_UNANNOUNCED = MutantEngine(
    "slot-freed-unannounced",
    catches="LIMITS-WAKE-SLOT-FREED",
    bug="wakes carry their topic and an ack, fail or cancel of a limited queue announces "
    "nothing, even while a claim is held back by the limit: a waiter in another process "
    "takes the freed slot at its timer or re-poll only",
    driver=SlotFreedUnannouncedDriver,
)

# -- per-key limits and fairness (contract 1.2 §16.9, §16.10) ----------------------
PER_KEY_LIMIT_IGNORED = MutantEngine(
    "per-key-limit-ignored",
    catches="KEYLIMITS-BOUND",
    bug="a claim of a queue with a per-key limit counts only the queue's own limits: one "
    "key's jobs can all be processing at once",
    driver=PerKeyLimitIgnoredDriver,
)
UNFAIR_KEY_ORDER = MutantEngine(
    "unfair-key-order",
    catches="KEYLIMITS-FAIRNESS",
    bug="a claim under a per-key limit takes jobs in claim order whatever their key: a key "
    "enqueued first is served until its backlog or its limit runs out",
    driver=UnfairKeyOrderDriver,
)
PER_KEY_RATE_PER_QUEUE = MutantEngine(
    "per-key-rate-per-queue",
    catches="KEYLIMITS-RATE",
    bug="a per-key rate counts the starts of every key of the queue against each key: "
    "one busy key holds every other key back",
    driver=PerKeyRateCountedPerQueueDriver,
)

# -- job metadata (contract 1.2 §20) -------------------------------------------------
METADATA_DROPPED_ON_REDRIVE = MutantEngine(
    "metadata-dropped-on-redrive",
    catches="METADATA-KEPT",
    bug="a redriven copy of a dead job has no metadata: its trace context and the rest "
    "are lost on the way back to pending",
    driver=MetadataDroppedOnRedriveDriver,
)

# -- acks that need not wait for the disk (contract 1.2 §12.11) ----------------------
ASYNC_ACK_IGNORES_CLAIM = MutantEngine(
    "async-ack-ignores-claim",
    catches="ASYNC-ACKS-AS-ACKS",
    bug="an ack asked not to wait for the disk deletes its job by id alone: a lapsed "
    "claim's ack ends the job another worker now runs",
    driver=AsyncAckIgnoresClaimDriver,
)
ASYNC_ACK_IGNORES_CLAIM.capabilities = dataclasses.replace(
    ASYNC_ACK_IGNORES_CLAIM.capabilities, async_acks=True
)

# -- the async surface (contract §13): the async-native door -------------------------
LISTENER_BLOCKS_THE_LOOP = LoopListeningEngine(
    "listener-blocks-the-loop",
    catches="ASYNC-LOOP-NEVER-BLOCKED",
    bug="the async-native door's listener, a task on the event loop, waits for the next "
    "commit with a blocking call: while a claim_wait waits the loop stands still",
)

# -- finished jobs (contract 1.2 §17) ------------------------------------------------
RESULT_TRUNCATED = MutantEngine(
    "result-truncated",
    catches="RESULTS-WHOLE",
    bug="a completed job's result keeps only its first 4000 characters of JSON text, "
    "so a large result reads back as something else",
    driver=TruncatedResultDriver,
)
COMPLETED_NEVER_SWEPT = MutantEngine(
    "completed-never-swept",
    catches="RESULTS-RETENTION",
    bug="sweep_expired never purges completed jobs: they outlive their retention",
    driver=CompletedNeverSweptDriver,
)
ACK_BATCH_DELETES_KEPT = MutantEngine(
    "ack-batch-deletes-kept",
    catches="RESULTS-COMPLETED-VISIBLE",
    bug="ack_batch deletes every job it acks: a retaining queue's jobs acked in a batch "
    "are gone instead of completed",
    driver=AckBatchDeletesKeptDriver,
)
TX_ACK_OUTSIDE = MutantEngine(
    "tx-ack-outside-the-transaction",
    catches="TX-ACK-ROLLBACK",
    bug="tx.ack acks the job on its own once the transaction ends, committed or not: "
    "a rolled-back transaction's job is acked anyway, its effect undone",
    store=TxAckOutsideStore,
)
TX_ACK_COMMITS_EARLY = MutantEngine(
    "tx-ack-commits-early",
    catches="TX-ACK-CRASH-ATOMIC",
    bug="the ack statement commits the transaction it runs in and begins another: a "
    "tx.ack commits it and the caller's writes before it early, so a crash before the "
    "caller's commit keeps the ack and loses what followed it",
    driver=AckCommitsEarlyDriver,
)

STALE_ACK_ABORTS_TRANSACTION = MutantEngine(
    "stale-ack-aborts-transaction",
    catches="TX-ACK-GROUP",
    bug="a tx.ack refused for a stale claim rolls back the transaction it ran in and "
    "begins another: the acks made before it in the transaction are lost, so a worker's "
    "grouped acks lose every job acked ahead of one lapsed claim",
    driver=StaleAckAbortsDriver,
)

ACK_ALL_GUARDS_FIRST_ONLY = MutantEngine(
    "ack-all-guards-first-only",
    catches="TX-ACK-ALL-STALE",
    bug="tx.ack_all's one statement guards only its first claim and acks the others by "
    "id: a lapsed or superseded claim in a worker's group ends a job that runs again "
    "elsewhere",
    driver=AckAllGuardsFirstOnlyDriver,
)
ACK_ALL_COMMITS_EACH = MutantEngine(
    "ack-all-commits-each",
    catches="TX-ACK-ALL-CRASH-ATOMIC",
    bug="tx.ack_all writes each claim's ack in a transaction of its own, committed at once: "
    "a crash before the caller's commit keeps the acks (and the business writes before "
    "them) and loses what the transaction wrote after",
    driver=AckAllCommitsEachDriver,
)

RETRY_ALL_IGNORES_DEADLINE = MutantEngine(
    "retry-all-ignores-deadline",
    catches="TX-RETRY-ALL-STALE",
    bug="tx.retry_all's one statement guards each claim by its attempt but not its "
    "deadline: a claim that lapsed while its retry waited in a worker's group is put "
    "back to pending anyway",
    driver=RetryAllIgnoresDeadlineDriver,
)
RETRY_ALL_COMMITS_EACH = MutantEngine(
    "retry-all-commits-each",
    catches="TX-RETRY-ALL-CRASH-ATOMIC",
    bug="tx.retry_all writes each claim's retry in a transaction of its own, committed "
    "at once: a crash before the caller's commit keeps the retries (and the business "
    "writes before them) and loses what the transaction wrote after",
    driver=RetryAllCommitsEachDriver,
)

RETRY_ALL_WRITES_AS_IT_CHECKS = MutantEngine(
    "retry-all-writes-as-it-checks",
    catches="TX-RETRY-ALL-ARGUMENTS",
    bug="tx.retry_all and tx.fail_all are a loop of tx.retry and tx.fail: a bad delay or "
    "error in the middle is refused after the claims before it were written, so a "
    "caller that catches the refusal and commits keeps half the call",
    store=RetryAllWritesAsItChecksStore,
)
FAIL_ALL_IGNORES_DEADLINE = MutantEngine(
    "fail-all-ignores-deadline",
    catches="TX-RETRY-ALL-STALE",
    bug="tx.fail_all's one statement guards each claim by its attempt but not its "
    "deadline: a claim that lapsed while its fail waited in a worker's group is "
    "dead-lettered anyway, though another worker may be about to run it",
    driver=FailAllIgnoresDeadlineDriver,
)
ACK_ALL_COUNTS_JOBS = MutantEngine(
    "ack-all-counts-jobs",
    catches="TX-RETRY-ALL-STALE",
    bug="tx.ack_all hands every claim to the one statement and counts a handle acked "
    "when its job's id comes back: named beside its job's newer claim, a stale claim is "
    "reported acked, though the statement acked the newer one",
    store=AckAllCountsJobsStore,
)
TX_RETRY_IGNORES_CLAIM = MutantEngine(
    "tx-retry-ignores-claim",
    catches="TX-RETRY-STALE",
    bug="tx.retry is guarded by the job's claim as the transaction reads it, not by the "
    "handle's: a superseded claim's retry puts back the job another worker now runs",
    store=TxRetryIgnoresClaimStore,
)
TX_ROLLBACK_KEEPS_CLAIM_FINISHED = MutantEngine(
    "tx-rollback-keeps-claim-finished",
    catches="QUEUE-MODEL-AGREEMENT",
    bug="the store remembers the claims its transactions acked, retried or failed, rolled-"
    "back ones too: after a rollback the claim is still valid, yet a later transaction's "
    "outcome of it is refused with StaleHandle (only the stateful model's transactions "
    "meet a second transaction's outcome of a rolled-back claim)",
    store=TxFinishedClaimsCachedStore,
)

# -- the worker registry (contract 1.2 §19) -------------------------------------------
LAPSED_WORKER_LISTED = MutantEngine(
    "lapsed-worker-listed",
    catches="WORKERS-LEASE-LAPSES",
    bug="workers() ignores the lease: a worker that died or was cut off stays listed, "
    "its jobs shown as held by a process that is gone",
    driver=LapsedWorkerListedDriver,
)
DEREGISTER_KEEPS_WORKER = MutantEngine(
    "deregister-keeps-worker",
    catches="WORKERS-DEREGISTER",
    bug="deregister_worker answers True and removes nothing: a stopped worker stays "
    "listed until its lease lapses",
    driver=DeregisterKeepsWorkerDriver,
)
THROUGHPUT_LAST_WRITE_WINS = MutantEngine(
    "throughput-last-write-wins",
    catches="WORKERS-THROUGHPUT",
    bug="a heartbeat's finished count replaces its minute's count instead of adding to it: "
    "a fleet's throughput shows one worker's share",
    driver=ThroughputLastWriteWinsDriver,
)

# -- job dependencies (contract 1.2 §18) -----------------------------------------------------
RELEASE_ON_FIRST_ACK = MutantEngine(
    "release-on-first-ack",
    catches="DEPS-WAITING",
    bug="the first dependency's ack releases its dependents, though others still run",
    driver=ReleaseOnFirstAckDriver,
)
RELEASE_IN_OWN_COMMIT = MutantEngine(
    "release-in-own-commit",
    catches="DEPS-RELEASE-IN-ACK-COMMIT",
    bug="the dependents of an acked job are released by a write of their own after the "
    "ack's commit: waiting when the ack returns, and released though a rolled-back "
    "tx.ack undid the ack",
    driver=ReleaseInOwnCommitDriver,
)
DEAD_DEPENDENCY_LEAVES_WAITING = MutantEngine(
    "dead-dependency-leaves-waiting",
    catches="DEPS-DEAD-CASCADE",
    bug="a dependency moved to dead or cancelled leaves its dependents waiting for ever",
    driver=DeadDependencyLeavesWaitingDriver,
)
FAN_IN_AS_DEPENDENCY = MutantEngine(
    "fan-in-as-dependency",
    catches="DEPS-FAN-IN",
    bug="after_finished is stored as after: a failed member dead-letters the fan-in "
    "callback instead of counting as finished",
    driver=FanInAsDependencyDriver,
)
CLAIM_BEFORE_BURY = MutantEngine(
    "claim-before-bury",
    catches="DEPS-FAN-IN",
    bug="a claim chooses its rows before it moves the queue's exhausted claims to dead: "
    "the fan-in callback that move made pending is left for a later claim",
    driver=ClaimBeforeBuryDriver,
)
EDGES_ONE_WAY = MutantEngine(
    "edges-one-way",
    catches="DEPS-EDGES",
    bug="dependencies(id) reads the edges by the waiting job only: a job never shows "
    "the waiting jobs that wait for it",
    driver=EdgesOneWayDriver,
)
REDRIVE_LEAVES_DEPENDENTS_DEAD = MutantEngine(
    "redrive-leaves-dependents-dead",
    catches="DEPS-REDRIVE-REVIVES",
    bug="a redrive of a dead dependency makes its new job only: the jobs that died "
    "waiting for it stay dead, so a graph redriven from its root never runs again",
    driver=RedriveLeavesDependentsDeadDriver,
)
STALE_REVIVAL = MutantEngine(
    "stale-revival",
    catches="DEPS-REDRIVE-RACE",
    bug="a redrive decides which dead dependents come back from the kept edges it read "
    "when it started: two redrives at once of a dependent's two dead dependencies each "
    "see the other's still dead, and the dependent stays dead",
    driver=StaleRevivalDriver,
)

# -- what a dialect or a hang hides (issue 23) -------------------------------------------
ENDLESS_PAGES = MutantEngine(
    "endless-pages",
    catches="KIT-FAILS-NEVER-HANGS",
    bug="jobs() ignores its after_id cursor: every page repeats the first, so a reader "
    "waiting for the empty last page waits forever",
    driver=CursorIgnoredDriver,
)
WAIT_IGNORES_TIMEOUT = MutantEngine(
    "wait-ignores-timeout",
    catches="KIT-FAILS-NEVER-HANGS",
    bug="claim_wait drops its timeout: on an empty queue without a stop token it never "
    "returns (only the kit's time budget ends the test)",
    store=TimeoutIgnoredStore,
    caught_by=BUDGET,
)
COLLATED_NAMES = MutantEngine(
    "collated-names",
    catches="NAMES-BYTE-EXACT",
    bug="lock and stream consumer names compare case- and pad-insensitively, as under a "
    "MySQL _ci PAD SPACE collation: 'Leader' and 'leader ' are one lock",
    driver=CollatedNamesDriver,
)
CHANGED_ROWS = MutantEngine(
    "changed-rows",
    catches="OUTCOMES-MATCHED-NOT-CHANGED",
    bug="heartbeat, renew and re-acquire answer with the rows they changed, not matched: "
    "writing the deadline already stored (twice in one second) answers False",
    driver=ChangedRowsDriver,
)

MUTANTS: dict[str, MutantEngine] = {
    mutant.name.removeprefix("selftest-"): mutant
    for mutant in (
        DOUBLE_CLAIM,
        ACK_IGNORES_ATTEMPT,
        LOST_ACK,
        SWEEP_MISSES_PROCESSING,
        NO_JITTER,
        UNCAPPED_BACKOFF,
        LATE_HEARTBEAT,
        REUSED_IDS,
        ROLLBACK_KEEPS_JOBS,
        SCHEDULE_DOUBLE_FIRE,
        SCHEDULE_NO_CAP,
        TRUNCATED_ERROR,
        CHUNKED_ENQUEUE,
        CHUNKED_ACK_BATCH,
        NO_TIMER,
        READ_THEN_WRITE_LOCK,
        SPLIT_FIRE,
        TWO_STEP_BURY,
        STATS_LAPSED_AS_PROCESSING,
        REDRIVE_KEEPS_DEAD_ROW,
        TWO_STEP_REDRIVE,
        READ_THEN_WRITE_REDRIVE,
        PAUSE_IN_PROCESS,
        BATCH_CLAIM_IGNORES_PAUSE,
        PURGE_IGNORES_QUEUE,
        OFFSET_PAGES,
        NEWEST_PAGES_ASCENDING,
        BURY_FORGETS_ERROR,
        WAIT_ANY_FIRST_QUEUE,
        WAIT_ANY_FIRST_TOPIC,
        WATCHER_OWN_COMMITS_ONLY,
        RELEASE_COUNTS_ATTEMPT,
        NUL_RESTORED,
        ACK_AND_CLAIM_AFTER_ACK_ONLY,
        # snooze
        SNOOZE_COUNTS_ATTEMPT,
        SNOOZE_UNCOUNTED,
        # payload size bound (contract 1.2)
        ENQUEUE_MANY_PAST_OVERSIZE,
        PAYLOAD_OPTION_IGNORED,
        # wakes on every path, isolation between stores
        REDRIVE_UNANNOUNCED,
        RESUME_UNANNOUNCED,
        RELEASE_UNANNOUNCED,
        TIMER_IGNORES_DEADLINES,
        LOCKS_SHARED_BY_DIRECTORY,
        WAKES_SHARED_BY_DIRECTORY,
        # outages and time limits under contention
        WAIT_PAST_TIMEOUT,
        RAW_LOCK_ERROR,
        NEVER_RECOVERS,
        NESTED_WRITE_RAW_ERROR,
        # cron schedules (contract 1.2)
        CRON_IN_UTC,
        DST_GAP_SKIPPED,
        CATCH_UP_IGNORED,
        # declared schedules (contract 1.2)
        DECLARATION_RESETS_BOUNDARY,
        LAPSED_DECLARATION_FIRES,
        # unique jobs (contract 1.2)
        CHECK_THEN_INSERT_UNIQUE,
        UNIQUE_FORGETS_PROCESSING,
        UNIQUE_PERIOD_NEVER_ENDS,
        # queue limits (contract 1.2)
        LIMIT_PER_PROCESS,
        LAPSED_COUNTED_FOREVER,
        LIMIT_READ_ONCE,
        RATE_WINDOW_SHORT,
        SLOT_FREED_UNANNOUNCED,
        # per-key limits and fairness (contract 1.2)
        PER_KEY_LIMIT_IGNORED,
        UNFAIR_KEY_ORDER,
        PER_KEY_RATE_PER_QUEUE,
        # finished jobs (contract 1.2)
        RESULT_TRUNCATED,
        COMPLETED_NEVER_SWEPT,
        ACK_BATCH_DELETES_KEPT,
        TX_ACK_OUTSIDE,
        TX_ACK_COMMITS_EARLY,
        STALE_ACK_ABORTS_TRANSACTION,
        ACK_ALL_GUARDS_FIRST_ONLY,
        ACK_ALL_COMMITS_EACH,
        RETRY_ALL_IGNORES_DEADLINE,
        RETRY_ALL_COMMITS_EACH,
        RETRY_ALL_WRITES_AS_IT_CHECKS,
        RETRY_ALL_UNANNOUNCED,
        ACK_ALL_COUNTS_JOBS,
        FAIL_ALL_IGNORES_DEADLINE,
        TX_RETRY_IGNORES_CLAIM,
        TX_ROLLBACK_KEEPS_CLAIM_FINISHED,
        # the worker registry (contract 1.2)
        LAPSED_WORKER_LISTED,
        DEREGISTER_KEEPS_WORKER,
        THROUGHPUT_LAST_WRITE_WINS,
        # job dependencies (contract 1.2)
        RELEASE_ON_FIRST_ACK,
        RELEASE_IN_OWN_COMMIT,
        DEAD_DEPENDENCY_LEAVES_WAITING,
        FAN_IN_AS_DEPENDENCY,
        CLAIM_BEFORE_BURY,
        EDGES_ONE_WAY,
        REDRIVE_LEAVES_DEPENDENTS_DEAD,
        STALE_REVIVAL,
        # job metadata (contract 1.2)
        METADATA_DROPPED_ON_REDRIVE,
        # acks that need not wait for the disk (contract 1.2)
        ASYNC_ACK_IGNORES_CLAIM,
        # the async surface (contract §13)
        LISTENER_BLOCKS_THE_LOOP,
        # what a dialect or a hang hides (issue 23)
        ENDLESS_PAGES,
        WAIT_IGNORES_TIMEOUT,
        COLLATED_NAMES,
        CHANGED_ROWS,
    )
}
"""Every mutant by its entry-point name in ``SELFTEST_GROUP``."""

__all__ = ["BUDGET", "MUTANTS", "SELFTEST_GROUP", "MutantEngine"]
