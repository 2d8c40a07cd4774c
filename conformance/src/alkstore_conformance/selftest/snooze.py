"""Broken snoozes (contract §14): one that spends the attempt, one that never counts.

A snooze that spends an attempt is a retry by another name: the rate-limited job it
was meant for dies "max attempts exceeded" without ever failing. A snooze that is
never counted leaves ``MAX_SNOOZES`` nothing to count, so a job snoozes forever.
"""

from __future__ import annotations

import sqlite3

from alkstore.params import Snooze
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.migrations import JOBS

_VALID_CLAIM = "id = :job_id AND state = 'processing' AND attempts = :attempt AND deadline > :now"

# The bug: the claim's attempt stays spent (the reference refunds it: max_attempts + 1).
SNOOZE_KEEPING_ATTEMPT = f"""
UPDATE {JOBS}
   SET state = 'pending', run_at = :run_at, snoozes = snoozes + 1,
       worker_id = NULL, claimed_at = NULL, deadline = NULL
 WHERE {_VALID_CLAIM}
"""

# The bug: the snooze is not counted (the reference adds one to snoozes).
SNOOZE_UNCOUNTED = f"""
UPDATE {JOBS}
   SET state = 'pending', run_at = :run_at, max_attempts = max_attempts + 1,
       worker_id = NULL, claimed_at = NULL, deadline = NULL
 WHERE {_VALID_CLAIM}
"""


def _named(params: Snooze) -> dict[str, int]:
    return {
        "job_id": params.job_id,
        "attempt": params.attempt,
        "now": params.now,
        "run_at": params.run_at,
    }


class SnoozeCountsAttemptDriver(SqliteDriver):
    """Snoozes the claim, but with its attempt still counted against the budget."""

    def snooze(self, c: sqlite3.Connection, params: Snooze) -> bool:
        return c.execute(SNOOZE_KEEPING_ATTEMPT, _named(params)).rowcount == 1


class SnoozeUncountedDriver(SqliteDriver):
    """Snoozes the claim without counting the snooze, so the bound never comes."""

    def snooze(self, c: sqlite3.Connection, params: Snooze) -> bool:
        return c.execute(SNOOZE_UNCOUNTED, _named(params)).rowcount == 1
