"""Broken queue limits (contract 1.2 §16): a limit per process, lapsed claims counted
forever, a limit read once and never again, a rate window off by one second.

Each keeps the stored limit where every process sees it, but out of the reference
claim's sight (under a shadow name in the limits table), and claims no more than
its own reckoning of the free slots allows:

* counted per process: only the claims this store made count, so every process
  takes the whole limit for itself;
* lapsed claims counted: a processing row holds its slot past its deadline, so a
  lapsed claim never frees it;
* read once: the limits are read at the first claim and never again, so a limit
  set, changed or cleared later (through another store) is never seen;
* a rate window one second short: a start leaves the window a second early, so
  one claim more than the rate starts within its window.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import replace
from typing import Any

from alkstore.options import Limits
from alkstore.params import Claim, SetLimits
from alkstore.values import Job
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite.handle import begin_transaction
from alkstore_sqlite.migrations import CLAIM_STARTS, JOBS

SHADOW = "\x00selftest-limit:"
"""Where the mutants keep a queue's limit: no queue name starts with a NUL, so the
reference claim never sees it."""

LIVE_OF_WORKERS = f"""
SELECT count(*) FROM {JOBS}
 WHERE queue = ? AND deadline > ? AND worker_id IN (SELECT value FROM json_each(?))
"""
PROCESSING_EVER = f"SELECT count(*) FROM {JOBS} WHERE queue = ? AND deadline IS NOT NULL"
LIVE = f"SELECT count(*) FROM {JOBS} WHERE queue = ? AND deadline > ?"


class _ShadowLimitsDriver(SqliteDriver):
    """Stores limits under ``SHADOW`` names; claims up to ``_free`` slots."""

    def set_limits(self, c: sqlite3.Connection, params: SetLimits) -> bool:
        return bool(super().set_limits(c, replace(params, queue=SHADOW + params.queue)))

    def queue_limits(self, c: sqlite3.Connection, queue: str | None) -> dict[str, Limits]:
        stored = super().queue_limits(c, None if queue is None else SHADOW + queue)
        return {name.removeprefix(SHADOW): limits for name, limits in stored.items()}

    def _limit(self, c: sqlite3.Connection, queue: str) -> int | None:
        limits = self.queue_limits(c, queue).get(queue)
        return None if limits is None else limits.concurrency

    def _free(self, c: sqlite3.Connection, params: Claim, concurrency: int) -> int:
        (live,) = c.execute(LIVE, (params.queue, params.now)).fetchone()
        return concurrency - int(live)

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        concurrency = self._limit(c, params.queue)
        if concurrency is None:
            return super().claim(c, params)
        free = self._free(c, params, concurrency)
        if free <= 0:
            return []
        fewer = Claim(params.queue, params.worker_id, params.now, min(free, params.limit))
        return super().claim(c, fewer)


class LimitPerProcessDriver(_ShadowLimitsDriver):
    """Counts only the live claims of the workers this store claimed for: every
    process (every store) allows the whole limit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._workers: set[str] = set()
        self._workers_lock = threading.Lock()

    def _free(self, c: sqlite3.Connection, params: Claim, concurrency: int) -> int:
        with self._workers_lock:
            self._workers.add(params.worker_id)
            workers = json.dumps(sorted(self._workers))
        (live,) = c.execute(LIVE_OF_WORKERS, (params.queue, params.now, workers)).fetchone()
        return concurrency - int(live)


class LapsedCountedForeverDriver(_ShadowLimitsDriver):
    """Counts every claimed row, lapsed or not: a lapsed claim never frees its slot."""

    def _free(self, c: sqlite3.Connection, params: Claim, concurrency: int) -> int:
        (claimed,) = c.execute(PROCESSING_EVER, (params.queue,)).fetchone()
        return concurrency - int(claimed)


class LimitReadOnceDriver(_ShadowLimitsDriver):
    """Reads every queue's limit at its first claim and keeps it: a limit set,
    changed or cleared afterwards is never seen by this store's claims."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read: dict[str, int] | None = None
        self._read_lock = threading.Lock()

    def _limit(self, c: sqlite3.Connection, queue: str) -> int | None:
        with self._read_lock:
            if self._read is None:
                self._read = {
                    name: limits.concurrency
                    for name, limits in self.queue_limits(c, None).items()
                    if limits.concurrency is not None
                }
            return self._read.get(queue)


STARTS_SINCE = f"""
SELECT coalesce(sum(claims), 0) FROM {CLAIM_STARTS} WHERE queue = ? AND started_at > ?
"""
RECORD_STARTS = f"""
INSERT INTO {CLAIM_STARTS} (queue, started_at, claims) VALUES (?, ?, ?)
    ON CONFLICT (queue, started_at) DO UPDATE SET claims = claims + excluded.claims
"""
"""The engine's starts, one row per (queue, second) with their count."""


class RateWindowShortDriver(_ShadowLimitsDriver):
    """Counts a rate limit's starts over a window one second short: the claims
    started at ``now - per + 1`` have already left it, so ``rate + 1`` claims can
    start within ``per`` seconds."""

    def claim(self, c: sqlite3.Connection, params: Claim) -> list[Job]:
        limits = self.queue_limits(c, params.queue).get(params.queue)
        if limits is None or limits.rate is None or limits.per is None:
            return super().claim(c, params)
        begin_transaction(c)  # the count, the claim and its starts commit together
        opens = params.now - limits.per + 1  # the bug: the window opens a second late
        (started,) = c.execute(STARTS_SINCE, (params.queue, opens)).fetchone()
        free = limits.rate - int(started)
        if free <= 0:
            return []
        fewer = Claim(params.queue, params.worker_id, params.now, min(free, params.limit))
        jobs = SqliteDriver.claim(self, c, fewer)
        if jobs:
            c.execute(RECORD_STARTS, (params.queue, params.now, len(jobs)))
        return jobs
