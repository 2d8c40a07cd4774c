"""A row whose payload text cannot be decoded (written around alkstore) never wedges
its queue: the claim dead-letters it and hands out the job behind it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from alkstore import JobState, Store
from alkstore.driver import ERROR_UNDECODABLE
from alkstore.payload import UndecodablePayload
from alkstore_sqlite.migrations import JOBS

CORRUPT_PAYLOAD = f"UPDATE {JOBS} SET payload = ? WHERE id = ?"


def corrupt(db_path: Path, job_id: int, text: str) -> None:
    """What raw SQL, an older release or a broken tool could leave in a row."""
    with sqlite3.connect(db_path) as conn:
        assert conn.execute(CORRUPT_PAYLOAD, (text, job_id)).rowcount == 1


@pytest.mark.parametrize(
    "text", ["[" * 900 + "]" * 900, "{not json", ""], ids=["900-deep", "garbage", "empty"]
)
def test_an_undecodable_row_is_dead_lettered_and_the_job_behind_it_claimed(
    store: Store, db_path: Path, text: str
) -> None:
    queue = store.queue("q")
    bad = queue.enqueue({"n": "bad"})
    good = queue.enqueue({"n": "good"})
    corrupt(db_path, bad, text)
    handle = queue.claim("worker")
    assert handle is not None
    assert (handle.id, handle.payload) == (good, {"n": "good"})
    dead = queue.get_job(bad)
    assert dead is not None
    assert dead.state is JobState.DEAD
    assert dead.last_error is not None
    assert dead.last_error.startswith(ERROR_UNDECODABLE)
    assert dead.payload == UndecodablePayload(text, dead.payload.reason)


def test_claim_wait_is_not_blocked_by_an_undecodable_row(store: Store, db_path: Path) -> None:
    queue = store.queue("q")
    bad = queue.enqueue({"n": "bad"})
    good = queue.enqueue({"n": "good"})
    corrupt(db_path, bad, "[" * 900 + "]" * 900)
    handle = queue.claim_wait("worker", timeout=5)
    assert handle is not None
    assert handle.id == good
