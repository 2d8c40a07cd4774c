"""Unique jobs on PostgreSQL (contract §15): the race a separate dead table opens.

A job that keeps its key while dead moves from the live table (where the unique
index guards its key) to the dead table (where it does not). An insert of the
same key that meets the live row while that move is uncommitted waits for it,
then finds the row gone and goes in: its own snapshot, taken before the wait,
cannot see the dead row. The engine looks again after its insert, with a newer
snapshot (``alkstore_enqueue_unique``; the redrive's ``TAKE_BACK_REDRIVEN``).
These tests hold the move open in a transaction of their own, make the insert
wait on it, and commit: there must never be two holders.
"""

from __future__ import annotations

from typing import Any

import psycopg
from pg_helpers import BackgroundCall, StoreFactory, blocked_on_a_lock, wait_until

from alkstore import EnqueueOpts, JobHandle, Unique
from alkstore.driver import ERROR_EXHAUSTED
from alkstore_postgres.statements import Statements

KEEPS_DEAD = Unique("k", states=("pending", "processing", "dead"))


def _holders(admin: psycopg.Connection[Any], schema: str) -> tuple[list[int], list[int]]:
    """The ids of the live and of the dead rows holding the key ``k``."""
    live = admin.execute(
        f'SELECT id FROM "{schema}".alkstore_jobs WHERE unique_hold = %s ORDER BY id', ("k",)
    ).fetchall()
    dead = admin.execute(
        f'SELECT id FROM "{schema}".alkstore_dead_jobs WHERE unique_hold = %s ORDER BY id', ("k",)
    ).fetchall()
    return [row[0] for row in live], [row[0] for row in dead]


def _move_to_dead(conn: psycopg.Connection[Any], schema: str, handle: JobHandle) -> None:
    """The engine's own move of a claimed job to the dead table, in ``conn``'s open
    transaction (not committed here)."""
    job = handle.job
    assert job.claimed_at is not None
    params = {
        "job_id": job.id,
        "attempt": job.attempts,
        "now": job.claimed_at,
        "last_error": ERROR_EXHAUSTED,
        "entry": None,
    }
    moved = conn.execute(Statements.for_schema(schema).bury_claim, params)
    assert moved.rowcount == 1


def test_an_enqueue_that_waited_on_a_holder_moving_to_dead_keeping_its_key_is_its_duplicate(
    open_store: StoreFactory, pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    queue = open_store().queue("q")
    holder = queue.enqueue({"n": 1}, EnqueueOpts(unique=KEEPS_DEAD))
    handle = queue.claim("w1")
    assert handle is not None
    with psycopg.connect(pg_dsn) as mover:
        _move_to_dead(mover, schema, handle)
        racer = BackgroundCall(lambda: queue.enqueue({"n": 2}, EnqueueOpts(unique="k")))
        assert wait_until(lambda: blocked_on_a_lock(admin, "alkstore_enqueue_unique"))
        mover.commit()
    got = racer.result()
    assert (got, got.duplicate) == (holder, True)
    assert _holders(admin, schema) == ([], [holder])


def test_an_enqueue_that_waited_on_a_holder_moving_to_dead_freeing_its_key_makes_a_job(
    open_store: StoreFactory, pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    queue = open_store().queue("q")
    holder = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    handle = queue.claim("w1")
    assert handle is not None
    with psycopg.connect(pg_dsn) as mover:
        _move_to_dead(mover, schema, handle)
        racer = BackgroundCall(lambda: queue.enqueue({"n": 2}, EnqueueOpts(unique="k")))
        assert wait_until(lambda: blocked_on_a_lock(admin, "alkstore_enqueue_unique"))
        mover.commit()
    got = racer.result()
    assert (got.duplicate, got != holder) == (False, True)
    assert _holders(admin, schema) == ([got], [])


def test_an_enqueue_many_that_waited_on_a_holder_moving_to_dead_keeping_its_key_is_its_duplicate(
    open_store: StoreFactory, pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    # The batch inserts set-based, so its look at the dead table is a statement of
    # its own too: the item whose key the dying holder keeps must come back duplicate.
    queue = open_store().queue("q")
    keeps = Unique(states=("pending", "processing", "dead"))  # each payload its own key
    holder = queue.enqueue({"n": 1}, EnqueueOpts(unique=keeps))
    held = queue.get_job(holder)
    assert held is not None
    handle = queue.claim("w1")
    assert handle is not None
    with psycopg.connect(pg_dsn) as mover:
        _move_to_dead(mover, schema, handle)
        racer = BackgroundCall(
            lambda: queue.enqueue_many([{"n": 1}, {"n": 2}], EnqueueOpts(unique=Unique()))
        )
        assert wait_until(lambda: blocked_on_a_lock(admin, "alkstore_enqueue_unique_many"))
        mover.commit()
    same, other = racer.result()
    assert (same, same.duplicate, other.duplicate) == (holder, True, False)
    live = admin.execute(
        f'SELECT id FROM "{schema}".alkstore_jobs WHERE unique_hold = %s', (held.unique_key,)
    ).fetchall()
    assert live == []


def test_a_redrive_that_waited_on_a_holder_moving_to_dead_keeping_its_key_takes_its_job_back(
    open_store: StoreFactory, pg_dsn: str, schema: str, admin: psycopg.Connection[Any]
) -> None:
    queue = open_store().queue("q")
    earlier = queue.enqueue({"n": 0}, EnqueueOpts(unique="k"))
    first = queue.claim("w1")
    assert first is not None
    assert first.fail("broken")  # dead, its key freed
    holder = queue.enqueue({"n": 1}, EnqueueOpts(unique=KEEPS_DEAD))
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == holder
    with psycopg.connect(pg_dsn) as mover:
        _move_to_dead(mover, schema, handle)
        redrive = BackgroundCall(lambda: queue.redrive([earlier]))
        assert wait_until(lambda: blocked_on_a_lock(admin, "alkstore_jobs"))
        mover.commit()
    assert redrive.result() == []
    still = queue.get_job(earlier)
    assert still is not None
    assert still.state.value == "dead"
    assert _holders(admin, schema) == ([], [holder])
