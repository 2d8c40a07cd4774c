"""The ops profile where SQLite shows through: the history kept as JSON by one
statement, redrive's one transaction, pauses in the file, resumes waking other processes."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import pytest
from sqlite_helpers import StoreFactory, sqlite_driver, wait_for_one

from alkstore import QueueOpts, Store
from alkstore.constants import MAX_ERROR_HISTORY, MAX_ERROR_LENGTH
from alkstore.params import Redrive
from alkstore.testing import FakeClock
from alkstore.values import JobState


def _stored_errors(db_path: Path, table: str, job_id: int) -> list[list[object]]:
    conn = sqlite3.connect(str(db_path))
    try:
        (text,) = conn.execute(f"SELECT errors FROM {table} WHERE id = ?", (job_id,)).fetchone()
        return list(json.loads(text))
    finally:
        conn.close()


def test_the_history_is_a_json_array_of_attempt_at_error(
    store: Store, clock: FakeClock, db_path: Path
) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    assert handle.retry("first", delay=0)
    now = int(clock.now())
    assert _stored_errors(db_path, "__alkstore_jobs", job_id) == [[1, now, "first"]]


def test_the_history_keeps_the_latest_entries_oldest_first(store: Store, db_path: Path) -> None:
    attempts = MAX_ERROR_HISTORY + 5
    queue = store.queue("q", QueueOpts(max_attempts=attempts))
    job_id = queue.enqueue({"n": 1})
    for attempt in range(1, attempts):
        handle = queue.claim("w")
        assert handle is not None
        assert handle.retry(f"attempt {attempt}", delay=0)
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail(f"attempt {attempts}")
    stored = _stored_errors(db_path, "__alkstore_dead", job_id)
    first_kept = attempts - MAX_ERROR_HISTORY + 1
    assert [entry[0] for entry in stored] == list(range(first_kept, attempts + 1))
    assert [entry[2] for entry in stored][-1] == f"attempt {attempts}"


def test_an_error_longer_than_the_limit_keeps_its_start_in_the_history(store: Store) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w")
    error = "é" * MAX_ERROR_LENGTH + "cut"
    assert handle is not None
    assert handle.fail(error)
    dead = queue.get_job(job_id)
    assert dead is not None
    assert [e.error for e in dead.errors] == [error[:MAX_ERROR_LENGTH]]
    assert dead.last_error == error


def test_a_redrive_that_rolls_back_leaves_the_dead_row_and_no_new_job(store: Store) -> None:
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("broken")
    driver = sqlite_driver(store)
    made: list[int] = []

    def redrive_then_crash(c: sqlite3.Connection) -> None:
        made.extend(driver.redrive(c, Redrive("q", None, 10, 0)))
        raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError):
        driver.write(redrive_then_crash)
    assert len(made) == 1
    assert queue.get_job(made[0]) is None
    dead = queue.get_job(job_id)
    assert dead is not None
    assert dead.state is JobState.DEAD


def test_redriven_ids_follow_the_order_the_ids_were_given_in(store: Store) -> None:
    queue = store.queue("q")
    ids = queue.enqueue_many([{"n": n} for n in range(4)])
    for handle in queue.claim_batch("w", 4):
        assert handle.fail("broken")
    wanted = [ids[2], ids[0], 999, ids[2], ids[3]]
    new_ids = queue.redrive(wanted)
    origins = [job.redriven_from for job in (queue.get_job(n) for n in new_ids) if job]
    assert origins == [ids[2], ids[0], ids[3]]
    assert new_ids == sorted(new_ids)


def test_a_pause_is_in_the_file_for_every_store_on_it(open_store: StoreFactory) -> None:
    pausing, other = open_store(), open_store()
    other.queue("q").enqueue({"n": 1})
    assert pausing.queue("q").pause()
    assert other.queue("q").paused()
    assert other.queue("q").claim("w") is None
    assert other.queue("q").resume()
    assert pausing.queue("q").claim("w") is not None


def test_a_resume_wakes_a_claim_wait_in_another_process(url: str, open_store: StoreFactory) -> None:
    queue = open_store().queue("q")
    queue.pause()
    job_id = queue.enqueue({"n": 1})
    ctx = mp.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    waiter = ctx.Process(target=wait_for_one, args=(url, "q", ready, results))
    waiter.start()
    assert ready.wait(timeout=60)
    time.sleep(0.3)  # let it block in claim_wait (sequencing only)
    pending = queue.get_job(job_id)
    assert pending is not None
    assert pending.attempts == 0  # the pause held it back
    assert queue.resume()
    # The waiter re-polls only hourly and waits at most 60 s: the watcher woke it.
    assert results.get(timeout=90) == (job_id, {"n": 1})
    waiter.join(timeout=30)
    assert waiter.exitcode == 0
