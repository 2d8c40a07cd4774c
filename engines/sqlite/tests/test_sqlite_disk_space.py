"""Running out of disk space, and giving it back.

A full disk is simulated without privileges: a child process limits the size
of every file it writes (RLIMIT_FSIZE, SIGXFSZ ignored) to what the store's
files already hold, so no file can grow; lifting the limit is room returning.
"""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import (
    HOLD_AT_MOST_S,
    StoreFactory,
    open_at_once,
    open_out_of_space,
    run_out_of_space,
)

import alkstore
from alkstore_sqlite import database_url
from alkstore_sqlite.gate import WriterGate

WAL_LIMIT_BYTES = 16 * 1024 * 1024

CHILD_TIMEOUT_S = 120


def _in_child(target: Any, *args: Any) -> Any:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=target, args=(*args, results))
    child.start()
    try:
        return results.get(timeout=CHILD_TIMEOUT_S)
    finally:
        child.join(CHILD_TIMEOUT_S)
        if child.is_alive():
            child.kill()
            child.join(CHILD_TIMEOUT_S)


@pytest.fixture(scope="module")
def episode(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One full-disk episode, start to end (see ``run_out_of_space``)."""
    directory = tmp_path_factory.mktemp("full-disk")
    seen: dict[str, Any] = _in_child(run_out_of_space, database_url(str(directory / "store.db")))
    return seen


# -- while the disk is full ---------------------------------------------------------


@pytest.mark.parametrize("call", ["enqueue", "claim", "transaction", "notify"])
def test_every_write_fails_with_engine_unavailable(episode: dict[str, Any], call: str) -> None:
    assert episode["while full"][call].startswith("EngineUnavailable: ")


def test_reads_keep_working(episode: dict[str, Any]) -> None:
    assert episode["while full"]["get_job"] == "ok"


def test_the_error_says_a_write_was_refused_for_want_of_room(episode: dict[str, Any]) -> None:
    assert "a full disk, a quota or a file size limit" in episode["while full"]["enqueue"]


def test_nothing_a_failed_write_began_is_stored(episode: dict[str, Any]) -> None:
    # 50 jobs before the episode, one after it; none of the failed calls left a trace.
    assert episode["claimed"] == [*range(50), "after"]
    assert episode["integrity"] == [("ok",)]


# -- once there is room again -------------------------------------------------------


def test_the_same_store_writes_again_without_intervention(episode: dict[str, Any]) -> None:
    assert episode["enqueue after"] == "ok"
    assert episode["acked"] == 51


def test_the_wal_gives_back_the_space_it_grew_into(episode: dict[str, Any]) -> None:
    # The first write after the episode checkpoints and truncates the WAL, then
    # appends its own few pages.
    assert episode["wal after"] < episode["wal while full"] / 4


def test_the_wal_is_cut_back_after_a_checkpoint(open_store: StoreFactory, db_path: Path) -> None:
    store = open_store()
    with store.transaction() as tx:  # ~20 MB in one commit, which then checkpoints
        for n in range(200):
            tx.enqueue("q", {"n": n, "pad": "x" * 100_000})
    wal = Path(f"{db_path}-wal")
    assert wal.stat().st_size > WAL_LIMIT_BYTES
    store.queue("q").enqueue({"n": "next"})  # restarts the checkpointed WAL
    assert wal.stat().st_size <= WAL_LIMIT_BYTES


# -- opening on a full disk ---------------------------------------------------------


@pytest.mark.parametrize(
    "limit",
    [0, 4096, 40_000],
    ids=["nothing-written", "header-written", "schema-half-written"],
)
def test_a_failed_open_leaves_no_new_files(tmp_path: Path, limit: int) -> None:
    outcome, files = _in_child(open_out_of_space, database_url(str(tmp_path / "store.db")), limit)
    assert outcome.startswith("EngineUnavailable: ")
    assert files == {}


def test_a_failed_open_keeps_a_database_file_that_was_there(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.touch()
    outcome, files = _in_child(open_out_of_space, database_url(str(path)), 0)
    assert outcome.startswith("EngineUnavailable: ")
    assert files == {"store.db": 0}
    assert os.path.getsize(path) == 0


@pytest.mark.parametrize("trial", range(5))
def test_a_failed_open_never_removes_a_file_that_concurrent_opens_use(url: str, trial: int) -> None:
    # Two processes open a new file at the moment a third, which can write nothing,
    # fails to and cleans up after itself: theirs must be one intact store.
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(3), ctx.Queue()
    limits = [None, 0, None]
    children = [
        ctx.Process(target=open_at_once, args=(url, limit, barrier, results)) for limit in limits
    ]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=HOLD_AT_MOST_S) for _ in children]
    for child in children:
        child.join(HOLD_AT_MOST_S)
    ids = [outcome for outcome in outcomes if isinstance(outcome, int)]
    failures = [outcome for outcome in outcomes if not isinstance(outcome, int)]
    assert len(ids) == 2
    assert len(failures) == 1
    assert failures[0].startswith("EngineUnavailable: ")
    with alkstore.open(url) as store:
        claimed = store.queue("q").claim_batch("checker", 10)
        assert sorted(h.id for h in claimed) == sorted(ids)


def test_a_gate_whose_lock_file_was_removed_takes_the_new_one(tmp_path: Path) -> None:
    gate = WriterGate(str(tmp_path / "store.db"))
    os.unlink(gate.path)  # what a failed open does after it held the gate
    gate.acquire_current(time.monotonic() + 1)
    other = os.open(gate.path, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # the file at the path is the one locked
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
        gate.release()
        gate.close()
