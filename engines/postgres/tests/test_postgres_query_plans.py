"""The profiles' statements use their indexes (EXPLAIN on a realistically filled schema):
the tick's due scan and the next boundary, stream reads and trims, stored messages,
and the ops profile's stats, redrive, purges and the claim's pause guard; and the
claims' plans hold whatever the table's size when they were planned."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from pg_helpers import LARGE, StoreFactory
from psycopg import sql

from alkstore import EnqueueOpts, QueueOpts, Store
from alkstore.testing import FakeClock
from alkstore_postgres import plans
from alkstore_postgres.statements import Statements

NOW = 1_700_000_000
SCHEDULES = 2000
EVENTS = 2000
MESSAGES = 5000

# Each plan checked here is one a session keeps; a cache reset from DDL elsewhere on the
# server (other tests' schemas, in parallel) makes it again: these run on their own.
pytestmark = pytest.mark.kept_plans


@pytest.fixture
def filled(open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str) -> Statements:
    """Schedules with boundaries spread over the next ~8 minutes, three streams of
    events with a committed consumer, stored messages; analyzed."""
    store = open_store(clock=FakeClock(NOW))
    store.schedule("schedule-00000", "@every 1s", "q", {"n": 0})
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_schedules'
        " (name, spec, queue, payload, priority, interval_s, next_fire_at)"
        " SELECT format('schedule-%%s', lpad(n::text, 5, '0')), format('@every %%ss', s),"
        "        'q', '{}', 0, s, %s + s"
        " FROM generate_series(1, %s) AS n, LATERAL (SELECT n %% 500 + 1 AS s) AS interval",
        (NOW, SCHEDULES),
    )
    for stream in ("s0", "s1", "s2"):
        admin.execute(
            f'INSERT INTO "{schema}".alkstore_stream_events'
            " (stream, event_offset, payload, created_at)"
            " SELECT %s, n, '{}', %s FROM generate_series(1, %s) AS n",
            (stream, NOW, EVENTS),
        )
    store.stream("s1").commit("c", EVENTS // 2)
    for n in range(20):
        store.notify("c", {"n": n, "blob": LARGE})
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_messages (channel, payload, created_at)'
        " SELECT 'c', '\"stored\"', %s FROM generate_series(1, %s)",
        (NOW, MESSAGES),
    )
    admin.execute(f'ANALYZE "{schema}".alkstore_schedules')
    admin.execute(f'ANALYZE "{schema}".alkstore_stream_events')
    admin.execute(f'ANALYZE "{schema}".alkstore_messages')
    return Statements.for_schema(schema)


def _plan(conn: psycopg.Connection[Any], query: bytes, params: dict[str, Any]) -> str:
    rows = conn.execute(b"EXPLAIN " + query, params).fetchall()
    return "\n".join(row[0] for row in rows)


def test_due_schedules_are_read_off_the_due_index(
    filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    plan = _plan(admin, filled.schedules_due, {"now": NOW + 5})
    assert "alkstore_schedules_due" in plan
    assert "Seq Scan" not in plan


def test_the_next_boundary_is_the_first_entry_of_the_due_index(
    filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    plan = _plan(admin, filled.schedule_next_fire_at, {})
    assert "alkstore_schedules_due" in plan
    assert "Seq Scan" not in plan


@pytest.mark.parametrize("statement", ["schedule_get", "schedule_delete"])
def test_a_schedule_row_is_found_by_its_name(
    filled: Statements, admin: psycopg.Connection[Any], statement: str
) -> None:
    plan = _plan(admin, getattr(filled, statement), {"name": "schedule-00007"})
    assert "alkstore_schedules_pkey" in plan
    assert "Seq Scan" not in plan


def test_an_advance_finds_its_row_by_an_index(
    filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    # By name (the primary key) or by boundary and name (the due index): one row.
    params = {"name": "schedule-00007", "expected": NOW + 8, "new_fire_at": NOW + 16}
    plan = _plan(admin, filled.schedule_advance, params)
    assert "Index Scan using alkstore_schedules_" in plan
    assert "Seq Scan" not in plan


def test_a_stream_read_is_one_range_of_the_primary_key(
    filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    params = {"stream": "s1", "after": EVENTS // 2, "limit": 100}
    plan = _plan(admin, filled.stream_read, params)
    assert "Index Scan using alkstore_stream_events_pkey" in plan
    assert "Sort" not in plan
    assert "Seq Scan" not in plan


def test_trimming_a_stream_is_one_range_of_the_primary_key(
    filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    plan = _plan(admin, filled.stream_trim, {"stream": "s1", "before": 100})
    assert "alkstore_stream_events_pkey" in plan
    assert "Seq Scan" not in plan


@pytest.mark.parametrize("statement", ["stream_offset", "stream_commit"])
def test_a_consumer_offset_is_found_by_its_key(
    filled: Statements, admin: psycopg.Connection[Any], statement: str
) -> None:
    params = {"stream": "s1", "consumer": "c", "offset": 7}
    plan = _plan(admin, getattr(filled, statement), params)
    assert "Seq Scan" not in plan


def test_the_listener_reads_stored_messages_by_id(
    filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    plan = _plan(admin, filled.fetch_messages, {"ids": [3, 4]})
    assert "alkstore_messages_pkey" in plan
    assert "Seq Scan" not in plan


@pytest.mark.parametrize("statement", ["prune_messages", "publish_stored"])
def test_pruning_stored_messages_reads_only_the_primary_key(
    filled: Statements, admin: psycopg.Connection[Any], statement: str
) -> None:
    params = {
        "keep": 10_000,
        "message_channel": "x",
        "channel": "c",
        "payload": "1",
        "now": NOW,
        "reference_prefix": "#",
    }
    plan = _plan(admin, getattr(filled, statement), params)
    assert "alkstore_messages_pkey" in plan
    assert "Seq Scan" not in plan


# -- the ops profile -------------------------------------------------------------------

QUEUES = 20


@pytest.fixture
def queues_filled(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> Statements:
    """Many queues with ready, delayed, claimed and dead rows, one paused; vacuumed
    (as autovacuum keeps a table in use) and analyzed."""
    store = open_store(clock=FakeClock(NOW))
    for n in range(QUEUES):
        queue = store.queue(f"q{n}", QueueOpts(visibility_timeout_s=30))
        queue.enqueue_many(list(range(200)), EnqueueOpts(priority=n % 3))
        queue.enqueue_many(list(range(100)), EnqueueOpts(delay=3600))
        for handle in queue.claim_batch("w", 80)[:30]:
            handle.fail("dead")
    store.queue("q3").pause()
    for table in ("alkstore_jobs", "alkstore_dead_jobs", "alkstore_paused_queues"):
        admin.execute(f'VACUUM ANALYZE "{schema}".{table}')
    return Statements.for_schema(schema)


def _reads_no_table_of_jobs(plan: str) -> bool:
    return "Seq Scan on alkstore_jobs" not in plan and "Seq Scan on alkstore_dead_jobs" not in plan


@pytest.mark.parametrize("statement", ["queue_stats", "queue_stats_all"])
def test_queue_stats_count_off_the_claim_and_dead_indexes_alone(
    queues_filled: Statements, admin: psycopg.Connection[Any], statement: str
) -> None:
    params = {"queues": ["q7"], "now": NOW + 60}
    plan = _plan(admin, getattr(queues_filled, statement), params)
    assert "Index Only Scan using alkstore_jobs_pending_claim" in plan
    assert "Index Only Scan using alkstore_jobs_processing_deadline" in plan
    # The dead count reads one of the dead table's two queue-led indexes, index only:
    # (queue, id) since DEAD_PAGES_MIGRATION is the narrower, (queue, died_at, id) before.
    assert re.search(r"Index Only Scan using alkstore_dead_jobs_(queue_id|died)\b", plan), plan
    assert _reads_no_table_of_jobs(plan)


CLAIM_PARAMS = {
    "now": NOW + 60,
    "worker_id": "w",
    "limit": 10,
    "last_error": "max attempts exceeded",
}


def test_the_claims_pause_guard_is_evaluated_once_before_any_row(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    params = {**CLAIM_PARAMS, "queue": "q7"}
    plan = _plan(admin, queues_filled.claim, params)
    assert "One-Time Filter" in plan
    assert "alkstore_jobs_pending_claim" in plan
    assert _reads_no_table_of_jobs(plan)


def test_the_pending_only_claims_guards_are_evaluated_once_before_any_row(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    plan = _plan(admin, queues_filled.claim_ready, {**CLAIM_PARAMS, "queue": "q7"})
    assert plan.count("InitPlan") >= 2, plan  # the pause and the lapsed-claim guards
    assert "One-Time Filter" in plan
    assert "alkstore_jobs_pending_claim" in plan
    assert "alkstore_jobs_processing_deadline" in plan
    assert "Tid Scan on alkstore_jobs job" in plan
    assert _reads_no_table_of_jobs(plan)


def test_the_claims_dead_lettering_reads_the_deadline_index(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    plan = _plan(admin, queues_filled.claim, {**CLAIM_PARAMS, "queue": "q3"})
    exhausted = plan[plan.index("CTE exhausted") : plan.index("CTE buried")]
    assert "alkstore_jobs_processing_deadline" in exhausted, plan
    assert _reads_no_table_of_jobs(plan)


def test_redriving_the_oldest_reads_the_dead_index_and_deletes_by_primary_key(
    queues_filled: Statements, admin: psycopg.Connection[Any], schema: str
) -> None:
    # A backlog worth redriving: with a few dead rows a queue's (queue, id) slice,
    # sorted, is as cheap as any order, and the planner may take it.
    admin.execute(
        f'INSERT INTO "{schema}".alkstore_dead_jobs (id, queue, payload, priority, attempts,'
        " max_attempts, created_at, run_at, visibility_timeout_s, backoff_base_s, last_error,"
        " died_at) SELECT n, 'q7', n::text, 0, 3, 3, 1, 1, 300, 1, 'boom', n"
        " FROM generate_series(1000000, 1004999) AS n"
    )
    admin.execute(f'VACUUM ANALYZE "{schema}".alkstore_dead_jobs')
    params = {"queue": "q7", "limit": 10, "now": NOW, "wake_channel": "c", "topic": "t"}
    plan = _plan(admin, queues_filled.redrive_oldest, params)
    assert "alkstore_dead_jobs_died" in plan
    assert "Index Scan using alkstore_dead_jobs_pkey" in plan
    assert _reads_no_table_of_jobs(plan)


def test_redriving_named_jobs_finds_them_by_primary_key(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    params = {"queue": "q7", "ids": [5, 9], "now": NOW, "wake_channel": "c", "topic": "t"}
    plan = _plan(admin, queues_filled.redrive_named, params)
    assert "alkstore_dead_jobs_pkey" in plan
    assert _reads_no_table_of_jobs(plan)


def test_the_acks_of_many_claims_find_their_rows_by_primary_key(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    params = {
        "job_ids": "{5,9,4000}",
        "attempts": "{1,1,1}",
        "now": NOW,
        "wake_channel": "c",
        "topic_prefix": "t",
    }
    plan = _plan(admin, queues_filled.ack_claims, params)
    assert "alkstore_jobs_pkey" in plan
    assert _reads_no_table_of_jobs(plan)


def test_the_retries_of_many_claims_find_their_rows_by_primary_key(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    params = {
        "job_ids": "{5,9,4000}",
        "attempts": "{1,1,1}",
        "run_ats": "{1,2,3}",
        "entries": ['[1,0,"e"]'] * 3,
        "now": NOW,
        "wake_channel": "c",
        "topic_prefix": "t",
    }
    plan = _plan(admin, queues_filled.reschedule_claims, params)
    assert "alkstore_jobs_pkey" in plan
    assert _reads_no_table_of_jobs(plan)


def test_the_fails_of_many_claims_find_their_rows_by_primary_key(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    params = {
        "job_ids": "{5,9,4000}",
        "attempts": "{1,1,1}",
        "last_errors": ["x", "y", "z"],
        "entries": [None, None, None],
        "now": NOW,
        "wake_channel": "c",
        "topic_prefix": "t",
    }
    plan = _plan(admin, queues_filled.bury_claims, params)
    assert "alkstore_jobs_pkey" in plan
    assert _reads_no_table_of_jobs(plan)


def test_purging_dead_jobs_by_age_is_one_range_of_the_dead_index(
    queues_filled: Statements, admin: psycopg.Connection[Any]
) -> None:
    params = {"queue": "q7", "died_before": NOW}
    plan = _plan(admin, queues_filled.purge_dead_before, params)
    assert "alkstore_dead_jobs_died" in plan
    assert _reads_no_table_of_jobs(plan)


# -- plans made on an empty table --------------------------------------------------------


CLAIM_PARAM_TYPES = {
    "now": "bigint",
    "worker_id": "text",
    "queue": "text",
    "limit": "bigint",
    "last_error": "text",
}


def _numbered(query: bytes) -> tuple[bytes, list[str]]:
    """``query`` with its named placeholders as ``$1``, ``$2``, … (as psycopg sends
    it), and the names in that order."""
    names: list[str] = []

    def placeholder(match: re.Match[bytes]) -> bytes:
        name = match.group(1).decode()
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}".encode()

    return re.sub(rb"%\((\w+)\)[sb]", placeholder, query), names


def _explain_execute(
    conn: psycopg.Connection[Any], prepared: str, names: list[str], params: dict[str, Any]
) -> str:
    # A utility statement takes no bound parameters: the values go in as literals.
    values = sql.SQL(", ").join(sql.Literal(params[name]) for name in names)
    query = sql.SQL("EXPLAIN EXECUTE {} ({})").format(sql.Identifier(prepared), values)
    return "\n".join(row[0] for row in conn.execute(query))


def _generic_plan(conn: psycopg.Connection[Any], query: bytes, params: dict[str, Any]) -> str:
    """The plan PostgreSQL keeps for ``query`` once prepared, made now."""
    body, names = _numbered(query)
    types = ", ".join(CLAIM_PARAM_TYPES[name] for name in names)
    conn.execute(f"PREPARE kept ({types}) AS ".encode() + body)
    try:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        return _explain_execute(conn, "kept", names, params)
    finally:
        conn.execute("RESET plan_cache_mode")
        conn.execute("DEALLOCATE kept")


@pytest.mark.parametrize("statement", ["claim_one", "claim_ready_one"])
def test_a_one_row_claim_planned_on_an_empty_table_still_takes_its_row_by_tid(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str, statement: str
) -> None:
    # A worker's store usually starts on an empty queue: psycopg prepares the claim
    # after five runs, and PostgreSQL may keep the generic plan made then.
    store = open_store(clock=FakeClock(NOW))
    for _ in range(3):
        store.queue("q").enqueue({})
        handle = store.queue("q").claim("w")
        assert handle is not None
        assert handle.ack() is True
    statements = Statements.for_schema(schema)
    params = {**CLAIM_PARAMS, "queue": "q", "limit": 1}
    plan = _generic_plan(admin, getattr(statements, statement), params)
    assert "Tid Scan on alkstore_jobs job" in plan, plan
    assert _reads_no_table_of_jobs(plan), plan


def _kept_plans(conn: psycopg.Connection[Any], query: bytes, params: dict[str, Any]) -> list[str]:
    """What ``conn`` keeps for ``query``: the plan of each copy psycopg prepared of it."""
    body, names = _numbered(query)
    find = "SELECT name FROM pg_prepared_statements WHERE statement = %s"
    prepared = [name for (name,) in conn.execute(find, (body.decode(),))]
    assert prepared, "not prepared"
    return [_explain_execute(conn, name, names, params) for name in prepared]


def _session_of(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """The server session ``conn`` runs on and how many statements it keeps prepared:
    said with a kept plan, so a failure tells a replaced connection or a server-wide
    reset (the count falls to none) from a plan made again."""
    (count,) = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() or (0,)
    return conn.info.backend_pid, int(count)


def _claim_and_ack_a_batch(queue: Any) -> None:
    handles = queue.claim_batch("w", 3)
    assert len(handles) == 3
    assert queue.ack_batch([h.id for h in handles], "w") == 3


@pytest.fixture
def grown_after_plans_were_kept(
    open_store: StoreFactory,
    admin: psycopg.Connection[Any],
    schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> Store:
    """A store of one connection whose batch claim and ack_batch were prepared, with
    generic plans, while the table held a few rows, and whose table has grown since."""
    monkeypatch.setattr(plans, "PLAN_REFRESH_S", float("inf"))  # never let go, for now
    store = open_store(clock=FakeClock(NOW), pool_min_size=1, pool_max_size=1)
    admin.execute(  # no ANALYZE to make the plans again meanwhile
        sql.SQL("ALTER TABLE {}.alkstore_jobs SET (autovacuum_enabled = false)").format(
            sql.Identifier(schema)
        )
    )
    with store.transaction() as tx:  # the pool's one connection runs everything below
        tx.connection.execute("SET plan_cache_mode = force_generic_plan")
    queue = store.queue("q")
    for _ in range(8):  # psycopg prepares a statement after its fifth run
        queue.enqueue_many([1, 2, 3])
        _claim_and_ack_a_batch(queue)
    queue.enqueue_many(list(range(20_000)))
    return store


BATCH_CLAIM = {**CLAIM_PARAMS, "queue": "q", "limit": 3}
ACK_BATCH = {
    "job_ids": [1, 2, 3],
    "queue": "q",
    "worker_id": "w",
    "now": NOW,
    "wake_channel": "c",
    "topic": "queue:q",
}


def _claimed_on_the_kept_plan(store: Store, claim_ready: bytes) -> tuple[list[Any], Any]:
    """A batch claim while the connection still keeps the plan made on the nearly empty
    table (nothing let go): that plan scans the whole table. Its handles, and the
    server session it ran on."""
    handles = store.queue("q").claim_batch("w", 3)
    with store.transaction() as tx:
        (kept,) = _kept_plans(tx.connection, claim_ready, BATCH_CLAIM)
        session = _session_of(tx.connection)
    assert "Seq Scan on alkstore_jobs job" in kept, (session, kept)
    return list(handles), session


def _claim_plan_made_again(store: Store, claim_ready: bytes, session: Any) -> None:
    """The batch claim's kept plan is one made for the table as it is now."""
    with store.transaction() as tx:
        (made_again,) = _kept_plans(tx.connection, claim_ready, BATCH_CLAIM)
        again = _session_of(tx.connection)
    assert "Tid Scan on alkstore_jobs job" in made_again, (session, again, made_again)
    assert "Seq Scan on alkstore_jobs job" not in made_again, (session, again, made_again)


def test_a_batch_claims_plan_made_on_a_nearly_empty_table_is_made_again_once_old(
    grown_after_plans_were_kept: Store, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Row counts are not known to a generic plan: one made while the table was
    # nearly empty scans the whole table.
    store = grown_after_plans_were_kept
    claim_ready = Statements.for_schema(schema).claim_ready
    handles, session = _claimed_on_the_kept_plan(store, claim_ready)
    assert all(handle.ack() for handle in handles)  # one by one: not ack_batch

    monkeypatch.setattr(plans, "PLAN_REFRESH_S", 0.0)
    store.queue("q").claim_batch("w", 3)  # lets the connection's plans go first
    monkeypatch.setattr(plans, "PLAN_REFRESH_S", float("inf"))
    _claim_plan_made_again(store, claim_ready, session)


def test_an_ack_batch_lets_go_of_the_connections_plans_once_old(
    grown_after_plans_were_kept: Store, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen through the batch claim's plan, the one that a stale plan makes slow.
    store = grown_after_plans_were_kept
    statements = Statements.for_schema(schema)
    handles, session = _claimed_on_the_kept_plan(store, statements.claim_ready)

    monkeypatch.setattr(plans, "PLAN_REFRESH_S", 0.0)
    assert store.queue("q").ack_batch([h.id for h in handles], "w") == 3  # lets plans go
    monkeypatch.setattr(plans, "PLAN_REFRESH_S", float("inf"))
    _claim_plan_made_again(store, statements.claim_ready, session)
    with store.transaction() as tx:
        ack_plans = _kept_plans(tx.connection, statements.ack_batch, ACK_BATCH)
    for plan in ack_plans:
        assert "Seq Scan on alkstore_jobs" not in plan, plan


def test_a_tx_ack_all_lets_go_of_the_connections_plans_once_old(
    grown_after_plans_were_kept: Store, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker's group of acks (tx.ack_all, one ack_claims statement) is the batch
    # statement a busy worker runs most: it lets old plans go as ack_batch does.
    store = grown_after_plans_were_kept
    claim_ready = Statements.for_schema(schema).claim_ready
    handles, session = _claimed_on_the_kept_plan(store, claim_ready)

    monkeypatch.setattr(plans, "PLAN_REFRESH_S", 0.0)
    with store.transaction() as tx:
        assert tx.ack_all(handles) == ()  # lets the plans go first
    monkeypatch.setattr(plans, "PLAN_REFRESH_S", float("inf"))
    _claim_plan_made_again(store, claim_ready, session)
