"""The engine-owned tables (``__alkstore_*``) and their versioned migrations.

Every migration runs inside one ``BEGIN IMMEDIATE`` transaction under the
cross-process writer lock, together with the write of its version, so
processes opening the same file at once apply it exactly once: the first
applies it, the others find the new version. (That is what makes version 3's
``ALTER TABLE … ADD COLUMN``, which has no ``IF NOT EXISTS``, safe; the other
DDL has it as well.)

Version 1 holds the queue core (jobs, dead jobs, locks); version 2 adds the
optional profiles: schedules, streams (events, per-stream offset counters,
consumer offsets) and the pub/sub notifications table; version 3 adds contract
1.1's operations profile: the error history and redrive origin of every job,
paused queues, and the dead table's indexes by queue; version 4 puts pending
and claimed rows in one index, so a claim and an ack each change one index
page instead of two; version 5 adds contract 1.2's snooze count of every job;
version 6 gives schedules contract 1.2's time zone and catch-up policy, and lets
a cron schedule's ``interval_s`` be NULL; version 7 adds contract 1.2's unique
jobs: every job's unique key and its hold, one unique index over the live holds;
version 8 gives schedules contract 1.2's declaration lease (the periodic profile);
version 9 adds contract 1.2's queue limits: one row per limited queue, and the
claim starts of rate-limited queues (written by a trigger on each claim);
version 10 adds contract 1.2's finished jobs (the results profile): every job's
completed retention stamp and the completed table, apart from the claim path;
version 11 adds contract 1.2's per-key limits (every job's limit key, the per-key
limit and its turn on the limits row, per-key claim starts); version 12 adds the
dashboard's reads: a queue's live rows in id order, the worker registry and its
throughput counts; version 13 adds contract 1.2's job dependencies (the
dependencies profile): the waiting table apart from the claim path, the edges,
every job's flag saying that some job waits for it, and the triggers that release
or dead-letter its dependents in the statement that finishes it; version 14 adds the
queues that keep completed jobs (a row per queue, written by a trigger when a live row
stamped with a completed retention is written), so an ``ack_batch`` of a queue that
deletes on ack copies nothing; version 16 adds contract 1.2's job metadata; version 18
(numbered by the lead on merge) keeps completed jobs in place in the live table (state
``'completed'``, a deadline above every claim's: ``KEPT_FROM``), rebuilding it and
moving the completed table's rows in.
"""

from __future__ import annotations

import sqlite3

from alkstore import EngineUnavailable

JOBS = "__alkstore_jobs"
DEAD = "__alkstore_dead"
LOCKS = "__alkstore_locks"
META = "__alkstore_meta"

LIVE_INDEX = "__alkstore_jobs_live"
QUEUE_INDEX = "__alkstore_jobs_queue"
# Versions 1 to 3's two indexes of live rows, replaced by LIVE_INDEX in version 4.
CLAIM_INDEX = "__alkstore_jobs_claim"
LAPSE_INDEX = "__alkstore_jobs_lapse"
EXPIRY_INDEX = "__alkstore_jobs_expiry"
PURGE_INDEX = "__alkstore_dead_purge"

SCHEDULES = "__alkstore_schedules"
STREAMS = "__alkstore_streams"
STREAM_EVENTS = "__alkstore_stream_events"
STREAM_OFFSETS = "__alkstore_stream_offsets"
NOTIFICATIONS = "__alkstore_notifications"

DUE_INDEX = "__alkstore_schedules_due"
DECLARED_INDEX = "__alkstore_schedules_declared"

PAUSED = "__alkstore_paused"
DEAD_QUEUE_INDEX = "__alkstore_dead_queue"
DEAD_AGE_INDEX = "__alkstore_dead_age"
MOVE_TO_DEAD_TRIGGER = "__alkstore_jobs_move_to_dead"
UNIQUE_INDEX = "__alkstore_jobs_unique"
DEAD_UNIQUE_INDEX = "__alkstore_dead_unique"
LIMITS = "__alkstore_queue_limits"
CLAIM_STARTS = "__alkstore_claim_starts"
CLAIM_STARTS_INDEX = "__alkstore_claim_starts_window"
CLAIM_STARTS_TRIGGER = "__alkstore_jobs_claim_start"
KEY_STARTS = "__alkstore_key_claim_starts"
KEY_STARTS_INDEX = "__alkstore_key_claim_starts_window"
# The pending rows by key in claim order: a claim under a per-key limit walks the keys.
KEY_INDEX = "__alkstore_jobs_key"
COMPLETED = "__alkstore_completed"
WORKERS = "__alkstore_workers"
THROUGHPUT = "__alkstore_throughput"
KEPT_QUEUES = "__alkstore_kept_queues"
KEEP_ON_INSERT_TRIGGER = "__alkstore_jobs_keep_on_insert"
KEEP_ON_UPDATE_TRIGGER = "__alkstore_jobs_keep_on_update"
WAITING = "__alkstore_waiting"
WAITING_QUEUE_INDEX = "__alkstore_waiting_queue"
DEPENDENCIES = "__alkstore_dependencies"
DEPENDENTS_INDEX = "__alkstore_dependencies_dependent"
RELEASE_TRIGGER = "__alkstore_jobs_release_dependents"
BURY_DEPENDENTS_TRIGGER = "__alkstore_dead_bury_dependents"
PASS_ON_TRIGGER = "__alkstore_dead_pass_on"
COMPLETED_QUEUE_INDEX = "__alkstore_completed_queue"
COMPLETED_PURGE_INDEX = "__alkstore_completed_purge"
COMPLETE_RELEASE_TRIGGER = "__alkstore_jobs_release_on_complete"

KEPT_FROM = 2**62
"""A completed row's deadline is ``KEPT_FROM`` plus its purge instant (``completed_at +
completed_retention_s``, version 18): above every claim's deadline (instants are below
``2**41``), so the claims' ranges of the live index (``deadline IS NULL``, ``deadline <=
now``, ``now < deadline < KEPT_FROM``) never walk a completed row, and the purge is one
range of it (``KEPT_FROM <= deadline < KEPT_FROM + now``)."""

KEPT_EDGES = "__alkstore_dead_dependencies"
KEPT_EDGES_INDEX = "__alkstore_dead_dependencies_dependency"

_KEPT_V13 = (
    "id, queue, payload, priority, attempts, max_attempts, created_at, run_at, claimed_at, "
    "expires_at, worker_id, visibility_timeout_s, backoff_base_s, dead_letter_retention_s, "
    "errors, redriven_from, snoozes, unique_key, completed_retention_s, limit_key"
)
# Version 13's triggers name the columns of their day: kept as written then.

KEPT_COLUMNS = f"{_KEPT_V13}, metadata"
"""The columns the live, dead, completed and waiting tables share (a row moves with them)."""


def bury_dependents(
    dependency: str,
    error: str,
    died_at: str,
    kept: str = KEPT_COLUMNS,
    keep_edges: bool = True,
) -> tuple[str, ...]:
    """The statements run when the job ``dependency`` (an SQL expression) will never
    complete. The fan-ins waiting for it (``finishes = 1``) count it finished: one job
    less, pending at none. The other waiting jobs with an edge to it move to dead with
    ``error`` and ``died_at`` (expressions), all of them first; then each one's flag,
    set, fires ``PASS_ON_TRIGGER`` for the next level, in id order (the connection's
    ``recursive_triggers``); then the rows and their edges go, each dead one's edges
    kept in ``KEPT_EDGES`` (the kept edges' version, ``keep_edges``) for a redrive of its
    dependency (contract 1.2 §18.4)."""
    waiters = f"(SELECT job_id FROM {DEPENDENCIES} WHERE depends_on = {dependency})"
    keep = (
        (
            f"""INSERT OR IGNORE INTO {KEPT_EDGES} (job_id, depends_on)
        SELECT job_id, depends_on FROM {DEPENDENCIES} WHERE job_id IN (
            SELECT id FROM {DEAD} WHERE id IN {waiters})""",
        )
        if keep_edges
        else ()
    )
    return (
        f"UPDATE {WAITING} SET waiting_on = waiting_on - 1 WHERE finishes = 1 AND id IN {waiters}",
        f"""INSERT INTO {JOBS} ({kept}, state, has_dependents)
        SELECT {kept}, 'pending', has_dependents FROM {WAITING}
         WHERE finishes = 1 AND waiting_on = 0 AND id IN {waiters}""",
        f"DELETE FROM {WAITING} WHERE finishes = 1 AND waiting_on = 0 AND id IN {waiters}",
        # All of them die at once (a job with dependents of its own marked 2: not yet
        # passed on), then each passes it on in id order: level by level.
        f"""INSERT OR IGNORE INTO {DEAD} ({kept}, has_dependents, last_error, died_at)
        SELECT {kept}, 2 * has_dependents, {error}, {died_at}
          FROM {WAITING} WHERE finishes = 0 AND id IN {waiters} ORDER BY id""",
        f"DELETE FROM {WAITING} WHERE finishes = 0 AND id IN {waiters}",
        f"UPDATE {DEAD} SET has_dependents = 1 WHERE has_dependents = 2 AND id IN {waiters}",
        *keep,
        f"""DELETE FROM {DEPENDENCIES} WHERE job_id IN (
            SELECT id FROM {DEAD} WHERE id IN {waiters})""",
        f"DELETE FROM {DEPENDENCIES} WHERE depends_on = {dependency}",
    )


_V1 = (
    f"""
    CREATE TABLE IF NOT EXISTS {META} (
        key   TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    # Live jobs: pending and processing. AUTOINCREMENT, not a plain rowid alias,
    # so an id is never handed out again after the highest row is acked or
    # moved to dead (sqlite_sequence remembers the largest id ever used).
    # 'dead' appears only inside one statement: the trigger below moves the row.
    # (The CHECK is spelled with OR: an IN list builds a lookup table on every
    # statement run, which costs a third of a batch insert.)
    f"""
    CREATE TABLE IF NOT EXISTS {JOBS} (
        id                      INTEGER PRIMARY KEY AUTOINCREMENT,
        queue                   TEXT    NOT NULL,
        state                   TEXT    NOT NULL
            CHECK (state = 'pending' OR state = 'processing' OR state = 'dead'),
        payload                 TEXT    NOT NULL,
        priority                INTEGER NOT NULL,
        attempts                INTEGER NOT NULL DEFAULT 0,
        max_attempts            INTEGER NOT NULL,
        created_at              INTEGER NOT NULL,
        run_at                  INTEGER NOT NULL,
        claimed_at              INTEGER,
        deadline                INTEGER,
        expires_at              INTEGER,
        worker_id               TEXT,
        visibility_timeout_s    INTEGER NOT NULL,
        backoff_base_s          INTEGER NOT NULL,
        dead_letter_retention_s INTEGER,
        last_error              TEXT,
        died_at                 INTEGER
    )
    """,
    # The claim path: pending rows of a queue in claim order, so a claim reads
    # the first rows of the index and stops, whatever the backlog (the rowid,
    # i.e. the id, ends every index entry and breaks ties). Replaced, with the
    # next one, by version 4's LIVE_INDEX.
    f"""
    CREATE INDEX IF NOT EXISTS {CLAIM_INDEX}
        ON {JOBS} (queue, priority DESC, run_at) WHERE state = 'pending'
    """,
    # Claimed rows by deadline: lapsed claims (reclaim, exhaustion) and the next
    # deadline are a range read over in-flight work only.
    f"""
    CREATE INDEX IF NOT EXISTS {LAPSE_INDEX}
        ON {JOBS} (queue, deadline) WHERE state = 'processing'
    """,
    # Only jobs enqueued with `expires` are indexed for the expiry sweep.
    f"""
    CREATE INDEX IF NOT EXISTS {EXPIRY_INDEX}
        ON {JOBS} (queue, expires_at) WHERE expires_at IS NOT NULL
    """,
    # Dead rows keep their id, never sit on the claim path, and carry why they died.
    f"""
    CREATE TABLE IF NOT EXISTS {DEAD} (
        id                      INTEGER PRIMARY KEY,
        queue                   TEXT    NOT NULL,
        payload                 TEXT    NOT NULL,
        priority                INTEGER NOT NULL,
        attempts                INTEGER NOT NULL,
        max_attempts            INTEGER NOT NULL,
        created_at              INTEGER NOT NULL,
        run_at                  INTEGER NOT NULL,
        claimed_at              INTEGER,
        expires_at              INTEGER,
        worker_id               TEXT,
        visibility_timeout_s    INTEGER NOT NULL,
        backoff_base_s          INTEGER NOT NULL,
        dead_letter_retention_s INTEGER,
        last_error              TEXT    NOT NULL,
        died_at                 INTEGER NOT NULL
    )
    """,
    # Retention purge: only rows with a retention are indexed, by their purge instant.
    f"""
    CREATE INDEX IF NOT EXISTS {PURGE_INDEX}
        ON {DEAD} (queue, died_at + dead_letter_retention_s)
        WHERE dead_letter_retention_s IS NOT NULL
    """,
    # Setting state = 'dead' moves the row to the dead table. A statement and
    # the triggers it fires are atomic in SQLite, so every move (fail, retry at
    # budget, exhaustion, expiry) is ONE statement: it cannot half-happen, in
    # the engine's own transactions or inside a caller's.
    f"""
    CREATE TRIGGER IF NOT EXISTS {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """,
    f"""
    CREATE TABLE IF NOT EXISTS {LOCKS} (
        name       TEXT    PRIMARY KEY,
        owner      TEXT    NOT NULL,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
)

_V2 = (
    # Schedules by name. WITHOUT ROWID: the name is the key, and an index on
    # next_fire_at then ends with the name, so "due, by next_fire_at then name"
    # reads the index in order and sorts nothing.
    f"""
    CREATE TABLE IF NOT EXISTS {SCHEDULES} (
        name         TEXT    PRIMARY KEY,
        spec         TEXT    NOT NULL,
        queue        TEXT    NOT NULL,
        payload      TEXT    NOT NULL,
        priority     INTEGER NOT NULL,
        max_attempts INTEGER,
        expires_s    INTEGER,
        interval_s   INTEGER NOT NULL,
        next_fire_at INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    f"""
    CREATE INDEX IF NOT EXISTS {DUE_INDEX} ON {SCHEDULES} (next_fire_at)
    """,
    # One counter row per stream: the last offset ever handed out. Appends take
    # their offsets by updating it, so offsets survive trim_to deleting every
    # event (MAX(offset) would hand them out again), and the write lock taken by
    # that update orders appenders (see the engine doc: gap safety).
    f"""
    CREATE TABLE IF NOT EXISTS {STREAMS} (
        stream      TEXT    PRIMARY KEY,
        last_offset INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    # Events clustered by (stream, offset): a read "after n" and a trim "before n"
    # are one range of the primary key.
    f"""
    CREATE TABLE IF NOT EXISTS {STREAM_EVENTS} (
        stream     TEXT    NOT NULL,
        offset     INTEGER NOT NULL,
        payload    TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (stream, offset)
    ) WITHOUT ROWID
    """,
    f"""
    CREATE TABLE IF NOT EXISTS {STREAM_OFFSETS} (
        stream   TEXT    NOT NULL,
        consumer TEXT    NOT NULL,
        offset   INTEGER NOT NULL,
        PRIMARY KEY (stream, consumer)
    ) WITHOUT ROWID
    """,
    # Pub/sub's transport: each process's watcher reads the rows committed after
    # its cursor (an id). AUTOINCREMENT: should the table ever be emptied, a plain
    # rowid would start again at 1, below every watcher's cursor.
    f"""
    CREATE TABLE IF NOT EXISTS {NOTIFICATIONS} (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        channel    TEXT    NOT NULL,
        payload    TEXT    NOT NULL,
        created_at INTEGER NOT NULL
    )
    """,
)

_V3 = (
    # The error history (JSON text, see alkstore.driver.JOB_COLUMNS) and the id a
    # redriven job was made from. Both NULL on every row written before.
    f"ALTER TABLE {JOBS} ADD COLUMN errors TEXT",
    f"ALTER TABLE {JOBS} ADD COLUMN redriven_from INTEGER",
    f"ALTER TABLE {DEAD} ADD COLUMN errors TEXT",
    f"ALTER TABLE {DEAD} ADD COLUMN redriven_from INTEGER",
    # The move to dead carries the two new columns: replace version 1's trigger.
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    f"""
    CREATE TRIGGER {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at, errors, redriven_from
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at, NEW.errors, NEW.redriven_from
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """,
    # A queue is paused while it has a row here. WITHOUT ROWID: a claim's check
    # is one seek of the key.
    f"""
    CREATE TABLE IF NOT EXISTS {PAUSED} (
        queue TEXT PRIMARY KEY
    ) WITHOUT ROWID
    """,
    # A queue's dead rows in id order (every index entry ends with the rowid, the
    # id): counting them reads only this index, and a page of dead jobs is one
    # range of it.
    f"""
    CREATE INDEX IF NOT EXISTS {DEAD_QUEUE_INDEX} ON {DEAD} (queue)
    """,
    # A queue's dead rows oldest first (then by id): redrive's default order, and
    # purging those dead longer than a given age, are one range of it.
    f"""
    CREATE INDEX IF NOT EXISTS {DEAD_AGE_INDEX} ON {DEAD} (queue, died_at)
    """,
)

_LIVE_INDEX_SQL = f"""
    CREATE INDEX IF NOT EXISTS {LIVE_INDEX}
        ON {JOBS} (queue, deadline DESC, priority DESC, run_at)
    """

_V4 = (
    # Pending rows and claimed rows in one index, keyed by the deadline alone:
    #   (queue, deadline DESC, …)  claimed, newest deadline first: lapsed claims
    #                              (reclaim, exhaustion), the next deadline
    #   (queue, NULL, priority DESC, run_at, id)  pending, in claim order (NULL
    #                              sorts last in a DESC column)
    # A row's deadline is set exactly while it is claimed (every statement that
    # makes a row pending clears it; this one mends any row an older version left
    # otherwise), so it tells the two apart without the state, which would
    # make every entry longer. A claim moves a row from the head of its queue's
    # pending range to the start of its claimed range, right before it (with few
    # claims in flight, the same page), and an ack deletes it from there: each
    # touches one index page where two indexes touched two (one page less in the
    # WAL per claim).
    f"UPDATE {JOBS} SET deadline = NULL WHERE state = 'pending' AND deadline IS NOT NULL",
    f"DROP INDEX IF EXISTS {CLAIM_INDEX}",
    f"DROP INDEX IF EXISTS {LAPSE_INDEX}",
    _LIVE_INDEX_SQL,
)

_V5 = (
    # How many times each job was snoozed (the snooze profile): 0 on every row
    # written before, and on every row inserted without it (enqueue, redrive).
    f"ALTER TABLE {JOBS} ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0",
    f"ALTER TABLE {DEAD} ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0",
    # The move to dead carries the count: replace version 3's trigger.
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    f"""
    CREATE TRIGGER {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at, errors, redriven_from, snoozes
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at, NEW.errors, NEW.redriven_from, NEW.snoozes
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """,
)

_V6_SCHEDULES = f"{SCHEDULES}_v6"

_V6 = (
    # Cron schedules (the cron profile): each schedule's zone and catch-up policy,
    # 'UTC' and 'all' on every schedule written before (what they always were), and
    # interval_s NULL for a cron spec. SQLite cannot drop a NOT NULL, so the table is
    # built anew and the rows copied over, in the migration's one transaction.
    f"""
    CREATE TABLE {_V6_SCHEDULES} (
        name         TEXT    PRIMARY KEY,
        spec         TEXT    NOT NULL,
        queue        TEXT    NOT NULL,
        payload      TEXT    NOT NULL,
        priority     INTEGER NOT NULL,
        max_attempts INTEGER,
        expires_s    INTEGER,
        interval_s   INTEGER,
        next_fire_at INTEGER NOT NULL,
        timezone     TEXT    NOT NULL DEFAULT 'UTC',
        catch_up     TEXT    NOT NULL DEFAULT 'all'
    ) WITHOUT ROWID
    """,
    f"""
    INSERT INTO {_V6_SCHEDULES} (
        name, spec, queue, payload, priority, max_attempts, expires_s, interval_s,
        next_fire_at
    )
    SELECT name, spec, queue, payload, priority, max_attempts, expires_s, interval_s,
           next_fire_at
      FROM {SCHEDULES}
    """,
    f"DROP TABLE {SCHEDULES}",  # (and its index)
    f"ALTER TABLE {_V6_SCHEDULES} RENAME TO {SCHEDULES}",
    f"CREATE INDEX IF NOT EXISTS {DUE_INDEX} ON {SCHEDULES} (next_fire_at)",
)

_UNIQUE_INDEX_SQL = f"""
    CREATE UNIQUE INDEX IF NOT EXISTS {UNIQUE_INDEX}
        ON {JOBS} (queue, unique_hold) WHERE unique_hold IS NOT NULL
    """

_V7 = (
    # The unique profile. unique_key is the key a job was enqueued with, shown for its
    # whole life; unique_hold is that key while the job holds it (NULL once its hold
    # passed, or on a dead row that does not keep it); hold_until is when the hold
    # ends (created_at + period; NULL: never while the job lives); hold_dead whether a
    # dead job keeps it. All NULL (hold_dead 0) on every row written before, and on
    # every row inserted without them (a plain enqueue).
    *(
        f"ALTER TABLE {table} ADD COLUMN {column}"
        for table in (JOBS, DEAD)
        for column in (
            "unique_key TEXT",
            "unique_hold TEXT",
            "hold_until INTEGER",
            "hold_dead INTEGER NOT NULL DEFAULT 0",
        )
    ),
    # At most one live row of a queue holds a key: the index is the arbiter, so two
    # writers can never both insert one (INSERT ... ON CONFLICT DO NOTHING). Partial:
    # a plain job is no entry, and no statement that leaves unique_hold alone (a
    # claim, a heartbeat, a retry) touches the index.
    _UNIQUE_INDEX_SQL,
    # Dead rows that keep their key. Not unique: a dead hold that passed is only
    # ignored, never cleared, so a later holder of the key may die holding it too.
    # (SQLite has one writer at a time, so the check of this table inside the
    # inserting write transaction cannot be raced.)
    f"""
    CREATE INDEX IF NOT EXISTS {DEAD_UNIQUE_INDEX}
        ON {DEAD} (queue, unique_hold) WHERE unique_hold IS NOT NULL
    """,
    # The move to dead carries the unique columns, the hold only for a job that keeps
    # it while dead: replace version 5's trigger.
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    f"""
    CREATE TRIGGER {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at, errors, redriven_from, snoozes,
            unique_key, unique_hold, hold_until, hold_dead
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at, NEW.errors, NEW.redriven_from, NEW.snoozes,
            NEW.unique_key, CASE WHEN NEW.hold_dead THEN NEW.unique_hold END,
            NEW.hold_until, NEW.hold_dead
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """,
)

_V8 = (
    # Declared schedules (the periodic profile): the lease of a schedule a worker
    # declares, NULL on every schedule written before and on every one store.schedule
    # writes (which never lapses). The partial index is what a tick's removal of the
    # lapsed ones reads; a schedule that is not declared is no entry.
    f"ALTER TABLE {SCHEDULES} ADD COLUMN declared_until INTEGER",
    f"""
    CREATE INDEX IF NOT EXISTS {DECLARED_INDEX}
        ON {SCHEDULES} (declared_until) WHERE declared_until IS NOT NULL
    """,
)


_CLAIM_STARTS_TRIGGER_SQL = f"""
    CREATE TRIGGER IF NOT EXISTS {CLAIM_STARTS_TRIGGER}
    AFTER UPDATE OF attempts ON {JOBS}
    WHEN NEW.attempts = OLD.attempts + 1
     AND EXISTS (SELECT 1 FROM {LIMITS} WHERE queue = NEW.queue AND rate IS NOT NULL)
    BEGIN
        DELETE FROM {CLAIM_STARTS}
         WHERE queue = NEW.queue
           AND started_at <= NEW.claimed_at
                             - (SELECT per_s FROM {LIMITS} WHERE queue = NEW.queue);
        INSERT INTO {CLAIM_STARTS} (queue, started_at) VALUES (NEW.queue, NEW.claimed_at);
    END
    """
"""A rate-limited queue's claim starts: one row per claimed row (version 9's trigger)."""


# Contract 1.2's queue limits (the limits profile): the limits of each limited
# queue, beside the paused queues. A claim reads them in its own statement, under
# SQLite's one write lock, so no two claimers both see a free slot.
_V9 = (
    f"""
    CREATE TABLE IF NOT EXISTS {LIMITS} (
        queue       TEXT PRIMARY KEY,
        concurrency INTEGER CHECK (concurrency >= 1),
        rate        INTEGER CHECK (rate >= 1),
        per_s       INTEGER CHECK (per_s >= 1),
        CHECK ((rate IS NULL) = (per_s IS NULL)),
        CHECK (concurrency IS NOT NULL OR rate IS NOT NULL)
    ) WITHOUT ROWID
    """,
    # A rate-limited queue's claim starts: one row per claimed row, at its claim's
    # now (claimed_at). Only a claim raises attempts, so the trigger fires on claims
    # alone; its WHEN is one seek of the limits table's key per claimed row, and it
    # drops the queue's starts that left the window (they can never count again).
    f"""
    CREATE TABLE IF NOT EXISTS {CLAIM_STARTS} (
        queue      TEXT NOT NULL,
        started_at INTEGER NOT NULL
    )
    """,
    f"CREATE INDEX IF NOT EXISTS {CLAIM_STARTS_INDEX} ON {CLAIM_STARTS} (queue, started_at)",
    _CLAIM_STARTS_TRIGGER_SQL,
)


_V10 = (
    # The results profile. completed_retention_s is every job's stamp (NULL: an ack
    # deletes it, as before; NULL on every row written before), carried to the dead
    # table so a redrive keeps it.
    f"ALTER TABLE {JOBS} ADD COLUMN completed_retention_s INTEGER",
    f"ALTER TABLE {DEAD} ADD COLUMN completed_retention_s INTEGER",
    # Acked jobs their queue keeps: same id, out of the live table (so the claim path
    # and its index never see them), with when they completed and their result (JSON
    # text, or NULL). A completed job holds no unique key: no hold columns.
    f"""
    CREATE TABLE IF NOT EXISTS {COMPLETED} (
        id                      INTEGER PRIMARY KEY,
        queue                   TEXT    NOT NULL,
        payload                 TEXT    NOT NULL,
        priority                INTEGER NOT NULL,
        attempts                INTEGER NOT NULL,
        max_attempts            INTEGER NOT NULL,
        created_at              INTEGER NOT NULL,
        run_at                  INTEGER NOT NULL,
        claimed_at              INTEGER,
        expires_at              INTEGER,
        worker_id               TEXT,
        visibility_timeout_s    INTEGER NOT NULL,
        backoff_base_s          INTEGER NOT NULL,
        dead_letter_retention_s INTEGER,
        errors                  TEXT,
        redriven_from           INTEGER,
        snoozes                 INTEGER NOT NULL DEFAULT 0,
        unique_key              TEXT,
        completed_retention_s   INTEGER NOT NULL,
        completed_at            INTEGER NOT NULL,
        result                  TEXT
    )
    """,
    # A queue's completed rows in id order (each entry ends with the id): counting
    # them and a page of them read only this index.
    f"CREATE INDEX IF NOT EXISTS {COMPLETED_QUEUE_INDEX} ON {COMPLETED} (queue)",
    # The retention purge: a range of the queue's rows by their purge instant.
    f"""
    CREATE INDEX IF NOT EXISTS {COMPLETED_PURGE_INDEX}
        ON {COMPLETED} (queue, completed_at + completed_retention_s)
    """,
    # The move to dead carries the stamp: replace version 7's trigger.
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    f"""
    CREATE TRIGGER {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at, errors, redriven_from, snoozes,
            unique_key, unique_hold, hold_until, hold_dead, completed_retention_s
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at, NEW.errors, NEW.redriven_from, NEW.snoozes,
            NEW.unique_key, CASE WHEN NEW.hold_dead THEN NEW.unique_hold END,
            NEW.hold_until, NEW.hold_dead, NEW.completed_retention_s
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """,
)


_V11 = (
    # The key_limits profile. limit_key is the key a per-key limit counts a job under
    # (NULL: the key every job without one shares; NULL on every row written before),
    # carried to the dead and completed tables so a job keeps it for its whole life.
    f"ALTER TABLE {JOBS} ADD COLUMN limit_key TEXT",
    f"ALTER TABLE {DEAD} ADD COLUMN limit_key TEXT",
    f"ALTER TABLE {COMPLETED} ADD COLUMN limit_key TEXT",
    # The limits row gains the per-key limit, the per-key rate (sharing per_s with the
    # queue's rate) and the key the queue's last claim served (where the next claim's
    # turn starts); a row may now hold only per-key limits, so the table is rebuilt
    # with its new CHECKs (it holds a row per limited queue). The claim-starts trigger
    # names the table: dropped first, made again.
    f"DROP TRIGGER IF EXISTS {CLAIM_STARTS_TRIGGER}",
    f"""
    CREATE TABLE {LIMITS}_v11 (
        queue               TEXT PRIMARY KEY,
        concurrency         INTEGER CHECK (concurrency >= 1),
        rate                INTEGER CHECK (rate >= 1),
        per_s               INTEGER CHECK (per_s >= 1),
        concurrency_per_key INTEGER CHECK (concurrency_per_key >= 1),
        rate_per_key        INTEGER CHECK (rate_per_key >= 1),
        key_cursor          TEXT,
        CHECK ((rate IS NULL AND rate_per_key IS NULL) = (per_s IS NULL)),
        CHECK (concurrency IS NOT NULL OR rate IS NOT NULL OR concurrency_per_key IS NOT NULL
               OR rate_per_key IS NOT NULL)
    ) WITHOUT ROWID
    """,
    f"""
    INSERT INTO {LIMITS}_v11 (queue, concurrency, rate, per_s)
    SELECT queue, concurrency, rate, per_s FROM {LIMITS}
    """,
    f"DROP TABLE {LIMITS}",
    f"ALTER TABLE {LIMITS}_v11 RENAME TO {LIMITS}",
    _CLAIM_STARTS_TRIGGER_SQL,
    # A per-key rate's claim starts: one row per claimed row, under its key ('' for
    # the jobs without one), written by the claim in turn in its own transaction.
    f"""
    CREATE TABLE IF NOT EXISTS {KEY_STARTS} (
        queue      TEXT NOT NULL,
        limit_key  TEXT NOT NULL,
        started_at INTEGER NOT NULL
    )
    """,
    f"""
    CREATE INDEX IF NOT EXISTS {KEY_STARTS_INDEX}
        ON {KEY_STARTS} (queue, limit_key, started_at)
    """,
    # The move to dead carries the key: replace version 10's trigger.
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    f"""
    CREATE TRIGGER {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at, errors, redriven_from, snoozes,
            unique_key, unique_hold, hold_until, hold_dead, completed_retention_s, limit_key
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at, NEW.errors, NEW.redriven_from, NEW.snoozes,
            NEW.unique_key, CASE WHEN NEW.hold_dead THEN NEW.unique_hold END,
            NEW.hold_until, NEW.hold_dead, NEW.completed_retention_s, NEW.limit_key
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """,
)


_QUEUE_INDEX_SQL = f"CREATE INDEX IF NOT EXISTS {QUEUE_INDEX} ON {JOBS} (queue)"

_V12 = (
    # A queue's live rows in id order (each entry ends with the rowid), for a page
    # of its jobs: an enqueue adds an entry and an ack or a move to dead removes
    # it; a claim, a heartbeat and a retry change neither column, so they write
    # no page of it.
    _QUEUE_INDEX_SQL,
    # The worker registry (the workers profile): one row per worker id, read whole
    # (a fleet is small); queues as a JSON array in the worker's order.
    f"""
    CREATE TABLE IF NOT EXISTS {WORKERS} (
        id          TEXT    PRIMARY KEY,
        host        TEXT    NOT NULL,
        pid         INTEGER NOT NULL,
        queues      TEXT    NOT NULL,
        started_at  INTEGER NOT NULL,
        last_seen   INTEGER NOT NULL,
        lease_until INTEGER NOT NULL
    )
    """,
    # Jobs finished per queue and minute, added by workers' heartbeats (the ack
    # path writes nothing here); at most an hour of minutes is kept.
    f"""
    CREATE TABLE IF NOT EXISTS {THROUGHPUT} (
        queue  TEXT    NOT NULL,
        minute INTEGER NOT NULL,
        count  INTEGER NOT NULL,
        PRIMARY KEY (queue, minute)
    ) WITHOUT ROWID
    """,
)


def _trigger_body(statements: tuple[str, ...]) -> str:
    return "".join(f"    {statement};\n" for statement in statements)


def _bury_dead_dependents(kept: str, keep_edges: bool = False) -> str:
    return _trigger_body(
        bury_dependents(
            "NEW.id", "'dependency ' || NEW.id || ' is dead'", "NEW.died_at", kept, keep_edges
        )
    )


_BURY_DEAD_DEPENDENTS = _bury_dead_dependents(_KEPT_V13)

_RELEASED = f"""(SELECT job_id FROM {DEPENDENCIES} WHERE depends_on = OLD.id)"""

_V13 = (
    # The dependencies profile. has_dependents: 1 once a job waits for this one (0 on
    # every row written before, and on most rows); 2 on a live row being cancelled.
    f"ALTER TABLE {JOBS} ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0",
    f"ALTER TABLE {DEAD} ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0",
    # Jobs waiting for others: same ids as the live table, out of it (no claim, no
    # claim index, no next-wake read ever sees them), with how many jobs they still
    # wait for.
    f"""
    CREATE TABLE IF NOT EXISTS {WAITING} (
        id                      INTEGER PRIMARY KEY,
        queue                   TEXT    NOT NULL,
        payload                 TEXT    NOT NULL,
        priority                INTEGER NOT NULL,
        attempts                INTEGER NOT NULL,
        max_attempts            INTEGER NOT NULL,
        created_at              INTEGER NOT NULL,
        run_at                  INTEGER NOT NULL,
        claimed_at              INTEGER,
        expires_at              INTEGER,
        worker_id               TEXT,
        visibility_timeout_s    INTEGER NOT NULL,
        backoff_base_s          INTEGER NOT NULL,
        dead_letter_retention_s INTEGER,
        errors                  TEXT,
        redriven_from           INTEGER,
        snoozes                 INTEGER NOT NULL DEFAULT 0,
        unique_key              TEXT,
        completed_retention_s   INTEGER,
        limit_key               TEXT,
        has_dependents          INTEGER NOT NULL DEFAULT 0,
        finishes                INTEGER NOT NULL DEFAULT 0,
        waiting_on              INTEGER NOT NULL
    )
    """,
    f"CREATE INDEX IF NOT EXISTS {WAITING_QUEUE_INDEX} ON {WAITING} (queue)",
    # One edge per job a waiting job still waits for; by dependency (the release and
    # the dead-letter cascade), and by dependent (its own cancel or expiry).
    f"""
    CREATE TABLE IF NOT EXISTS {DEPENDENCIES} (
        depends_on INTEGER NOT NULL,
        job_id     INTEGER NOT NULL,
        PRIMARY KEY (depends_on, job_id)
    ) WITHOUT ROWID
    """,
    f"CREATE INDEX IF NOT EXISTS {DEPENDENTS_INDEX} ON {DEPENDENCIES} (job_id)",
    # The move to dead carries the flag (and version 11's limit key): replace it.
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    f"""
    CREATE TRIGGER {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at, errors, redriven_from, snoozes,
            unique_key, unique_hold, hold_until, hold_dead, completed_retention_s,
            limit_key, has_dependents
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at, NEW.errors, NEW.redriven_from, NEW.snoozes,
            NEW.unique_key, CASE WHEN NEW.hold_dead THEN NEW.unique_hold END,
            NEW.hold_until, NEW.hold_dead, NEW.completed_retention_s, NEW.limit_key,
            NEW.has_dependents
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """,
    # A live row with dependents leaving the table other than to dead (an ack, a
    # completion; a cancel marks it 2 first) completed: in the same statement, each
    # waiting job counts one job less, and those at 0 become pending, same id.
    f"""
    CREATE TRIGGER IF NOT EXISTS {RELEASE_TRIGGER}
    AFTER DELETE ON {JOBS}
    WHEN OLD.has_dependents = 1 AND NOT EXISTS (SELECT 1 FROM {DEAD} WHERE id = OLD.id)
    BEGIN
        UPDATE {WAITING} SET waiting_on = waiting_on - 1 WHERE id IN {_RELEASED};
        INSERT INTO {JOBS} ({_KEPT_V13}, state, has_dependents)
        SELECT {_KEPT_V13}, 'pending', has_dependents
          FROM {WAITING} WHERE waiting_on = 0 AND id IN {_RELEASED};
        DELETE FROM {WAITING} WHERE waiting_on = 0 AND id IN {_RELEASED};
        DELETE FROM {DEPENDENCIES} WHERE depends_on = OLD.id;
    END
    """,
    # A job with dependents reached the dead table (any path): they never run.
    f"""
    CREATE TRIGGER IF NOT EXISTS {BURY_DEPENDENTS_TRIGGER}
    AFTER INSERT ON {DEAD} WHEN NEW.has_dependents = 1
    BEGIN
{_BURY_DEAD_DEPENDENTS}    END
    """,
    # A job buried with the others waiting for a dead one passes it on to its own.
    f"""
    CREATE TRIGGER IF NOT EXISTS {PASS_ON_TRIGGER}
    AFTER UPDATE OF has_dependents ON {DEAD} WHEN NEW.has_dependents = 1
    BEGIN
{_BURY_DEAD_DEPENDENTS}    END
    """,
)

_KEY_INDEX_SQL = f"""
    CREATE INDEX IF NOT EXISTS {KEY_INDEX}
        ON {JOBS} (queue, coalesce(limit_key, ''), priority DESC, run_at, id)
    """

_V14 = (
    # A claim under a per-key limit (the key_limits profile) reads only what it takes:
    # the queue's distinct keys one seek each, from the key cursor on, and each key's
    # first rows in claim order (statements.PICK_IN_TURN). Every live row, pending or
    # claimed: a claim changes none of these columns, so it writes nothing here (an
    # index partial on the pending rows would lose an entry on every claim of every
    # queue, one page more per claim), and the lapsed claims are found with the
    # pending rows, in claim order. No index is made redundant by it: LIVE_INDEX still
    # serves every other claim, the live counts and the lapsed claims.
    _KEY_INDEX_SQL,
)

_KEEP_ON_INSERT_SQL = f"""
    CREATE TRIGGER IF NOT EXISTS {KEEP_ON_INSERT_TRIGGER}
    AFTER INSERT ON {JOBS} WHEN NEW.completed_retention_s IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM {KEPT_QUEUES} WHERE queue = NEW.queue)
    BEGIN
        INSERT OR IGNORE INTO {KEPT_QUEUES} (queue) VALUES (NEW.queue);
    END
    """
_KEEP_ON_UPDATE_SQL = f"""
    CREATE TRIGGER IF NOT EXISTS {KEEP_ON_UPDATE_TRIGGER}
    AFTER UPDATE OF completed_retention_s, queue ON {JOBS}
    WHEN NEW.completed_retention_s IS NOT NULL
    BEGIN
        INSERT OR IGNORE INTO {KEPT_QUEUES} (queue) VALUES (NEW.queue);
    END
    """

_V15 = (
    # The queues some live row of which was ever stamped with a completed retention
    # (the results profile): ack_batch copies rows to the completed table only for
    # these. A row is never removed (a queue that kept jobs once may again), and a
    # queue that deletes on ack never gets one: its enqueues and acks pay nothing.
    f"""
    CREATE TABLE IF NOT EXISTS {KEPT_QUEUES} (
        queue TEXT PRIMARY KEY
    ) WITHOUT ROWID
    """,
    f"""
    INSERT OR IGNORE INTO {KEPT_QUEUES} (queue)
    SELECT DISTINCT queue FROM {JOBS} WHERE completed_retention_s IS NOT NULL
    """,
    _KEEP_ON_INSERT_SQL,
    _KEEP_ON_UPDATE_SQL,
)


def _release_body(kept: str, keep_edges: bool = False) -> str:
    # From the kept edges' version on, a completion satisfies the kept edges of the
    # dead jobs that waited for it too (a redrive of their dead dependency will not
    # wait for it again).
    satisfied = (
        f"        DELETE FROM {KEPT_EDGES} WHERE depends_on = OLD.id;\n" if keep_edges else ""
    )
    return f"""
        UPDATE {WAITING} SET waiting_on = waiting_on - 1 WHERE id IN {_RELEASED};
        INSERT INTO {JOBS} ({kept}, state, has_dependents)
        SELECT {kept}, 'pending', has_dependents
          FROM {WAITING} WHERE waiting_on = 0 AND id IN {_RELEASED};
        DELETE FROM {WAITING} WHERE waiting_on = 0 AND id IN {_RELEASED};
        DELETE FROM {DEPENDENCIES} WHERE depends_on = OLD.id;
{satisfied}    """


def _release_trigger(kept: str, keep_edges: bool = False) -> str:
    return f"""
    CREATE TRIGGER IF NOT EXISTS {RELEASE_TRIGGER}
    AFTER DELETE ON {JOBS}
    WHEN OLD.has_dependents = 1 AND NOT EXISTS (SELECT 1 FROM {DEAD} WHERE id = OLD.id)
    BEGIN{_release_body(kept, keep_edges)}END
    """


def _release_on_complete_trigger(kept: str, keep_edges: bool = False) -> str:
    """A live row with dependents completed in place (version 18): the release of
    ``_release_trigger``, fired by the update that completes it (which clears its
    ``has_dependents``, so the purge of the completed row releases nothing again).
    ``OF completed_at``: only a completion writes it, so no claim, retry or move to
    dead runs this trigger's program at all (``OF state`` would, on every claim)."""
    return f"""
    CREATE TRIGGER IF NOT EXISTS {COMPLETE_RELEASE_TRIGGER}
    AFTER UPDATE OF completed_at ON {JOBS}
    WHEN NEW.state = 'completed' AND OLD.has_dependents = 1
    BEGIN{_release_body(kept, keep_edges)}END
    """


_MOVE_TO_DEAD_SQL = f"""
    CREATE TRIGGER {MOVE_TO_DEAD_TRIGGER}
    AFTER UPDATE OF state ON {JOBS} WHEN NEW.state = 'dead'
    BEGIN
        INSERT INTO {DEAD} (
            id, queue, payload, priority, attempts, max_attempts, created_at, run_at,
            claimed_at, expires_at, worker_id, visibility_timeout_s, backoff_base_s,
            dead_letter_retention_s, last_error, died_at, errors, redriven_from, snoozes,
            unique_key, unique_hold, hold_until, hold_dead, completed_retention_s,
            limit_key, has_dependents, metadata
        ) VALUES (
            NEW.id, NEW.queue, NEW.payload, NEW.priority, NEW.attempts, NEW.max_attempts,
            NEW.created_at, NEW.run_at, NEW.claimed_at, NEW.expires_at, NEW.worker_id,
            NEW.visibility_timeout_s, NEW.backoff_base_s, NEW.dead_letter_retention_s,
            NEW.last_error, NEW.died_at, NEW.errors, NEW.redriven_from, NEW.snoozes,
            NEW.unique_key, CASE WHEN NEW.hold_dead THEN NEW.unique_hold END,
            NEW.hold_until, NEW.hold_dead, NEW.completed_retention_s, NEW.limit_key,
            NEW.has_dependents, NEW.metadata
        );
        DELETE FROM {JOBS} WHERE id = NEW.id;
    END
    """
"""The move to dead as of version 16 (every column the live and dead tables share)."""

_V16 = (
    # The metadata profile. metadata is a job's small map of strings as JSON text
    # (NULL: none, as on every row written before), on all four job tables, so a job
    # keeps it through every move of its life.
    f"ALTER TABLE {JOBS} ADD COLUMN metadata TEXT",
    f"ALTER TABLE {DEAD} ADD COLUMN metadata TEXT",
    f"ALTER TABLE {COMPLETED} ADD COLUMN metadata TEXT",
    f"ALTER TABLE {WAITING} ADD COLUMN metadata TEXT",
    # Every trigger that moves a row names its columns: made again with metadata.
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    _MOVE_TO_DEAD_SQL,
    f"DROP TRIGGER IF EXISTS {RELEASE_TRIGGER}",
    _release_trigger(KEPT_COLUMNS),
    f"DROP TRIGGER IF EXISTS {BURY_DEPENDENTS_TRIGGER}",
    f"""
    CREATE TRIGGER IF NOT EXISTS {BURY_DEPENDENTS_TRIGGER}
    AFTER INSERT ON {DEAD} WHEN NEW.has_dependents = 1
    BEGIN
{_bury_dead_dependents(KEPT_COLUMNS)}    END
    """,
    f"DROP TRIGGER IF EXISTS {PASS_ON_TRIGGER}",
    f"""
    CREATE TRIGGER IF NOT EXISTS {PASS_ON_TRIGGER}
    AFTER UPDATE OF has_dependents ON {DEAD} WHEN NEW.has_dependents = 1
    BEGIN
{_bury_dead_dependents(KEPT_COLUMNS)}    END
    """,
)

_V_KEPT_EDGES = (
    # Contract 1.2 §18.4: a job that dies waiting because a dependency will never
    # complete keeps its edges, so a redrive of that dependency brings it back. By
    # dependent (its own redrive, purge or sweep), and by dependency (a completion
    # satisfies it; a redrive moves the edges to the new job). Rows that died before
    # this version have none.
    f"""
    CREATE TABLE IF NOT EXISTS {KEPT_EDGES} (
        job_id     INTEGER NOT NULL,
        depends_on INTEGER NOT NULL,
        PRIMARY KEY (job_id, depends_on)
    ) WITHOUT ROWID
    """,
    f"CREATE INDEX IF NOT EXISTS {KEPT_EDGES_INDEX} ON {KEPT_EDGES} (depends_on)",
    # The cascade keeps the edges, and a completion removes those to it: the four
    # triggers made again (the cancel's cascade is a statement: it keeps them as well).
    f"DROP TRIGGER IF EXISTS {RELEASE_TRIGGER}",
    _release_trigger(KEPT_COLUMNS, keep_edges=True),
    # (and the release of a job completed in place, version 18's, likewise)
    f"DROP TRIGGER IF EXISTS {COMPLETE_RELEASE_TRIGGER}",
    _release_on_complete_trigger(KEPT_COLUMNS, keep_edges=True),
    f"DROP TRIGGER IF EXISTS {BURY_DEPENDENTS_TRIGGER}",
    f"""
    CREATE TRIGGER IF NOT EXISTS {BURY_DEPENDENTS_TRIGGER}
    AFTER INSERT ON {DEAD} WHEN NEW.has_dependents = 1
    BEGIN
{_bury_dead_dependents(KEPT_COLUMNS, keep_edges=True)}    END
    """,
    f"DROP TRIGGER IF EXISTS {PASS_ON_TRIGGER}",
    f"""
    CREATE TRIGGER IF NOT EXISTS {PASS_ON_TRIGGER}
    AFTER UPDATE OF has_dependents ON {DEAD} WHEN NEW.has_dependents = 1
    BEGIN
{_bury_dead_dependents(KEPT_COLUMNS, keep_edges=True)}    END
    """,
)


_RATE_BUCKETS_TRIGGER_SQL = f"""
    CREATE TRIGGER {CLAIM_STARTS_TRIGGER}
    AFTER UPDATE OF attempts ON {JOBS}
    WHEN NEW.attempts = OLD.attempts + 1
     AND EXISTS (SELECT 1 FROM {LIMITS} WHERE queue = NEW.queue AND rate IS NOT NULL)
    BEGIN
        DELETE FROM {CLAIM_STARTS}
         WHERE queue = NEW.queue
           AND started_at <= NEW.claimed_at
                             - (SELECT per_s FROM {LIMITS} WHERE queue = NEW.queue);
        INSERT INTO {CLAIM_STARTS} (queue, started_at, claims)
        VALUES (NEW.queue, NEW.claimed_at, 1)
        ON CONFLICT (queue, started_at) DO UPDATE SET claims = claims + 1;
    END
    """
"""A rate-limited queue's claim starts, one row per second a claim started in, with
how many (the rate-buckets version's trigger). From that version on, a migration that
makes the jobs table (and so its triggers) again makes this one, not version 9's
``_CLAIM_STARTS_TRIGGER_SQL``, whose INSERT has no ``claims``."""


# A limit that never binds costs little (issue 25): a rate's starts are kept one row
# per (queue, second) with their count, not one row per claimed row, so the count of
# a window's starts reads at most per_s rows however many claims started in it. The
# store's clock is whole seconds and every start is at its claim's now, so the
# window (now - per_s, now] counts exactly the starts it did. A per-key rate's starts
# likewise, one row per (queue, second, key). The tables are made again from the
# rows they held; only the claim-starts trigger names one: dropped, made again.
_V_RATE_BUCKETS = (
    f"DROP TRIGGER IF EXISTS {CLAIM_STARTS_TRIGGER}",
    f"""
    CREATE TABLE {CLAIM_STARTS}_buckets (
        queue      TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        claims     INTEGER NOT NULL CHECK (claims >= 1),
        PRIMARY KEY (queue, started_at)
    ) WITHOUT ROWID
    """,
    f"""
    INSERT INTO {CLAIM_STARTS}_buckets (queue, started_at, claims)
    SELECT queue, started_at, count(*) FROM {CLAIM_STARTS} GROUP BY queue, started_at
    """,
    f"DROP TABLE {CLAIM_STARTS}",
    f"ALTER TABLE {CLAIM_STARTS}_buckets RENAME TO {CLAIM_STARTS}",
    _RATE_BUCKETS_TRIGGER_SQL,
    f"""
    CREATE TABLE {KEY_STARTS}_buckets (
        queue      TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        limit_key  TEXT NOT NULL,
        claims     INTEGER NOT NULL CHECK (claims >= 1),
        PRIMARY KEY (queue, started_at, limit_key)
    ) WITHOUT ROWID
    """,
    f"""
    INSERT INTO {KEY_STARTS}_buckets (queue, started_at, limit_key, claims)
    SELECT queue, started_at, limit_key, count(*) FROM {KEY_STARTS}
     GROUP BY queue, started_at, limit_key
    """,
    f"DROP TABLE {KEY_STARTS}",
    f"ALTER TABLE {KEY_STARTS}_buckets RENAME TO {KEY_STARTS}",
)


_JOBS_V18 = f"{JOBS}_v18"

# Every column of the live table as of version 16, in its order; version 18 adds
# completed_at and result.
_JOBS_V16_COLUMNS = (
    "id, queue, state, payload, priority, attempts, max_attempts, created_at, run_at, "
    "claimed_at, deadline, expires_at, worker_id, visibility_timeout_s, backoff_base_s, "
    "dead_letter_retention_s, last_error, died_at, errors, redriven_from, snoozes, "
    "unique_key, unique_hold, hold_until, hold_dead, completed_retention_s, limit_key, "
    "has_dependents, metadata"
)

# Jobs only the expiry sweep must see: those with an expiry that did not complete
# (completed_at is set only by a completion; a claim changes neither column, so it
# writes nothing here).
_EXPIRY_INDEX_SQL = f"""
    CREATE INDEX IF NOT EXISTS {EXPIRY_INDEX}
        ON {JOBS} (queue, expires_at) WHERE expires_at IS NOT NULL AND completed_at IS NULL
    """

# The rows a claim under a per-key limit walks by key: those not completed (a
# completed row would rank first among its key's rows, before every claimable one).
_KEY_INDEX_V18_SQL = f"""
    CREATE INDEX IF NOT EXISTS {KEY_INDEX}
        ON {JOBS} (queue, coalesce(limit_key, ''), priority DESC, run_at, id)
     WHERE completed_at IS NULL
    """

_JOBS_INDEXES_V18 = (
    _LIVE_INDEX_SQL,
    _EXPIRY_INDEX_SQL,
    _UNIQUE_INDEX_SQL,
    _QUEUE_INDEX_SQL,
    _KEY_INDEX_V18_SQL,
)
"""Every index of the live table, as of version 18 (a rebuild makes them all again)."""

_JOBS_TRIGGERS_V18 = (
    _MOVE_TO_DEAD_SQL,
    _RATE_BUCKETS_TRIGGER_SQL,
    _KEEP_ON_INSERT_SQL,
    _KEEP_ON_UPDATE_SQL,
    _release_trigger(KEPT_COLUMNS),
    _release_on_complete_trigger(KEPT_COLUMNS),
)
"""Every trigger on the live table, as of version 18 (a rebuild makes them all again)."""

# Version 18: completed jobs kept in place. An ack
# that keeps its job updates the live row (state 'completed', its result, when it
# completed, a deadline above every claim's: KEPT_FROM) where it copied it into the
# completed table and deleted it: a row written once, not twice. SQLite cannot
# change the state CHECK in place, so the live table is rebuilt (SQLite's own
# procedure: a new table, the rows copied, the old one dropped, the new one renamed),
# its indexes and triggers made again from their definitions, and the completed
# table's rows moved in. legacy_alter_table: the rename must not re-read the other
# tables' triggers, which name the live table while it does not exist.
_V18 = (
    "PRAGMA legacy_alter_table = ON",
    f"""
    CREATE TABLE {_JOBS_V18} (
        id                      INTEGER PRIMARY KEY AUTOINCREMENT,
        queue                   TEXT    NOT NULL,
        state                   TEXT    NOT NULL
            CHECK (state = 'pending' OR state = 'processing' OR state = 'dead'
                   OR state = 'completed'),
        payload                 TEXT    NOT NULL,
        priority                INTEGER NOT NULL,
        attempts                INTEGER NOT NULL DEFAULT 0,
        max_attempts            INTEGER NOT NULL,
        created_at              INTEGER NOT NULL,
        run_at                  INTEGER NOT NULL,
        claimed_at              INTEGER,
        deadline                INTEGER,
        expires_at              INTEGER,
        worker_id               TEXT,
        visibility_timeout_s    INTEGER NOT NULL,
        backoff_base_s          INTEGER NOT NULL,
        dead_letter_retention_s INTEGER,
        last_error              TEXT,
        died_at                 INTEGER,
        errors                  TEXT,
        redriven_from           INTEGER,
        snoozes                 INTEGER NOT NULL DEFAULT 0,
        unique_key              TEXT,
        unique_hold             TEXT,
        hold_until              INTEGER,
        hold_dead               INTEGER NOT NULL DEFAULT 0,
        completed_retention_s   INTEGER,
        limit_key               TEXT,
        has_dependents          INTEGER NOT NULL DEFAULT 0,
        metadata                TEXT,
        completed_at            INTEGER,
        result                  TEXT
    )
    """,
    f"""
    INSERT INTO {_JOBS_V18} ({_JOBS_V16_COLUMNS})
    SELECT {_JOBS_V16_COLUMNS} FROM {JOBS} ORDER BY id
    """,
    # The completed rows, same ids, with the live table's: a completed job holds no
    # key and has no dependents (they were released when it completed).
    f"""
    INSERT INTO {_JOBS_V18} ({KEPT_COLUMNS}, state, deadline, completed_at, result)
    SELECT {KEPT_COLUMNS}, 'completed', {KEPT_FROM} + completed_at + completed_retention_s,
           completed_at, result
      FROM {COMPLETED} ORDER BY id
    """,
    # An id is never handed out again: the new table continues the old one's sequence.
    f"DELETE FROM sqlite_sequence WHERE name = '{_JOBS_V18}'",
    f"UPDATE sqlite_sequence SET name = '{_JOBS_V18}' WHERE name = '{JOBS}'",
    f"DROP TABLE {JOBS}",  # (and its indexes and triggers)
    f"DROP TABLE {COMPLETED}",  # (and its indexes)
    f"ALTER TABLE {_JOBS_V18} RENAME TO {JOBS}",
    "PRAGMA legacy_alter_table = OFF",
    *_JOBS_INDEXES_V18,
    *_JOBS_TRIGGERS_V18,
)


def _release_before_delete_trigger(kept: str) -> str:
    """The release of a live row's dependents as of version 20: fired by the update that
    clears its ``has_dependents`` (1 to 0, not completing it) just before the statement
    that deletes it on an ack (``statements.RELEASE_FOR_ACK``). No DELETE of the live
    table fires a trigger any more: a DELETE with one must read every deleted row whole
    and delete in two passes, which cost an ``ack_batch`` of 100 a tenth of its SQL
    (measured, issue 28 §3), for a release most stores never need."""
    return f"""
    CREATE TRIGGER IF NOT EXISTS {RELEASE_TRIGGER}
    AFTER UPDATE OF has_dependents ON {JOBS}
    WHEN OLD.has_dependents = 1 AND NEW.has_dependents = 0 AND NEW.completed_at IS NULL
    BEGIN{_release_body(kept, keep_edges=True)}END
    """


_V_RELEASE_ON_ACK = (
    # The release moves from the delete of an acked row to the update just before it
    # (a cancel marks its row 2 and a move to dead deletes it: neither releases, as
    # before; a completion in place releases by its own trigger, as before).
    f"DROP TRIGGER IF EXISTS {RELEASE_TRIGGER}",
    _release_before_delete_trigger(KEPT_COLUMNS),
    # The move to dead fires OF died_at: every move to dead sets it (with state =
    # 'dead'), no claim does, so a claim runs this trigger's program for no row (OF
    # state ran it for every claimed row).
    f"DROP TRIGGER IF EXISTS {MOVE_TO_DEAD_TRIGGER}",
    _MOVE_TO_DEAD_SQL.replace("AFTER UPDATE OF state ON", "AFTER UPDATE OF died_at ON", 1),
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _V6,
    _V7,
    _V8,
    _V9,
    _V10,
    _V11,
    _V12,
    _V13,
    _V14,
    _V15,
    _V16,
    _V_RATE_BUCKETS,
    _V18,
    _V_KEPT_EDGES,
    _V_RELEASE_ON_ACK,
)
"""``MIGRATIONS[v - 1]`` takes the schema from version ``v - 1`` to ``v``; append only."""

LATEST_VERSION = len(MIGRATIONS)

METADATA_VERSION = MIGRATIONS.index(_V16) + 1
"""The version that adds the metadata profile's column (contract 1.2 §20)."""

RATE_BUCKETS_VERSION = MIGRATIONS.index(_V_RATE_BUCKETS) + 1
"""The version that keeps a rate's starts one row per second (the limited claim's)."""
COMPLETED_IN_PLACE_VERSION = MIGRATIONS.index(_V18) + 1
"""The version that keeps completed jobs in the live table (issue 24)."""
KEPT_EDGES_VERSION = MIGRATIONS.index(_V_KEPT_EDGES) + 1
"""The version that keeps a dead dependent's edges (contract 1.2 §18.4)."""
RELEASE_ON_ACK_VERSION = MIGRATIONS.index(_V_RELEASE_ON_ACK) + 1
"""The version whose acks release dependents by an update before the delete (issue 28)."""

_META_EXISTS = f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '{META}'"
_READ_VERSION = f"SELECT value FROM {META} WHERE key = 'schema_version'"
_WRITE_VERSION = (
    f"INSERT INTO {META} (key, value) VALUES ('schema_version', :version) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


def schema_version(conn: sqlite3.Connection) -> int:
    """The version stored in the file (0 for a database alkstore never opened)."""
    (exists,) = conn.execute(_META_EXISTS).fetchone()
    if not exists:
        return 0
    row = conn.execute(_READ_VERSION).fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Inside the caller's write transaction: bring the schema to ``LATEST_VERSION``."""
    version = schema_version(conn)
    if version > LATEST_VERSION:
        raise EngineUnavailable(
            f"the database's alkstore schema is version {version}, newer than this "
            f"alkstore-sqlite understands ({LATEST_VERSION}); upgrade alkstore-sqlite"
        )
    for statements in MIGRATIONS[version:]:
        for statement in statements:
            conn.execute(statement)
    if version != LATEST_VERSION:
        conn.execute(_WRITE_VERSION, {"version": LATEST_VERSION})
    return LATEST_VERSION
