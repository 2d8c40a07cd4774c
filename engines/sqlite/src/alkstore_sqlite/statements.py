"""Every SQL statement the driver runs, one named constant each.

Values are always bound parameters (``:name``; positional ``?`` where rows are
bound in bulk). A statement a params value (``alkstore.params``) feeds whole is
written with that value's field names and bound by number (``_bind``): its
``*_PARAMS`` function gives the values in order. Identifiers are the fixed
table and index names of ``schema``.
"now" is always a parameter from the store's clock, never SQLite's own time.
Python's sqlite3 caches prepared statements by their text, so these constants
are compiled once per connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from alkstore.constants import MAX_ERROR_HISTORY
from alkstore.driver import ERROR_EXHAUSTED, ERROR_EXPIRED
from alkstore.options import JOB_STAMP_FIELDS
from alkstore.params import (
    Bury,
    ClaimRef,
    Complete,
    Heartbeat,
    LockLease,
    LockRelease,
    Publish,
    Reschedule,
    ScheduleAdvance,
    ScheduleLapse,
    Snooze,
    StreamCommit,
    StreamOffset,
    StreamRead,
    StreamTrim,
    WorkerRef,
    WorkerRenew,
    WorkersAt,
    bind_by_name,
)
from alkstore.rows import CLAIMED_COLUMNS, JOB_COLUMNS

from .migrations import (
    CLAIM_STARTS,
    DEAD,
    DEAD_AGE_INDEX,
    DEAD_QUEUE_INDEX,
    DEAD_UNIQUE_INDEX,
    DEPENDENCIES,
    DEPENDENTS_INDEX,
    EXPIRY_INDEX,
    JOBS,
    KEPT_COLUMNS,
    KEPT_EDGES,
    KEPT_EDGES_INDEX,
    KEPT_FROM,
    KEPT_QUEUES,
    KEY_INDEX,
    KEY_STARTS,
    LIMITS,
    LIVE_INDEX,
    LOCKS,
    NOTIFICATIONS,
    PAUSED,
    PURGE_INDEX,
    QUEUE_INDEX,
    SCHEDULES,
    STREAM_EVENTS,
    STREAM_OFFSETS,
    STREAMS,
    THROUGHPUT,
    UNIQUE_INDEX,
    WAITING,
    WAITING_QUEUE_INDEX,
    WORKERS,
    bury_dependents,
)


def _bind(
    text: str, params: type, *, extra: Sequence[str] = ()
) -> tuple[str, Callable[[Any], tuple[Any, ...]]]:
    """A statement written with its params' field names (``:job_id``), bound by
    number (``?1``): the SQL names each value, a call binds a tuple of them."""
    return bind_by_name(text, params, "?{}", extra=extra)


BEGIN_WRITE = "BEGIN IMMEDIATE"
BEGIN_READ = "BEGIN"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

SYNCHRONOUS = {
    "NORMAL": "PRAGMA synchronous = NORMAL",
    "FULL": "PRAGMA synchronous = FULL",
}
# Claims sort a handful of rows in a temp b-tree; on disk that costs a temp file per statement.
TEMP_STORE_MEMORY = "PRAGMA temp_store = MEMORY"
RECURSIVE_TRIGGERS = "PRAGMA recursive_triggers = ON"
"""The dependencies profile's dead-letter cascade: a waiting job moved to dead fires the
trigger that moves the jobs waiting for it (version 13), level after level."""
# A checkpoint runs inside the COMMIT that crosses this many WAL pages, with two
# fsyncs, while the writer gate is held. Checkpointing every 4000 pages (~8 MB
# with the default 2 KiB pages) instead of SQLite's 1000 makes those stalls four
# times rarer.
WAL_AUTOCHECKPOINT = "PRAGMA wal_autocheckpoint = 4000"
# Without a limit the WAL file keeps the largest size it ever reached (a big
# transaction, a reader that held checkpoints back, a full-disk episode). With
# it, the first commit after a completed checkpoint cuts the file back to 16 MiB,
# just above what 4000 pages reach between checkpoints (with pages of up to 4 KiB),
# so steady writing never truncates and regrows it.
JOURNAL_SIZE_LIMIT = "PRAGMA journal_size_limit = 16777216"
# Copies the WAL into the database and truncates it to zero bytes; the driver runs
# it once after a write failed for want of room (see SqliteDriver._reclaim_wal).
WAL_CHECKPOINT_TRUNCATE = "PRAGMA wal_checkpoint(TRUNCATE)"
JOURNAL_MODE = "PRAGMA journal_mode"
JOURNAL_MODE_WAL = "PRAGMA journal_mode = WAL"
# PRAGMA takes no bound parameters: the value is one of options.PAGE_SIZES.
PAGE_SIZE = "PRAGMA page_size = {size:d}"
DATA_VERSION = "PRAGMA data_version"
DATABASE_LIST = "PRAGMA database_list"


def _columns(computed: dict[str, str]) -> str:
    """``JOB_COLUMNS`` as one table's SELECT list: a column it does not store as the
    contract reads it as its expression, every other one by name."""
    return ", ".join(f"{computed[c]} AS {c}" if c in computed else c for c in JOB_COLUMNS)


# Only a completed row holds these (the results profile): the live table's completed
# rows (version 18) hold them, the other tables never.
_NOT_COMPLETED = {"completed_at": "NULL", "result": "NULL"}
_LIVE_COLUMNS = _columns({})
# A claim returns only what it did not set itself (see alkstore.rows.claimed_jobs), and
# the columns a claimed row rarely holds anything but its default in as one value:
# NULL while all of them hold it, else one JSON array of them (RARE_CLAIMED order).
# Each returned value is stored by the RETURNING and converted by sqlite3, once per
# claimed row: seven NULLs (or zeros) as one NULL cost a claim_batch(100) 7% of its
# statement's CPU (measured, issue 28 §3).
RARE_CLAIMED: dict[str, str] = {
    "errors": "errors IS NULL",
    "redriven_from": "redriven_from IS NULL",
    "snoozes": "snoozes = 0",
    "unique_key": "unique_key IS NULL",
    "completed_retention_s": "completed_retention_s IS NULL",
    "limit_key": "limit_key IS NULL",
    "metadata": "metadata IS NULL",
}
"""A claimed row's rarely set columns, each with the term that holds while it stores
``Job``'s default (``alkstore_sqlite.claimed`` checks the defaults)."""
CLAIMED_COMMON = tuple(c for c in CLAIMED_COLUMNS if c not in RARE_CLAIMED)
"""What a claim returns first, one value each: ``CLAIMED_COLUMNS`` but ``RARE_CLAIMED``."""
_CLAIMED_COLUMNS = (
    f"{', '.join(CLAIMED_COMMON)}, "
    f"CASE WHEN {' AND '.join(RARE_CLAIMED.values())} THEN NULL "
    f"ELSE json_array({', '.join(RARE_CLAIMED)}) END"
)
_DEAD_COLUMNS = _columns({"state": "'dead'", **_NOT_COMPLETED})
_WAITING_COLUMNS = _columns(
    {"state": "'waiting'", "last_error": "NULL", "died_at": "NULL", **_NOT_COMPLETED}
)

# -- queues ---------------------------------------------------------------------

_STAMP_COLUMNS = ", ".join(JOB_STAMP_FIELDS)
_STAMP_PARAMS = ", ".join(f"?{n}" for n in range(1, len(JOB_STAMP_FIELDS) + 1))
_FIRST_PAYLOAD = len(JOB_STAMP_FIELDS) + 1

INSERT_JOB = f"""
INSERT INTO {JOBS} ({_STAMP_COLUMNS}, state, payload)
VALUES ({_STAMP_PARAMS}, 'pending', ?{_FIRST_PAYLOAD})
"""
"""Positional: the stamps in ``JOB_STAMP_FIELDS`` order, then the payload."""

BATCH_SIZES = (64, 32, 16, 8, 4, 2, 1)
"""Batches run as multi-row statements of these sizes: one statement per 64 rows
runs far faster than a statement per row, and a fixed set of sizes keeps the
prepared-statement cache small."""


def _insert_alike(rows: int) -> str:
    payloads = ", ".join(f"(?{_FIRST_PAYLOAD + row})" for row in range(rows))
    return f"""
INSERT INTO {JOBS} ({_STAMP_COLUMNS}, state, payload)
SELECT {_STAMP_PARAMS}, 'pending', column1 FROM (VALUES {payloads})
"""


INSERT_JOBS_ALIKE = {size: _insert_alike(size) for size in BATCH_SIZES}
"""Jobs stamped alike (one enqueue): the stamps in ``JOB_STAMP_FIELDS`` order, then one
payload per row, inserted in VALUES order."""

LAST_INSERT_ID = "SELECT last_insert_rowid()"

# -- unique jobs (the unique profile) ---------------------------------------------

_UNIQUE_FIRST = _FIRST_PAYLOAD + 3
"""After the stamps: ?10 hold_until, ?11 hold_dead, ?12 now, then (payload, key) pairs."""

_HOLDS_DEAD = f"""
    SELECT 1 FROM {DEAD}
     WHERE queue = ?1 AND unique_hold = {{key}} AND unique_hold IS NOT NULL
       AND (hold_until IS NULL OR hold_until > ?{_FIRST_PAYLOAD + 2})"""
"""A dead row of the queue holding ``{key}`` (its hold not passed)."""


def _insert_unique(rows: int) -> str:
    pairs = ", ".join(
        f"(?{_UNIQUE_FIRST + 2 * row}, ?{_UNIQUE_FIRST + 2 * row + 1})" for row in range(rows)
    )
    return f"""
INSERT INTO {JOBS} ({_STAMP_COLUMNS}, state, payload, unique_key, unique_hold, hold_until,
                    hold_dead)
SELECT {_STAMP_PARAMS}, 'pending', job.column1, job.column2, job.column2,
       ?{_FIRST_PAYLOAD}, ?{_FIRST_PAYLOAD + 1}
  FROM (VALUES {pairs}) AS job
 WHERE NOT EXISTS ({_HOLDS_DEAD.format(key="job.column2")})
ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
RETURNING id, unique_key
"""


INSERT_UNIQUE_ONE = f"""
INSERT INTO {JOBS} ({_STAMP_COLUMNS}, state, payload, unique_key, unique_hold, hold_until,
                    hold_dead)
SELECT {_STAMP_PARAMS}, 'pending', ?{_UNIQUE_FIRST}, ?{_UNIQUE_FIRST + 1}, ?{_UNIQUE_FIRST + 1},
       ?{_FIRST_PAYLOAD}, ?{_FIRST_PAYLOAD + 1}
 WHERE NOT EXISTS ({_HOLDS_DEAD.format(key=f"?{_UNIQUE_FIRST + 1}")})
ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
"""
"""``INSERT_UNIQUE`` of one row, without a VALUES list or RETURNING: its row count says
whether the row went in and ``lastrowid`` is its id (the lone enqueue, the hot path)."""

INSERT_UNIQUE = {size: _insert_unique(size) for size in BATCH_SIZES}
"""Unique jobs stamped alike: the stamps in ``JOB_STAMP_FIELDS`` order, ``hold_until``,
``hold_dead``, now, then ``(payload, key)`` per row (distinct keys). A row is inserted
only where no job of the queue holds its key: ON CONFLICT skips a key a live row holds
(the unique index decides, so no writer slips in between), NOT EXISTS one a dead row
keeps. It returns ``(id, key)`` of the rows inserted, in no promised order."""

KEY_HOLDERS = f"""
SELECT id, unique_hold, hold_until FROM {JOBS} INDEXED BY {UNIQUE_INDEX}
 WHERE queue = :queue AND unique_hold IN (SELECT value FROM json_each(:keys))
UNION ALL
SELECT id, unique_hold, NULL FROM {DEAD} INDEXED BY {DEAD_UNIQUE_INDEX}
 WHERE queue = :queue AND unique_hold IN (SELECT value FROM json_each(:keys))
   AND (hold_until IS NULL OR hold_until > :now)
"""
"""The holders of ``:keys`` (a JSON array) in ``:queue``: ``(id, key, hold_until)``, a
live row's whatever its hold's end (one that passed is then given up), a dead row's
only while it holds (its ``hold_until`` as NULL: nothing to give up)."""

GIVE_UP_HOLDS = f"""
UPDATE {JOBS} SET unique_hold = NULL WHERE id IN (SELECT value FROM json_each(:ids))
"""
"""Live rows whose hold passed give their key up (they keep ``unique_key``)."""

GIVE_UP_PASSED_HOLDS_OF_KEYS = f"""
UPDATE {JOBS} INDEXED BY {UNIQUE_INDEX} SET unique_hold = NULL
 WHERE queue = :queue AND unique_hold IN (SELECT value FROM json_each(:keys))
   AND hold_until <= :now
"""
"""The live rows of ``:queue`` holding one of ``:keys`` (a JSON array) whose hold
passed give their key up (they keep ``unique_key``): before a batch's insert, so every
key it takes is free when the insert runs and the new ids follow payload order."""

GIVE_UP_PASSED_HOLDS = f"""
UPDATE {JOBS} INDEXED BY {UNIQUE_INDEX} SET unique_hold = NULL
 WHERE queue = :queue AND unique_hold IS NOT NULL AND hold_until <= :now
"""
"""Every live row of ``:queue`` whose hold passed gives its key up (before a redrive)."""

# A limited queue (the limits profile) claims at most its free slots: its concurrency
# limit less its claims whose deadline has not passed (a lapsed claim holds no slot),
# and its rate less its claim starts in the window (now - per_s, now]. Read in the
# claim's own statement, under the one write lock: no two claimers see one free slot.
# An unlimited queue pays one seek of the limits table's key, as for the pause.
# Claims in flight: deadlines after now, below every completed row's (KEPT_FROM).
_IN_FLIGHT = f"deadline > :now AND deadline < {KEPT_FROM}"
_LIVE_CLAIMS = f"""(SELECT count(*) FROM {JOBS} INDEXED BY {LIVE_INDEX}
                      WHERE queue = :queue AND {_IN_FLIGHT})"""
_WINDOW_STARTS = f"""(SELECT coalesce(sum(claims), 0) FROM {CLAIM_STARTS}
                      WHERE queue = :queue AND started_at > :now - limits.per_s)"""
_FREE = f"""max(0, min(:limit,
                        coalesce(limits.concurrency - {_LIVE_CLAIMS}, :limit),
                        coalesce(limits.rate - {_WINDOW_STARTS}, :limit)))"""
# A queue with a per-key limit (the key_limits profile) claims by CLAIM_IN_TURN
# alone: the other claims take none of its rows.
_SLOTS = f"""CASE WHEN NOT EXISTS (SELECT 1 FROM {LIMITS} WHERE queue = :queue) THEN :limit
              ELSE (SELECT CASE WHEN limits.concurrency_per_key IS NULL
                                 AND limits.rate_per_key IS NULL THEN {_FREE} ELSE 0 END
                      FROM {LIMITS} AS limits WHERE limits.queue = :queue) END"""

_UNLESS_PAUSED = f"""CASE WHEN NOT EXISTS (SELECT 1 FROM {PAUSED} WHERE queue = :queue)
                          THEN {_SLOTS} ELSE 0 END"""


_CLAIM_UPDATE = f"""UPDATE {JOBS}
   SET state = 'processing',
       attempts = attempts + 1,
       claimed_at = :now,
       worker_id = :worker_id,
       deadline = :now + visibility_timeout_s"""
"""What every claim sets on the rows it claims."""


# One statement. An OR over "pending and due" / "processing and lapsed" would
# defeat ordered index use, so each kind is read as its own range of the live
# index, each already LIMITed: pending rows straight off it in claim order
# (INDEXED BY pins that plan: a run_at range over any other index would sort
# the whole ready backlog). A row is pending exactly while its deadline is NULL
# and claimed while it has one (see the live index in migrations.py), so the
# ranges are read by the deadline alone, off the index: `deadline IS NULL` is
# one seek to the pending rows in claim order, `deadline <= :now` the lapsed
# claims (only they are sorted). At most 2 * limit candidates are then ordered
# and cut.
# A paused queue yields nothing: the final cut is to 0 rows then. As a LIMIT,
# the seek of the paused table's key runs once per claim (a NOT EXISTS term in
# a WHERE would be tested again for every candidate row).
def _claim(pick: str) -> str:
    return f"""
{_CLAIM_UPDATE}
 WHERE id {pick} (
    SELECT id FROM (
        SELECT id, priority, run_at FROM (
            SELECT id, priority, run_at FROM {JOBS} INDEXED BY {LIVE_INDEX}
             WHERE queue = :queue AND deadline IS NULL
               AND run_at <= :now
               AND (expires_at IS NULL OR expires_at > :now)
               AND attempts < max_attempts
             ORDER BY priority DESC, run_at, id
             LIMIT :limit)
        UNION ALL
        SELECT id, priority, run_at FROM (
            SELECT id, priority, run_at FROM {JOBS} INDEXED BY {LIVE_INDEX}
             WHERE queue = :queue AND deadline <= :now
               AND (expires_at IS NULL OR expires_at > :now)
               AND attempts < max_attempts
             ORDER BY priority DESC, run_at, id
             LIMIT :limit))
     ORDER BY priority DESC, run_at, id
     LIMIT {_UNLESS_PAUSED})
RETURNING {_CLAIMED_COLUMNS}
"""


CLAIM = _claim("IN")

# A claim of one row compares the id with a scalar subquery: SQLite evaluates it
# once, where IN (…) fills a temporary index with the ids first (a sixth of the
# statement's cost when only one row is claimed).
CLAIM_ONE = _claim("=")
"""``CLAIM`` with ``:limit`` 1."""

# The common case, in one statement: pending rows only, claimed only while the
# queue has no lapsed claim at all (and is not paused). Then nothing is exhausted
# either, and the lapsed branch of CLAIM has nothing to add. Both guards are one
# index seek each, run once per statement as a LIMIT. When it claims nothing the
# driver looks for lapsed claims (ANY_LAPSED) and, finding some, dead-letters the
# exhausted ones and runs the full CLAIM.
_NOTHING_LAPSED = f"""NOT EXISTS (SELECT 1 FROM {JOBS} INDEXED BY {LIVE_INDEX}
                           WHERE queue = :queue AND deadline <= :now)"""


def _claim_ready(pick: str) -> str:
    return f"""
{_CLAIM_UPDATE}
 WHERE id {pick} (
    SELECT id FROM {JOBS} INDEXED BY {LIVE_INDEX}
     WHERE queue = :queue AND deadline IS NULL AND run_at <= :now
       AND (expires_at IS NULL OR expires_at > :now)
       AND attempts < max_attempts
     ORDER BY priority DESC, run_at, id
     LIMIT CASE WHEN NOT EXISTS (SELECT 1 FROM {PAUSED} WHERE queue = :queue)
                 AND {_NOTHING_LAPSED}
                THEN {_SLOTS} ELSE 0 END)
RETURNING {_CLAIMED_COLUMNS}
"""


CLAIM_READY = _claim_ready("IN")
"""Pending rows only, and only while ``:queue`` has no lapsed claim and no pause."""

CLAIM_READY_ONE = _claim_ready("=")
"""``CLAIM_READY`` with ``:limit`` 1."""

# -- per-key limits and fairness (the key_limits profile) ------------------------------

KEYED_LIMITS = f"""
SELECT concurrency_per_key, rate_per_key, per_s, key_cursor FROM {LIMITS}
 WHERE queue = :queue AND (concurrency_per_key IS NOT NULL OR rate_per_key IS NOT NULL)
"""
"""A queue's per-key limit and rate, and the key its last claim served; no row without
either."""

# The reference for PICK_IN_TURN (the claim's pick before the key walk; the engine's
# tests check the two agree, and the kit's key mutants change this one): contract
# §16.10's order, in one SELECT under the write lock: each key (NULL: the shared key
# "") offers its first `concurrency_per_key - its live claims` claimable
# rows in claim order (`turn` 1, 2, ...), and no more than `rate_per_key - its starts
# in the window (now - per_s, now]` (§16.11); the claim takes every key's first row, then
# every key's second, and so on, the keys of each turn after :cursor first (the key
# the queue's last claim served), then the rest, each in key order (BINARY: UTF-8
# bytes, which is code-point order). The queue's own limits and a pause cut it as
# for any claim. Its cost grows with the queue's claimable rows, as the ranking
# reads them all.
PICK_IN_TURN_RANKED = f"""
WITH live AS (
    SELECT coalesce(limit_key, '') AS k, count(*) AS n FROM {JOBS} INDEXED BY {LIVE_INDEX}
     WHERE queue = :queue AND {_IN_FLIGHT}
     GROUP BY 1
), started AS (
    SELECT limit_key AS k, sum(claims) AS n FROM {KEY_STARTS}
     WHERE queue = :queue AND started_at > :now - :per_s
     GROUP BY 1
), ranked AS (
    SELECT id, coalesce(limit_key, '') AS k,
           row_number() OVER (PARTITION BY coalesce(limit_key, '')
                              ORDER BY priority DESC, run_at, id) AS turn
      FROM {JOBS}
     WHERE queue = :queue
       AND ((deadline IS NULL AND run_at <= :now) OR deadline <= :now)
       AND (expires_at IS NULL OR expires_at > :now)
       AND attempts < max_attempts
)
SELECT ranked.id, ranked.k FROM ranked
  LEFT JOIN live ON live.k = ranked.k
  LEFT JOIN started ON started.k = ranked.k
 WHERE ranked.turn <= coalesce(:per_key - coalesce(live.n, 0), :limit)
   AND ranked.turn <= coalesce(:rate_per_key - coalesce(started.n, 0), :limit)
 ORDER BY ranked.turn, (:cursor IS NOT NULL AND ranked.k <= :cursor), ranked.k
 LIMIT CASE WHEN EXISTS (SELECT 1 FROM {PAUSED} WHERE queue = :queue) THEN 0
            ELSE (SELECT {_FREE} FROM {LIMITS} AS limits WHERE limits.queue = :queue) END
"""
"""``PICK_IN_TURN`` by ranking every claimable row of the queue (the reference)."""

# Contract §16.10's order, read off KEY_INDEX: only what a claim takes. The key
# (NULL: the shared key "") and `turn` (1, 2, ...: a key's claimable rows in claim
# order) are as in PICK_IN_TURN_RANKED, whose result this one equals; the turn order
# is every key's first row, then every key's second, the keys after :cursor first
# (the key the queue's last claim served), then the rest, each in key order (BINARY:
# UTF-8 bytes, which is code-point order).
#
# KEY_INDEX holds every live row, pending or claimed, by key in claim order (a claim
# changes none of its columns, so it writes nothing to it; see migrations._V14), and
# no completed one (version 18: every read of it says `completed_at IS NULL`).
# `walk` visits the queue's distinct keys in turn order, one loose-index seek each
# (the smallest key past the one before), wrapping once past the last key to the
# first, and stops as soon as `slots` keys have a free slot and a claimable row
# (`eligible`): the claim's first turn is then full, and no later key can be served.
# Each chosen key then offers its rows one seek at a time (`turns`: the next of the
# same priority, else the first of a lower one), at most `slots - keys + 1` of them
# (a key is served no more in a claim that takes one row of every other chosen key
# first), and no more than its allowance (the per-key limit less its live claims,
# the per-key rate less its starts in the window (now - per_s, now]).
#
# Cost: O(slots² · log n) for the rows plus one probe (a few seeks) per key visited.
# The worst case is a queue with many keys that cannot be served (at their limit, or
# with no row due yet): each costs its probe, and a key's probe also reads its rows
# that are not claimable (not yet due, in flight) ranking before its first claimable
# one; the live claims are counted once per claim (`live`), so a claim also reads
# the queue's claims in flight.
_K = "coalesce(limit_key, '')"


def _next_key(after: str, op: str = ">") -> str:
    """The smallest key of the queue's live rows ``op`` ``after`` (one seek)."""
    return f"""(SELECT {_K} FROM {JOBS} INDEXED BY {KEY_INDEX}
                 WHERE queue = :queue AND {_K} {op} {after} AND completed_at IS NULL
                 ORDER BY {_K} LIMIT 1)"""


def _allowance(key: str) -> str:
    return f"""min(coalesce(:per_key - coalesce((SELECT n FROM live WHERE k = {key}), 0),
                        :limit),
                   coalesce(:rate_per_key
                            - coalesce((SELECT n FROM started WHERE k = {key}), 0), :limit))"""


_CLAIMABLE_OF = f"""FROM {JOBS} INDEXED BY {KEY_INDEX}
             WHERE queue = :queue AND {_K} = {{key}} AND completed_at IS NULL
               AND ((deadline IS NULL AND run_at <= :now) OR deadline <= :now)
               AND (expires_at IS NULL OR expires_at > :now) AND attempts < max_attempts"""


def _first_row(key: str) -> str:
    """The first claimable row of ``key`` in claim order."""
    return f"""(SELECT id {_CLAIMABLE_OF.format(key=key)}
                 ORDER BY priority DESC, run_at, id LIMIT 1)"""


def _next_row(key: str, cur: str) -> str:
    """The claimable row of ``key`` after the row ``cur`` in claim order: the next one of
    its priority, else the first of a lower one (each one seek)."""
    return f"""coalesce(
        (SELECT id {_CLAIMABLE_OF.format(key=key)}
            AND priority = {cur}.priority AND (run_at, id) > ({cur}.run_at, {cur}.id)
          ORDER BY run_at, id LIMIT 1),
        (SELECT id {_CLAIMABLE_OF.format(key=key)} AND priority < {cur}.priority
          ORDER BY priority DESC, run_at, id LIMIT 1))"""


def _eligible(key: str) -> str:
    return f"""({_allowance(key)} >= 1 AND {_first_row(key)} IS NOT NULL)"""


_FIRST_KEY = _next_key("''", ">=")
_IN_WALK = "(walk.k IS NOT NULL AND (walk.wrapped = 0 OR :cursor IS NULL OR walk.k <= :cursor))"

PICK_IN_TURN = f"""
WITH RECURSIVE live AS (
    SELECT {_K} AS k, count(*) AS n FROM {JOBS} INDEXED BY {LIVE_INDEX}
     WHERE queue = :queue AND {_IN_FLIGHT}
     GROUP BY 1
), started AS (
    SELECT limit_key AS k, sum(claims) AS n FROM {KEY_STARTS}
     WHERE queue = :queue AND started_at > :now - :per_s
     GROUP BY 1
), slots(n) AS (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM {PAUSED} WHERE queue = :queue) THEN 0
                ELSE (SELECT {_FREE} FROM {LIMITS} AS limits WHERE limits.queue = :queue) END
), walk(k, wrapped, pos, found) AS (
    SELECT coalesce({_next_key(":cursor")}, {_FIRST_KEY}),
           CASE WHEN {_next_key(":cursor")} IS NULL THEN 1 ELSE 0 END, 0, 0
    UNION ALL
    SELECT coalesce({_next_key("walk.k")}, CASE WHEN walk.wrapped = 0 THEN {_FIRST_KEY} END),
           CASE WHEN walk.wrapped = 1 OR {_next_key("walk.k")} IS NULL THEN 1 ELSE 0 END,
           walk.pos + 1, walk.found + {_eligible("walk.k")}
      FROM walk
     WHERE {_IN_WALK} AND walk.found + {_eligible("walk.k")} < (SELECT n FROM slots)
), chosen AS (
    SELECT walk.k, walk.pos, {_allowance("walk.k")} AS allowance FROM walk
     WHERE {_IN_WALK} AND {_eligible("walk.k")}
), cap(n) AS (
    SELECT max(1, (SELECT n FROM slots) - (SELECT count(*) FROM chosen) + 1)
), turns(pos, k, allowance, turn, id) AS (
    SELECT chosen.pos, chosen.k, chosen.allowance, 1, {_first_row("chosen.k")} FROM chosen
    UNION ALL
    SELECT turns.pos, turns.k, turns.allowance, turns.turn + 1, {_next_row("turns.k", "cur")}
      FROM turns JOIN {JOBS} AS cur ON cur.id = turns.id
     WHERE turns.turn < min(turns.allowance, (SELECT n FROM cap))
)
SELECT turns.id, turns.k FROM turns
 WHERE turns.id IS NOT NULL AND turns.turn <= turns.allowance
 ORDER BY turns.turn, turns.pos
 LIMIT (SELECT n FROM slots)
"""
"""The rows a claim of a queue with a per-key limit takes, in turn order, with their keys."""

CLAIM_PICKED = f"""
{_CLAIM_UPDATE}
 WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING {_CLAIMED_COLUMNS}
"""
"""Claim the rows ``PICK_IN_TURN`` chose (``:ids``, a JSON array)."""

SET_KEY_CURSOR = f"UPDATE {LIMITS} SET key_cursor = :cursor WHERE queue = :queue"
"""The key the claim served last: where the queue's next claim's turn starts."""

DROP_KEY_STARTS = f"""
DELETE FROM {KEY_STARTS} WHERE queue = :queue AND started_at <= :now - :per_s
"""
"""A per-key rate's starts that left the window (they can never count again)."""

RECORD_KEY_STARTS = f"""
INSERT INTO {KEY_STARTS} (queue, started_at, limit_key, claims)
SELECT :queue, :now, value, count(*) FROM json_each(:keys) WHERE true GROUP BY value
    ON CONFLICT (queue, started_at, limit_key) DO UPDATE SET claims = claims + excluded.claims
"""
"""One start per row the claim took, under its key (``:keys``, a JSON array): each key's
count added to its row of this second."""

ANY_LAPSED = f"""
SELECT 1 FROM {JOBS} INDEXED BY {LIVE_INDEX}
 WHERE queue = :queue AND deadline <= :now
 LIMIT 1
"""
"""Whether ``:queue`` has a lapsed claim (to reclaim, or to dead-letter)."""

# Moves: setting state = 'dead' fires the trigger that moves the row (see schema).
BURY_EXHAUSTED = f"""
UPDATE {JOBS} INDEXED BY {LIVE_INDEX}
   SET state = 'dead', last_error = '{ERROR_EXHAUSTED}', died_at = :now
 WHERE queue = :queue AND deadline <= :now
   AND attempts >= max_attempts
"""

# BURY_EXHAUSTED nearly always finds nothing: this read of the same index range
# costs half as much as an UPDATE that changes no row.
ANY_EXHAUSTED = f"""
SELECT 1 FROM {JOBS} INDEXED BY {LIVE_INDEX}
 WHERE queue = :queue AND deadline <= :now
   AND attempts >= max_attempts
 LIMIT 1
"""

# A completed row never expires: EXPIRY_INDEX holds only the rows not completed
# (version 18), and the term says so (the partial index is usable only then).
BURY_EXPIRED = f"""
UPDATE {JOBS} INDEXED BY {EXPIRY_INDEX}
   SET state = 'dead', last_error = '{ERROR_EXPIRED}', died_at = :now
 WHERE queue = :queue AND expires_at <= :now AND completed_at IS NULL
"""

PURGE_DEAD = f"""
DELETE FROM {DEAD} INDEXED BY {PURGE_INDEX}
 WHERE queue = :queue AND dead_letter_retention_s IS NOT NULL
   AND died_at + dead_letter_retention_s < :now
"""

# -- finished jobs (the results profile) -------------------------------------------

# A completed job is its live row, completed in place (version 18): state
# 'completed', deadline KEPT_FROM + its purge instant (completed_at +
# completed_retention_s), so it sorts above every claim in the live index and the
# purge is one range of it. It holds no unique key and has no dependents (the update
# that completes it releases them: version 18's trigger).
_COMPLETE = f"""
   SET state = 'completed', deadline = {KEPT_FROM} + {{now}} + completed_retention_s,
       completed_at = {{now}}, result = {{result}}, unique_hold = NULL, has_dependents = 0"""

PURGE_COMPLETED = f"""
DELETE FROM {JOBS} INDEXED BY {LIVE_INDEX}
 WHERE queue = :queue AND deadline >= {KEPT_FROM} AND deadline < {KEPT_FROM} + :now
"""

# Handle ops: valid only under the very claim (id, attempt) with its deadline ahead.
_VALID_CLAIM = "id = :job_id AND state = 'processing' AND attempts = :attempt AND deadline > :now"

# An acked row with dependents releases them by the update that clears its
# has_dependents, just before its delete (version 20's trigger): only while some
# dependency edge exists at all (_ANY_EDGES) can a release do anything.
_ANY_EDGES = f"""(EXISTS (SELECT 1 FROM {DEPENDENCIES}) OR EXISTS (SELECT 1 FROM {KEPT_EDGES}))"""

ACK, ACK_PARAMS = _bind(
    f"DELETE FROM {JOBS} WHERE {_VALID_CLAIM} AND (has_dependents <> 1 OR NOT {_ANY_EDGES})",
    ClaimRef,
)
"""The ack of a claim whose ack releases nothing, in one statement (the uncorrelated
``EXISTS`` run once); 0 rows: not a valid claim, or ``RELEASE_FOR_ACK`` first, then
``ACK_RELEASED``, in one transaction."""
ACK_RELEASED, ACK_RELEASED_PARAMS = _bind(f"DELETE FROM {JOBS} WHERE {_VALID_CLAIM}", ClaimRef)

RELEASE_FOR_ACK, RELEASE_FOR_ACK_PARAMS = _bind(
    f"UPDATE {JOBS} SET has_dependents = 0 WHERE {_VALID_CLAIM} AND has_dependents = 1",
    ClaimRef,
)
"""Before ``ACK`` with the same claim, in its transaction: the release of its dependents."""

# The ack of a job its queue keeps: one UPDATE of the live row, under the claim.
COMPLETE, COMPLETE_PARAMS = _bind(
    f"UPDATE {JOBS}{_COMPLETE.format(now=':now', result=':result')} WHERE {_VALID_CLAIM}",
    Complete,
)

ACK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""An ack_batch runs one statement per ``ACK_SIZES[-1]`` ids, each list padded up to
the next size by repeating its last id (an id named twice in ``IN`` is still one
row): ``claim_batch(100)`` is acked in one statement, not three."""

# NOT INDEXED still allows the primary key: the rows are fetched by id, never by
# a range over every in-flight claim of the queue (which the planner may prefer).
ACK_FOR_WORKER = {
    size: f"""
DELETE FROM {JOBS} NOT INDEXED
 WHERE id IN ({", ".join(["?"] * size)})
   AND queue = ? AND worker_id = ? AND state = 'processing' AND deadline > ?
"""
    for size in ACK_SIZES
}
"""Positional: ``size`` ids, then queue, worker_id, now."""

RELEASE_FOR_WORKER = {
    size: f"""
UPDATE {JOBS} NOT INDEXED SET has_dependents = 0
 WHERE id IN ({", ".join(f"?{n}" for n in range(1, size + 1))})
   AND queue = ?{size + 1} AND worker_id = ?{size + 2}
   AND state = 'processing' AND deadline > ?{size + 3} AND has_dependents = 1
"""
    for size in ACK_SIZES
}
"""Before ``ACK_FOR_WORKER`` with the same values, while an edge exists: the release of
the dependents of the rows it deletes."""

ACK_BATCH_PROBES = f"""
SELECT EXISTS (SELECT 1 FROM {KEPT_QUEUES} WHERE queue = ?1), {_ANY_EDGES}
"""
"""Whether the queue keeps jobs (``KEEPS_JOBS``) and whether any job waits for another
or any dead job kept its edges (else no ack releases anything), for an ``ack_batch``."""

KEEPS_JOBS = f"SELECT 1 FROM {KEPT_QUEUES} WHERE queue = ?"
"""Whether a live row of the queue was ever stamped with a completed retention (one key
seek): an ``ack_batch`` of a queue without it runs ``ACK_FOR_WORKER`` alone."""

COMPLETE_FOR_WORKER = {
    size: f"""
UPDATE {JOBS} NOT INDEXED{_COMPLETE.format(now=f"?{size + 3}", result="NULL")}
 WHERE id IN ({", ".join(f"?{n}" for n in range(1, size + 1))})
   AND queue = ?{size + 1} AND worker_id = ?{size + 2}
   AND state = 'processing' AND deadline > ?{size + 3}
   AND completed_retention_s IS NOT NULL
"""
    for size in ACK_SIZES
}
"""Before ``ACK_FOR_WORKER`` with the same values, on a queue that keeps jobs
(``KEEPS_JOBS``): the rows of it stamped with a retention, completed in place without a
result (the results profile)."""


def _claims(size: int) -> str:
    """The claims of ``tx.ack_all``'s statement: ``size`` pairs ``(id, attempts)`` as
    ``?1, ?2``, ``?3, ?4``, ... and ``now`` after them, each under its own guard; the
    ids alone first, so the rows are fetched by primary key."""
    ids = ", ".join(f"?{2 * n + 1}" for n in range(size))
    pairs = ", ".join(f"(?{2 * n + 1}, ?{2 * n + 2})" for n in range(size))
    return f"""id IN ({ids}) AND (id, attempts) IN (VALUES {pairs})
   AND state = 'processing' AND deadline > ?{2 * size + 1}"""


ACK_CLAIMS = {
    size: f"DELETE FROM {JOBS} NOT INDEXED\n WHERE {_claims(size)}\nRETURNING id\n"
    for size in ACK_SIZES
}
"""``tx.ack_all`` (contract 1.2 §3.10), ``ack_batch``'s delete guarded by each claim
``(id, attempts)`` rather than by a worker: positional, ``size`` pairs (padded as
``ack_batch``'s ids are, by repeating the last: a pair named twice is one row), then
now; the ids acked."""

RELEASE_FOR_CLAIMS = {
    size: f"UPDATE {JOBS} NOT INDEXED SET has_dependents = 0\n"
    f" WHERE {_claims(size)} AND has_dependents = 1\n"
    for size in ACK_SIZES
}
"""Before ``ACK_CLAIMS`` with the same values, while an edge exists: the release of the
dependents of the rows it deletes (as ``RELEASE_FOR_WORKER``)."""

COMPLETE_CLAIMS = {
    size: f"UPDATE {JOBS} NOT INDEXED{_COMPLETE.format(now=f'?{2 * size + 1}', result='NULL')}\n"
    f" WHERE {_claims(size)} AND completed_retention_s IS NOT NULL\nRETURNING id\n"
    for size in ACK_SIZES
}
"""Before ``ACK_CLAIMS`` with the same values, when some queue keeps jobs: the rows
stamped with a retention, completed in place without a result (as
``COMPLETE_FOR_WORKER``)."""

ACK_CLAIMS_PROBES = f"SELECT EXISTS (SELECT 1 FROM {KEPT_QUEUES}), {_ANY_EDGES}"
"""Whether any queue keeps jobs and whether any edge exists, for ``ACK_CLAIMS``."""

HEARTBEAT, HEARTBEAT_PARAMS = _bind(
    f"UPDATE {JOBS} SET deadline = :deadline WHERE {_VALID_CLAIM}", Heartbeat
)

# The error history: :entry (one ``[attempt, at, error]`` as JSON text, or NULL
# when there is nothing to record) appended to the JSON array in ``errors``.
# Only this expression grows a history, one entry at a time, so dropping the
# oldest entry once it holds MAX_ERROR_HISTORY keeps the latest that many.
# Scalar JSON functions only: the handle op stays one statement on one row.
_ERRORS = "coalesce(errors, '[]')"
_APPEND_ERROR = f"""
       errors = CASE
           WHEN :entry IS NULL THEN errors
           WHEN json_array_length({_ERRORS}) >= {MAX_ERROR_HISTORY}
           THEN json_insert(json_remove({_ERRORS}, '$[0]'), '$[#]', json(:entry))
           ELSE json_insert({_ERRORS}, '$[#]', json(:entry)) END"""

RESCHEDULE, RESCHEDULE_PARAMS = _bind(
    f"""
UPDATE {JOBS}
   SET state = 'pending', run_at = :run_at, worker_id = NULL, claimed_at = NULL, deadline = NULL,
{_APPEND_ERROR}
 WHERE {_VALID_CLAIM}
""",
    Reschedule,
    extra=("entry",),
)
"""Its params' values, then ``:entry``."""

RELEASE_CLAIM, RELEASE_CLAIM_PARAMS = _bind(
    f"""
UPDATE {JOBS}
   SET state = 'pending', max_attempts = max_attempts + 1, worker_id = NULL, claimed_at = NULL,
       deadline = NULL
 WHERE {_VALID_CLAIM}
""",
    ClaimRef,
)
"""A claim given back unused: pending at its own run_at, its attempt refunded to the
budget (attempts keeps counting claims, so no later claim reuses this one's identity)."""

SNOOZE, SNOOZE_PARAMS = _bind(
    f"""
UPDATE {JOBS}
   SET state = 'pending', run_at = :run_at, snoozes = snoozes + 1,
       max_attempts = max_attempts + 1, worker_id = NULL, claimed_at = NULL, deadline = NULL
 WHERE {_VALID_CLAIM}
""",
    Snooze,
)
"""A claim put back to wait until run_at, counted, its attempt refunded as a release's is."""

BURY, BURY_PARAMS = _bind(
    f"""
UPDATE {JOBS}
   SET state = 'dead', last_error = :last_error, died_at = :now,
{_APPEND_ERROR}
 WHERE {_VALID_CLAIM}
""",
    Bury,
    extra=("entry",),
)
"""Its params' values, then ``:entry``."""

CANCEL = f"DELETE FROM {JOBS} WHERE id = :id AND queue = :queue AND state <> 'completed'"

# -- dependencies (the dependencies profile) ----------------------------------------

_JSON_IDS = "SELECT value FROM json_each(:ids)"

JOB_WAITS_FOR = f"""
SELECT depends_on FROM {DEPENDENCIES} INDEXED BY {DEPENDENTS_INDEX}
 WHERE job_id = :job_id ORDER BY depends_on
"""
"""The jobs ``:job_id`` still waits for: a range of the edges' dependent index."""

JOB_WAITED_BY = f"""
SELECT job_id FROM {DEPENDENCIES} WHERE depends_on = :job_id ORDER BY job_id
"""
"""The waiting jobs that still wait for ``:job_id``: a range of the edges' key."""

DEPENDENCY_STATES = f"""
SELECT id, CASE WHEN state = 'completed' THEN 'completed' ELSE 'live' END
  FROM {JOBS} WHERE id IN ({_JSON_IDS})
UNION ALL SELECT id, 'live' FROM {WAITING} WHERE id IN ({_JSON_IDS})
UNION ALL SELECT id, 'dead' FROM {DEAD} WHERE id IN ({_JSON_IDS})
"""
"""Where each of the ids (a JSON array) is; an absent one has no row."""

MARK_DEPENDED_ON = (
    f"UPDATE {JOBS} SET has_dependents = 1 WHERE id IN ({_JSON_IDS}) AND has_dependents = 0",
    f"UPDATE {WAITING} SET has_dependents = 1 WHERE id IN ({_JSON_IDS}) AND has_dependents = 0",
)

MAKE_WAITING = (
    f"""INSERT INTO {WAITING} ({KEPT_COLUMNS}, finishes, waiting_on)
    SELECT {KEPT_COLUMNS}, :finishes, :count FROM {JOBS} WHERE id IN ({_JSON_IDS})""",
    f"DELETE FROM {JOBS} WHERE id IN ({_JSON_IDS})",
    f"""INSERT INTO {DEPENDENCIES} (depends_on, job_id)
    SELECT after.value, job.value FROM json_each(:after) AS after, json_each(:ids) AS job""",
)
"""The new rows (``:ids``), just inserted pending in this transaction, moved to the
waiting table with their edges to the live jobs ``:after`` (``:count`` of them);
``:finishes`` 1 for fan-ins (``after_finished``)."""

CANCEL_MARK = f"""
UPDATE {JOBS} SET has_dependents = 2, died_at = :now
 WHERE id = :id AND queue = :queue AND has_dependents = 1
"""
"""A live job with dependents about to be cancelled: the release trigger skips it."""

CANCEL_WAITING = (
    f"DELETE FROM {DEPENDENCIES} WHERE job_id = :id AND EXISTS "
    f"(SELECT 1 FROM {WAITING} WHERE id = :id AND queue = :queue)",
    f"DELETE FROM {WAITING} WHERE id = :id AND queue = :queue",
)

BURY_CANCELLED_DEPENDENTS = bury_dependents(
    ":id", "'dependency ' || :id || ' was cancelled'", ":now"
)

_EXPIRED_WAITING = f"(SELECT id FROM {WAITING} WHERE queue = :queue AND expires_at <= :now)"

BURY_EXPIRED_WAITING = (
    f"""INSERT OR IGNORE INTO {DEAD} ({KEPT_COLUMNS}, has_dependents, last_error, died_at)
    SELECT {KEPT_COLUMNS}, 2 * has_dependents, 'expired', :now FROM {WAITING}
     WHERE queue = :queue AND expires_at <= :now ORDER BY id""",
    f"DELETE FROM {DEPENDENCIES} WHERE job_id IN {_EXPIRED_WAITING}",
    f"DELETE FROM {WAITING} WHERE queue = :queue AND expires_at <= :now",
    f"""UPDATE {DEAD} SET has_dependents = 1
     WHERE queue = :queue AND died_at = :now AND has_dependents = 2""",
)
"""Waiting jobs past their expiry, to dead all at once; then each passes its death on to
its own dependents, in id order (version 13's pass-on trigger)."""

GET_JOB = f"""
SELECT {_LIVE_COLUMNS} FROM {JOBS} WHERE id = :id
UNION ALL
SELECT {_DEAD_COLUMNS} FROM {DEAD} WHERE id = :id
UNION ALL
SELECT {_WAITING_COLUMNS} FROM {WAITING} WHERE id = :id
"""

GET_JOB_IN_QUEUE = f"""
SELECT {_LIVE_COLUMNS} FROM {JOBS} WHERE id = :id AND queue = :queue
UNION ALL
SELECT {_DEAD_COLUMNS} FROM {DEAD} WHERE id = :id AND queue = :queue
UNION ALL
SELECT {_WAITING_COLUMNS} FROM {WAITING} WHERE id = :id AND queue = :queue
"""

# The earliest future run_at among pending rows without a second index on
# (queue, run_at), which every enqueue would pay for: walk the distinct
# priorities of the live index's pending range (one seek each) and take the first
# run_at > now in each. Cost grows with the number of distinct pending
# priorities, not the backlog. The earliest future deadline is one seek into the
# claimed range.
NEXT_WAKE_AT = f"""
WITH RECURSIVE priorities (priority) AS (
    SELECT max(priority) FROM {JOBS} INDEXED BY {LIVE_INDEX}
     WHERE queue = :queue AND deadline IS NULL
    UNION ALL
    SELECT (SELECT max(j.priority) FROM {JOBS} AS j INDEXED BY {LIVE_INDEX}
             WHERE j.queue = :queue AND j.deadline IS NULL
               AND j.priority < p.priority)
      FROM priorities AS p
     WHERE p.priority IS NOT NULL
)
SELECT
    (SELECT min((SELECT min(j.run_at) FROM {JOBS} AS j INDEXED BY {LIVE_INDEX}
                  WHERE j.queue = :queue AND j.deadline IS NULL
                    AND j.priority = p.priority AND j.run_at > :now))
       FROM priorities AS p
      WHERE p.priority IS NOT NULL),
    (SELECT min(deadline) FROM {JOBS} INDEXED BY {LIVE_INDEX}
      WHERE queue = :queue AND {_IN_FLIGHT}),
    CASE WHEN EXISTS (SELECT 1 FROM {LIMITS} WHERE queue = :queue)
         THEN (SELECT limits.concurrency <= {_LIVE_CLAIMS}
                 FROM {LIMITS} AS limits WHERE limits.queue = :queue)
         ELSE 0 END,
    CASE WHEN EXISTS (SELECT 1 FROM {LIMITS} WHERE queue = :queue AND rate IS NOT NULL)
         THEN (SELECT CASE WHEN limits.rate <= {_WINDOW_STARTS}
                           THEN (SELECT min(started_at) FROM {CLAIM_STARTS}
                                  WHERE queue = :queue
                                    AND started_at > :now - limits.per_s) + limits.per_s
                      END
                 FROM {LIMITS} AS limits WHERE limits.queue = :queue)
         END,
    CASE WHEN EXISTS (SELECT 1 FROM {LIMITS} WHERE queue = :queue AND rate_per_key IS NOT NULL)
         THEN (SELECT (SELECT min(started_at) FROM {KEY_STARTS}
                        WHERE queue = :queue AND started_at > :now - limits.per_s)
                      + limits.per_s
                 FROM {LIMITS} AS limits WHERE limits.queue = :queue)
         END
"""
"""The queue's next pending ``run_at`` and next deadline after ``:now``, whether it is
at its concurrency limit (then only a deadline can free a slot), at its rate limit,
when its oldest start in the window leaves it, and with a per-key rate, when the
oldest start of any key leaves the window (§16.11)."""

SET_LIMITS = f"""
INSERT INTO {LIMITS} (queue, concurrency, rate, per_s, concurrency_per_key, rate_per_key)
VALUES (:queue, :concurrency, :rate, :per_s, :concurrency_per_key, :rate_per_key)
ON CONFLICT (queue) DO UPDATE
   SET concurrency = excluded.concurrency, rate = excluded.rate, per_s = excluded.per_s,
       concurrency_per_key = excluded.concurrency_per_key,
       rate_per_key = excluded.rate_per_key
 WHERE concurrency IS NOT excluded.concurrency OR rate IS NOT excluded.rate
    OR per_s IS NOT excluded.per_s OR concurrency_per_key IS NOT excluded.concurrency_per_key
    OR rate_per_key IS NOT excluded.rate_per_key
"""
"""A queue's limits stored; no row changed (rowcount 0) when they were already those."""

CLEAR_LIMITS = f"DELETE FROM {LIMITS} WHERE queue = :queue"

QUEUE_LIMITS = f"""
SELECT queue, concurrency, rate, per_s, concurrency_per_key, rate_per_key FROM {LIMITS}
 WHERE queue = :queue
"""

ALL_QUEUE_LIMITS = f"""
SELECT queue, concurrency, rate, per_s, concurrency_per_key, rate_per_key FROM {LIMITS}
 ORDER BY queue
"""

# -- operations (the ops profile) ---------------------------------------------------


# Stats: one pass over each index, grouped by queue (each index starts with the
# queue, so grouping sorts nothing): the live index for pending and claimed rows,
# the dead table's queue index for dead ones; every read is index-only, no row of
# any table is visited. The queues reported are either those named in :queues (a
# JSON array) or every queue that has a row in one of the two or a pause.
def _queue_stats(names: str, reported: str) -> str:
    return f"""
WITH
names (queue) AS ({names}),
live (queue, ready, scheduled, oldest_ready, processing, lapsed, completed) AS (
    SELECT queue,
           count(*) FILTER (WHERE deadline IS NULL AND run_at <= :now),
           count(*) FILTER (WHERE deadline IS NULL AND run_at > :now),
           min(run_at) FILTER (WHERE deadline IS NULL AND run_at <= :now),
           count(*) FILTER (WHERE {_IN_FLIGHT}),
           count(*) FILTER (WHERE deadline <= :now),
           count(*) FILTER (WHERE deadline >= {KEPT_FROM})
      FROM {JOBS} INDEXED BY {LIVE_INDEX}
     WHERE {reported}
     GROUP BY queue),
dead (queue, dead) AS (
    SELECT queue, count(*) FROM {DEAD} INDEXED BY {DEAD_QUEUE_INDEX}
     WHERE {reported}
     GROUP BY queue),
waiting (queue, waiting) AS (
    SELECT queue, count(*) FROM {WAITING} INDEXED BY {WAITING_QUEUE_INDEX}
     WHERE {reported}
     GROUP BY queue)
SELECT names.queue,
       coalesce(live.ready, 0), coalesce(live.scheduled, 0),
       coalesce(live.processing, 0), coalesce(live.lapsed, 0), coalesce(dead.dead, 0),
       :now - live.oldest_ready,
       EXISTS (SELECT 1 FROM {PAUSED} WHERE {PAUSED}.queue = names.queue),
       coalesce(live.completed, 0),
       coalesce(waiting.waiting, 0)
  FROM names
  LEFT JOIN live ON live.queue = names.queue
  LEFT JOIN dead ON dead.queue = names.queue
  LEFT JOIN waiting ON waiting.queue = names.queue
 ORDER BY names.queue
"""


_NAMED = "SELECT DISTINCT value FROM json_each(:queues)"

QUEUE_STATS = _queue_stats(_NAMED, f"queue IN ({_NAMED})")
"""Stats of the queues named in ``:queues`` (a JSON array of names), as of ``:now``."""

QUEUE_STATS_ALL = _queue_stats(
    f"""SELECT queue FROM live UNION SELECT queue FROM dead
        UNION SELECT queue FROM waiting
        UNION SELECT queue FROM {PAUSED}""",
    "TRUE",
)
"""Stats of every queue with a live or dead row or a pause, as of ``:now``."""

# A page of a queue's jobs, by id. Live rows are a range of the queue index
# (queue, then the rowid: version 12), which an enqueue and an ack write and a
# claim does not touch; the pending rows among them are most of them, so a
# pending page reads about its own rows. Processing rows (the claims in flight)
# are read off the live index's claimed range and sorted: walking the queue
# index for them would step over every pending row (the range ends below the
# completed rows: version 18). Completed rows are read off the queue index as
# pending ones are; dead and waiting rows are ranges of their tables' queue indexes,
# in id order too.
_LIVE_PAGE = f"""
SELECT {_LIVE_COLUMNS} FROM {JOBS} INDEXED BY {QUEUE_INDEX}
 WHERE queue = :queue AND id > :after{{state}}
 ORDER BY id LIMIT :limit
"""
_CLAIMED_PAGE = f"""
SELECT {_LIVE_COLUMNS} FROM {JOBS} INDEXED BY {LIVE_INDEX}
 WHERE queue = :queue AND deadline < {KEPT_FROM} AND state = 'processing' AND id > :after
 ORDER BY id LIMIT :limit
"""
_DEAD_PAGE = f"""
SELECT {_DEAD_COLUMNS} FROM {DEAD} INDEXED BY {DEAD_QUEUE_INDEX}
 WHERE queue = :queue AND id > :after
 ORDER BY id LIMIT :limit
"""

_WAITING_PAGE = f"""
SELECT {_WAITING_COLUMNS} FROM {WAITING} INDEXED BY {WAITING_QUEUE_INDEX}
 WHERE queue = :queue AND id > :after
 ORDER BY id LIMIT :limit
"""

LIST_JOBS = f"""
SELECT * FROM (SELECT * FROM ({_LIVE_PAGE.format(state="")})
               UNION ALL
               SELECT * FROM ({_DEAD_PAGE})
               UNION ALL
               SELECT * FROM ({_WAITING_PAGE}))
 ORDER BY id LIMIT :limit
"""
"""Live, dead and completed jobs of ``:queue`` with ``id > :after``, the first
``:limit`` by id."""

LIST_PENDING_JOBS = _LIVE_PAGE.format(state=" AND state = 'pending'")
"""Pending jobs of ``:queue`` with ``id > :after``."""

LIST_COMPLETED_JOBS = _LIVE_PAGE.format(state=" AND state = 'completed'")
"""Completed jobs of ``:queue`` with ``id > :after`` (live rows completed in place)."""

LIST_PROCESSING_JOBS = _CLAIMED_PAGE
"""Processing jobs of ``:queue`` with ``id > :after``."""

LIST_DEAD_JOBS = _DEAD_PAGE


LIST_WAITING_JOBS = _WAITING_PAGE

# Newest first (``before_id``): the same ranges walked backwards from :before.
_NEWEST = (("id > :after", "id > :after AND id < :before"), ("ORDER BY id", "ORDER BY id DESC"))


def _newest(page: str) -> str:
    for oldest, newest in _NEWEST:
        assert page.count(oldest) >= 1, page
        page = page.replace(oldest, newest)
    return page


LIST_JOBS_NEWEST = _newest(LIST_JOBS)
"""Live and dead jobs of ``:queue`` with ``:after < id < :before``, the last ``:limit``
by id, largest first."""

LIST_PENDING_JOBS_NEWEST = _newest(LIST_PENDING_JOBS)
"""Pending jobs of ``:queue`` with ``:after < id < :before``, largest id first."""

LIST_PROCESSING_JOBS_NEWEST = _newest(LIST_PROCESSING_JOBS)
"""Processing jobs of ``:queue`` with ``:after < id < :before``, largest id first."""

LIST_DEAD_JOBS_NEWEST = _newest(LIST_DEAD_JOBS)

LIST_COMPLETED_JOBS_NEWEST = _newest(LIST_COMPLETED_JOBS)

LIST_WAITING_JOBS_NEWEST = _newest(LIST_WAITING_JOBS)


# Redrive: one INSERT makes the new rows from the dead ones, in the order given
# (AUTOINCREMENT numbers them in insert order), and returns each new id with the
# dead id it replaces; one DELETE then removes those dead rows. The dead rows
# are picked either by the ids in :ids (a JSON array, repeats removed, each
# looked up by key) or as the oldest :limit off the dead age index.
# A redriven job keeps its dead row's stamps but for the three that count from
# its enqueue: it is enqueued now, its lifetime (if any) starting over.
_RESTAMPED = {
    "created_at": ":now",
    "run_at": ":now",
    "expires_at": ":now + (d.expires_at - d.created_at)",
}
_REDRIVE_COLUMNS = ", ".join(
    [
        *JOB_STAMP_FIELDS,
        "state",
        "payload",
        "attempts",
        "redriven_from",
        "unique_key",
        "unique_hold",
        "hold_until",
        "hold_dead",
    ]
)
_REDRIVE_VALUES = ", ".join(
    [
        *(_RESTAMPED.get(f, f"d.{f}") for f in JOB_STAMP_FIELDS),
        "'pending'",
        "d.payload",
        "0",
        "d.id",
        "d.unique_key",
        "d.unique_key",
        ":now + (d.hold_until - d.created_at)",
        "d.hold_dead",
    ]
)

# A unique job's new life takes its key, unless another job holds it: a live row
# (the unique index: ON CONFLICT skips it, and a second dead row of the same key
# behind a first one) or another dead row keeping it (NOT EXISTS). A skipped row is
# not returned, so its dead row stays. (The caller first makes live holds that
# passed give their key up.)
_KEY_FREE = f"""(d.unique_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM {DEAD} AS other
         WHERE other.queue = d.queue AND other.unique_hold = d.unique_key
           AND other.unique_hold IS NOT NULL AND other.id <> d.id
           AND (other.hold_until IS NULL OR other.hold_until > :now)))"""


def _redrive(chosen: str) -> str:
    return f"""
INSERT INTO {JOBS} ({_REDRIVE_COLUMNS})
SELECT {_REDRIVE_VALUES}
  FROM ({chosen}) AS chosen
  JOIN {DEAD} AS d ON d.id = chosen.id
 WHERE d.queue = :queue AND {_KEY_FREE}
 ORDER BY chosen.position, chosen.id
ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
RETURNING id, redriven_from
"""


REDRIVE_IDS = _redrive("SELECT value AS id, key AS position FROM json_each(:ids)")
"""The dead rows of ``:queue`` named in ``:ids`` (a JSON array without repeats)."""

REDRIVE_OLDEST = _redrive(
    f"""SELECT id, died_at AS position
          FROM {DEAD} INDEXED BY {DEAD_AGE_INDEX}
         WHERE queue = :queue
         ORDER BY died_at, id LIMIT :limit"""
)
"""The oldest ``:limit`` dead rows of ``:queue`` (``died_at``, then id)."""

# -- a redrive's dependents (contract 1.2 §18.4) --------------------------------------

REDRIVEN_FROM = f"""
SELECT id, redriven_from FROM {JOBS} WHERE id IN ({_JSON_IDS}) ORDER BY id
"""
"""The jobs ``:ids`` just made by a redrive, each with the dead job it replaces."""

MOVE_KEPT_EDGES = f"""
UPDATE {KEPT_EDGES} INDEXED BY {KEPT_EDGES_INDEX} SET depends_on = :new WHERE depends_on = :old
"""
"""The kept edges to the dead job ``:old`` now point to its new job ``:new``."""

_LIVE = f"""(EXISTS (SELECT 1 FROM {JOBS} WHERE id = k.depends_on)
        OR EXISTS (SELECT 1 FROM {WAITING} WHERE id = k.depends_on))"""

KEPT_LIVE = f"""
SELECT k.depends_on FROM {KEPT_EDGES} AS k WHERE k.job_id = :old AND {_LIVE}
 ORDER BY k.depends_on
"""
"""The jobs the dead job ``:old`` kept an edge to that can still complete."""

DROP_KEPT_EDGES = f"DELETE FROM {KEPT_EDGES} WHERE job_id = :old"

REVIVABLE = f"""
SELECT DISTINCT w.job_id FROM {KEPT_EDGES} AS w INDEXED BY {KEPT_EDGES_INDEX}
  JOIN {DEAD} AS d ON d.id = w.job_id
 WHERE w.depends_on IN ({_JSON_IDS}) AND NOT EXISTS (
       SELECT 1 FROM {KEPT_EDGES} AS k WHERE k.job_id = w.job_id AND NOT {_LIVE})
 ORDER BY w.job_id
"""
"""The dead jobs with a kept edge to one of ``:ids`` whose every kept edge names a live
or waiting job."""

REDRIVE_REVIVED = f"""
INSERT INTO {JOBS} ({_REDRIVE_COLUMNS})
SELECT {_REDRIVE_VALUES}
  FROM json_each(:ids) AS chosen
  JOIN {DEAD} AS d ON d.id = chosen.value
 ORDER BY chosen.value
RETURNING id
"""
"""The dead rows ``:ids`` (of any queue) made new, as a redrive makes them."""

PRUNE_KEPT_EDGES = f"""
DELETE FROM {KEPT_EDGES} WHERE NOT EXISTS (SELECT 1 FROM {DEAD} WHERE id = job_id)
"""
"""The kept edges of dead rows purged or swept."""

# NOT INDEXED still allows the primary key: the named rows are found by id, never
# by a range over the queue's dead rows (which the planner may prefer).
DELETE_DEAD_IDS = f"""
DELETE FROM {DEAD} NOT INDEXED WHERE id IN (SELECT value FROM json_each(:ids))
"""

PURGE_DEAD_ALL = f"DELETE FROM {DEAD} INDEXED BY {DEAD_QUEUE_INDEX} WHERE queue = :queue"

PURGE_DEAD_BEFORE = f"""
DELETE FROM {DEAD} INDEXED BY {DEAD_AGE_INDEX}
 WHERE queue = :queue AND died_at < :died_before
"""

PURGE_DEAD_IDS = f"""
DELETE FROM {DEAD} NOT INDEXED
 WHERE id IN (SELECT value FROM json_each(:ids)) AND queue = :queue
   AND (:died_before IS NULL OR died_at < :died_before)
"""
"""The dead rows of ``:queue`` named in ``:ids`` (a JSON array), of those the ones
that died before ``:died_before`` when it is not NULL."""

PAUSE = f"INSERT INTO {PAUSED} (queue) VALUES (:queue) ON CONFLICT (queue) DO NOTHING"

RESUME = f"DELETE FROM {PAUSED} WHERE queue = :queue"

IS_PAUSED = f"SELECT EXISTS (SELECT 1 FROM {PAUSED} WHERE queue = :queue)"

# -- locks ----------------------------------------------------------------------

LOCK_ACQUIRE, LOCK_ACQUIRE_PARAMS = _bind(
    f"""
INSERT INTO {LOCKS} (name, owner, expires_at) VALUES (:name, :owner, :expires_at)
ON CONFLICT (name) DO UPDATE
   SET owner = excluded.owner, expires_at = excluded.expires_at
 WHERE {LOCKS}.expires_at <= :now OR {LOCKS}.owner = excluded.owner
""",
    LockLease,
)

LOCK_RENEW, LOCK_RENEW_PARAMS = _bind(
    f"""
UPDATE {LOCKS} SET expires_at = :expires_at
 WHERE name = :name AND owner = :owner AND expires_at > :now
""",
    LockLease,
)

LOCK_RELEASE, LOCK_RELEASE_PARAMS = _bind(
    f"DELETE FROM {LOCKS} WHERE name = :name AND owner = :owner AND expires_at > :now",
    LockRelease,
)

LOCK_HOLDER = f"SELECT owner, expires_at FROM {LOCKS} WHERE name = :name AND expires_at > :now"

# -- scheduler ------------------------------------------------------------------

SCHEDULE_COLUMNS = (
    "name, spec, queue, payload, priority, max_attempts, expires_s, interval_s, next_fire_at, "
    "timezone, catch_up, declared_until"
)
"""In the field order of ``alkstore.driver.ScheduleRecord``, which is built from a row."""

# One statement: an unchanged spec in an unchanged zone keeps its stored boundary
# (re-registering must not push the next fire away), a new or changed spec or zone
# takes the one given. (Every right-hand side of DO UPDATE reads the row as it was
# before the update.)
SCHEDULE_UPSERT = f"""
INSERT INTO {SCHEDULES} ({SCHEDULE_COLUMNS})
VALUES (:name, :spec, :queue, :payload, :priority, :max_attempts, :expires_s, :interval_s,
        :next_fire_at, :timezone, :catch_up, :declared_until)
ON CONFLICT (name) DO UPDATE
   SET spec = excluded.spec,
       queue = excluded.queue,
       payload = excluded.payload,
       priority = excluded.priority,
       max_attempts = excluded.max_attempts,
       expires_s = excluded.expires_s,
       interval_s = excluded.interval_s,
       timezone = excluded.timezone,
       catch_up = excluded.catch_up,
       declared_until = excluded.declared_until,
       next_fire_at = CASE WHEN {SCHEDULES}.spec = excluded.spec
                                AND {SCHEDULES}.timezone = excluded.timezone
                           THEN {SCHEDULES}.next_fire_at
                           ELSE excluded.next_fire_at END
"""

SCHEDULE_DELETE = f"DELETE FROM {SCHEDULES} WHERE name = :name"

SCHEDULE_GET = f"SELECT {SCHEDULE_COLUMNS} FROM {SCHEDULES} WHERE name = :name"

SCHEDULE_LIST = f"SELECT {SCHEDULE_COLUMNS} FROM {SCHEDULES} ORDER BY name"

SCHEDULES_DUE = f"""
SELECT {SCHEDULE_COLUMNS} FROM {SCHEDULES}
 WHERE next_fire_at <= :now
 ORDER BY next_fire_at, name
"""

# The compare-and-set of a boundary fire: a ticker that read a stale boundary
# updates nothing. The write lock is held from here to the commit of the fire.
SCHEDULE_ADVANCE, SCHEDULE_ADVANCE_PARAMS = _bind(
    f"""
UPDATE {SCHEDULES} SET next_fire_at = :new_fire_at
 WHERE name = :name AND next_fire_at = :expected
""",
    ScheduleAdvance,
)

SCHEDULE_NEXT_FIRE_AT = f"SELECT min(next_fire_at) FROM {SCHEDULES}"

# -- declared schedules (the periodic profile) -------------------------------------


def schedules_renew(count: int) -> str:
    """Renew the lease of ``count`` named schedules (``?2`` .. ``?{count + 1}``) to
    ``?1``: only those still declared."""
    names = ", ".join(f"?{i}" for i in range(2, count + 2))
    return f"""
UPDATE {SCHEDULES} SET declared_until = ?1
 WHERE name IN ({names}) AND declared_until IS NOT NULL
RETURNING name
"""


SCHEDULES_LAPSE, SCHEDULES_LAPSE_PARAMS = _bind(
    f"""
DELETE FROM {SCHEDULES}
 WHERE declared_until IS NOT NULL AND declared_until <= :now
RETURNING name
""",
    ScheduleLapse,
)

# -- the worker registry (the workers profile) -------------------------------------

WORKERS_LAPSE = f"DELETE FROM {WORKERS} WHERE lease_until <= :now"
"""Named: ``now``."""

WORKER_UPSERT = f"""
INSERT INTO {WORKERS} (id, host, pid, queues, started_at, last_seen, lease_until)
VALUES (:worker_id, :host, :pid, :queues, :started_at, :now, :lease_until)
ON CONFLICT (id) DO UPDATE
   SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
       started_at = excluded.started_at, last_seen = excluded.last_seen,
       lease_until = excluded.lease_until
"""
"""Named: ``WorkerRegister``'s fields, ``queues`` as JSON text."""

WORKER_RENEW, WORKER_RENEW_PARAMS = _bind(
    f"""
UPDATE {WORKERS} SET last_seen = :now, lease_until = :lease_until
 WHERE id = :worker_id AND lease_until > :now
""",
    WorkerRenew,
)

WORKER_DEREGISTER, WORKER_DEREGISTER_PARAMS = _bind(
    f"DELETE FROM {WORKERS} WHERE id = :worker_id", WorkerRef
)

WORKERS_LIST, WORKERS_LIST_PARAMS = _bind(
    f"""
SELECT id, host, pid, queues, started_at, last_seen, lease_until FROM {WORKERS}
 WHERE lease_until > :now
 ORDER BY id
""",
    WorkersAt,
)

THROUGHPUT_ADD = f"""
INSERT INTO {THROUGHPUT} (queue, minute, count)
SELECT q.value, :minute, n.value
  FROM json_each(:queues) AS q JOIN json_each(:counts) AS n ON n.key = q.key
 WHERE true
ON CONFLICT (queue, minute) DO UPDATE SET count = count + excluded.count
"""
"""Named: ``minute``, and ``queues`` and ``counts`` as JSON arrays of one length."""

THROUGHPUT_PRUNE = f"DELETE FROM {THROUGHPUT} WHERE minute <= :prune_through"

THROUGHPUT_READ = f"SELECT queue, minute, count FROM {THROUGHPUT} WHERE minute > :after"

# -- streams ----------------------------------------------------------------------

# Takes :count offsets from the stream's counter row and returns the last one.
# The update holds SQLite's write lock until the transaction ends, so no other
# transaction can take the next offsets before this one commits or rolls back.
STREAM_ALLOCATE = f"""
INSERT INTO {STREAMS} (stream, last_offset) VALUES (:stream, :count)
ON CONFLICT (stream) DO UPDATE SET last_offset = {STREAMS}.last_offset + excluded.last_offset
RETURNING last_offset
"""

STREAM_INSERT = f"""
INSERT INTO {STREAM_EVENTS} (stream, offset, payload, created_at) VALUES (?, ?, ?, ?)
"""
"""Positional: stream, offset, payload, created_at."""

STREAM_READ, STREAM_READ_PARAMS = _bind(
    f"""
SELECT offset, payload, created_at FROM {STREAM_EVENTS}
 WHERE stream = :stream AND offset > :after
 ORDER BY offset
 LIMIT :limit
""",
    StreamRead,
)

STREAM_COMMIT, STREAM_COMMIT_PARAMS = _bind(
    f"""
INSERT INTO {STREAM_OFFSETS} (stream, consumer, offset) VALUES (:stream, :consumer, :offset)
ON CONFLICT (stream, consumer) DO UPDATE SET offset = excluded.offset
""",
    StreamCommit,
)

STREAM_OFFSET, STREAM_OFFSET_PARAMS = _bind(
    f"""
SELECT offset FROM {STREAM_OFFSETS} WHERE stream = :stream AND consumer = :consumer
""",
    StreamOffset,
)

STREAM_TRIM, STREAM_TRIM_PARAMS = _bind(
    f"DELETE FROM {STREAM_EVENTS} WHERE stream = :stream AND offset < :before", StreamTrim
)

# -- pub/sub ----------------------------------------------------------------------

PUBLISH, PUBLISH_PARAMS = _bind(
    f"""
INSERT INTO {NOTIFICATIONS} (channel, payload, created_at) VALUES (:channel, :payload, :now)
""",
    Publish,
)

LATEST_NOTIFICATION = f"SELECT coalesce(max(id), 0) FROM {NOTIFICATIONS}"
"""Where a watcher that starts tracking begins: messages up to here are not for it."""

NOTIFICATIONS_AFTER = f"""
SELECT id, channel, payload FROM {NOTIFICATIONS} WHERE id > :after ORDER BY id LIMIT :limit
"""

# Pruning keeps the rows with the newest :keep ids (so at most :keep rows).
# Both read the table's two ends by primary key; opening a store runs the first
# on its read, and takes the writer lock for the second only when it is needed.
NOTIFICATIONS_OVERFLOW = f"""
SELECT EXISTS (
    SELECT 1 FROM {NOTIFICATIONS} WHERE id <= (SELECT max(id) FROM {NOTIFICATIONS}) - :keep
)
"""

PRUNE_NOTIFICATIONS = f"""
DELETE FROM {NOTIFICATIONS} WHERE id <= (SELECT max(id) FROM {NOTIFICATIONS}) - :keep
"""
