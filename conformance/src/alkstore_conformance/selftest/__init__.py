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

from .blind_spots import (
    ChunkedEnqueueDriver,
    NoTimerDriver,
    ReadThenWriteLockDriver,
    SplitFireDriver,
    TruncatingErrorDriver,
    TwoStepBuryDriver,
)
from .engine import MutantEngine
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
from .scheduler import AdvanceWithoutCompareDriver, NeverSkipsDriver

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
        NO_TIMER,
        READ_THEN_WRITE_LOCK,
        SPLIT_FIRE,
        TWO_STEP_BURY,
    )
}
"""Every mutant by its entry-point name in ``SELFTEST_GROUP``."""

__all__ = ["MUTANTS", "SELFTEST_GROUP", "MutantEngine"]
