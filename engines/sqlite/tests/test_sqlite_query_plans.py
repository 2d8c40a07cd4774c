"""The hot statements read the engine's indexes, and their cost does not grow with the backlog.

Plans are checked with ``EXPLAIN QUERY PLAN`` (no full scan of an engine
table, no sort over rows read from the pending backlog), and cost with the
number of SQLite VM instructions one run executes, at a backlog of 100 and
of 20,000 rows: a deterministic measure, unlike time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import StoreFactory, instructions, query_plan, sorted_beside

import alkstore
from alkstore import EnqueueOpts, QueueOpts, Store
from alkstore.params import (
    Bury,
    ClaimRef,
    Heartbeat,
    Reschedule,
    ScheduleAdvance,
    ScheduleLapse,
    StreamOffset,
    StreamRead,
    StreamTrim,
)
from alkstore.testing import FakeClock
from alkstore_sqlite import database_url
from alkstore_sqlite import statements as sql
from alkstore_sqlite.migrations import (
    DEAD_AGE_INDEX,
    DEAD_QUEUE_INDEX,
    DEAD_UNIQUE_INDEX,
    DECLARED_INDEX,
    DUE_INDEX,
    EXPIRY_INDEX,
    LIVE_INDEX,
    NOTIFICATIONS,
    PAUSED,
    PURGE_INDEX,
    QUEUE_INDEX,
    SCHEDULES,
    STREAM_EVENTS,
    STREAM_OFFSETS,
    UNIQUE_INDEX,
)

NOW = 1_700_000_000
DEPTH = 20_000
QUEUE = "backlog"

CLAIM = {"queue": QUEUE, "worker_id": "w", "now": NOW, "limit": 10}
CLAIM_ONE = {**CLAIM, "limit": 1}
CLAIMS = pytest.mark.parametrize(
    ("statement", "params"),
    [
        (sql.CLAIM, CLAIM),
        (sql.CLAIM_ONE, CLAIM_ONE),
        (sql.CLAIM_READY, CLAIM),
        (sql.CLAIM_READY_ONE, CLAIM_ONE),
    ],
    ids=["many", "one", "ready-many", "ready-one"],
)
QUEUE_NOW = {"queue": QUEUE, "now": NOW}
# The handle ops bind their params values by number (statements._bind).
_ENTRY = '[1, 1, "e"]'
HANDLE_OPS: dict[str, tuple[str, Any]] = {
    "ack_released": (sql.ACK_RELEASED, sql.ACK_RELEASED_PARAMS(ClaimRef(1, 1, NOW))),
    "release_for_ack": (sql.RELEASE_FOR_ACK, sql.RELEASE_FOR_ACK_PARAMS(ClaimRef(1, 1, NOW))),
    "heartbeat": (sql.HEARTBEAT, sql.HEARTBEAT_PARAMS(Heartbeat(1, 1, NOW, NOW))),
    "reschedule": (
        sql.RESCHEDULE,
        (*sql.RESCHEDULE_PARAMS(Reschedule(1, 1, NOW, NOW, "e")), _ENTRY),
    ),
    "bury": (sql.BURY, (*sql.BURY_PARAMS(Bury(1, 1, NOW, "e", "e")), _ENTRY)),
    "cancel": (sql.CANCEL, {"id": 1, "queue": QUEUE}),
}


def _fill(store: Store, depth: int, opts: EnqueueOpts | None = None) -> None:
    queue = store.queue(QUEUE, QueueOpts(dead_letter_retention_s=60))
    for start in range(0, depth, 1000):
        queue.enqueue_many([{"n": n} for n in range(start, min(depth, start + 1000))], opts)


def _backlog(store: Store, depth: int) -> None:
    """``depth`` ready jobs, some in flight, some delayed, some dead, some expiring."""
    _fill(store, depth)
    _fill(store, 50, EnqueueOpts(delay=3600, priority=5))
    _fill(store, 50, EnqueueOpts(expires=3600))
    queue = store.queue(QUEUE)
    for handle in queue.claim_batch("w", 20)[:10]:
        handle.fail("dead")


@pytest.fixture
def conn(db_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(str(db_path), isolation_level=None)
    yield connection
    connection.close()


@pytest.fixture
def deep(open_store: StoreFactory, conn: sqlite3.Connection) -> sqlite3.Connection:
    """A database with a backlog of DEPTH ready jobs, statistics gathered by ANALYZE
    (so the planner sees the real shape of the data)."""
    _backlog(open_store(clock=FakeClock(NOW)), DEPTH)
    conn.execute("ANALYZE")
    return conn


def _details(plan: list[tuple[int, int, str]]) -> list[str]:
    return [detail for _, _, detail in plan]


def _assert_no_table_scan(plan: list[tuple[int, int, str]]) -> None:
    scans = [d for d in _details(plan) if d.startswith("SCAN __alkstore")]
    assert scans == [], plan


@CLAIMS
def test_claim_reads_pending_rows_in_claim_order_off_the_live_index_without_sorting_them(
    deep: sqlite3.Connection, statement: str, params: dict[str, Any]
) -> None:
    plan = query_plan(deep, statement, params)
    details = _details(plan)
    pending = f"SEARCH __alkstore_jobs USING INDEX {LIVE_INDEX} (queue=? AND deadline=?)"
    assert pending in details
    assert any(d.endswith(f"INDEX {LIVE_INDEX} (queue=? AND deadline<?)") for d in details), plan
    _assert_no_table_scan(plan)
    # Sorts happen only over lapsed claims and over the 2 * limit candidates.
    assert pending not in sorted_beside(plan), plan


@CLAIMS
def test_claim_updates_its_rows_by_primary_key(
    deep: sqlite3.Connection, statement: str, params: dict[str, Any]
) -> None:
    details = _details(query_plan(deep, statement, params))
    assert "SEARCH __alkstore_jobs USING INTEGER PRIMARY KEY (rowid=?)" in details


@pytest.mark.parametrize(
    "statement",
    [sql.ANY_EXHAUSTED, sql.BURY_EXHAUSTED, sql.ANY_LAPSED],
    ids=["probe", "move", "any-lapsed"],
)
def test_bury_exhausted_is_a_range_read_of_lapsed_claims(
    deep: sqlite3.Connection, statement: str
) -> None:
    (step,) = _details(query_plan(deep, statement, QUEUE_NOW))
    assert step.startswith("SEARCH __alkstore_jobs USING")
    assert step.endswith(f"INDEX {LIVE_INDEX} (queue=? AND deadline<?)")


def test_next_wake_at_seeks_the_pending_and_claimed_ranges_of_the_live_index(
    deep: sqlite3.Connection,
) -> None:
    plan = query_plan(deep, sql.NEXT_WAKE_AT, QUEUE_NOW)
    details = _details(plan)
    assert any(
        d.startswith("SEARCH") and f"{LIVE_INDEX} (queue=? AND deadline=?" in d for d in details
    ), plan
    claimed = f"COVERING INDEX {LIVE_INDEX} (queue=? AND deadline>? AND deadline<?)"
    assert f"SEARCH __alkstore_jobs USING {claimed}" in details
    _assert_no_table_scan(plan)
    assert not [d for d in details if "TEMP B-TREE" in d], plan


def test_sweeping_expired_rows_reads_only_rows_with_an_expiry(deep: sqlite3.Connection) -> None:
    (step,) = _details(query_plan(deep, sql.BURY_EXPIRED, QUEUE_NOW))
    assert step.startswith("SEARCH __alkstore_jobs USING")
    assert step.endswith(f"INDEX {EXPIRY_INDEX} (queue=? AND expires_at<?)")


def test_purging_completed_rows_reads_only_the_completed_range_of_the_live_index(
    deep: sqlite3.Connection,
) -> None:
    (step,) = _details(query_plan(deep, sql.PURGE_COMPLETED, QUEUE_NOW))
    assert step.startswith("SEARCH __alkstore_jobs USING")
    assert step.endswith(f"INDEX {LIVE_INDEX} (queue=? AND deadline>? AND deadline<?)")


def test_purging_dead_rows_reads_only_rows_with_a_retention(deep: sqlite3.Connection) -> None:
    plan = query_plan(deep, sql.PURGE_DEAD, QUEUE_NOW)
    assert _details(plan) == [
        f"SEARCH __alkstore_dead USING INDEX {PURGE_INDEX} (queue=? AND <expr><?)"
    ]


@pytest.mark.parametrize(("statement", "params"), HANDLE_OPS.values(), ids=HANDLE_OPS.keys())
def test_handle_ops_touch_one_row_by_primary_key(
    deep: sqlite3.Connection, statement: str, params: Any
) -> None:
    plan = query_plan(deep, statement, params)
    assert _details(plan) == ["SEARCH __alkstore_jobs USING INTEGER PRIMARY KEY (rowid=?)"]


def test_an_ack_touches_one_row_by_primary_key_and_reads_no_other_job_row(
    deep: sqlite3.Connection,
) -> None:
    details = _details(query_plan(deep, sql.ACK, sql.ACK_PARAMS(ClaimRef(1, 1, NOW))))
    assert details[0] == "SEARCH __alkstore_jobs USING INTEGER PRIMARY KEY (rowid=?)"
    # The rest: the probes of the edge tables, each a subquery run once.
    assert [d for d in details[1:] if "__alkstore_jobs" in d] == [], details
    assert "SCALAR SUBQUERY 1" in details


def test_ack_batch_deletes_by_primary_key(deep: sqlite3.Connection) -> None:
    params = [1, 2, 3, 4, QUEUE, "w", NOW]
    plan = query_plan(deep, sql.ACK_FOR_WORKER[4], params)
    assert _details(plan) == ["SEARCH __alkstore_jobs USING INTEGER PRIMARY KEY (rowid=?)"]


def test_ack_batch_completion_updates_by_primary_key(deep: sqlite3.Connection) -> None:
    params = [1, 2, 3, 4, QUEUE, "w", NOW]
    plan = query_plan(deep, sql.COMPLETE_FOR_WORKER[4], params)
    assert _details(plan) == ["SEARCH __alkstore_jobs USING INTEGER PRIMARY KEY (rowid=?)"]


@pytest.mark.parametrize("statement", ["ACK_CLAIMS", "COMPLETE_CLAIMS", "RELEASE_FOR_CLAIMS"])
def test_the_acks_of_many_claims_touch_their_rows_by_primary_key(
    deep: sqlite3.Connection, statement: str
) -> None:
    params = [1, 1, 2, 1, 3, 2, 4, 1, NOW]
    plan = query_plan(deep, getattr(sql, statement)[4], params)
    details = [d for d in _details(plan) if "__alkstore_jobs" in d]
    assert details == ["SEARCH __alkstore_jobs USING INTEGER PRIMARY KEY (rowid=?)"], details


def test_ack_batch_looks_up_whether_the_queue_keeps_jobs_by_its_key(
    deep: sqlite3.Connection,
) -> None:
    plan = query_plan(deep, sql.KEEPS_JOBS, [QUEUE])
    assert _details(plan) == ["SEARCH __alkstore_kept_queues USING PRIMARY KEY (queue=?)"]


@pytest.mark.parametrize(
    ("statement", "search"),
    [
        ("JOB_WAITS_FOR", "SEARCH __alkstore_dependencies USING COVERING INDEX"),
        ("JOB_WAITED_BY", "SEARCH __alkstore_dependencies USING PRIMARY KEY (depends_on=?)"),
    ],
)
def test_a_jobs_edges_are_one_key_range_of_the_edges_each_way(
    deep: sqlite3.Connection, statement: str, search: str
) -> None:
    plan = _details(query_plan(deep, getattr(sql, statement), {"job_id": 1}))
    assert len(plan) == 1, plan
    assert plan[0].startswith(search), plan
    assert "TEMP B-TREE" not in plan[0]


def test_get_job_looks_up_every_job_table_by_primary_key(deep: sqlite3.Connection) -> None:
    plan = query_plan(deep, sql.GET_JOB, {"id": 1})
    searches = [d for d in _details(plan) if d.startswith(("SEARCH", "SCAN"))]
    assert searches == [
        "SEARCH __alkstore_jobs USING INTEGER PRIMARY KEY (rowid=?)",
        "SEARCH __alkstore_dead USING INTEGER PRIMARY KEY (rowid=?)",
        "SEARCH __alkstore_waiting USING INTEGER PRIMARY KEY (rowid=?)",
    ]


@CLAIMS
def test_claim_seeks_the_paused_table_once_by_its_key(
    deep: sqlite3.Connection, statement: str, params: dict[str, Any]
) -> None:
    plan = query_plan(deep, statement, params)
    paused = [(node, d) for node, _, d in plan if PAUSED in d]
    assert [d for _, d in paused] == [f"SEARCH {PAUSED} USING PRIMARY KEY (queue=?)"], plan
    # ... inside a subquery run once per statement, not once per candidate row.
    parent = next(parent for node, parent, _ in plan if node == paused[0][0])
    assert any(node == parent and d.startswith("SCALAR SUBQUERY") for node, _, d in plan), plan


# -- operations: stats, job pages, redrive, purge, pause ---------------------------

OTHER = "other"
OPS = {
    "queue": QUEUE,
    "queues": f'["{QUEUE}"]',
    "now": NOW,
    "after": 100,
    "limit": 10,
    "state": "pending",
    "ids": "[5, 7, 9]",
    "died_before": NOW - 60,
}


def _graveyard(store: Store, depth: int) -> None:
    """The backlog of ``_backlog``, then half its ready jobs, and as many of another
    queue's, dead (moved by the engine's own trigger, died at different times)."""
    _backlog(store, depth)
    _fill(store, depth // 2)
    store.queue(OTHER).enqueue_many([{"n": n} for n in range(depth // 2)])
    with store.transaction() as tx:
        tx.execute(
            "UPDATE __alkstore_jobs SET state = 'dead', last_error = 'gone',"
            " died_at = ? - id % 1000 WHERE state = 'pending' AND id % 2 = 0",
            (NOW,),
        )


@pytest.fixture
def dead_rows(open_store: StoreFactory, conn: sqlite3.Connection) -> sqlite3.Connection:
    """DEPTH dead rows over two queues beside the backlog, statistics gathered."""
    _graveyard(open_store(clock=FakeClock(NOW)), DEPTH)
    conn.execute("ANALYZE")
    return conn


def _reads_of(plan: list[tuple[int, int, str]], table: str) -> list[str]:
    """The steps of ``plan`` that read ``table`` (or one of its indexes)."""
    reads = [d for d in _details(plan) if d.startswith(("SEARCH", "SCAN"))]
    return [d for d in reads if d.split(" ")[1] == table]


def test_stats_of_a_queue_count_dead_rows_off_the_dead_queue_index_alone(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = query_plan(dead_rows, sql.QUEUE_STATS, OPS)
    assert _reads_of(plan, "__alkstore_dead") == [
        f"SEARCH __alkstore_dead USING COVERING INDEX {DEAD_QUEUE_INDEX} (queue=?)"
    ]


def test_stats_of_a_queue_count_live_rows_off_the_live_index_alone(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = query_plan(dead_rows, sql.QUEUE_STATS, OPS)
    assert _reads_of(plan, "__alkstore_jobs") == [
        f"SEARCH __alkstore_jobs USING COVERING INDEX {LIVE_INDEX} (queue=?)"
    ]


def test_stats_of_every_queue_read_the_indexes_and_no_table(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = query_plan(dead_rows, sql.QUEUE_STATS_ALL, OPS)
    assert _reads_of(plan, "__alkstore_jobs") == [
        f"SCAN __alkstore_jobs USING COVERING INDEX {LIVE_INDEX}"
    ]
    assert _reads_of(plan, "__alkstore_dead") == [
        f"SCAN __alkstore_dead USING COVERING INDEX {DEAD_QUEUE_INDEX}"
    ]
    # Grouping by queue follows the indexes' order: only the few result rows are sorted.
    assert not [d for d in sorted_beside(plan) if "__alkstore" in d], plan


def test_a_page_of_pending_jobs_is_one_range_of_the_queue_index(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = _details(query_plan(dead_rows, sql.LIST_PENDING_JOBS, OPS))
    assert plan == [f"SEARCH __alkstore_jobs USING INDEX {QUEUE_INDEX} (queue=? AND rowid>?)"]


def test_a_page_of_processing_jobs_reads_only_the_claimed_range_of_the_live_index(
    dead_rows: sqlite3.Connection,
) -> None:
    newest = {**OPS, "before": 10**6}
    plan = _details(query_plan(dead_rows, sql.LIST_PROCESSING_JOBS_NEWEST, newest))
    assert plan == [
        f"SEARCH __alkstore_jobs USING INDEX {LIVE_INDEX} (queue=? AND deadline<?)",
        "USE TEMP B-TREE FOR ORDER BY",
    ]


def test_a_page_of_dead_jobs_is_one_range_of_the_dead_queue_index(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = _details(query_plan(dead_rows, sql.LIST_DEAD_JOBS, OPS))
    assert plan == [f"SEARCH __alkstore_dead USING INDEX {DEAD_QUEUE_INDEX} (queue=? AND rowid>?)"]


def test_a_page_of_all_jobs_reads_both_ranges_and_sorts_only_the_page(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = query_plan(dead_rows, sql.LIST_JOBS, OPS)
    assert _reads_of(plan, "__alkstore_jobs") == [
        f"SEARCH __alkstore_jobs USING INDEX {QUEUE_INDEX} (queue=? AND rowid>?)"
    ]
    assert _reads_of(plan, "__alkstore_dead") == [
        f"SEARCH __alkstore_dead USING INDEX {DEAD_QUEUE_INDEX} (queue=? AND rowid>?)"
    ]


def test_redriving_the_oldest_reads_the_dead_age_index_in_order(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = query_plan(dead_rows, sql.REDRIVE_OLDEST, OPS)
    assert _reads_of(plan, "__alkstore_dead") == [
        f"SEARCH __alkstore_dead USING COVERING INDEX {DEAD_AGE_INDEX} (queue=?)"
    ]
    assert "SEARCH d USING INTEGER PRIMARY KEY (rowid=?)" in _details(plan)  # the rows chosen
    assert not [d for d in sorted_beside(plan) if DEAD_AGE_INDEX in d], plan


@pytest.mark.parametrize(
    "statement",
    [sql.REDRIVE_IDS, sql.DELETE_DEAD_IDS, sql.PURGE_DEAD_IDS],
    ids=["redrive", "delete", "purge"],
)
def test_named_dead_rows_are_found_by_primary_key(
    dead_rows: sqlite3.Connection, statement: str
) -> None:
    plan = query_plan(dead_rows, statement, OPS)
    # A redriven unique job's key is looked up among the dead rows that keep one (below).
    reads = [
        d
        for d in _details(plan)
        if ("__alkstore" in d or d.startswith("SEARCH d ")) and DEAD_UNIQUE_INDEX not in d
    ]
    assert len(reads) == 1, plan
    assert reads[0].endswith("USING INTEGER PRIMARY KEY (rowid=?)"), plan


def test_a_redriven_unique_jobs_key_is_one_search_of_the_dead_holds(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = _details(query_plan(dead_rows, sql.REDRIVE_IDS, OPS))
    holds = [d for d in plan if DEAD_UNIQUE_INDEX in d]
    assert holds == [f"SEARCH other USING INDEX {DEAD_UNIQUE_INDEX} (queue=? AND unique_hold=?)"], (
        plan
    )


def test_purging_dead_rows_older_than_an_age_is_one_range_of_the_dead_age_index(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = _details(query_plan(dead_rows, sql.PURGE_DEAD_BEFORE, OPS))
    assert plan == [f"SEARCH __alkstore_dead USING INDEX {DEAD_AGE_INDEX} (queue=? AND died_at<?)"]


def test_purging_every_dead_row_of_a_queue_reads_only_that_queue(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = _details(query_plan(dead_rows, sql.PURGE_DEAD_ALL, OPS))
    assert plan == [f"SEARCH __alkstore_dead USING INDEX {DEAD_QUEUE_INDEX} (queue=?)"]


def test_a_newest_first_page_of_pending_jobs_is_one_range_of_the_queue_index(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = _details(query_plan(dead_rows, sql.LIST_PENDING_JOBS_NEWEST, {**OPS, "before": 10**6}))
    assert plan == [
        f"SEARCH __alkstore_jobs USING INDEX {QUEUE_INDEX} (queue=? AND rowid>? AND rowid<?)"
    ]


def test_a_newest_first_page_of_dead_jobs_is_one_range_of_the_dead_queue_index(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = _details(query_plan(dead_rows, sql.LIST_DEAD_JOBS_NEWEST, {**OPS, "before": 10**6}))
    assert plan == [
        f"SEARCH __alkstore_dead USING INDEX {DEAD_QUEUE_INDEX} (queue=? AND rowid>? AND rowid<?)"
    ]


@pytest.mark.parametrize("statement", [sql.IS_PAUSED, sql.RESUME], ids=["is_paused", "resume"])
def test_a_pause_is_found_by_its_key(dead_rows: sqlite3.Connection, statement: str) -> None:
    reads = [d for d in _details(query_plan(dead_rows, statement, OPS)) if PAUSED in d]
    assert reads == [f"SEARCH {PAUSED} USING PRIMARY KEY (queue=?)"]


@pytest.mark.parametrize(
    "statement",
    [
        sql.LIST_JOBS,
        sql.LIST_PENDING_JOBS,
        sql.LIST_PROCESSING_JOBS,
        sql.LIST_DEAD_JOBS,
        sql.REDRIVE_OLDEST,
        sql.REDRIVE_IDS,
    ],
    ids=[
        "list_jobs",
        "list_pending_jobs",
        "list_processing_jobs",
        "list_dead_jobs",
        "redrive_oldest",
        "redrive_ids",
    ],
)
def test_operation_cost_does_not_grow_with_the_dead_rows(tmp_path: Path, statement: str) -> None:
    costs = []
    for depth in (200, DEPTH):
        path = tmp_path / f"depth-{depth}.db"
        store = alkstore.open(database_url(str(path)), clock=FakeClock(NOW))
        try:
            _graveyard(store, depth)
        finally:
            store.close()
        conn = sqlite3.connect(str(path), isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")  # a write's changes go with the connection
            costs.append(instructions(conn, statement, OPS))
        finally:
            conn.close()
    shallow, deep_cost = costs
    assert deep_cost <= shallow * 1.2 + 50, costs


# -- cost does not grow with the backlog ---------------------------------------


def _cost_on_a_file(
    path: Path,
    build: Callable[[Store], object],
    statement: str,
    params: dict[str, Any],
    *,
    in_a_write: bool = True,
) -> int:
    """The VM instructions ``statement`` runs on a new file that ``build`` filled
    through the engine (inside a write transaction unless ``in_a_write`` is off)."""
    store = alkstore.open(database_url(str(path)), clock=FakeClock(NOW))
    try:
        build(store)
    finally:
        store.close()
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        if in_a_write:
            conn.execute("BEGIN IMMEDIATE")
        return instructions(conn, statement, params)
    finally:
        conn.close()


def _claims_in_flight(store: Store, in_flight: int) -> None:
    _fill(store, in_flight + 100)
    assert len(store.queue(QUEUE).claim_batch("w", in_flight)) == in_flight


@pytest.mark.parametrize(
    "statement",
    [
        sql.CLAIM,
        sql.CLAIM_ONE,
        sql.CLAIM_READY,
        sql.CLAIM_READY_ONE,
        sql.ANY_LAPSED,
        sql.ANY_EXHAUSTED,
        sql.BURY_EXHAUSTED,
        sql.NEXT_WAKE_AT,
        sql.BURY_EXPIRED,
        sql.PURGE_DEAD,
    ],
    ids=[
        "claim",
        "claim_one",
        "claim_ready",
        "claim_ready_one",
        "any_lapsed",
        "any_exhausted",
        "bury_exhausted",
        "next_wake_at",
        "bury_expired",
        "purge_dead",
    ],
)
def test_statement_cost_does_not_grow_with_the_backlog(tmp_path: Path, statement: str) -> None:
    params = {
        sql.CLAIM: CLAIM,
        sql.CLAIM_ONE: CLAIM_ONE,
        sql.CLAIM_READY: CLAIM,
        sql.CLAIM_READY_ONE: CLAIM_ONE,
    }.get(statement, QUEUE_NOW)
    shallow, deep_cost = (
        _cost_on_a_file(
            tmp_path / f"depth-{depth}.db", partial(_backlog, depth=depth), statement, params
        )
        for depth in (100, DEPTH)
    )
    # A handful of extra b-tree levels at most; a scan of the backlog would be 200x.
    assert deep_cost <= shallow * 1.2 + 50, (shallow, deep_cost)


@pytest.mark.parametrize(
    "statement",
    [sql.NEXT_WAKE_AT, sql.CLAIM_READY_ONE, sql.ANY_LAPSED],
    ids=["next_wake_at", "claim_ready_one", "any_lapsed"],
)
def test_statement_cost_does_not_grow_with_the_claims_in_flight(
    tmp_path: Path, statement: str
) -> None:
    # The next deadline and the lapse guard are seeks into the claimed range of the
    # live index, not walks over every claim in flight.
    params = CLAIM_ONE if statement is sql.CLAIM_READY_ONE else QUEUE_NOW
    few, many = (
        _cost_on_a_file(
            tmp_path / f"in-flight-{in_flight}.db",
            partial(_claims_in_flight, in_flight=in_flight),
            statement,
            params,
        )
        for in_flight in (10, 2000)
    )
    assert many <= few * 1.2 + 50, (few, many)


KEPT_NOW = NOW + 120
"""After the completed jobs' expiry (60 s), before their retention ends (3600 s)."""
KEPT_CLAIM = {**CLAIM, "now": KEPT_NOW}
KEY_WALK = {"per_key": 10, "rate_per_key": None, "per_s": None, "cursor": None}
"""A per-key limit's walk (statements.PICK_IN_TURN) of the queue's one key, ''."""


def _completed_jobs(store: Store, completed: int) -> None:
    """A limited queue that keeps its jobs: ``completed`` of them completed in place
    (each with an expiry), a few in flight, 100 pending."""
    queue = store.queue(QUEUE, QueueOpts(completed_retention_s=3600))
    assert queue.set_limits(alkstore.Limits(concurrency=1000))
    for start in range(0, completed, 1000):
        count = min(1000, completed - start)
        queue.enqueue_many([{"n": n} for n in range(count)], EnqueueOpts(expires=60))
        handles = queue.claim_batch("w", count)
        assert queue.ack_batch([handle.id for handle in handles], "w") == count
    queue.enqueue_many([{"n": n} for n in range(100)])
    assert len(queue.claim_batch("w", 5)) == 5


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        (sql.CLAIM, KEPT_CLAIM),
        (sql.CLAIM_ONE, {**KEPT_CLAIM, "limit": 1}),
        (sql.CLAIM_READY, KEPT_CLAIM),
        (sql.CLAIM_READY_ONE, {**KEPT_CLAIM, "limit": 1}),
        (sql.ANY_LAPSED, {"queue": QUEUE, "now": KEPT_NOW}),
        (sql.BURY_EXHAUSTED, {"queue": QUEUE, "now": KEPT_NOW}),
        (sql.NEXT_WAKE_AT, {"queue": QUEUE, "now": KEPT_NOW}),
        (sql.BURY_EXPIRED, {"queue": QUEUE, "now": KEPT_NOW}),
        (sql.PURGE_COMPLETED, {"queue": QUEUE, "now": KEPT_NOW}),
        (sql.LIST_PROCESSING_JOBS, {"queue": QUEUE, "after": 0, "limit": 10}),
        (sql.PICK_IN_TURN, {**KEPT_CLAIM, **KEY_WALK}),
    ],
    ids=[
        "claim",
        "claim_one",
        "claim_ready",
        "claim_ready_one",
        "any_lapsed",
        "bury_exhausted",
        "next_wake_at",
        "bury_expired",
        "purge_completed",
        "processing_page",
        "key_walk",
    ],
)
def test_statement_cost_does_not_grow_with_the_completed_jobs(
    tmp_path: Path, statement: str, params: dict[str, Any]
) -> None:
    # Completed rows stay in the live table (version 18) but out of every range these
    # read: their deadlines sort above every claim's, and the expiry index leaves them out.
    few, many = (
        _cost_on_a_file(
            tmp_path / f"completed-{completed}.db",
            partial(_completed_jobs, completed=completed),
            statement,
            params,
        )
        for completed in (100, 5000)
    )
    assert many <= few * 1.2 + 50, (few, many)


def test_a_claim_on_a_deep_backlog_writes_one_page_of_the_table_and_one_of_the_index(
    db_path: Path,
) -> None:
    # Claimed rows sort right before the pending ones in the live index (deadline
    # DESC puts NULL, pending, last): a claim moves the row's entry from the head of
    # the pending range to the start of the claimed range, on the same index page.
    # (In ascending deadline order the claimed range sits apart, and a claim
    # changes a second index page.)
    store = alkstore.open(database_url(str(db_path)), clock=FakeClock(NOW))
    try:
        _fill(store, 5_000)
        assert store.queue(QUEUE).claim("w") is not None  # the claimed range exists
        conn = sqlite3.connect(str(db_path), isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            assert store.queue(QUEUE).claim("w") is not None
            (_, pages_in_wal, _) = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            conn.close()
    finally:
        store.close()
    assert pages_in_wal == 2


# -- the profiles: schedules, streams, pub/sub ----------------------------------------

STREAM_READ = sql.STREAM_READ_PARAMS(StreamRead("s1", 0, 10))


def _fill_profiles(store: Store, depth: int) -> None:
    """``depth`` schedules, events in each of three streams, and notifications."""
    for n in range(depth):
        store.schedule(f"schedule-{n:05}", f"@every {n % 500 + 1}s", "q", {"n": n})
    for n in range(depth // 100):  # a few declared among them
        store.declare_schedule(f"declared-{n:05}", "@every 60s", "q", {"n": n})
    with store.transaction() as tx:
        for n in range(depth):
            for stream in ("s0", "s1", "s2"):
                tx.stream_append(stream, {"n": n})
            tx.notify("c", {"n": n})
    store.stream("s1").commit("c", depth // 2)


@pytest.fixture
def profiles(open_store: StoreFactory, conn: sqlite3.Connection) -> sqlite3.Connection:
    _fill_profiles(open_store(clock=FakeClock(NOW)), 2_000)
    conn.execute("ANALYZE")
    return conn


def test_due_schedules_are_read_off_the_due_index_in_order(profiles: sqlite3.Connection) -> None:
    plan = _details(query_plan(profiles, sql.SCHEDULES_DUE, {"now": NOW + 60}))
    assert plan == [f"SEARCH {SCHEDULES} USING INDEX {DUE_INDEX} (next_fire_at<?)"]


def test_the_next_fire_at_is_one_seek_of_the_due_index(profiles: sqlite3.Connection) -> None:
    plan = _details(query_plan(profiles, sql.SCHEDULE_NEXT_FIRE_AT, {}))
    assert plan == [f"SEARCH {SCHEDULES} USING COVERING INDEX {DUE_INDEX}"]


def test_a_tick_s_lapse_reads_only_declared_schedules_off_their_index(
    profiles: sqlite3.Connection,
) -> None:
    plan = _details(
        query_plan(profiles, sql.SCHEDULES_LAPSE, sql.SCHEDULES_LAPSE_PARAMS(ScheduleLapse(NOW)))
    )
    assert plan == [
        f"SEARCH {SCHEDULES} USING COVERING INDEX {DECLARED_INDEX} "
        "(declared_until>? AND declared_until<?)"
    ]


def test_a_renewal_finds_each_schedule_by_its_name(profiles: sqlite3.Connection) -> None:
    statement = sql.schedules_renew(2)
    plan = _details(query_plan(profiles, statement, (NOW, "declared-00001", "declared-00002")))
    assert plan == [f"SEARCH {SCHEDULES} USING PRIMARY KEY (name=?)"]


_SCHEDULE = "schedule-00007"


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        (sql.SCHEDULE_GET, {"name": _SCHEDULE}),
        (
            sql.SCHEDULE_ADVANCE,
            sql.SCHEDULE_ADVANCE_PARAMS(ScheduleAdvance(_SCHEDULE, NOW, NOW + 1)),
        ),
        (sql.SCHEDULE_DELETE, {"name": _SCHEDULE}),
    ],
    ids=["get", "advance", "delete"],
)
def test_a_schedule_row_is_found_by_its_name(
    profiles: sqlite3.Connection, statement: str, params: Any
) -> None:
    plan = _details(query_plan(profiles, statement, params))
    assert plan == [f"SEARCH {SCHEDULES} USING PRIMARY KEY (name=?)"]


def test_a_stream_read_is_one_range_of_the_primary_key(profiles: sqlite3.Connection) -> None:
    plan = _details(query_plan(profiles, sql.STREAM_READ, STREAM_READ))
    assert plan == [f"SEARCH {STREAM_EVENTS} USING PRIMARY KEY (stream=? AND offset>?)"]


def test_trimming_a_stream_is_one_range_of_the_primary_key(profiles: sqlite3.Connection) -> None:
    plan = _details(
        query_plan(profiles, sql.STREAM_TRIM, sql.STREAM_TRIM_PARAMS(StreamTrim("s1", 5)))
    )
    assert plan == [f"SEARCH {STREAM_EVENTS} USING PRIMARY KEY (stream=? AND offset<?)"]


def test_a_consumer_offset_is_found_by_its_key(profiles: sqlite3.Connection) -> None:
    plan = _details(
        query_plan(profiles, sql.STREAM_OFFSET, sql.STREAM_OFFSET_PARAMS(StreamOffset("s1", "c")))
    )
    assert plan == [f"SEARCH {STREAM_OFFSETS} USING PRIMARY KEY (stream=? AND consumer=?)"]


def test_the_watcher_reads_new_notifications_by_id(profiles: sqlite3.Connection) -> None:
    plan = _details(query_plan(profiles, sql.NOTIFICATIONS_AFTER, {"after": 10, "limit": 100}))
    assert plan == [f"SEARCH {NOTIFICATIONS} USING INTEGER PRIMARY KEY (rowid>?)"]


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        (sql.STREAM_READ, sql.STREAM_READ_PARAMS(StreamRead("s1", 50, 10))),
        (sql.SCHEDULE_NEXT_FIRE_AT, {}),
        (sql.NOTIFICATIONS_AFTER, {"after": 50, "limit": 10}),
        (sql.NOTIFICATIONS_OVERFLOW, {"keep": 10_000}),
    ],
    ids=["stream_read", "schedule_next_fire_at", "notifications_after", "notifications_overflow"],
)
def test_profile_statement_cost_does_not_grow_with_the_rows(
    tmp_path: Path, statement: str, params: Any
) -> None:
    shallow, deep_cost = (
        _cost_on_a_file(
            tmp_path / f"depth-{depth}.db",
            partial(_fill_profiles, depth=depth),
            statement,
            params,
            in_a_write=False,
        )
        for depth in (100, 5_000)
    )
    assert deep_cost <= shallow * 1.2 + 50, (shallow, deep_cost)


# -- unique jobs (the unique profile) ------------------------------------------------

UNIQUE_ONE_PARAMS = (
    *(QUEUE, 0, NOW, NOW, None, 3, 300, 5, None, None, None, None),
    *(None, 0, NOW, '"p"', "k"),
)
"""The stamps (the last three, completed_retention_s, limit_key and metadata, None),
hold_until, hold_dead, now, the payload and the key."""


def test_a_lone_unique_insert_looks_for_a_dead_holder_with_one_search_of_the_dead_holds(
    dead_rows: sqlite3.Connection,
) -> None:
    plan = query_plan(dead_rows, sql.INSERT_UNIQUE_ONE, UNIQUE_ONE_PARAMS)
    assert _reads_of(plan, "__alkstore_dead") == [
        f"SEARCH __alkstore_dead USING INDEX {DEAD_UNIQUE_INDEX} (queue=? AND unique_hold=?)"
    ]
    assert _reads_of(plan, "__alkstore_jobs") == []  # live holds: the unique index's conflict


def test_the_holders_of_keys_are_read_off_the_unique_indexes(
    dead_rows: sqlite3.Connection,
) -> None:
    named = {"queue": QUEUE, "keys": '["k1", "k2"]', "now": NOW}
    plan = query_plan(dead_rows, sql.KEY_HOLDERS, named)
    assert _reads_of(plan, "__alkstore_jobs") == [
        f"SEARCH __alkstore_jobs USING INDEX {UNIQUE_INDEX} (queue=? AND unique_hold=?)"
    ]
    assert _reads_of(plan, "__alkstore_dead") == [
        f"SEARCH __alkstore_dead USING INDEX {DEAD_UNIQUE_INDEX} (queue=? AND unique_hold=?)"
    ]
