"""Broken queue cores: each class below gets exactly one thing wrong.

They subclass the SQLite reference driver and replace one statement (or wrap
the store's random source); everything else is the real engine. Their SQL
names the reference engine's fixed tables from ``alkstore_sqlite.migrations``.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from alkstore import BACKOFF_CAP_S
from alkstore.core import CoreStore
from alkstore.driver import ERROR_EXPIRED, Driver
from alkstore.options import JobStamps
from alkstore.params import Claim, ClaimRef, Heartbeat, Reschedule, Sweep
from alkstore.rows import JOB_COLUMNS, job_from_row
from alkstore.values import Job
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import JOBS

_COLUMNS = ", ".join(JOB_COLUMNS)

# -- a claim that can hand one job to two workers -----------------------------------

CLAIM_CANDIDATES = f"""
SELECT id FROM {JOBS}
 WHERE queue = :queue
   AND ((state = 'pending' AND run_at <= :now) OR (state = 'processing' AND deadline <= :now))
   AND (expires_at IS NULL OR expires_at > :now)
   AND attempts < max_attempts
 ORDER BY priority DESC, run_at, id
 LIMIT :limit
"""

# The bug: rows are taken by id alone, never re-checked as still claimable.
TAKE_BY_ID = f"""
UPDATE {JOBS}
   SET state = 'processing', attempts = attempts + 1, claimed_at = :now,
       worker_id = :worker_id, deadline = :now + visibility_timeout_s
 WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING {_COLUMNS}
"""

PREFETCH = 8
"""Candidates a claimer reads at once and hands out over its next claims."""


class PrefetchingClaimDriver(SqliteDriver):
    """Prefetches claim candidates per thread and hands them out later by id
    without re-checking them: the classic "SELECT, later UPDATE ... WHERE id = ?"
    race. Claimers working off their own stale lists take jobs another claimer
    already holds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._prefetched = threading.local()

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        queue, worker_id, now, limit = params.queue, params.worker_id, params.now, params.limit
        lists: dict[str, list[int]] = self._prefetched.__dict__.setdefault("by_queue", {})
        candidates = lists.get(queue) or [
            row[0]
            for row in c.execute(
                CLAIM_CANDIDATES, {"queue": queue, "now": now, "limit": max(limit, PREFETCH)}
            )
        ]
        taken, lists[queue] = candidates[:limit], candidates[limit:]
        if not taken:
            return []
        named = {"ids": json.dumps(taken), "now": now, "worker_id": worker_id}
        return [job_from_row(row) for row in c.execute(TAKE_BY_ID, named).fetchall()]


# -- an ack that ignores the claim identity ------------------------------------------

# The bug: no "attempts = :attempt", so an earlier claim's handle acks a later claim.
ACK_ANY_CLAIM = f"""
DELETE FROM {JOBS} WHERE id = :id AND state = 'processing' AND deadline > :now
"""


class AckIgnoresAttemptDriver(SqliteDriver):
    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        job_id, now = params.job_id, params.now
        return c.execute(ACK_ANY_CLAIM, {"id": job_id, "now": now}).rowcount == 1


# -- an ack that is lost --------------------------------------------------------------

VALID_CLAIM = f"""
SELECT 1 FROM {JOBS}
 WHERE id = :id AND state = 'processing' AND attempts = :attempt AND deadline > :now
"""


class LostAckDriver(SqliteDriver):
    """Answers an ack of a valid claim with True, and deletes nothing."""

    def ack(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        job_id, attempt, now = params.job_id, params.attempt, params.now
        named = {"id": job_id, "attempt": attempt, "now": now}
        return c.execute(VALID_CLAIM, named).fetchone() is not None


# -- a sweep that misses processing rows ---------------------------------------------

# The bug: "AND state = 'pending'": an expired row someone holds stays a zombie.
BURY_EXPIRED_PENDING = f"""
UPDATE {JOBS}
   SET state = 'dead', last_error = :error, died_at = :now
 WHERE queue = :queue AND state = 'pending' AND expires_at <= :now
"""


class SweepMissesProcessingDriver(SqliteDriver):
    def bury_expired(self, c: sqlite3.Connection, params: Sweep) -> int:
        queue, now = params.queue, params.now
        named = {"queue": queue, "now": now, "error": ERROR_EXPIRED}
        return c.execute(BURY_EXPIRED_PENDING, named).rowcount


# -- a late heartbeat that steals the job back ---------------------------------------

# The bug: no "deadline > :now": a lapsed claim extends itself again.
HEARTBEAT_EVEN_LAPSED = f"""
UPDATE {JOBS} SET deadline = :deadline
 WHERE id = :id AND state = 'processing' AND attempts = :attempt
"""


class LateHeartbeatDriver(SqliteDriver):
    def heartbeat(self, c: sqlite3.Connection, params: Heartbeat) -> bool:
        job_id, attempt, deadline = params.job_id, params.attempt, params.deadline
        named = {"id": job_id, "attempt": attempt, "deadline": deadline}
        return c.execute(HEARTBEAT_EVEN_LAPSED, named).rowcount == 1


# -- ids reused -------------------------------------------------------------------------

# The bug: the id counter forgets ids above the highest live row -- what a plain
# rowid (no AUTOINCREMENT) does: the newest job's id comes back once it is gone.
FORGET_USED_IDS = f"""
UPDATE sqlite_sequence SET seq = (SELECT coalesce(max(id), 0) FROM {JOBS}) WHERE name = :table
"""


class ReusedIdsDriver(SqliteDriver):
    def insert_jobs(
        self, c: sqlite3.Connection, stamps: JobStamps, payloads: Sequence[str]
    ) -> list[int]:
        c.execute(FORGET_USED_IDS, {"table": JOBS})
        return super().insert_jobs(c, stamps, payloads)


# -- a rollback that leaves a job behind ------------------------------------------------


class EscapingEnqueueDriver(SqliteDriver):
    """Jobs enqueued through ``store.transaction()`` are written again after a
    rollback, as if the engine had enqueued them on a connection of its own
    outside the caller's transaction."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open = threading.local()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        enqueued: list[tuple[JobStamps, Sequence[str]]] = []
        try:
            with super().transaction() as c:
                self._open.tx, self._open.enqueued = c, enqueued
                yield c
        except BaseException:
            self._open.tx = None
            for stamps, payloads in enqueued:
                self.write(
                    partial(SqliteDriver.insert_jobs, self, stamps=stamps, payloads=payloads)
                )
            raise
        finally:
            self._open.tx = None

    def insert_jobs(
        self, c: sqlite3.Connection, stamps: JobStamps, payloads: Sequence[str]
    ) -> list[int]:
        ids = super().insert_jobs(c, stamps, payloads)
        if getattr(self._open, "tx", None) is c:
            self._open.enqueued.append((stamps, payloads))
        return ids


# -- backoff without jitter, backoff past the cap ----------------------------------------


class TopOfTheRange(random.Random):
    """A random source whose every uniform draw is the top of its range."""

    def uniform(self, a: float, b: float) -> float:
        return b


class NoJitterStore(CoreStore):
    """The reference core with a random source that never varies: every retry of
    one attempt and base waits exactly the ceiling of the curve."""

    def __init__(self, driver: Driver[Any], **kwargs: Any) -> None:
        super().__init__(driver, **kwargs)
        self._context.rng = TopOfTheRange()  # the core's one random source (backoff jitter)


STAMPED_BASE = f"SELECT backoff_base_s FROM {JOBS} WHERE id = :id"

_MAX_EXPONENT = 40


class UncappedBackoffDriver(SqliteDriver):
    """Stretches every retry of a job whose curve passes 3600 s by the factor the
    cap removed: the delays are the curve without its cap."""

    def reschedule(self, c: sqlite3.Connection, params: Reschedule) -> bool:
        job_id = params.job_id
        attempt = params.attempt
        now = params.now
        run_at = params.run_at
        row = c.execute(STAMPED_BASE, {"id": job_id}).fetchone()
        if row is not None:
            uncapped = int(row[0]) * 2 ** min(attempt - 1, _MAX_EXPONENT)
            if uncapped > BACKOFF_CAP_S:
                run_at = now + (run_at - now) * uncapped // BACKOFF_CAP_S
        return super().reschedule(c, params)
