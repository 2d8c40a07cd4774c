"""A broken ``release``: the claim given back is still counted as an attempt.

What ``alkstore.aio`` does for a cancelled claim is ``JobHandle.release``; an
engine that keeps the attempt would make every cancelled ``await claim_wait``
cost the job one attempt of its budget, until a job nobody ever ran goes dead.
"""

from __future__ import annotations

import sqlite3

from alkstore.params import ClaimRef
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import JOBS

# The bug: the claim's attempt stays spent (the reference refunds it: max_attempts + 1).
RELEASE_KEEPING_ATTEMPT = f"""
UPDATE {JOBS}
   SET state = 'pending', worker_id = NULL, claimed_at = NULL, deadline = NULL
 WHERE id = :id AND state = 'processing' AND attempts = :attempt AND deadline > :now
"""


class ReleaseCountsAttemptDriver(SqliteDriver):
    """Gives a released claim back pending, but with its attempt still counted."""

    def release_claim(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        job_id, attempt, now = params.job_id, params.attempt, params.now
        named = {"id": job_id, "attempt": attempt, "now": now}
        return c.execute(RELEASE_KEEPING_ATTEMPT, named).rowcount == 1
