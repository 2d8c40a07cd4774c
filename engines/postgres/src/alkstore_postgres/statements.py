"""Every SQL statement the driver runs, one named constant each.

Templates name the engine schema as ``{schema}``; ``Statements.for_schema``
renders them once per store with the schema quoted by
``psycopg.sql.Identifier`` (never interpolated raw), into bytes that psycopg
executes -- and, after a few runs, prepares -- as is. Values are always
``%(name)s`` parameters. Time is always the ``now`` parameter from the store's
clock; no statement reads the server's own ``now()``. Job and schedule column
lists are never written out here: ``columns`` derives them from the contract's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache, lru_cache
from typing import Final

from psycopg import sql

from alkstore.constants import MAX_ERROR_HISTORY
from alkstore.rows import CLAIMED_COLUMNS, ScheduleRecord

from .columns import (
    CLAIMED_JOB,
    COMPLETED_JOB,
    DEAD_JOB,
    HOLD,
    HOLD_KEPT_DEAD,
    LIVE_JOB,
    MOVED,
    STAMP_COLUMNS,
    STAMP_PARAMETERS,
    WAITING_JOB,
    column,
    column_list,
    parameters,
    restamped,
)

# -- shared fragments ------------------------------------------------------------


def _appended_error(entry: str) -> str:
    """``errors`` with the entry ``entry`` (``alkstore.rows.error_entry``) appended,
    the latest ``MAX_ERROR_HISTORY`` kept: a slice of the array, the entries themselves
    are never parsed. (``cardinality(NULL)`` is NULL, which ``greatest`` ignores.)"""
    return f"""
    (coalesce(errors, ARRAY[]::text[]) || {entry}::text)
        [greatest(1, cardinality(errors) + 2 - {MAX_ERROR_HISTORY}):]"""


_APPENDED_ERROR = _appended_error("%(entry)s")
"""The history with the statement's one ``%(entry)s`` appended."""


def _move_to_dead(predicate: str, errors: str = "errors") -> str:
    """One atomic statement: delete the live rows matching ``predicate`` and insert
    them into the dead table with ``%(last_error)s`` and the history ``errors``; the
    statement's row count is how many moved. A row with dependents carries the flag,
    whose trigger dead-letters them (the dependencies profile). A unique job's hold of its key moves
    only if it keeps it while dead (``HOLD_KEPT_DEAD``)."""
    return f"""
WITH moved AS (
    DELETE FROM {{schema}}.alkstore_jobs
    WHERE {predicate}
    RETURNING {MOVED}, errors, {HOLD}, has_dependents
)
INSERT INTO {{schema}}.alkstore_dead_jobs (
        {MOVED}, errors, {HOLD}, has_dependents, last_error, died_at)
SELECT {MOVED}, {errors}, {HOLD_KEPT_DEAD}, has_dependents, %(last_error)s, %(now)s
FROM moved
"""


_NOT_PAUSED = """
      AND NOT EXISTS (SELECT FROM {schema}.alkstore_paused_queues WHERE queue = %(queue)s)"""
"""A claim's guard: not a row for a paused queue. Uncorrelated, so the planner
evaluates it once per statement (one primary-key probe), before any row is locked."""

_NOT_LIMITED = """
      AND NOT EXISTS (SELECT FROM {schema}.alkstore_queue_limits WHERE queue = %(queue)s)"""
"""A claim's guard: not a row for a queue with a concurrency limit (the limits
profile), whose claims take ``CLAIM_LIMITED`` after locking the limit's row. One
primary-key probe per statement, as ``_NOT_PAUSED``."""

_LIVE_CLAIMS = """(SELECT count(*) FROM {schema}.alkstore_jobs
      WHERE queue = %(queue)s AND state = 'processing' AND deadline > %(now)s)"""
"""The queue's claims whose deadline has not passed: each holds one of its slots."""


# -- queues ----------------------------------------------------------------------

INSERT_JOB: Final = f"""
WITH inserted AS (
    INSERT INTO {{schema}}.alkstore_jobs (
        payload, {STAMP_COLUMNS})
    VALUES (%(payload)s, {STAMP_PARAMETERS})
    RETURNING id
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic)s::text) WHERE %(topic)s::text IS NOT NULL
)
SELECT id FROM inserted, (SELECT count(*) FROM woken) AS wake
"""
"""Insert one job and, in the same statement, NOTIFY its queue's topic (unless
``topic`` is NULL: this transaction already announced it).

The NOTIFY rides along so a lone enqueue costs one round trip; PostgreSQL
delivers it only when the transaction commits."""

INSERT_JOBS: Final = f"""
WITH inserted AS (
    INSERT INTO {{schema}}.alkstore_jobs (
        payload, {STAMP_COLUMNS})
    SELECT job.payload, {STAMP_PARAMETERS}
    FROM unnest(%(payloads)b::text[]) WITH ORDINALITY AS job (payload, position)
    ORDER BY job.position
    RETURNING id
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic)s::text) WHERE %(topic)s::text IS NOT NULL
)
SELECT id FROM inserted, (SELECT count(*) FROM woken) AS wake
ORDER BY id
"""
"""``INSERT_JOB`` for many jobs that share every stamp (one ``enqueue_many``).

Only the payloads vary, so they travel as one binary array and the stamps as
scalars. Ids come from one identity sequence in ``position`` order, so
``ORDER BY id`` is input order."""


_UNIQUE_ARGUMENTS = """
    %(queue)s, %(priority)s, %(created_at)s, %(run_at)s, %(expires_at)s::bigint,
    %(max_attempts)s, %(visibility_timeout_s)s, %(backoff_base_s)s,
    %(dead_letter_retention_s)s::bigint, %(hold_until)s::bigint, %(hold_dead)s"""
"""The stamps and the hold, as the unique enqueue functions take them."""

INSERT_UNIQUE: Final = f"""
SELECT {{schema}}.alkstore_enqueue_unique_many({_UNIQUE_ARGUMENTS},
    %(payloads)s::text[], %(keys)s::text[], %(wake_channel)s, %(topic)s::text)
"""
"""The unique enqueue of many keys: ``alkstore_enqueue_unique_many`` (migration 7, made
again by ``UNIQUE_BATCH_ORDER_MIGRATION`` to give passed holds up before its insert)
inserts each payload whose key no job of the queue holds, set-based, and gives one
signed id per key, in order (see ``INSERT_UNIQUE_ONE``); it NOTIFYs the queue when a
row went in (unless ``topic`` is NULL: this transaction already announced it)."""

INSERT_UNIQUE_ONE: Final = f"""
SELECT {{schema}}.alkstore_enqueue_unique({_UNIQUE_ARGUMENTS},
    %(payload)s, %(key)s, %(wake_channel)s, %(topic)s::text)
"""
"""The lone unique enqueue, the hot path: ``alkstore_enqueue_unique`` (migration 7)
gives one scalar, the new job's id or minus the id of the job holding the key (ids
are positive), and NOTIFYs the queue (unless ``topic`` is NULL) when the row went in."""


_CLAIM_SET = """SET state = 'processing',
    attempts = job.attempts + 1,
    claimed_at = %(now)s,
    worker_id = %(worker_id)s,
    deadline = %(now)s + job.visibility_timeout_s"""
"""What every claim sets on the rows it claims (``job``)."""

_CLAIM_RETURNING = f"RETURNING {CLAIMED_JOB}"
"""``alkstore.rows.CLAIMED_COLUMNS`` of the claimed rows, as updated."""


_LIMITED_CUE = f"""
UNION ALL
SELECT {", ".join(["NULL"] * len(CLAIMED_COLUMNS))}
FROM {{schema}}.alkstore_queue_limits WHERE queue = %(queue)s"""
"""The end of ``CLAIM``: one row of NULLs when the queue has a limit (the driver's cue)."""


def _exhausted_buried(selected: str = "", flag: str = ", has_dependents") -> str:
    """The CTEs of a claim's move to dead: ``exhausted``, the queue's lapsed claims at
    their budget (``id`` and ``selected``; one another claimer has locked is left to
    it), and ``buried``, them deleted, returning what the dead row keeps (``flag``: the
    ``has_dependents`` flag, whose trigger settles their dependents)."""
    return f"""exhausted AS (
    SELECT id{selected} FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND deadline <= %(now)s
      AND attempts >= max_attempts
    FOR UPDATE SKIP LOCKED
), buried AS (
    DELETE FROM {{schema}}.alkstore_jobs
    WHERE id IN (SELECT id FROM exhausted)
    RETURNING {MOVED}, errors, {HOLD}{flag}
)"""


def _into_dead(flag: str = ", has_dependents") -> str:
    """The insert of ``_exhausted_buried``'s rows into the dead table."""
    return f"""INSERT INTO {{schema}}.alkstore_dead_jobs (
        {MOVED}, errors, {HOLD}{flag}, last_error, died_at)
    SELECT {MOVED}, errors, {HOLD_KEPT_DEAD}{flag}, %(last_error)s, %(now)s
    FROM buried"""


RELEASED_CUE_ID: Final = 0
"""The id of ``CLAIM``'s other cue row (no job has it: ids start at 1): it buried a row
with dependents, so it claimed nothing and the driver runs it again."""

_RELEASED_CUE = f"""
UNION ALL
(SELECT {RELEASED_CUE_ID}, {", ".join(["NULL"] * (len(CLAIMED_COLUMNS) - 1))}
 FROM exhausted WHERE has_dependents LIMIT 1)"""
"""After ``CLAIM``'s rows: its cue when it buried a row with dependents."""


def _claim(
    pick: str,
    guard: str = _NOT_LIMITED,
    slots: str = "%(limit)s",
    *,
    returning: str = _CLAIM_RETURNING,
    recorded: str = "",
    cue: str = _LIMITED_CUE,
    released_first: bool = False,
) -> str:
    """The claim statement; ``pick`` is how its UPDATE takes the chosen rows' ``ctid``,
    ``guard`` what else a candidate row's queue must satisfy, ``slots`` how many rows
    it claims at most, ``returning`` what it gives of them, ``recorded`` more CTEs
    after ``claimed`` and ``cue`` what follows its rows. ``released_first``: when it
    buries a row with dependents it claims nothing and says so (``_RELEASED_CUE``), as
    its snapshot cannot see the jobs that move made pending (contract §2.7)."""
    flagged = ", has_dependents" if released_first else ""
    wait = (
        "\n    WHERE NOT EXISTS (SELECT FROM exhausted WHERE has_dependents)"
        if released_first
        else ""
    )
    released = _RELEASED_CUE if released_first else ""
    return f"""
WITH {_exhausted_buried(flagged)}, dead AS (
    {_into_dead()}
), ready AS (
    SELECT ctid AS row_at, id, priority, run_at FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s
      AND (expires_at IS NULL OR expires_at > %(now)s)
      AND attempts < max_attempts{_NOT_PAUSED}{guard}
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), lapsed AS (
    SELECT ctid AS row_at, id, priority, run_at FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND deadline <= %(now)s
      AND (expires_at IS NULL OR expires_at > %(now)s)
      AND attempts < max_attempts{_NOT_PAUSED}{guard}
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT row_at FROM (SELECT * FROM ready UNION ALL SELECT * FROM lapsed) AS candidate{wait}
    ORDER BY priority DESC, run_at, id
    LIMIT {slots}
), claimed AS (
    UPDATE {{schema}}.alkstore_jobs AS job
    {_CLAIM_SET}
    WHERE job.ctid {pick}
    {returning}
){recorded}
SELECT * FROM claimed{released}{cue}
"""


CLAIM: Final = _claim("= ANY(ARRAY(SELECT row_at FROM chosen))", released_first=True)
"""Dead-letter the exhausted lapsed rows and claim, in one statement (one round trip).

First the queue's lapsed claims at their attempt budget move to the dead table
(``exhausted``/``buried``/``dead``: ``BURY_EXHAUSTED``'s move, as data-modifying
CTEs of this statement, so the move is as atomic as the claim). A row another
claimer has locked is skipped: that claimer is moving it. Every CTE sees the
statement's one snapshot, and the claim's lapsed branch takes only rows with
``attempts < max_attempts``, so the two never touch the same row. That snapshot
cannot see what the move makes pending (a fan-in callback of a buried member, made
pending by the dead table's trigger), which contract §2.7 lets this claim hand out:
so when a buried row has dependents the statement claims nothing and ends with its
cue (``RELEASED_CUE_ID``), and the driver runs it again, with a fresh snapshot.

Then the claim: each state walks its own partial index in claim order (pending:
``alkstore_jobs_pending_claim``; lapsed: ``alkstore_jobs_processing_deadline``) and
locks with SKIP LOCKED, so concurrent claimers never wait on or share a row; the
best ``limit`` of both are claimed, the rest unlock at commit. The chosen rows are
updated where they lie (``ctid = ANY(ARRAY(...))``, a TID scan): each is locked by
this statement, so no one can move it first. (One that another claimer took and
gave back after this statement's snapshot is locked in its newer version, which
the update's snapshot does not see: it is left pending and unclaimed this time;
a one-row claim that comes back empty runs ``CLAIM`` next, with a fresh snapshot.)
Any other way in depends on the
table's size when the statement was planned: as a join the planner would hash
the whole table once the backlog is a few thousand rows, and by primary key
(``id = ANY``) a plan made while the table was nearly empty, which psycopg then
prepares and PostgreSQL keeps as its generic plan, scans the whole table for
every claim once it has grown. A paused queue
(``alkstore_paused_queues``) yields nothing and locks nothing to claim (its
exhausted rows still move). It returns ``alkstore.rows.CLAIMED_COLUMNS``: what the
claim did not set itself. Prepared, with its plan made again as the table grows: see
``CLAIM_ONE``."""

CLAIM_ONE: Final = _claim("= (SELECT row_at FROM chosen)", released_first=True)
"""``CLAIM`` with ``limit`` 1: one row, so a prepared generic plan of it stays a TID
scan whatever the table's size was when it was planned. (For an array of ``ctid``s
of unknown length the planner prices a TID scan at ten rows, more than a scan of a
table it believes nearly empty: a plan made then, kept as the generic plan, scans
the whole table for every claim once it has grown. So before ``CLAIM`` runs, the
driver lets a connection's plans go once they are ``PLAN_REFRESH_S`` old:
``plans.py``.)"""


def _claim_ready(pick: str, close: str) -> str:
    """The ready-only claim; ``pick``/``close`` wrap its row-choosing subquery."""
    return f"""
UPDATE {{schema}}.alkstore_jobs AS job
{_CLAIM_SET}
WHERE job.ctid {pick}
    SELECT ctid FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s
      AND (expires_at IS NULL OR expires_at > %(now)s)
      AND attempts < max_attempts{_NOT_PAUSED}{_NOT_LIMITED}
      AND NOT EXISTS (SELECT FROM {{schema}}.alkstore_jobs
                      WHERE queue = %(queue)s AND state = 'processing'
                        AND deadline <= %(now)s)
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED{close}
{_CLAIM_RETURNING}
"""


CLAIM_READY: Final = _claim_ready("= ANY(ARRAY(", "))")
"""The common case of ``CLAIM``, lighter: pending rows only, and only while the queue
has no lapsed claim (then there is none to reclaim and none exhausted to move) and
no pause. Both guards are uncorrelated, so each is one index probe per statement,
evaluated before any row is locked. The rows are updated where they lie, as in
``CLAIM``. When it claims nothing the driver runs ``CLAIM``, which tells the cases
apart. Its plan is kept fresh as ``CLAIM``'s."""

CLAIM_READY_ONE: Final = _claim_ready("= (", ")")
"""``CLAIM_READY`` with ``limit`` 1, prepared as ``CLAIM_ONE``."""

_LIMITED_SLOTS = f"""CASE WHEN %(concurrency)s::integer IS NULL THEN %(rate_room)s
            ELSE least(%(rate_room)s, greatest(0, %(concurrency)s::integer - {_LIVE_CLAIMS})) END"""
"""A limited claim's free slots: ``rate_room`` (the most its rate lets start now, at most
the claim's ``limit``: ``limit`` itself without a rate) and, with a concurrency limit,
that limit less its claims whose deadline has not passed (a lapsed claim holds none),
counted only then (``CASE`` evaluates the count's subquery in that branch alone)."""

CLAIM_LIMITED: Final = _claim(
    "= ANY(ARRAY(SELECT row_at FROM chosen))", guard="", slots=_LIMITED_SLOTS
)
"""``CLAIM`` of a queue with a limit (the limits profile): at most its free slots
(``_LIMITED_SLOTS``), under ``LOCK_LIMIT``'s lock on the queue's limit row, with a
snapshot taken after it, so claims of the queue serialise there and each sees every
claim committed before it. (``CLAIM_READY`` and ``CLAIM`` leave a limited queue's rows
alone, and ``CLAIM`` ends with one row of NULLs when the queue has a limit: the
driver's cue.) ``alkstore_claim_limited`` holds it, and works out ``rate_room``."""

LOCK_LIMIT: Final = """
SELECT concurrency, rate, per_s, concurrency_per_key, rate_per_key, key_cursor
FROM {schema}.alkstore_queue_limits
WHERE queue = %(queue)s FOR UPDATE
"""
"""The queue's limits, its row locked until the claim's transaction ends."""

# Contract §16.10's order, read off alkstore_jobs_pending_key: only what a claim takes.
# The key (NULL: the shared key "") and `turn` (1, 2, ...: a key's claimable rows in
# claim order) are as in the ranking of every claimable row this replaced (kept as
# the reference in the engine's tests, whose random backlogs check the two agree):
# every key's first row, then every key's second, the keys after the cursor (the key
# the queue's last claim served) first, then the rest, each in key order ("C":
# code-point order).
#
# `walk` visits the distinct keys of the queue's claimable rows in that order, one
# loose-index probe each (the smallest key past the one before: a seek of the key
# index for the pending rows, and a read of the few lapsed claims through the
# deadline index), wrapping once past the last key to the first, and stops as soon
# as `slots` keys have a free slot and a claimable row: the first turn is then full,
# and no later key can be served. Each chosen key then offers at most
# `slots - keys + 1` rows (a key is served no more in a claim that takes one row of
# every other chosen key first), read by LIMIT off the same index (LATERAL); its
# allowance (the per-key limit less its live claims, the per-key rate less its
# starts in the window) and the turn order cut them.
#
# Cost: O(slots² · log n) for the rows plus one probe per key visited. The worst case
# is a queue with many keys that cannot be served (at their limit, or with no row due
# yet): each costs its probe, and a key's probe also reads its rows not yet due that
# rank before its first due one; each probe also reads the queue's lapsed claims
# (few: a sweep or a claim takes them back), and the live claims are counted once
# per claim (`live`), so a claim also reads the queue's claims in flight.
_KEY = "coalesce(limit_key, '')"
_DUE_ROW = """AND (expires_at IS NULL OR expires_at > %(now)s) AND attempts < max_attempts"""


# The key index is on the pair ARRAY[queue, key] (then claim order), and the pending
# rows are read by that pair alone: no other index of the table can serve a condition
# on it, so the planner cannot trade the index for a walk of the queue's claim index
# filtered by key. With `queue = ... AND key = ...` it did, on a table whose
# statistics were older than its backlog (a queue estimated at a few rows: every
# index ties, and the older one wins): 2.5 ms a probe at 10,000 jobs.
_PAIR = "ARRAY[queue, coalesce(limit_key, '')]"


def _pair(key: str) -> str:
    return f"ARRAY[%(queue)s::text, {key}]"


def _next_key(after: str, op: str = ">") -> str:
    return f"""(SELECT min(k) FROM (
        (SELECT pair[2] AS k FROM (
            SELECT {_PAIR} AS pair FROM {{schema}}.alkstore_jobs
             WHERE state = 'pending' AND {_PAIR} {op} {_pair(after)}
             ORDER BY {_PAIR} LIMIT 1) AS first_pair
          WHERE pair[1] = %(queue)s)
        UNION ALL
        (SELECT {_KEY} AS k FROM {{schema}}.alkstore_jobs
          WHERE queue = %(queue)s AND state = 'processing' AND deadline <= %(now)s
            AND {_KEY} {op} {after}
          ORDER BY 1 LIMIT 1)) AS next_key)"""


def _claimable(key: str, cap: str) -> str:
    return f"""SELECT ctid AS row_at, id, priority, run_at FROM (
            (SELECT ctid, id, priority, run_at FROM {{schema}}.alkstore_jobs
              WHERE state = 'pending' AND {_PAIR} = {_pair(key)}
                AND run_at <= %(now)s {_DUE_ROW}
              ORDER BY priority DESC, run_at, id LIMIT {cap})
            UNION ALL
            (SELECT ctid, id, priority, run_at FROM {{schema}}.alkstore_jobs
              WHERE queue = %(queue)s AND state = 'processing' AND deadline <= %(now)s
                AND {_KEY} = {key} {_DUE_ROW})) AS claimable"""


def _allowance(key: str) -> str:
    return f"""least(
        coalesce(%(per_key)s::integer
                 - coalesce((SELECT n FROM live WHERE live.k = {key}), 0), %(limit)s),
        coalesce(%(rate_per_key)s::integer
                 - coalesce((SELECT n FROM started WHERE started.k = {key}), 0), %(limit)s))"""


def _eligible(key: str) -> str:
    return f"""({_allowance(key)} >= 1 AND EXISTS ({_claimable(key, "1")}))"""


_FIRST_KEY = _next_key("''", ">=")
_IN_WALK = (
    "(walk.k IS NOT NULL AND (NOT walk.wrapped OR %(cursor)s::text IS NULL"
    " OR walk.k <= %(cursor)s::text))"
)

_PICK_CTES = f"""live AS (
    SELECT coalesce(limit_key, '') AS k, count(*) AS n FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND deadline > %(now)s
    GROUP BY 1
), started AS (
    SELECT limit_key AS k, sum(claims) AS n FROM {{schema}}.alkstore_key_claim_starts
    WHERE queue = %(queue)s AND started_at > %(now)s - %(per_s)s::bigint
    GROUP BY 1
), slots AS (
    SELECT CASE WHEN EXISTS (SELECT FROM {{schema}}.alkstore_paused_queues
                              WHERE queue = %(queue)s) THEN 0
           ELSE {_LIMITED_SLOTS} END AS n
), walk(k, wrapped, pos, found) AS (
    SELECT coalesce({_next_key("%(cursor)s::text")}, {_FIRST_KEY}),
           {_next_key("%(cursor)s::text")} IS NULL, 0, 0
    UNION ALL
    SELECT coalesce(step.next_key, CASE WHEN NOT walk.wrapped THEN {_FIRST_KEY} END),
           walk.wrapped OR step.next_key IS NULL, walk.pos + 1, walk.found + step.ok
    FROM walk CROSS JOIN LATERAL (
        SELECT {_next_key("walk.k")} AS next_key, {_eligible("walk.k")}::integer AS ok
    ) AS step
    WHERE {_IN_WALK} AND walk.found + step.ok < (SELECT n FROM slots)
), keys AS (
    SELECT walk.k, walk.pos, {_allowance("walk.k")} AS allowance FROM walk
    WHERE {_IN_WALK} AND {_eligible("walk.k")}
), cap AS (
    SELECT greatest(1, (SELECT n FROM slots) - (SELECT count(*) FROM keys) + 1) AS n
), offered AS (
    SELECT cand.row_at, cand.id, keys.k, keys.pos, keys.allowance,
           row_number() OVER (PARTITION BY keys.pos
                              ORDER BY cand.priority DESC, cand.run_at, cand.id) AS turn
    FROM keys CROSS JOIN LATERAL (
        {_claimable("keys.k", "(SELECT n FROM cap)")}
        ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM cap)) AS cand
), chosen AS (
    SELECT offered.row_at, offered.id, offered.k, offered.turn, offered.pos FROM offered
    WHERE offered.turn <= offered.allowance
    ORDER BY offered.turn, offered.pos
    LIMIT (SELECT n FROM slots)
)"""

PICK_IN_TURN: Final = f"""
WITH RECURSIVE {_PICK_CTES}
SELECT id, k FROM chosen ORDER BY turn, pos
"""
"""The rows ``CLAIM_IN_TURN`` takes, ``(id, key)`` in turn order, without taking them (the
engine's tests check it against the ranking it replaced)."""


def _claim_in_turn(
    returning: str = _CLAIM_RETURNING, recorded: str = "", *, dependents: bool = True
) -> str:
    """``CLAIM_IN_TURN`` giving ``returning`` of its rows, ``recorded`` more CTEs after
    ``claimed``. Its buried rows carry ``has_dependents`` into the dead table, as
    ``_move_to_dead``'s do, so the dead table's trigger settles their dependents
    (``dependents`` false: as migrations 17 to 21 made it, which dropped the flag and
    left a buried row's dependents waiting)."""
    flag = ", has_dependents" if dependents else ""
    return f"""
WITH RECURSIVE {_exhausted_buried(flag=flag)}, dead AS (
    {_into_dead(flag)}
), {_PICK_CTES}, claimed AS (
    UPDATE {{schema}}.alkstore_jobs AS job
    {_CLAIM_SET}
    WHERE job.ctid = ANY(ARRAY(SELECT row_at FROM chosen))
    {returning}
), turned AS (
    UPDATE {{schema}}.alkstore_queue_limits SET key_cursor = last.k
    FROM (SELECT chosen.k FROM chosen JOIN claimed ON claimed.id = chosen.id
          ORDER BY chosen.turn DESC, chosen.pos DESC LIMIT 1) AS last
    WHERE queue = %(queue)s
){recorded}
SELECT * FROM claimed
"""


CLAIM_IN_TURN: Final = _claim_in_turn()
"""``CLAIM_LIMITED`` of a queue with a per-key limit (the key_limits profile), under
``LOCK_LIMIT``'s lock: contract §16.10's turn. Each key (``NULL``: the shared key
``''``) offers its first ``per_key`` less its live claims claimable rows in claim order
(``turn`` 1, 2, ...), and no more than ``rate_per_key`` less its starts in the
window (§16.11); the claim takes every key's first row, then every key's second,
and so on, the keys of each turn after ``cursor`` (the key the queue's last claim
served) first, then the rest, each in byte order (``COLLATE "C"``), at most the queue's
free slots; the key of the last row claimed becomes the cursor. The rows are found by
``_PICK_CTES``' key walk (only what the claim takes; its cost and worst case there),
without ``FOR UPDATE``: claims of the queue serialise on the limit row instead, and a
row another statement changed since the snapshot is left alone (its ``ctid`` moved)."""

_RECORD_KEY_STARTS = """, key_gone AS (
    DELETE FROM {schema}.alkstore_key_claim_starts
    WHERE %(rate_per_key)s::integer IS NOT NULL AND queue = %(queue)s
      AND started_at <= %(now)s - %(per_s)s::bigint
), key_started AS (
    INSERT INTO {schema}.alkstore_key_claim_starts AS starts (
        queue, limit_key, started_at, claims)
    SELECT %(queue)s, coalesce(limit_key, ''), %(now)s, count(*) FROM claimed
    WHERE %(rate_per_key)s::integer IS NOT NULL
    GROUP BY 2
    ON CONFLICT (queue, started_at, limit_key)
    DO UPDATE SET claims = starts.claims + excluded.claims
)"""
"""The starts a per-key rate counts (§16.11), as CTEs of the claim in turn: each claimed
row a start of its key, added to the key's row of this second."""

_FUNCTION_ARGUMENTS: Final = {
    "queue": "p_queue",
    "worker_id": "p_worker_id",
    "now": "p_now",
    "limit": "p_limit",
    "last_error": "p_last_error",
    "concurrency": "v_concurrency",
    "rate_room": "v_rate_room",
    "per_s": "v_per_s",
    "per_key": "v_per_key",
    "rate_per_key": "v_rate_per_key",
    "cursor": "v_cursor",
}
"""A claim statement's parameters as ``alkstore_claim_limited``'s arguments (``p_``) and
the values it read from the limit row or worked out from them (``v_``)."""


def _in_function(statement: str) -> str:
    """``statement`` with each ``%(name)s`` parameter as the function's variable."""
    for name, variable in _FUNCTION_ARGUMENTS.items():
        statement = statement.replace(f"%({name})s", variable)
    if "%(" in statement or "$alkstore$" in statement:
        raise ValueError("a claim statement the function cannot hold")
    return statement.strip()


_LAPSED = """SELECT FROM {schema}.alkstore_jobs
        WHERE queue = %(queue)s AND state = 'processing' AND deadline <= %(now)s"""
"""The queue's lapsed claims (to take back, or to bury at their budget)."""


_COUNT_STARTS = """, counted AS (
    UPDATE {schema}.alkstore_queue_claims
    SET rate_second = %(now)s,
        rate_second_claims = v_second_claims + (SELECT count(*) FROM claimed),
        rate_older_latest = v_older
    WHERE ctid = v_row_at AND v_rate IS NOT NULL AND EXISTS (SELECT FROM claimed)
)"""
"""The claim's starts, as a CTE after ``claimed`` (in ``alkstore_claim_limited``): with a
rate, added to the queue's claims row's count of this second, the row found where the
lock left it (``v_row_at``: no other statement can move it while the lock is held)."""


def _limited_ready(pick: str, close: str, *, counted: bool) -> str:
    """The limited claim of pending rows only, while the queue has no lapsed claim (as
    ``CLAIM_READY``), and, when ``counted`` (a rate), its starts; ``pick``/``close`` wrap
    its row-choosing subquery. Without a rate, the bare UPDATE: no CTE to set up."""
    claim = f"""UPDATE {{schema}}.alkstore_jobs AS job
    {_CLAIM_SET}
    WHERE job.ctid {pick}
        SELECT ctid FROM {{schema}}.alkstore_jobs
        WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s
          AND (expires_at IS NULL OR expires_at > %(now)s)
          AND attempts < max_attempts{_NOT_PAUSED}
          AND NOT EXISTS ({_LAPSED})
        ORDER BY priority DESC, run_at, id
        LIMIT {_LIMITED_SLOTS}
        FOR UPDATE SKIP LOCKED{close}
    RETURNING job.*"""
    if not counted:
        return claim
    return f"""
WITH claimed AS (
    {claim}
){_COUNT_STARTS}
SELECT * FROM claimed
"""


def _ready_branches() -> str:
    """The function's ready claim: one row (a scalar pick, whose generic plan is a TID
    scan at any table size) or more, with or without a rate's starts to count."""
    branches = []
    for condition, pick, close in (("p_limit = 1", "= (", ")"), ("", "= ANY(ARRAY(", "))")):
        for rate, counted in (("v_rate IS NULL", False), ("", True)):
            statement = _in_function(_limited_ready(pick, close, counted=counted))
            test = " AND ".join(part for part in (condition, rate) if part)
            branches.append((test, statement))
    first, *rest = branches
    lines = [f"IF {first[0]} THEN\n            RETURN QUERY {first[1]};"]
    for test, statement in rest:
        keyword = f"ELSIF {test} THEN" if test else "ELSE"
        lines.append(f"        {keyword}\n            RETURN QUERY {statement};")
    return "\n".join(lines) + "\n        END IF;"


LIMIT_ROW_RATE_MIGRATION: Final = 19
"""The migration that keeps a rate's current second in the limit row (the one place its
number is written)."""

SLOT_WAITED_MIGRATION: Final = 21
"""The migration that adds the held-back mark of a claim (``alkstore_jobs.held_back``)
and makes ``CLAIM_LIMITED_FUNCTION`` as below (the one place its number is written)."""

_ROUNDS_OPEN: Final = """
      -- At most two rounds: the second only after the first was held back by the
      -- concurrency limit, once its live claims are marked held back.
      FOR v_round IN 1 .. 2 LOOP
"""
"""The held-back rounds of ``CLAIM_LIMITED_FUNCTION`` (contract §16.4), opened."""


def _rounds_close() -> str:
    """The rounds closed: a held-back round marks the live claims and claims again."""
    return f"""
        v_total := v_total + v_claimed;
        -- The held-back mark (contract §16.4; the ending statements read it through
        -- their RETURNING). Only a concurrency limit holds a claim back for a freed
        -- slot to matter: a claim that took all it asked found room, and so did one
        -- short of it with the queue under its limit (the rate, or no job, cut it).
        -- One short of it at the limit is held back, whatever the rate let it take: a
        -- waiter held by both waits for a slot as well as for the window.
        EXIT WHEN v_concurrency IS NULL OR v_total >= p_limit OR v_round = 2;
        EXIT WHEN {_in_function(_LIVE_CLAIMS)} < v_concurrency;
        -- Held back: mark every live claim of the queue (in this transaction). The
        -- UPDATE waits for the row lock of each claim an ack (or any ending statement)
        -- has deleted or moved and not yet committed, and skips it once that commits,
        -- so the second round's count (a snapshot taken after it) sees that slot free.
        -- An ack that reaches a claim after it was marked waits for this transaction
        -- and deletes the row's latest version (READ COMMITTED), so its RETURNING sees
        -- the mark and it announces the queue. A claim marked before needs nothing: an
        -- ack sees a committed mark in its row the same way. So no slot is freed unseen
        -- by both sides (contract §16.4).
        UPDATE {{schema}}.alkstore_jobs SET held_back = true
        WHERE queue = p_queue AND state = 'processing' AND deadline > p_now AND NOT held_back;
        -- The first round's starts are in the row now (_COUNT_STARTS, which moved the
        -- row: its new place for the second round's count); the second round counts on
        -- top of them and takes at most what is left of the rate.
        IF v_rate IS NOT NULL AND v_claimed > 0 THEN
            v_second_claims := v_second_claims + v_claimed;
            SELECT ctid INTO v_row_at FROM {{schema}}.alkstore_queue_claims
            WHERE queue = p_queue;
        END IF;
        v_rate_room := v_rate_room - v_claimed;
      END LOOP;
      v_claimed := v_total;
"""


_BURY_FIRST: Final = _in_function(f"WITH {_exhausted_buried()}\n{_into_dead()}") + ";"
"""``CLAIM_LIMITED_FUNCTION``'s move of the exhausted claims to dead in a statement of
its own, before the claim that would have moved them (from ``BURY_FIRST_MIGRATION``):
that claim's snapshot then sees the jobs the move made pending, a fan-in callback of a
buried member being the claim's to hand out (contract §2.7)."""


def _claim_limited_function(*, mark: bool, dependents: bool = True, bury_first: bool = True) -> str:
    """``CLAIM_LIMITED_FUNCTION``, or (``mark`` false) the function as migration 19 made
    it, without the held-back mark; ``dependents`` false: its claim in turn as
    migrations 17 to 21 made it (``_claim_in_turn``); ``bury_first`` false: as
    migrations 17 to 22 made it, burying only in its claim's statement, whose snapshot
    missed a callback that move made pending."""
    rounds_open = _ROUNDS_OPEN if mark else ""
    rounds_close = _rounds_close() if mark else ""
    # The keyed claim probes for exhausted claims first; the other claims reach their
    # move only once they found a lapsed claim, so a claim of a queue with none pays
    # nothing for it.
    bury_keyed = (
        f"""
        IF EXISTS ({_in_function(_LAPSED)} AND attempts >= max_attempts) THEN
            {_BURY_FIRST}
        END IF;"""
        if bury_first
        else ""
    )
    bury_lapsed = f"\n            {_BURY_FIRST}" if bury_first else ""
    return f"""
CREATE OR REPLACE FUNCTION {{schema}}.alkstore_claim_limited(
    p_queue text, p_worker_id text, p_now bigint, p_limit integer, p_last_error text)
RETURNS SETOF {{schema}}.alkstore_jobs
LANGUAGE plpgsql VOLATILE AS $alkstore$
DECLARE
    v_concurrency integer;
    v_rate integer;
    v_per_s integer;
    v_per_key integer;
    v_rate_per_key integer;
    v_cursor text;
    v_row_at tid;
    v_second bigint;
    v_second_claims integer;
    v_older bigint;
    v_rolled boolean := false;
    v_rate_room integer := p_limit;
    v_claimed bigint;
    v_keyed boolean;
    v_attempt integer;
    v_total bigint := 0;
    v_round integer;
BEGIN
    -- The lock: the queue's claims row (no CHECK to run when it is written). The limits
    -- are as this statement found them; a claim waiting for the lock reads the row's
    -- latest version once it holds it.
    FOR v_attempt IN 1 .. 2 LOOP
        SELECT l.concurrency, l.rate, l.per_s, l.concurrency_per_key, l.rate_per_key,
               l.key_cursor, c.ctid, c.rate_second, c.rate_second_claims, c.rate_older_latest
          INTO v_concurrency, v_rate, v_per_s, v_per_key, v_rate_per_key, v_cursor, v_row_at,
               v_second, v_second_claims, v_older
          FROM {{schema}}.alkstore_queue_limits AS l
          JOIN {{schema}}.alkstore_queue_claims AS c ON c.queue = l.queue
          WHERE l.queue = p_queue FOR UPDATE OF c;
        EXIT WHEN FOUND;
        IF v_attempt = 2 THEN  -- the limit was cleared: one row of NULLs, the driver's cue
            RETURN QUERY SELECT (NULL::{{schema}}.alkstore_jobs).*;
            RETURN;
        END IF;
        -- A limit without its claims row: set by a release before the claims row (a
        -- rolling upgrade), which made only the limit row. Made here, once.
        INSERT INTO {{schema}}.alkstore_queue_claims (queue, rate_older_latest)
        SELECT limits.queue, (SELECT max(started_at) FROM {{schema}}.alkstore_claim_starts
                              WHERE queue = p_queue)
        FROM {{schema}}.alkstore_queue_limits AS limits WHERE limits.queue = p_queue
        ON CONFLICT (queue) DO NOTHING;
    END LOOP;
    v_keyed := v_per_key IS NOT NULL OR v_rate_per_key IS NOT NULL;
    -- Each statement below takes a snapshot of its own (READ COMMITTED, a VOLATILE
    -- function), after the lock: it sees every claim of the queue committed before.
    IF v_rate IS NOT NULL THEN
        -- The row counts the starts of one second, the latest a claim started in; a
        -- claim of another second moves that count to the starts table (only while
        -- the window still holds it) and the starts that left the window go.
        IF v_second <> p_now THEN
            v_rolled := true;
            IF v_second > p_now - v_per_s THEN
                INSERT INTO {{schema}}.alkstore_claim_starts AS starts (queue, started_at, claims)
                VALUES (p_queue, v_second, v_second_claims)
                ON CONFLICT (queue, started_at)
                DO UPDATE SET claims = starts.claims + excluded.claims;
                v_older := greatest(v_older, v_second);
            END IF;
            IF v_older IS NOT NULL THEN
                DELETE FROM {{schema}}.alkstore_claim_starts
                WHERE queue = p_queue AND started_at <= p_now - v_per_s;
                IF v_older <= p_now - v_per_s THEN
                    v_older := NULL;
                END IF;
            END IF;
            v_second_claims := 0;
        END IF;
        v_rate_room := v_rate - v_second_claims;
        IF v_older > p_now - v_per_s THEN  -- older seconds still in the window
            v_rate_room := v_rate_room - (
                SELECT coalesce(sum(claims), 0) FROM {{schema}}.alkstore_claim_starts
                WHERE queue = p_queue AND started_at > p_now - v_per_s);
        END IF;
        v_rate_room := greatest(0, least(p_limit, v_rate_room));
    END IF;
    IF v_keyed THEN{bury_keyed}
        RETURN QUERY {
        _in_function(_claim_in_turn("RETURNING job.*", _RECORD_KEY_STARTS, dependents=dependents))
    };
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
    ELSE
{rounds_open}        -- Pending rows only while no claim of the queue has lapsed (as CLAIM_READY).
        {_ready_branches()}
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
        -- Nested, not one condition: a plan of `v_claimed = 0 AND EXISTS (...)` made for
        -- the value at hand is always the cheaper, so PL/pgSQL would plan it every time.
        IF v_claimed = 0 THEN
          IF EXISTS ({_in_function(_LAPSED)}) THEN{bury_lapsed}
            -- Lapsed claims: bury those at their budget, claim pending and lapsed rows.
            RETURN QUERY {
        _in_function(
            _claim(
                "= ANY(ARRAY(SELECT row_at FROM chosen))",
                guard="",
                slots=_LIMITED_SLOTS,
                returning="RETURNING job.*",
                recorded=_COUNT_STARTS,
                cue="",
            )
        )
    };
            GET DIAGNOSTICS v_claimed = ROW_COUNT;
          END IF;
        END IF;
{rounds_close}    END IF;
    -- The claim's starts: counted in its statement (_COUNT_STARTS) unless it claimed in
    -- turn (whose statement moves the key cursor in that row); a second that ended
    -- without a claim of this one, moved.
    IF v_rate IS NOT NULL AND ((v_keyed AND (v_claimed > 0 OR v_rolled))
                               OR (NOT v_keyed AND v_claimed = 0 AND v_rolled)) THEN
        UPDATE {{schema}}.alkstore_queue_claims
        SET rate_second = CASE WHEN v_claimed > 0 THEN p_now END,
            rate_second_claims = v_second_claims + v_claimed,
            rate_older_latest = v_older
        WHERE queue = p_queue;
    END IF;
END
$alkstore$
"""


BURY_FIRST_MIGRATION: Final = 23
"""The migration that makes ``CLAIM_LIMITED_FUNCTION`` bury before it claims (the one
place its number is written)."""

CLAIM_LIMITED_FUNCTION: Final = _claim_limited_function(mark=True)
"""A limited queue's claim in one statement (the limits profile; made by migration 17,
made again by ``LIMIT_ROW_RATE_MIGRATION`` and ``SLOT_WAITED_MIGRATION``): lock the
queue's claims row, then claim at most its free slots
(``_LIMITED_SLOTS``: pending rows only while no claim has lapsed,
as ``CLAIM_READY``; then as ``CLAIM_LIMITED``; with a per-key limit or rate, in turn as
``CLAIM_IN_TURN``, recording the keys' starts) and count the claim's starts, in the
caller's transaction, which holds the lock until it ends. A VOLATILE PL/pgSQL function
takes a fresh snapshot for each of its statements, so the claim's sees every claim
committed before the lock was granted: two claimers never share a slot.

The claims row (``alkstore_queue_claims``, one per limited queue, made and dropped with
its limit) is the lock and a rate's count: the second the queue's latest claim started
in (``rate_second``) and how many started then (``rate_second_claims``); the older
seconds are rows of ``alkstore_claim_starts``, the latest of them ``rate_older_latest``
(``NULL``: none). So while every start of the window is of this second (a rate per
second, or claims only this second) the window's count is read off the locked row and
a claim writes one tuple, of that row, which has no CHECK to evaluate (the limit row
has six); the starts table is written once per second a claim started in, and read
only while it holds some of the window. It reads the limit itself; a queue whose limit
was cleared gives one row of NULLs. A claim (not in turn) of a queue with a concurrency
limit that its limit held back marks the queue's live claims (``alkstore_jobs.held_back``,
whose ack then announces the queue) and claims once more after the marks' row locks
(contract §16.4). Made from this module's statements when the
migration runs: a change to them needs a migration that makes the function again."""

CLAIM_LIMITED_FUNCTION_V19: Final = _claim_limited_function(mark=False, dependents=False)
"""The function as migrations 17 and 19 made it (a schema upgraded step by step runs
the claims of each version with the function of that version)."""

CLAIM_LIMITED_FUNCTION_V21: Final = _claim_limited_function(mark=True, dependents=False)
"""The function as migration 21 made it: its claim in turn buried exhausted rows
without their ``has_dependents`` flag (migration 22 makes it again)."""

CLAIM_LIMITED_FUNCTION_V22: Final = _claim_limited_function(mark=True, bury_first=False)
"""The function as migration 22 made it: it buried exhausted rows in its claim's own
statement, whose snapshot missed what that made pending (``BURY_FIRST_MIGRATION``
makes it again)."""

CALL_CLAIM_LIMITED: Final = f"""
SELECT {CLAIMED_JOB} FROM {{schema}}.alkstore_claim_limited(
    %(queue)s, %(worker_id)s, %(now)s::bigint, %(limit)s::integer, %(last_error)s) AS job
"""
"""The claim of a queue known to be limited: one round trip (``CLAIM_LIMITED_FUNCTION``);
the claimed rows as ``CLAIM`` gives them, or one row of NULLs: the queue has no limit."""


BURY_EXHAUSTED: Final = _move_to_dead(
    "queue = %(queue)s AND state = 'processing' AND deadline <= %(now)s"
    " AND attempts >= max_attempts"
)

BURY_EXPIRED: Final = _move_to_dead("queue = %(queue)s AND expires_at <= %(now)s")
"""Every live row is pending or processing, so this covers both states."""

BURY_CLAIM: Final = (
    _move_to_dead(
        "id = %(job_id)s AND state = 'processing' AND attempts = %(attempt)s"
        " AND deadline > %(now)s",
        errors=f"CASE WHEN %(entry)s::text IS NULL THEN errors ELSE {_APPENDED_ERROR} END",
    )
    + "RETURNING queue\n"
)
"""``fail`` (and a retry past the budget): the caller's error, when there is one,
joins the history on the way to the dead table."""

PURGE_DEAD: Final = """
DELETE FROM {schema}.alkstore_dead_jobs
WHERE queue = %(queue)s
  AND dead_letter_retention_s IS NOT NULL
  AND died_at + dead_letter_retention_s < %(now)s
"""

ACK: Final = """
WITH acked AS (
    DELETE FROM {schema}.alkstore_jobs
    WHERE id = %(job_id)s AND state = 'processing' AND attempts = %(attempt)s
      AND deadline > %(now)s
    RETURNING queue, held_back
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic_prefix)s || acked.queue) FROM acked
    WHERE acked.held_back
       OR EXISTS (SELECT FROM {schema}.alkstore_queue_limits AS limits
                  WHERE limits.queue = acked.queue
                    AND (limits.concurrency_per_key IS NOT NULL
                         OR limits.rate_per_key IS NOT NULL))
)
SELECT (SELECT count(*) FROM acked), (SELECT count(*) FROM woken)
"""
"""Delete a valid claim's row; a limited queue's freed slot wakes its waiters in every
process (the limits profile), in the same round trip, when it can matter (contract
§16.4): a claim was held back by the concurrency limit while this one held its slot (the
row's ``held_back``, read off the deleted row's latest version: see
``CLAIM_LIMITED_FUNCTION``), or the queue has a per-key limit or rate (whose claims in
turn mark nothing)."""

_KEPT_OF_ACKED: Final = ", ".join(f"(acked.job).{name.strip()}" for name in MOVED.split(","))

ACK_BATCH: Final = f"""
WITH acked AS (
    DELETE FROM {{schema}}.alkstore_jobs AS job
    WHERE id = ANY(%(job_ids)s::bigint[]) AND queue = %(queue)s
      AND worker_id = %(worker_id)s AND deadline > %(now)s
    RETURNING CASE WHEN job.completed_retention_s IS NOT NULL THEN job END AS job,
              job.held_back
), kept AS (
    INSERT INTO {{schema}}.alkstore_completed_jobs ({MOVED}, errors, completed_at)
    SELECT {_KEPT_OF_ACKED}, (acked.job).errors, %(now)s
      FROM acked WHERE (acked.job).id IS NOT NULL
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic)s)
    WHERE EXISTS (SELECT FROM acked WHERE acked.held_back)
       OR (EXISTS (SELECT FROM acked)
           AND EXISTS (SELECT FROM {{schema}}.alkstore_queue_limits
                       WHERE queue = %(queue)s
                         AND (concurrency_per_key IS NOT NULL OR rate_per_key IS NOT NULL)))
)
SELECT (SELECT count(*) FROM acked), (SELECT count(*) FROM woken)
"""
"""One atomic statement: the rows acked, those stamped with a completed retention
moved to the completed table without a result (the results profile); the count of
the rows acked. The ids come as the text of one array (``binding.id_array``), cast
here. Each acked row returns its whole row only when it is kept, NULL
otherwise: a queue that deletes on ack carries no column of its rows out of the
delete. Looks rows up by primary key. A generic plan made while the table was nearly
empty can scan the whole table for every batch once it has grown: the driver
lets a connection's plans go once they are ``plans.PLAN_REFRESH_S`` old, before it
runs this (``plans.py``). ``deadline > now`` already means "processing"
(the table's CHECK: a deadline is set exactly while processing), and leaving
``state = 'processing'`` out keeps the planner off ``alkstore_jobs_processing_deadline``:
with stale statistics it would otherwise walk every in-flight row of the queue
for each batch."""

ACK_CLAIMS: Final = f"""
WITH acked AS (
    DELETE FROM {{schema}}.alkstore_jobs AS job
     USING unnest(%(job_ids)s::bigint[], %(attempts)s::integer[]) AS claim(id, attempts)
    WHERE job.id = claim.id AND job.attempts = claim.attempts AND job.deadline > %(now)s
    RETURNING job.id, job.queue, job.held_back,
              CASE WHEN job.completed_retention_s IS NOT NULL THEN job END AS job
), kept AS (
    INSERT INTO {{schema}}.alkstore_completed_jobs ({MOVED}, errors, completed_at)
    SELECT {_KEPT_OF_ACKED}, (acked.job).errors, %(now)s
      FROM acked WHERE (acked.job).id IS NOT NULL
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic_prefix)s || queues.queue)
      FROM (SELECT DISTINCT acked.queue FROM acked
             WHERE acked.held_back
                OR EXISTS (SELECT FROM {{schema}}.alkstore_queue_limits AS limits
                           WHERE limits.queue = acked.queue
                             AND (limits.concurrency_per_key IS NOT NULL
                                  OR limits.rate_per_key IS NOT NULL))) AS queues
)
SELECT array(SELECT id FROM acked), (SELECT count(*) FROM woken)
"""
"""``tx.ack_all`` (contract 1.2 §3.10): ``ACK_BATCH`` guarded by each claim ``(id,
attempts)`` rather than by a worker, over the claims of any queues: one atomic
statement, the rows stamped with a completed retention moved to the completed table
without a result, a freed slot announced when ``ACK`` would announce it (contract
§16.4: a claim carrying the held-back mark, or a queue with a per-key limit or rate;
each queue at most once); the ids acked. The claims come as the text of two arrays
(``binding.id_array``), paired by position; a claim named twice is one row.
``deadline > now`` already means "processing", as in ``ACK_BATCH``."""

RESCHEDULE_CLAIMS: Final = f"""
WITH rescheduled AS (
    UPDATE {{schema}}.alkstore_jobs AS job
    SET state = 'pending', run_at = claim.run_at, worker_id = NULL, claimed_at = NULL,
        deadline = NULL, errors = {_appended_error("claim.entry")}
      FROM unnest(%(job_ids)s::bigint[], %(attempts)s::integer[], %(run_ats)s::bigint[],
                  %(entries)s::text[]) AS claim(id, attempts, run_at, entry)
    WHERE job.id = claim.id AND job.attempts = claim.attempts AND job.deadline > %(now)s
    RETURNING job.id, job.queue
), queues AS (
    SELECT DISTINCT queue FROM rescheduled
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic_prefix)s || queue) FROM queues
)
SELECT array(SELECT id FROM rescheduled), array(SELECT queue FROM queues),
       (SELECT count(*) FROM woken)
"""
"""``tx.retry_all`` (contract 1.2 §3.11): ``RESCHEDULE`` for many claims, each guarded
by its own ``(id, attempts)``, each back to pending at its own ``run_at`` with its own
history entry, and each queue it put a job back in announced once; the ids and the
queues. The claims come as arrays paired by position (the core names each job once).
``deadline > now`` already means "processing", as in ``ACK_CLAIMS``."""

BURY_CLAIMS: Final = f"""
WITH moved AS (
    DELETE FROM {{schema}}.alkstore_jobs
     USING unnest(%(job_ids)s::bigint[], %(attempts)s::integer[], %(last_errors)s::text[],
                  %(entries)s::text[]) AS claim(claim_id, claim_attempts, claim_last_error,
                                                 claim_entry)
    WHERE id = claim_id AND attempts = claim_attempts AND deadline > %(now)s
    RETURNING {MOVED}, errors, {HOLD}, has_dependents, claim_last_error, claim_entry
), dead AS (
    INSERT INTO {{schema}}.alkstore_dead_jobs (
            {MOVED}, errors, {HOLD}, has_dependents, last_error, died_at)
    SELECT {MOVED},
           CASE WHEN claim_entry IS NULL THEN errors ELSE {_appended_error("claim_entry")} END,
           {HOLD_KEPT_DEAD}, has_dependents, claim_last_error, %(now)s
      FROM moved
    RETURNING id, queue
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic_prefix)s || limits.queue)
      FROM {{schema}}.alkstore_queue_limits AS limits
     WHERE limits.queue IN (SELECT queue FROM dead)
)
SELECT array(SELECT id FROM dead), (SELECT count(*) FROM woken)
"""
"""``tx.fail_all`` (contract 1.2 §3.11, and ``tx.retry_all`` at the attempt budget):
``BURY_CLAIM`` for many claims, each guarded by its own ``(id, attempts)``, each dead
with its own ``last_error`` and history entry (none: the history as it was); a limited
queue whose slots it freed woken once, as ``NOTIFY_IF_LIMITED`` after a ``bury``. The
dependents' trigger and the unique holds act on each row as on ``BURY_CLAIM``'s."""

ASYNC_COMMIT: Final = "set_config('synchronous_commit', 'off', true)"
"""Appended to an ack's last select (``ACK_ASYNC``, ``COMPLETE_ASYNC``): the statement's
own implicit transaction -- and nothing after it, ``true`` is ``SET LOCAL`` -- commits
without waiting for its WAL flush (contract §12.11, the async_acks profile)."""


def _without_waiting(statement: str) -> str:
    last = "SELECT (SELECT count(*) FROM acked), (SELECT count(*) FROM woken)\n"
    if not statement.endswith(last):
        raise AssertionError("an ack statement ends with its counts")
    return statement.removesuffix("\n") + ", " + ASYNC_COMMIT + "\n"


ACK_ASYNC: Final = _without_waiting(ACK)
"""``ACK``, its commit not waiting for the disk: one round trip, as ``ACK``."""

SET_LOCAL_ASYNC_COMMIT: Final = "SET LOCAL synchronous_commit = off"
"""In a transaction of acks only (a worker's group, §12.10): its commit does not wait
for the disk; ``LOCAL`` ends with the transaction, so the pooled connection that goes
back to the pool carries nothing."""

COMPLETE: Final = f"""
WITH acked AS (
    DELETE FROM {{schema}}.alkstore_jobs
    WHERE id = %(job_id)s AND state = 'processing' AND attempts = %(attempt)s
      AND deadline > %(now)s
    RETURNING {MOVED}, errors, held_back
), kept AS (
    INSERT INTO {{schema}}.alkstore_completed_jobs ({MOVED}, errors, completed_at, result)
    SELECT {MOVED}, errors, %(now)s, %(result)s::text FROM acked
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic_prefix)s || acked.queue) FROM acked
    WHERE acked.held_back
       OR EXISTS (SELECT FROM {{schema}}.alkstore_queue_limits AS limits
                  WHERE limits.queue = acked.queue
                    AND (limits.concurrency_per_key IS NOT NULL
                         OR limits.rate_per_key IS NOT NULL))
)
SELECT (SELECT count(*) FROM acked), (SELECT count(*) FROM woken)
"""
"""The ack of a job its queue keeps (the results profile): one atomic statement moves
the row to the completed table (same id) with when and what it completed, and, as
``ACK``, a limited queue's freed slot wakes its waiters in every process; the count
of rows acked says whether the claim was valid."""

COMPLETE_ASYNC: Final = _without_waiting(COMPLETE)
"""``COMPLETE``, its commit not waiting for the disk (as ``ACK_ASYNC``)."""

PURGE_COMPLETED: Final = """
DELETE FROM {schema}.alkstore_completed_jobs
WHERE queue = %(queue)s AND completed_at + completed_retention_s < %(now)s
"""

SET_LIMIT_KEY: Final = """
UPDATE {schema}.alkstore_jobs SET limit_key = %(limit_key)s
WHERE id = ANY(%(ids)s::bigint[])
"""
"""The limit key of the rows a unique enqueue just made (the unique functions of
migrations 6 and 7 predate it), in the enqueue's transaction."""

SET_METADATA: Final = """
UPDATE {schema}.alkstore_jobs SET metadata = %(metadata)s
WHERE id = ANY(%(ids)s::bigint[])
"""
"""The metadata of the rows a unique enqueue just made (the unique functions of
migrations 6 and 7 predate it), in the enqueue's transaction."""

SET_COMPLETED_RETENTION: Final = """
UPDATE {schema}.alkstore_jobs SET completed_retention_s = %(completed_retention_s)s
WHERE id = ANY(%(ids)s::bigint[])
"""
"""The stamp of the rows a unique enqueue just made (the unique functions of
migrations 6 and 7 predate it), in the enqueue's transaction."""

HEARTBEAT: Final = """
UPDATE {schema}.alkstore_jobs SET deadline = %(deadline)s
WHERE id = %(job_id)s AND state = 'processing' AND attempts = %(attempt)s AND deadline > %(now)s
"""

RESCHEDULE: Final = f"""
WITH rescheduled AS (
    UPDATE {{schema}}.alkstore_jobs
    SET state = 'pending', run_at = %(run_at)s, worker_id = NULL, claimed_at = NULL,
        deadline = NULL, errors = {_APPENDED_ERROR}
    WHERE id = %(job_id)s AND state = 'processing' AND attempts = %(attempt)s AND deadline > %(now)s
    RETURNING queue
)
SELECT queue, pg_notify(%(wake_channel)s, %(topic_prefix)s || queue) FROM rescheduled
"""
"""Back to pending, and (the core's announce of the queue, folded into the same
round trip) wake the queue's waiters in every process: the job may be due now,
and anyone's timer for the queue's next due row may have to move. The retry's
error joins the history."""

RELEASE_CLAIM: Final = """
WITH released AS (
    UPDATE {schema}.alkstore_jobs
    SET state = 'pending', max_attempts = max_attempts + 1, worker_id = NULL,
        claimed_at = NULL, deadline = NULL
    WHERE id = %(job_id)s AND state = 'processing' AND attempts = %(attempt)s AND deadline > %(now)s
    RETURNING queue
)
SELECT queue, pg_notify(%(wake_channel)s, %(topic_prefix)s || queue) FROM released
"""
"""A claim given back unused: pending at its own run_at, its attempt refunded to the
budget (attempts keeps counting claims, so no later claim reuses this one's identity),
and the queue's waiters in every process woken in the same round trip."""

SNOOZE: Final = """
WITH snoozed AS (
    UPDATE {schema}.alkstore_jobs
    SET state = 'pending', run_at = %(run_at)s, snoozes = snoozes + 1,
        max_attempts = max_attempts + 1, worker_id = NULL, claimed_at = NULL, deadline = NULL
    WHERE id = %(job_id)s AND state = 'processing' AND attempts = %(attempt)s AND deadline > %(now)s
    RETURNING queue
)
SELECT queue, pg_notify(%(wake_channel)s, %(topic_prefix)s || queue) FROM snoozed
"""
"""A claim put back to wait until run_at, counted, its attempt refunded as a release's
is, and the queue's waiters in every process told in the same round trip (their
timers may have to move)."""

CANCEL: Final = """
WITH mark AS MATERIALIZED (
    SELECT set_config('alkstore.cancel', %(job_id)s::text || ' ' || %(now)s::text, true)
)
DELETE FROM {schema}.alkstore_jobs
WHERE id = %(job_id)s AND queue = %(queue)s AND EXISTS (SELECT FROM mark)
"""
"""The job's row gone. The dependencies profile's trigger (migration 13) reads which
job this statement cancels, and when, from ``alkstore.cancel``: its dependents are
dead-lettered, not released. (``EXISTS`` makes the setting precede the delete.)"""

GET_JOB: Final = f"""
SELECT {LIVE_JOB}
FROM {{schema}}.alkstore_jobs
WHERE id = %(job_id)s AND (%(queue)s::text IS NULL OR queue = %(queue)s)
UNION ALL
SELECT {DEAD_JOB}
FROM {{schema}}.alkstore_dead_jobs
WHERE id = %(job_id)s AND (%(queue)s::text IS NULL OR queue = %(queue)s)
UNION ALL
SELECT {COMPLETED_JOB}
FROM {{schema}}.alkstore_completed_jobs
WHERE id = %(job_id)s AND (%(queue)s::text IS NULL OR queue = %(queue)s)
UNION ALL
SELECT {WAITING_JOB}
FROM {{schema}}.alkstore_waiting_jobs
WHERE id = %(job_id)s AND (%(queue)s::text IS NULL OR queue = %(queue)s)
"""
"""Live, dead and completed rows share the id sequence, so at most one row matches."""

NEXT_WAKE_AT: Final = """
SELECT
    (SELECT min(run_at) FROM {schema}.alkstore_jobs
     WHERE queue = %(queue)s AND state = 'pending' AND run_at > %(now)s),
    (SELECT min(deadline) FROM {schema}.alkstore_jobs
     WHERE queue = %(queue)s AND state = 'processing' AND deadline > %(now)s),
    (SELECT limits.concurrency <= (SELECT count(*) FROM {schema}.alkstore_jobs
                                    WHERE queue = %(queue)s AND state = 'processing'
                                      AND deadline > %(now)s)
     FROM {schema}.alkstore_queue_limits AS limits WHERE limits.queue = %(queue)s),
    (SELECT CASE WHEN limits.rate <= starts.n THEN starts.first + limits.per_s END
     FROM {schema}.alkstore_queue_limits AS limits
     JOIN {schema}.alkstore_queue_claims AS claims ON claims.queue = limits.queue
     CROSS JOIN LATERAL (
         SELECT coalesce(sum(claims), 0) AS n, min(started_at) AS first FROM (
             SELECT started_at, claims FROM {schema}.alkstore_claim_starts
             WHERE queue = %(queue)s
             UNION ALL
             SELECT claims.rate_second, claims.rate_second_claims
             WHERE claims.rate_second IS NOT NULL) AS start
         WHERE started_at > %(now)s - limits.per_s) AS starts
     WHERE limits.queue = %(queue)s AND limits.rate IS NOT NULL),
    (SELECT (SELECT min(started_at) FROM {schema}.alkstore_key_claim_starts
             WHERE queue = %(queue)s AND started_at > %(now)s - limits.per_s)
            + limits.per_s
     FROM {schema}.alkstore_queue_limits AS limits
     WHERE limits.queue = %(queue)s AND limits.rate_per_key IS NOT NULL)
"""
"""The queue's next due ``run_at`` and next deadline; whether it is at its concurrency
limit (the limits profile: then only a deadline frees a slot); at its rate limit,
when its oldest start in the window leaves it (the starts table's seconds and the limit
queue's claims row's own, ``CLAIM_LIMITED_FUNCTION``); and with a per-key rate, when the oldest
start of any key leaves the window (§16.11)."""

NOTIFY_IF_LIMITED: Final = """
SELECT pg_notify(%(wake_channel)s, %(topic)s)
FROM {schema}.alkstore_queue_limits WHERE queue = %(queue)s
"""
"""After a fail or cancel ended a claim: wake a limited queue's waiters everywhere (these
announce every freed slot, contract §16.4 allows more than the acks' rule)."""

# -- operations (the ops profile) --------------------------------------------------


def _loose_scan(name: str, table: str, predicate: str = "TRUE") -> str:
    """A recursive CTE ``name`` listing the distinct queues of ``table`` rows matching
    ``predicate``, one index probe per queue (``min(queue)`` above the last one) on an
    index that leads with ``queue``: never a walk over every row."""
    return f"""{name} (queue) AS (
    SELECT min(queue) FROM {{schema}}.{table} WHERE {predicate}
    UNION ALL
    SELECT (SELECT min(queue) FROM {{schema}}.{table}
            WHERE {predicate} AND queue > previous.queue)
    FROM {name} AS previous
    WHERE previous.queue IS NOT NULL
)"""


def _queue_stats(names: str) -> str:
    """One statement: per queue of the CTE ``names``, counts read off the partial claim
    indexes (pending, processing) and the dead table's ``(queue, died_at, id)`` index,
    each one index range per queue; ordered by name."""
    return f"""
{names}
SELECT name.queue, pending.ready, pending.scheduled, pending.oldest_ready_at,
       claimed.processing, claimed.lapsed, dead.dead,
       EXISTS (SELECT FROM {{schema}}.alkstore_paused_queues AS paused
               WHERE paused.queue = name.queue) AS paused,
       completed.completed, waiting.waiting
FROM (SELECT DISTINCT queue FROM named WHERE queue IS NOT NULL) AS name
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE run_at <= %(now)s) AS ready,
           count(*) FILTER (WHERE run_at > %(now)s) AS scheduled,
           min(run_at) FILTER (WHERE run_at <= %(now)s) AS oldest_ready_at
    FROM {{schema}}.alkstore_jobs
    WHERE queue = name.queue AND state = 'pending'
) AS pending
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE deadline > %(now)s) AS processing,
           count(*) FILTER (WHERE deadline <= %(now)s) AS lapsed
    FROM {{schema}}.alkstore_jobs
    WHERE queue = name.queue AND state = 'processing'
) AS claimed
CROSS JOIN LATERAL (
    SELECT count(*) AS dead FROM {{schema}}.alkstore_dead_jobs WHERE queue = name.queue
) AS dead
CROSS JOIN LATERAL (
    SELECT count(*) AS completed FROM {{schema}}.alkstore_completed_jobs
    WHERE queue = name.queue
) AS completed
CROSS JOIN LATERAL (
    SELECT count(*) AS waiting FROM {{schema}}.alkstore_waiting_jobs
    WHERE queue = name.queue
) AS waiting
ORDER BY name.queue COLLATE "C"
"""


QUEUE_STATS: Final = _queue_stats(
    'WITH named (queue) AS (SELECT unnest(%(queues)s::text[]) COLLATE "C")'
)
"""Stats of the named queues (one with no rows: zeros)."""

QUEUE_STATS_ALL: Final = _queue_stats(
    f"""WITH RECURSIVE {_loose_scan("pending_queues", "alkstore_jobs", "state = 'pending'")},
{_loose_scan("processing_queues", "alkstore_jobs", "state = 'processing'")},
{_loose_scan("dead_queues", "alkstore_dead_jobs")},
{_loose_scan("completed_queues", "alkstore_completed_jobs")},
{_loose_scan("waiting_queues", "alkstore_waiting_jobs")},
named (queue) AS (
    SELECT queue FROM pending_queues
    UNION ALL SELECT queue FROM processing_queues
    UNION ALL SELECT queue FROM dead_queues
    UNION ALL SELECT queue FROM completed_queues
    UNION ALL SELECT queue FROM waiting_queues
    UNION ALL SELECT queue FROM {{schema}}.alkstore_paused_queues
)"""
)
"""Stats of every queue with a live row, a dead row or a pause. The queues are
found by loose index scans (one probe per queue), not by reading every row."""

# A queue's live rows by id. Generic plans (a statement prepared after five runs)
# estimate a range of ids between two parameters as a sliver of the table, so a
# plain "id > $after ORDER BY id LIMIT n" walks the primary key in page order,
# filtering every other queue's and state's rows (747,000 of them for a pending
# page at 1,000,000 jobs, 137 ms). So: the pending range is a row comparison on
# (queue, id), which only alkstore_jobs_queue_pending's (queue, id) can serve, and
# the processing rows are the queue's claims behind OFFSET 0 (no qual is pushed
# below it), read off alkstore_jobs_processing_deadline and only then ranged and
# sorted. Both plans hold whatever the parameters' estimates.
_PENDING_RANGE = (
    "(queue, id) > (%(queue)s, %(after_id)s)",
    "(queue, id) > (%(queue)s, %(after_id)s) AND (queue, id) < (%(queue)s, %(before_id)s)",
)
_ID_RANGE = ("id > %(after_id)s", "id > %(after_id)s AND id < %(before_id)s")
_ORDER = ("ORDER BY id", "ORDER BY id DESC")


def _pending_page(newest: bool) -> str:
    return f"""
SELECT {LIVE_JOB} FROM {{schema}}.alkstore_jobs
WHERE queue = %(queue)s AND state = 'pending' AND {_PENDING_RANGE[newest]}
{_ORDER[newest]}
LIMIT %(limit)s
"""


def _dead_page(newest: bool) -> str:
    # The same row comparison as the pending range: only alkstore_dead_jobs_queue_id
    # (queue, id) serves it, so a generic plan cannot walk the primary key instead.
    return f"""
SELECT {DEAD_JOB} FROM {{schema}}.alkstore_dead_jobs
WHERE queue = %(queue)s AND {_PENDING_RANGE[newest]}
{_ORDER[newest]}
LIMIT %(limit)s
"""


def _processing_page(newest: bool) -> str:
    return f"""
SELECT * FROM (
    SELECT {LIVE_JOB} FROM {{schema}}.alkstore_jobs
    WHERE queue = %(queue)s AND state = 'processing'
    OFFSET 0
) AS claimed
WHERE {_ID_RANGE[newest]}
{_ORDER[newest]}
LIMIT %(limit)s
"""


def _all_page(newest: bool) -> str:
    order, ids = _ORDER[newest], _ID_RANGE[newest]
    return f"""
SELECT * FROM (
    ({_pending_page(newest)})
    UNION ALL
    ({_processing_page(newest)})
    UNION ALL
    ({_dead_page(newest)})
    UNION ALL
    (SELECT {COMPLETED_JOB} FROM {{schema}}.alkstore_completed_jobs
     WHERE queue = %(queue)s AND {ids}
     {order} LIMIT %(limit)s)
    UNION ALL
    (SELECT {WAITING_JOB} FROM {{schema}}.alkstore_waiting_jobs
     WHERE queue = %(queue)s AND {ids}
     {order} LIMIT %(limit)s)
) AS page
{order}
LIMIT %(limit)s
"""


LIST_JOBS: Final = _all_page(newest=False)
"""A keyset page over live, dead and completed rows (one id sequence): the first
``limit`` of each state past ``after_id``, merged. The pending rows are a range of
``alkstore_jobs_queue_pending (queue, id)``; the processing ones (as many as the
claims in flight) are read off ``alkstore_jobs_processing_deadline`` and sorted; the
dead rows are a range of ``alkstore_dead_jobs_queue_id (queue, id)``; the completed
and waiting tables' ranges are their ``(queue, id)`` order. The states are
literals, never parameters, so a generic plan still matches the partial indexes."""

LIST_PENDING_JOBS: Final = _pending_page(newest=False)
"""A keyset page of the pending rows: one range of ``alkstore_jobs_queue_pending``
(migration 12), whatever the queue's size, in either direction."""

LIST_PROCESSING_JOBS: Final = _processing_page(newest=False)
"""A keyset page of the processing rows: the queue's claims in flight, read off
``alkstore_jobs_processing_deadline`` and sorted (no id-ordered index of claims is
kept: each claim and heartbeat would write to it)."""

LIST_DEAD_JOBS: Final = _dead_page(newest=False)
"""A keyset page of the dead rows: one range of ``alkstore_dead_jobs_queue_id (queue,
id)`` (migration ``DEAD_PAGES_MIGRATION``), whatever the dead table's size."""

LIST_COMPLETED_JOBS: Final = f"""
SELECT {COMPLETED_JOB} FROM {{schema}}.alkstore_completed_jobs
WHERE queue = %(queue)s AND id > %(after_id)s
ORDER BY id
LIMIT %(limit)s
"""
"""A keyset page of the completed rows (the results profile)."""

LIST_WAITING_JOBS: Final = f"""
SELECT {WAITING_JOB} FROM {{schema}}.alkstore_waiting_jobs
WHERE queue = %(queue)s AND id > %(after_id)s
ORDER BY id
LIMIT %(limit)s
"""
"""A keyset page of the waiting rows (the dependencies profile)."""

# Newest first (``before_id``): the same ranges walked backwards from before_id.
_NEWEST = (
    ("id > %(after_id)s", "id > %(after_id)s AND id < %(before_id)s"),
    ("ORDER BY id", "ORDER BY id DESC"),
)


def _newest(page: str) -> str:
    for oldest, newest in _NEWEST:
        assert oldest in page, page
        page = page.replace(oldest, newest)
    return page


LIST_JOBS_NEWEST: Final = _all_page(newest=True)
"""``LIST_JOBS`` below ``before_id``, the largest ids first."""
LIST_PENDING_JOBS_NEWEST: Final = _pending_page(newest=True)
"""``LIST_PENDING_JOBS`` below ``before_id``, the largest ids first."""
LIST_PROCESSING_JOBS_NEWEST: Final = _processing_page(newest=True)
"""``LIST_PROCESSING_JOBS`` below ``before_id``, the largest ids first."""
LIST_DEAD_JOBS_NEWEST: Final = _dead_page(newest=True)
"""``LIST_DEAD_JOBS`` below ``before_id``, the largest ids first."""
LIST_COMPLETED_JOBS_NEWEST: Final = _newest(LIST_COMPLETED_JOBS)
"""``LIST_COMPLETED_JOBS`` below ``before_id``, the largest ids first."""
LIST_WAITING_JOBS_NEWEST: Final = _newest(LIST_WAITING_JOBS)
"""``LIST_WAITING_JOBS`` below ``before_id``, the largest ids first."""


_REDRIVEN_STAMPS = restamped(
    "dead",
    {
        "created_at": "%(now)s",
        "run_at": "%(now)s",
        "expires_at": "%(now)s + (dead.expires_at - dead.created_at)",
    },
)
"""A redriven job's stamps: its dead row's, but a new life starts now (an expiry
keeps its length)."""
REDRIVEN_STAMPS: Final = _REDRIVEN_STAMPS

_KEY_KEPT_BY_ANOTHER_DEAD = """EXISTS (
        SELECT FROM {schema}.alkstore_dead_jobs AS other
        WHERE other.queue = {row}.queue AND other.unique_hold = {key}
          AND other.id <> {source}
          AND (other.hold_until IS NULL OR other.hold_until > %(now)s))"""
"""Whether a dead row other than ``{source}`` keeps the key ``{key}`` (its hold not passed)."""


def _redrive(chosen: str) -> str:
    """The first statement of a redrive (``OpsStatements.redrive`` runs them in one
    transaction): the dead rows of the CTE ``chosen`` (``id``, ``position``), locked
    so a second redrive of them waits and then finds them gone, become new pending
    rows in ``position`` order, returned as ``(id, redriven_from, keyed)``. A unique
    job's new row takes its key (its hold shifted with its ``created_at``), unless
    another job holds it: a live row (the unique index: ON CONFLICT skips it, and a
    second dead row of one key behind the first) or another dead row keeping it (NOT
    EXISTS); a row skipped is not returned, so its dead row stays."""
    keeps = _KEY_KEPT_BY_ANOTHER_DEAD.format(
        schema="{schema}", row="dead", key="dead.unique_key", source="dead.id"
    )
    return f"""
WITH {chosen}, inserted AS (
    INSERT INTO {{schema}}.alkstore_jobs (
        payload, {STAMP_COLUMNS}, redriven_from,
        unique_key, {HOLD})
    SELECT dead.payload, {_REDRIVEN_STAMPS}, dead.id,
        dead.unique_key, dead.unique_key, %(now)s + (dead.hold_until - dead.created_at),
        dead.hold_dead
    FROM chosen JOIN {{schema}}.alkstore_dead_jobs AS dead ON dead.id = chosen.id
    WHERE dead.unique_key IS NULL OR NOT {keeps}
    ORDER BY chosen.position
    ON CONFLICT (queue, unique_hold) WHERE unique_hold IS NOT NULL DO NOTHING
    RETURNING id, redriven_from, unique_hold IS NOT NULL AS keyed
)
SELECT id, redriven_from, keyed FROM inserted
ORDER BY id
"""


REDRIVE_NAMED: Final = _redrive(
    """chosen AS (
    SELECT dead.id, wanted.position
    FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS wanted (id, position)
    JOIN {schema}.alkstore_dead_jobs AS dead ON dead.id = wanted.id
    WHERE dead.queue = %(queue)s
    ORDER BY dead.id
    FOR UPDATE OF dead
)"""
)
"""Redrive the dead rows named in ``ids`` (distinct), in ``ids`` order; ids that are
not dead rows of the queue match nothing. They are locked in id order, so two
redrives of overlapping ids never deadlock. New ids come from one identity sequence
in ``position`` order, so ``ORDER BY id`` is that order."""

REDRIVE_OLDEST: Final = _redrive(
    """oldest AS (
    SELECT id, died_at FROM {schema}.alkstore_dead_jobs
    WHERE queue = %(queue)s
    ORDER BY died_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT id, row_number() OVER (ORDER BY died_at, id) AS position FROM oldest
)"""
)
"""Redrive up to ``limit`` of the queue's dead rows, oldest ``died_at`` first (the
``alkstore_dead_jobs_died`` index, in order). SKIP LOCKED: rows another redrive
is taking are left to it, so two redrives split the backlog instead of waiting."""

PRUNE_KEPT_EDGES: Final = """
DELETE FROM {schema}.alkstore_dead_dependencies AS kept
WHERE NOT EXISTS (SELECT FROM {schema}.alkstore_dead_jobs WHERE id = kept.job_id)
"""
"""The kept edges of dead rows purged or swept."""

GIVE_UP_PASSED_HOLDS: Final = """
UPDATE {schema}.alkstore_jobs SET unique_hold = NULL
WHERE queue = %(queue)s AND unique_hold IS NOT NULL AND hold_until <= %(now)s
"""
"""A redrive's first step: the queue's live rows whose hold passed give their key up
(they keep ``unique_key``), so it no longer keeps a dead job's key from its new life.
One range of ``alkstore_jobs_unique``."""

_TAKEN_KEY = _KEY_KEPT_BY_ANOTHER_DEAD.format(
    schema="{schema}", row="job", key="job.unique_hold", source="job.redriven_from"
)

TAKE_BACK_REDRIVEN: Final = f"""
DELETE FROM {{schema}}.alkstore_jobs AS job
WHERE job.id = ANY(%(ids)s::bigint[]) AND job.unique_hold IS NOT NULL
  AND {_TAKEN_KEY}
RETURNING job.id
"""
"""A redrive's check of its new unique rows, with this statement's newer snapshot:
one whose key another job's move to the dead table (keeping it) committed while the
insert waited on that job's live row is taken back (its dead row stays)."""

REMOVE_REDRIVEN: Final = """
WITH removed AS (
    DELETE FROM {schema}.alkstore_dead_jobs WHERE id = ANY(%(ids)s::bigint[])
    RETURNING id
), woken AS (
    SELECT pg_notify(%(wake_channel)s, %(topic)s::text)
    WHERE %(topic)s::text IS NOT NULL AND EXISTS (SELECT FROM removed)
)
SELECT count(*) FROM removed, (SELECT count(*) FROM woken) AS wake
"""
"""A redrive's last step: the dead rows that now have their new life go, and the queue
is NOTIFYed (unless ``topic`` is NULL)."""

PURGE_DEAD_NAMED: Final = """
DELETE FROM {schema}.alkstore_dead_jobs
WHERE id = ANY(%(ids)s::bigint[]) AND queue = %(queue)s AND died_at < %(died_before)s
"""
"""Delete the named dead rows of the queue that died before ``died_before``."""

PURGE_DEAD_BEFORE: Final = """
DELETE FROM {schema}.alkstore_dead_jobs
WHERE queue = %(queue)s AND died_at < %(died_before)s
"""
"""Delete the queue's dead rows that died before ``died_before``: one range of the
``alkstore_dead_jobs_died`` index."""

PAUSE: Final = """
INSERT INTO {schema}.alkstore_paused_queues (queue) VALUES (%(queue)s)
ON CONFLICT (queue) DO NOTHING
"""
"""Row count 1 if the queue was running."""

RESUME: Final = """
WITH resumed AS (
    DELETE FROM {schema}.alkstore_paused_queues WHERE queue = %(queue)s RETURNING queue
)
SELECT pg_notify(%(wake_channel)s, %(topic)s) FROM resumed
"""
"""Resume and, in the same statement, NOTIFY the queue so claim_wait in every process
tries again; a row only if the queue was paused."""

IS_PAUSED: Final = """
SELECT EXISTS (SELECT FROM {schema}.alkstore_paused_queues WHERE queue = %(queue)s)
"""

SET_LIMITS: Final = """
WITH stored AS (
    INSERT INTO {schema}.alkstore_queue_limits AS limits (
        queue, concurrency, rate, per_s, concurrency_per_key, rate_per_key)
    VALUES (%(queue)s, %(concurrency)s, %(rate)s, %(per_s)s, %(concurrency_per_key)s,
            %(rate_per_key)s)
    ON CONFLICT (queue) DO UPDATE
    SET concurrency = excluded.concurrency, rate = excluded.rate, per_s = excluded.per_s,
        concurrency_per_key = excluded.concurrency_per_key,
        rate_per_key = excluded.rate_per_key
    WHERE (limits.concurrency, limits.rate, limits.per_s, limits.concurrency_per_key,
           limits.rate_per_key)
          IS DISTINCT FROM (excluded.concurrency, excluded.rate, excluded.per_s,
                            excluded.concurrency_per_key, excluded.rate_per_key)
    RETURNING queue
), claims AS (
    INSERT INTO {schema}.alkstore_queue_claims (queue, rate_older_latest)
    SELECT %(queue)s, (SELECT max(started_at) FROM {schema}.alkstore_claim_starts
                       WHERE queue = %(queue)s)
    ON CONFLICT (queue) DO NOTHING
)
SELECT pg_notify(%(wake_channel)s, %(topic)s) FROM stored
"""
"""Store a queue's limit and NOTIFY the queue; a row only if that changed it. A limited
queue has a claims row too (``CLAIM_LIMITED_FUNCTION``'s lock); a new one learns the
latest second of the queue's starts still kept (a limit cleared and set again counts the
starts its claims made, as every engine does), one there already keeps its count."""

CLEAR_LIMITS: Final = """
WITH cleared AS (
    DELETE FROM {schema}.alkstore_queue_limits WHERE queue = %(queue)s RETURNING queue
), claims AS (
    DELETE FROM {schema}.alkstore_queue_claims WHERE queue = %(queue)s
    RETURNING queue, rate_second, rate_second_claims
), kept AS (
    INSERT INTO {schema}.alkstore_claim_starts AS starts (queue, started_at, claims)
    SELECT queue, rate_second, rate_second_claims FROM claims WHERE rate_second IS NOT NULL
    ON CONFLICT (queue, started_at) DO UPDATE SET claims = starts.claims + excluded.claims
)
SELECT pg_notify(%(wake_channel)s, %(topic)s) FROM cleared
"""
"""Remove a queue's limit and NOTIFY the queue; a row only if it had one. The starts its
claims row counted (its second's) go to the starts table, beside the older ones."""

QUEUE_LIMITS: Final = """
SELECT queue, concurrency, rate, per_s, concurrency_per_key, rate_per_key
FROM {schema}.alkstore_queue_limits
WHERE queue = %(queue)s
"""

ALL_QUEUE_LIMITS: Final = """
SELECT queue, concurrency, rate, per_s, concurrency_per_key, rate_per_key
FROM {schema}.alkstore_queue_limits ORDER BY queue
"""

# -- wakes -------------------------------------------------------------------------

NOTIFY: Final = """
SELECT pg_notify(%(wake_channel)s, topic) FROM unnest(%(topics)s::text[]) AS topic
"""

# -- locks -------------------------------------------------------------------------

LOCK_ACQUIRE: Final = """
INSERT INTO {schema}.alkstore_locks AS held (name, owner, expires_at)
VALUES (%(name)s, %(owner)s, %(expires_at)s)
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE held.owner = excluded.owner OR held.expires_at <= %(now)s
RETURNING 1
"""

LOCK_RENEW: Final = """
UPDATE {schema}.alkstore_locks SET expires_at = %(expires_at)s
WHERE name = %(name)s AND owner = %(owner)s AND expires_at > %(now)s
"""

LOCK_RELEASE: Final = """
DELETE FROM {schema}.alkstore_locks
WHERE name = %(name)s AND owner = %(owner)s AND expires_at > %(now)s
"""

LOCK_HOLDER: Final = """
SELECT owner, expires_at FROM {schema}.alkstore_locks
WHERE name = %(name)s AND expires_at > %(now)s
"""

# -- scheduler ---------------------------------------------------------------------

_SCHEDULE = column_list(ScheduleRecord)
"""In the field order of ``alkstore.rows.ScheduleRecord``, which is built from a row."""

_SCHEDULE_REPLACED = ",\n    ".join(
    f"{column(field.name)} = excluded.{column(field.name)}"
    for field in fields(ScheduleRecord)
    if field.name not in ("name", "next_fire_at")
)
"""What re-registering a schedule replaces: all but its name and its boundary."""

SCHEDULE_UPSERT: Final = f"""
INSERT INTO {{schema}}.alkstore_schedules AS stored (
        {_SCHEDULE})
VALUES ({parameters(ScheduleRecord)})
ON CONFLICT (name) DO UPDATE
SET {_SCHEDULE_REPLACED},
    next_fire_at = CASE WHEN stored.spec = excluded.spec AND stored.timezone = excluded.timezone
                        THEN stored.next_fire_at
                        ELSE excluded.next_fire_at END
"""
"""One statement: re-registering an unchanged spec in an unchanged zone keeps the stored
boundary (it must not push the next fire away); a new or changed spec or zone takes the
one given. ``stored`` is the row as it was before the update."""

SCHEDULE_DELETE: Final = """
DELETE FROM {schema}.alkstore_schedules WHERE name = %(name)s
"""

SCHEDULE_GET: Final = f"""
SELECT {_SCHEDULE} FROM {{schema}}.alkstore_schedules WHERE name = %(name)s
"""

SCHEDULE_LIST: Final = f"""
SELECT {_SCHEDULE} FROM {{schema}}.alkstore_schedules ORDER BY name
"""

SCHEDULES_DUE: Final = f"""
SELECT {_SCHEDULE} FROM {{schema}}.alkstore_schedules
WHERE next_fire_at <= %(now)s
ORDER BY next_fire_at, name
"""
"""Walks ``alkstore_schedules_due`` in its own order and stops at the first future boundary."""

SCHEDULE_ADVANCE: Final = """
UPDATE {schema}.alkstore_schedules SET next_fire_at = %(new_fire_at)s
WHERE name = %(name)s AND next_fire_at = %(expected)s
"""
"""The compare-and-set of a boundary fire. A second ticker's update waits for the
first one's row lock and then re-checks ``next_fire_at`` against the committed row:
it matches nothing, so it fires nothing."""

SCHEDULE_NEXT_FIRE_AT: Final = """
SELECT min(next_fire_at) FROM {schema}.alkstore_schedules
"""

# -- declared schedules (the periodic profile) ---------------------------------------

SCHEDULES_RENEW: Final = """
UPDATE {schema}.alkstore_schedules SET declared_until = %(declared_until)s
WHERE name = ANY(%(names)s::text[]) AND declared_until IS NOT NULL
RETURNING name
"""
"""Renew the lease of the named schedules still declared; one statement for them all."""

SCHEDULES_LAPSE: Final = """
DELETE FROM {schema}.alkstore_schedules
WHERE declared_until IS NOT NULL AND declared_until <= %(now)s
RETURNING name
"""
"""Remove the declared schedules whose lease has lapsed (``alkstore_schedules_declared``)."""

# -- the worker registry (the workers profile) ---------------------------------------

WORKER_REGISTER: Final = """
WITH lapsed AS (
    DELETE FROM {schema}.alkstore_workers
    WHERE lease_until <= %(now)s AND id <> %(worker_id)s
)
INSERT INTO {schema}.alkstore_workers AS w
    (id, host, pid, queues, started_at, last_seen, lease_until)
VALUES (%(worker_id)s, %(host)s, %(pid)s, %(queues)s::text[], %(started_at)s, %(now)s,
        %(lease_until)s)
ON CONFLICT (id) DO UPDATE
   SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
       started_at = excluded.started_at, last_seen = excluded.last_seen,
       lease_until = excluded.lease_until
"""
"""Store a worker's row (replacing one of its id) and drop the lapsed ones, in one
statement (the upserted id is not among those the CTE deletes: one statement may
not both delete and upsert a row)."""

WORKER_RENEW: Final = """
UPDATE {schema}.alkstore_workers SET last_seen = %(now)s, lease_until = %(lease_until)s
WHERE id = %(worker_id)s AND lease_until > %(now)s
"""

WORKER_DEREGISTER: Final = "DELETE FROM {schema}.alkstore_workers WHERE id = %(worker_id)s"

WORKERS_LIST: Final = """
SELECT id, host, pid, queues, started_at, last_seen, lease_until
FROM {schema}.alkstore_workers
WHERE lease_until > %(now)s
ORDER BY id
"""

THROUGHPUT_ADD: Final = """
WITH pruned AS (
    DELETE FROM {schema}.alkstore_throughput WHERE minute <= %(prune_through)s
)
INSERT INTO {schema}.alkstore_throughput AS t (queue, minute, count)
SELECT q, %(minute)s, n FROM unnest(%(queues)s::text[], %(counts)s::bigint[]) AS u (q, n)
ON CONFLICT (queue, minute) DO UPDATE SET count = t.count + excluded.count
"""
"""Add a heartbeat's counts to their minute and drop the counts past the hour, in one
statement (the pruned minutes are never the one added to)."""

THROUGHPUT_READ: Final = """
SELECT queue, minute, count FROM {schema}.alkstore_throughput WHERE minute > %(after)s
"""

# -- streams -------------------------------------------------------------------------

_ALLOCATE_OFFSETS = """
    INSERT INTO {schema}.alkstore_streams AS counter (stream, last_offset)
    VALUES (%(stream)s, %(count)s)
    ON CONFLICT (stream) DO UPDATE SET last_offset = counter.last_offset + excluded.last_offset
    RETURNING last_offset"""
"""Takes ``count`` offsets from the stream's counter row and returns the last one. The
row stays locked until the transaction ends, so the next appender of the stream
waits and numbers after it: offsets become visible in order (no reader can pass
an offset that commits later), and a rolled-back append gives its offsets back."""

_WAKE_STREAM = """
    SELECT pg_notify(%(wake_channel)s, %(topic)s::text) WHERE %(topic)s::text IS NOT NULL"""

STREAM_APPEND: Final = f"""
WITH allocated AS ({_ALLOCATE_OFFSETS}
), appended AS (
    INSERT INTO {{schema}}.alkstore_stream_events (stream, event_offset, payload, created_at)
    SELECT %(stream)s, last_offset, %(payload)s, %(now)s FROM allocated
    RETURNING event_offset
), woken AS ({_WAKE_STREAM}
)
SELECT event_offset FROM appended, (SELECT count(*) FROM woken) AS wake
"""
"""Append one event (``count`` = 1), and NOTIFY the stream's topic in the same
statement (unless ``topic`` is NULL: this transaction already announced it)."""

STREAM_APPEND_MANY: Final = f"""
WITH allocated AS ({_ALLOCATE_OFFSETS}
), appended AS (
    INSERT INTO {{schema}}.alkstore_stream_events (stream, event_offset, payload, created_at)
    SELECT %(stream)s, allocated.last_offset - %(count)s + event.position, event.payload,
           %(now)s
    FROM allocated, unnest(%(payloads)b::text[]) WITH ORDINALITY AS event (payload, position)
    RETURNING event_offset
), woken AS ({_WAKE_STREAM}
)
SELECT event_offset FROM appended, (SELECT count(*) FROM woken) AS wake
ORDER BY event_offset
"""
"""``STREAM_APPEND`` for ``count`` events, numbered consecutively in input order."""

STREAM_READ: Final = """
SELECT event_offset, payload, created_at FROM {schema}.alkstore_stream_events
WHERE stream = %(stream)s AND event_offset > %(after)s
ORDER BY event_offset
LIMIT %(limit)s
"""

STREAM_COMMIT: Final = """
INSERT INTO {schema}.alkstore_stream_consumers (stream, consumer, committed_offset)
VALUES (%(stream)s, %(consumer)s, %(offset)s)
ON CONFLICT (stream, consumer) DO UPDATE SET committed_offset = excluded.committed_offset
"""

STREAM_OFFSET: Final = """
SELECT committed_offset FROM {schema}.alkstore_stream_consumers
WHERE stream = %(stream)s AND consumer = %(consumer)s
"""

STREAM_TRIM: Final = """
DELETE FROM {schema}.alkstore_stream_events WHERE stream = %(stream)s AND event_offset < %(before)s
"""

# -- pub/sub -----------------------------------------------------------------------

PUBLISH: Final = """
SELECT pg_notify(%(message_channel)s, %(message)s)
"""
"""A message small enough for NOTIFY (``alkstore_postgres.messages``), sent on commit."""

_PRUNE_MESSAGES_UP_TO = """
    DELETE FROM {{schema}}.alkstore_messages
    WHERE id = ANY(ARRAY(
        SELECT id FROM {{schema}}.alkstore_messages
        WHERE id <= {newest} - %(keep)s
        FOR UPDATE SKIP LOCKED
    ))"""
"""Keeps the newest ``keep`` stored messages. SKIP LOCKED: a row another transaction
is pruning is left to it, so pruning never waits for (or deadlocks with) a
publisher's transaction, however long the caller keeps it open."""

PUBLISH_STORED: Final = f"""
WITH stored AS (
    INSERT INTO {{schema}}.alkstore_messages (channel, payload, created_at)
    VALUES (%(channel)s, %(payload)s, %(now)s)
    RETURNING id
), pruned AS ({_PRUNE_MESSAGES_UP_TO.format(newest="(SELECT id FROM stored)")}
)
SELECT pg_notify(%(message_channel)s, %(reference_prefix)s || id) FROM stored
"""
"""A message too large for NOTIFY: store it, NOTIFY its id, and prune the stored
messages beyond the newest ``keep``, in one statement."""

PRUNE_MESSAGES: Final = _PRUNE_MESSAGES_UP_TO.format(
    newest="(SELECT max(id) FROM {schema}.alkstore_messages)"
)
"""Run when a store opens (and, within ``PUBLISH_STORED``, on each stored publish):
never on a timer."""

FETCH_MESSAGES: Final = """
SELECT id, channel, payload FROM {schema}.alkstore_messages WHERE id = ANY(%(ids)s::bigint[])
"""
"""The listener resolving the references it received."""


def render(template: str, schema: str) -> bytes:
    """``template`` with ``{schema}`` replaced by the quoted identifier."""
    return _composed(template).replace(_SCHEMA_MARK, _quoted(schema))


_SCHEMA_MARK: Final = b"\x00schema\x00"
"""Where ``_composed`` leaves the schema: a NUL cannot occur in SQL text."""


@cache
def _composed(template: str) -> bytes:
    """``template`` formatted once (its ``{{``/``}}`` unescaped, any other field refused)
    with a mark for the schema: a store's every statement and migration is rendered on
    open, and composing each again was a sixth of a fresh store's open."""
    return sql.SQL(template).format(schema=sql.SQL(_SCHEMA_MARK.decode())).as_bytes(None)


@lru_cache(maxsize=256)
def _quoted(schema: str) -> bytes:
    return sql.Identifier(schema).as_bytes(None)


@dataclass(frozen=True, slots=True)
class Statements:
    """The statements above, rendered for one schema."""

    insert_job: bytes
    insert_jobs: bytes
    claim: bytes
    claim_one: bytes
    claim_ready: bytes
    claim_ready_one: bytes
    claim_limited: bytes
    call_claim_limited: bytes
    claim_in_turn: bytes
    lock_limit: bytes
    notify_if_limited: bytes
    set_limits: bytes
    clear_limits: bytes
    queue_limits: bytes
    all_queue_limits: bytes
    bury_exhausted: bytes
    bury_expired: bytes
    bury_claim: bytes
    purge_dead: bytes
    ack: bytes
    ack_async: bytes
    set_local_async_commit: bytes
    ack_batch: bytes
    ack_claims: bytes
    reschedule_claims: bytes
    bury_claims: bytes
    heartbeat: bytes
    reschedule: bytes
    release_claim: bytes
    snooze: bytes
    cancel: bytes
    get_job: bytes
    next_wake_at: bytes
    queue_stats: bytes
    queue_stats_all: bytes
    list_jobs: bytes
    list_pending_jobs: bytes
    list_processing_jobs: bytes
    list_dead_jobs: bytes
    list_jobs_newest: bytes
    list_pending_jobs_newest: bytes
    list_processing_jobs_newest: bytes
    list_dead_jobs_newest: bytes
    list_completed_jobs: bytes
    list_completed_jobs_newest: bytes
    list_waiting_jobs: bytes
    list_waiting_jobs_newest: bytes
    complete: bytes
    complete_async: bytes
    purge_completed: bytes
    set_completed_retention: bytes
    set_limit_key: bytes
    set_metadata: bytes
    redrive_named: bytes
    redrive_oldest: bytes
    give_up_passed_holds: bytes
    take_back_redriven: bytes
    remove_redriven: bytes
    prune_kept_edges: bytes
    insert_unique: bytes
    insert_unique_one: bytes
    purge_dead_named: bytes
    purge_dead_before: bytes
    pause: bytes
    resume: bytes
    is_paused: bytes
    notify: bytes
    lock_acquire: bytes
    lock_renew: bytes
    lock_release: bytes
    lock_holder: bytes
    schedule_upsert: bytes
    schedule_delete: bytes
    schedule_get: bytes
    schedule_list: bytes
    schedules_due: bytes
    schedule_advance: bytes
    schedule_next_fire_at: bytes
    schedules_renew: bytes
    schedules_lapse: bytes
    worker_register: bytes
    worker_renew: bytes
    worker_deregister: bytes
    workers_list: bytes
    throughput_add: bytes
    throughput_read: bytes
    stream_append: bytes
    stream_append_many: bytes
    stream_read: bytes
    stream_commit: bytes
    stream_offset: bytes
    stream_trim: bytes
    publish: bytes
    publish_stored: bytes
    prune_messages: bytes
    fetch_messages: bytes

    @classmethod
    def for_schema(cls, schema: str) -> Statements:
        return cls(
            insert_job=render(INSERT_JOB, schema),
            insert_jobs=render(INSERT_JOBS, schema),
            claim=render(CLAIM, schema),
            claim_one=render(CLAIM_ONE, schema),
            claim_ready=render(CLAIM_READY, schema),
            claim_ready_one=render(CLAIM_READY_ONE, schema),
            claim_limited=render(CLAIM_LIMITED, schema),
            call_claim_limited=render(CALL_CLAIM_LIMITED, schema),
            claim_in_turn=render(CLAIM_IN_TURN, schema),
            lock_limit=render(LOCK_LIMIT, schema),
            notify_if_limited=render(NOTIFY_IF_LIMITED, schema),
            set_limits=render(SET_LIMITS, schema),
            clear_limits=render(CLEAR_LIMITS, schema),
            queue_limits=render(QUEUE_LIMITS, schema),
            all_queue_limits=render(ALL_QUEUE_LIMITS, schema),
            bury_exhausted=render(BURY_EXHAUSTED, schema),
            bury_expired=render(BURY_EXPIRED, schema),
            bury_claim=render(BURY_CLAIM, schema),
            purge_dead=render(PURGE_DEAD, schema),
            ack=render(ACK, schema),
            ack_async=render(ACK_ASYNC, schema),
            set_local_async_commit=render(SET_LOCAL_ASYNC_COMMIT, schema),
            ack_batch=render(ACK_BATCH, schema),
            ack_claims=render(ACK_CLAIMS, schema),
            reschedule_claims=render(RESCHEDULE_CLAIMS, schema),
            bury_claims=render(BURY_CLAIMS, schema),
            heartbeat=render(HEARTBEAT, schema),
            reschedule=render(RESCHEDULE, schema),
            release_claim=render(RELEASE_CLAIM, schema),
            snooze=render(SNOOZE, schema),
            cancel=render(CANCEL, schema),
            get_job=render(GET_JOB, schema),
            next_wake_at=render(NEXT_WAKE_AT, schema),
            queue_stats=render(QUEUE_STATS, schema),
            queue_stats_all=render(QUEUE_STATS_ALL, schema),
            list_jobs=render(LIST_JOBS, schema),
            list_pending_jobs=render(LIST_PENDING_JOBS, schema),
            list_processing_jobs=render(LIST_PROCESSING_JOBS, schema),
            list_dead_jobs=render(LIST_DEAD_JOBS, schema),
            list_jobs_newest=render(LIST_JOBS_NEWEST, schema),
            list_pending_jobs_newest=render(LIST_PENDING_JOBS_NEWEST, schema),
            list_processing_jobs_newest=render(LIST_PROCESSING_JOBS_NEWEST, schema),
            list_dead_jobs_newest=render(LIST_DEAD_JOBS_NEWEST, schema),
            list_completed_jobs=render(LIST_COMPLETED_JOBS, schema),
            list_completed_jobs_newest=render(LIST_COMPLETED_JOBS_NEWEST, schema),
            list_waiting_jobs=render(LIST_WAITING_JOBS, schema),
            list_waiting_jobs_newest=render(LIST_WAITING_JOBS_NEWEST, schema),
            complete=render(COMPLETE, schema),
            complete_async=render(COMPLETE_ASYNC, schema),
            purge_completed=render(PURGE_COMPLETED, schema),
            set_completed_retention=render(SET_COMPLETED_RETENTION, schema),
            set_limit_key=render(SET_LIMIT_KEY, schema),
            set_metadata=render(SET_METADATA, schema),
            redrive_named=render(REDRIVE_NAMED, schema),
            redrive_oldest=render(REDRIVE_OLDEST, schema),
            give_up_passed_holds=render(GIVE_UP_PASSED_HOLDS, schema),
            take_back_redriven=render(TAKE_BACK_REDRIVEN, schema),
            remove_redriven=render(REMOVE_REDRIVEN, schema),
            prune_kept_edges=render(PRUNE_KEPT_EDGES, schema),
            insert_unique=render(INSERT_UNIQUE, schema),
            insert_unique_one=render(INSERT_UNIQUE_ONE, schema),
            purge_dead_named=render(PURGE_DEAD_NAMED, schema),
            purge_dead_before=render(PURGE_DEAD_BEFORE, schema),
            pause=render(PAUSE, schema),
            resume=render(RESUME, schema),
            is_paused=render(IS_PAUSED, schema),
            notify=render(NOTIFY, schema),
            lock_acquire=render(LOCK_ACQUIRE, schema),
            lock_renew=render(LOCK_RENEW, schema),
            lock_release=render(LOCK_RELEASE, schema),
            lock_holder=render(LOCK_HOLDER, schema),
            schedule_upsert=render(SCHEDULE_UPSERT, schema),
            schedule_delete=render(SCHEDULE_DELETE, schema),
            schedule_get=render(SCHEDULE_GET, schema),
            schedule_list=render(SCHEDULE_LIST, schema),
            schedules_due=render(SCHEDULES_DUE, schema),
            schedule_advance=render(SCHEDULE_ADVANCE, schema),
            schedule_next_fire_at=render(SCHEDULE_NEXT_FIRE_AT, schema),
            schedules_renew=render(SCHEDULES_RENEW, schema),
            schedules_lapse=render(SCHEDULES_LAPSE, schema),
            worker_register=render(WORKER_REGISTER, schema),
            worker_renew=render(WORKER_RENEW, schema),
            worker_deregister=render(WORKER_DEREGISTER, schema),
            workers_list=render(WORKERS_LIST, schema),
            throughput_add=render(THROUGHPUT_ADD, schema),
            throughput_read=render(THROUGHPUT_READ, schema),
            stream_append=render(STREAM_APPEND, schema),
            stream_append_many=render(STREAM_APPEND_MANY, schema),
            stream_read=render(STREAM_READ, schema),
            stream_commit=render(STREAM_COMMIT, schema),
            stream_offset=render(STREAM_OFFSET, schema),
            stream_trim=render(STREAM_TRIM, schema),
            publish=render(PUBLISH, schema),
            publish_stored=render(PUBLISH_STORED, schema),
            prune_messages=render(PRUNE_MESSAGES, schema),
            fetch_messages=render(FETCH_MESSAGES, schema),
        )
