"""The plain-driver baselines' schema and statements, one named constant each.

The same shape as the reference engines' job tables (the columns a job
carries, a partial index of pending rows in claim order) and the same kind of
statement per operation, written the way one would by hand. Identifiers are
fixed; the PostgreSQL schema name is validated by the caller and quoted.
"""

from __future__ import annotations

# --------------------------------------------------------------------------- sqlite3

SQLITE_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA temp_store = MEMORY",
)

# Before the pragmas above, on a new file only (row 3p): PRAGMA takes no parameters.
SQLITE_PAGE_SIZE = "PRAGMA page_size = {size:d}"

SQLITE_SCHEMA = """
CREATE TABLE jobs (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    queue                TEXT    NOT NULL,
    state                TEXT    NOT NULL DEFAULT 'pending',
    payload              TEXT    NOT NULL,
    priority             INTEGER NOT NULL DEFAULT 0,
    attempts             INTEGER NOT NULL DEFAULT 0,
    max_attempts         INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    run_at               INTEGER NOT NULL,
    claimed_at           INTEGER,
    deadline             INTEGER,
    worker_id            TEXT,
    visibility_timeout_s INTEGER NOT NULL
);
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at) WHERE state = 'pending';
CREATE TABLE streams (stream TEXT PRIMARY KEY, last_offset INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE events (
    stream TEXT NOT NULL, event_offset INTEGER NOT NULL, payload TEXT NOT NULL,
    created_at INTEGER NOT NULL, PRIMARY KEY (stream, event_offset)
) WITHOUT ROWID;
"""

# The fair baseline's one extra index (issue 28): what finding lapsed claims needs at
# the least (reclaim, dead-letter at the budget, the next deadline), so every claim
# moves its row into it and every ack out again, as in the engine.
SQLITE_LAPSE_INDEX = "CREATE INDEX jobs_lapse ON jobs (queue, deadline) WHERE state = 'processing'"

SQLITE_INSERT = """
INSERT INTO jobs (queue, payload, created_at, run_at, max_attempts, visibility_timeout_s)
VALUES (?, ?, ?, ?, ?, ?) RETURNING id
"""
SQLITE_INSERT_MANY = """
INSERT INTO jobs (queue, payload, created_at, run_at, max_attempts, visibility_timeout_s)
VALUES (?, ?, ?, ?, ?, ?)
"""

_SQLITE_PICK = """
SELECT id FROM jobs
 WHERE queue = :queue AND state = 'pending' AND run_at <= :now
 ORDER BY priority DESC, run_at, id LIMIT {limit}
"""


def _sqlite_claim(compare: str, limit: str) -> str:
    return f"""
UPDATE jobs
   SET state = 'processing', attempts = attempts + 1, claimed_at = :now,
       worker_id = :worker, deadline = :now + visibility_timeout_s
 WHERE id {compare} ({_SQLITE_PICK.format(limit=limit)})
RETURNING id, attempts, payload
"""


SQLITE_CLAIM = _sqlite_claim("IN", ":limit")
SQLITE_CLAIM_ONE = _sqlite_claim("=", "1")
SQLITE_ACK = """
DELETE FROM jobs WHERE id = ? AND state = 'processing' AND attempts = ? AND deadline > ?
"""


def sqlite_ack_batch(count: int) -> str:
    """``count`` ids, then queue, worker, now."""
    marks = ", ".join(["?"] * count)
    return f"""
DELETE FROM jobs WHERE id IN ({marks})
   AND queue = ? AND worker_id = ? AND state = 'processing' AND deadline > ?
"""


SQLITE_NEXT_OFFSET = """
INSERT INTO streams (stream, last_offset) VALUES (?, 1)
ON CONFLICT (stream) DO UPDATE SET last_offset = last_offset + 1
RETURNING last_offset
"""
SQLITE_APPEND = "INSERT INTO events (stream, event_offset, payload, created_at) VALUES (?, ?, ?, ?)"
SQLITE_READ = """
SELECT event_offset, payload FROM events
 WHERE stream = ? AND event_offset > ? ORDER BY event_offset LIMIT ?
"""

# --------------------------------------------------------------------------- psycopg

PG_SCHEMA = (
    """
    CREATE TABLE {schema}.jobs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue text COLLATE "C" NOT NULL,
        state text NOT NULL DEFAULT 'pending',
        payload text NOT NULL,
        priority integer NOT NULL DEFAULT 0,
        attempts integer NOT NULL DEFAULT 0,
        max_attempts integer NOT NULL,
        created_at bigint NOT NULL,
        run_at bigint NOT NULL,
        claimed_at bigint,
        deadline bigint,
        worker_id text,
        visibility_timeout_s integer NOT NULL DEFAULT 30
    )
    """,
    """
    CREATE INDEX ON {schema}.jobs (queue, priority DESC, run_at, id) WHERE state = 'pending'
    """,
    """
    CREATE TABLE {schema}.streams (stream text COLLATE "C" PRIMARY KEY, last_offset bigint NOT NULL)
    """,
    """
    CREATE TABLE {schema}.events (
        stream text COLLATE "C" NOT NULL, event_offset bigint NOT NULL, payload text NOT NULL,
        created_at bigint NOT NULL, PRIMARY KEY (stream, event_offset)
    )
    """,
)

PG = {
    # NOTIFY rides in the insert statement, as the engine's does, so a waiting
    # consumer would hear of the job.
    "insert": """
        WITH job AS (
            INSERT INTO {schema}.jobs (queue, payload, created_at, run_at, max_attempts)
            VALUES (%s, %s, %s, %s, %s) RETURNING id, queue
        )
        SELECT id, pg_notify('bench', queue) FROM job
    """,
    "insert_many": """
        WITH jobs AS (
            INSERT INTO {schema}.jobs (queue, payload, created_at, run_at, max_attempts)
            SELECT q, p, c, r, m FROM (SELECT %s AS q, %s::bigint AS c, %s::bigint AS r,
                                                   %s::int AS m) AS stamps,
                   unnest(%s::text[]) AS p
            RETURNING queue
        )
        SELECT count(*), pg_notify('bench', min(queue)) FROM jobs
    """,
    "claim": """
        UPDATE {schema}.jobs
           SET state = 'processing', attempts = attempts + 1, claimed_at = %(now)s,
               worker_id = %(worker)s, deadline = %(now)s + visibility_timeout_s
         WHERE id IN (
            SELECT id FROM {schema}.jobs
             WHERE queue = %(queue)s AND state = 'pending' AND run_at <= %(now)s
             ORDER BY priority DESC, run_at, id
             LIMIT %(limit)s
             FOR UPDATE SKIP LOCKED)
        RETURNING id, attempts, payload
    """,
    "ack": """
        DELETE FROM {schema}.jobs
         WHERE id = %s AND state = 'processing' AND attempts = %s AND deadline > %s
    """,
    "ack_batch": """
        DELETE FROM {schema}.jobs
         WHERE id = ANY(%s) AND queue = %s AND worker_id = %s AND state = 'processing'
           AND deadline > %s
    """,
    "append": """
        WITH counter AS (
            INSERT INTO {schema}.streams AS s (stream, last_offset) VALUES (%s, 1)
            ON CONFLICT (stream) DO UPDATE SET last_offset = s.last_offset + 1
            RETURNING stream, last_offset
        )
        INSERT INTO {schema}.events (stream, event_offset, payload, created_at)
        SELECT stream, last_offset, %s, %s FROM counter
        RETURNING event_offset
    """,
    "read": """
        SELECT event_offset, payload FROM {schema}.events
         WHERE stream = %s AND event_offset > %s ORDER BY event_offset LIMIT %s
    """,
}

# ----------------------------------------------------------- the unique key's floor
# The plain tables again, with a key column: the floor of a unique enqueue is the
# same insert with the key held by a partial unique index (ON CONFLICT DO NOTHING),
# against that insert into the same table without the index.

SQLITE_UNIQUE_COLUMN = "ALTER TABLE jobs ADD COLUMN unique_key TEXT"
SQLITE_UNIQUE_INDEX = (
    "CREATE UNIQUE INDEX jobs_unique ON jobs (queue, unique_key) WHERE unique_key IS NOT NULL"
)
_SQLITE_INSERT_KEYED = """
INSERT INTO jobs (queue, payload, created_at, run_at, max_attempts, visibility_timeout_s,
                  unique_key)
VALUES (?, ?, ?, ?, ?, ?, ?)
"""
_SQLITE_ON_CONFLICT = "ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING"
SQLITE_INSERT_KEYED = {
    False: _SQLITE_INSERT_KEYED + "RETURNING id",
    True: _SQLITE_INSERT_KEYED + _SQLITE_ON_CONFLICT + " RETURNING id",
}
"""By whether the table has the unique index: one row, its id back."""
SQLITE_INSERT_KEYED_MANY = {
    False: _SQLITE_INSERT_KEYED,
    True: _SQLITE_INSERT_KEYED + _SQLITE_ON_CONFLICT,
}

PG_UNIQUE_COLUMN = 'ALTER TABLE {schema}.jobs ADD COLUMN unique_key text COLLATE "C"'
PG_UNIQUE_INDEX = (
    "CREATE UNIQUE INDEX ON {schema}.jobs (queue, unique_key) WHERE unique_key IS NOT NULL"
)
_PG_ON_CONFLICT = "ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING"
_PG_INSERT_KEYED = """
    WITH job AS (
        INSERT INTO {{schema}}.jobs (queue, payload, created_at, run_at, max_attempts, unique_key)
        VALUES (%s, %s, %s, %s, %s, %s) {conflict} RETURNING id, queue
    )
    SELECT id, pg_notify('bench', queue) FROM job
"""
_PG_INSERT_KEYED_MANY = """
    WITH jobs AS (
        INSERT INTO {{schema}}.jobs (queue, payload, created_at, run_at, max_attempts, unique_key)
        SELECT q, j.p, c, r, m, j.k FROM (SELECT %s AS q, %s::bigint AS c, %s::bigint AS r,
                                                 %s::int AS m) AS stamps,
               unnest(%s::text[], %s::text[]) AS j (p, k)
        {conflict}
        RETURNING queue
    )
    SELECT count(*), pg_notify('bench', min(queue)) FROM jobs
"""
PG_INSERT_KEYED = {
    indexed: _PG_INSERT_KEYED.format(conflict=_PG_ON_CONFLICT if indexed else "")
    for indexed in (False, True)
}
PG_INSERT_KEYED_MANY = {
    indexed: _PG_INSERT_KEYED_MANY.format(conflict=_PG_ON_CONFLICT if indexed else "")
    for indexed in (False, True)
}
