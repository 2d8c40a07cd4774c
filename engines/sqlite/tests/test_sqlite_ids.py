"""Job ids come from AUTOINCREMENT: never handed out again, whatever happened to the highest."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlite_helpers import StoreFactory

from alkstore import EnqueueOpts, JobState, QueueOpts, Store
from alkstore.core import CoreStore
from alkstore.options import resolve_stamps
from alkstore.testing import FakeClock

START = 1_700_000_000


def _newest(store: Store) -> int:
    return store.queue("q").enqueue({"probe": True})


def test_an_id_is_not_reused_after_the_highest_job_is_acked(store: Store) -> None:
    queue = store.queue("q")
    queue.enqueue_many([{"n": 1}, {"n": 2}])
    handles = queue.claim_batch("w", 2)
    highest = max(h.id for h in handles)
    assert all(h.ack() for h in handles)
    assert _newest(store) > highest


def test_an_id_is_not_reused_after_the_highest_job_is_cancelled(store: Store) -> None:
    queue = store.queue("q")
    highest = queue.enqueue_many([{"n": 1}, {"n": 2}])[-1]
    assert queue.cancel(highest)
    assert _newest(store) > highest


def test_an_id_is_not_reused_after_the_highest_job_died_and_was_purged(
    store: Store, clock: FakeClock
) -> None:
    queue = store.queue("q", QueueOpts(dead_letter_retention_s=10))
    highest = queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("bad")
    dead = queue.get_job(highest)
    assert dead is not None
    assert (dead.id, dead.state) == (highest, JobState.DEAD)  # dead rows keep their id
    clock.advance(11)
    assert queue.sweep_expired().purged == 1
    assert queue.get_job(highest) is None
    assert _newest(store) > highest


def test_ids_stay_unique_across_reopening_an_emptied_database(
    open_store: StoreFactory,
) -> None:
    first = open_store()
    highest = first.queue("q").enqueue_many([{"n": n} for n in range(5)])[-1]
    for job_id in range(highest - 4, highest + 1):
        assert first.queue("q").cancel(job_id)
    first.close()
    assert _newest(open_store()) > highest


def test_a_batch_gets_consecutive_ids_in_payload_order(store: Store) -> None:
    queue = store.queue("q")
    payloads = [{"n": n} for n in range(130)]  # spans several multi-row statements
    ids = queue.enqueue_many(payloads)
    assert ids == list(range(ids[0], ids[0] + 130))
    jobs = [queue.get_job(job_id) for job_id in ids]
    assert [job.payload if job else None for job in jobs] == payloads


def test_a_dead_row_moves_out_of_the_live_table(store: Store, db_path: Path) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("bad")
    conn = sqlite3.connect(str(db_path))
    try:
        live = conn.execute("SELECT count(*) FROM __alkstore_jobs").fetchone()[0]
        dead = conn.execute("SELECT id, last_error FROM __alkstore_dead").fetchall()
    finally:
        conn.close()
    assert (live, dead) == (0, [(job_id, "bad")])


def test_a_batch_split_across_statement_sizes_gets_consecutive_ids_in_payload_order(
    store: Store,
) -> None:
    # 100 rows run as multi-row statements of 64, 32 and 4 rows: the ids the driver
    # computes from the last one must still match each row's payload.
    assert isinstance(store, CoreStore)
    driver = store.driver
    stamps = resolve_stamps("q", QueueOpts(max_attempts=2), EnqueueOpts(priority=7), START)
    payloads = [f'{{"n":{n}}}' for n in range(100)]
    ids = driver.write(lambda c: driver.insert_jobs(c, stamps, payloads))
    assert ids == list(range(ids[0], ids[0] + 100))
    for n, job_id in enumerate(ids):
        stored = store.queue("q").get_job(job_id)
        assert stored is not None
        assert (stored.payload, stored.max_attempts, stored.priority) == ({"n": n}, 2, 7)
