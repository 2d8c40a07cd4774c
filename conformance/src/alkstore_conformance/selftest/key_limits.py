"""Broken per-key limits (contract 1.2 §16.9-§16.11): the per-key limit ignored, the
keys not served in turn, a per-key rate counted per queue.

Each is the reference SQLite engine with its claim in turn changed:

* ignored: every key may take all the queue's free slots (the per-key limit read as
  the largest one), so one key's jobs can all be processing at once;
* unfair: the rows are taken in claim order (priority, run_at, id) whatever their
  key, within the per-key limit, so a key enqueued first is served until its
  backlog is drained or its limit reached, and a small key waits behind it;
* rate per queue: a per-key rate counts every key's starts in the window against
  each key, as if it were the queue's rate, so one busy key holds back the others.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from alkstore.constants import MAX_CONCURRENCY_LIMIT
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite import statements as sql

_TURN_ORDER = "ORDER BY ranked.turn, (:cursor IS NOT NULL AND ranked.k <= :cursor), ranked.k"
_CLAIM_ORDER = """ORDER BY (SELECT priority FROM {jobs} WHERE id = ranked.id) DESC,
          (SELECT run_at FROM {jobs} WHERE id = ranked.id), ranked.id"""


def _unfair_pick() -> str:
    from alkstore_sqlite.migrations import JOBS

    if _TURN_ORDER not in sql.PICK_IN_TURN_RANKED:  # pragma: no cover - the engine changed
        raise RuntimeError("the mutant no longer finds the turn order it replaces")
    return sql.PICK_IN_TURN_RANKED.replace(_TURN_ORDER, _CLAIM_ORDER.format(jobs=JOBS))


_PER_KEY_STARTS = "LEFT JOIN started ON started.k = ranked.k"
_QUEUE_STARTS = "LEFT JOIN (SELECT sum(n) AS n FROM started) AS started ON 1"


def _rate_per_queue_pick() -> str:
    if _PER_KEY_STARTS not in sql.PICK_IN_TURN_RANKED:  # pragma: no cover - the engine changed
        raise RuntimeError("the mutant no longer finds the per-key starts it replaces")
    return sql.PICK_IN_TURN_RANKED.replace(_PER_KEY_STARTS, _QUEUE_STARTS)


class PerKeyLimitIgnoredDriver(SqliteDriver):
    """Claims in turn with every key allowed the largest limit."""

    def _picked(self, c: sqlite3.Connection, named: dict[str, Any]) -> list[Any]:
        return super()._picked(c, {**named, "per_key": MAX_CONCURRENCY_LIMIT})


class UnfairKeyOrderDriver(SqliteDriver):
    """Claims within the per-key limit in claim order, regardless of key."""

    _UNFAIR = _unfair_pick()

    def _picked(self, c: sqlite3.Connection, named: dict[str, Any]) -> list[Any]:
        return c.execute(self._UNFAIR, named).fetchall()


class PerKeyRateCountedPerQueueDriver(SqliteDriver):
    """Counts every key's starts against each key's per-key rate."""

    _PER_QUEUE = _rate_per_queue_pick()

    def _picked(self, c: sqlite3.Connection, named: dict[str, Any]) -> list[Any]:
        return c.execute(self._PER_QUEUE, named).fetchall()
