"""Wakes: one watcher thread per process per file notices every connection's commits."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time

from sqlite_helpers import StoreFactory, shared_state, wait_for_one, watcher_threads

import alkstore
from alkstore.core import CoreStore


def test_a_claim_wait_in_another_process_is_woken_by_a_commit_here(url: str) -> None:
    with alkstore.open(url) as store:
        ctx = mp.get_context("spawn")
        ready, results = ctx.Event(), ctx.Queue()
        waiter = ctx.Process(target=wait_for_one, args=(url, "q", ready, results))
        waiter.start()
        assert ready.wait(timeout=60)
        time.sleep(0.3)  # let it block in claim_wait (sequencing only)
        job_id = store.queue("q").enqueue({"hello": "there"})
        # The waiter re-polls only hourly and waits at most 60 s: the watcher woke it.
        assert results.get(timeout=90) == (job_id, {"hello": "there"})
        waiter.join(timeout=30)
        assert waiter.exitcode == 0


def test_stores_on_one_file_share_one_watcher_that_stops_with_the_last(
    open_store: StoreFactory, url: str
) -> None:
    others = watcher_threads()  # of stores other tests may have left open
    first, second = open_store(), open_store()
    assert watcher_threads() == others  # nothing watches until someone waits
    assert first.queue("q").claim_wait("w", timeout=0.05) is None
    assert second.queue("q").claim_wait("w", timeout=0.05) is None
    (watcher,) = watcher_threads() - others
    first.close()
    assert watcher.is_alive()
    second.close()
    assert not watcher.is_alive()
    assert shared_state(url) is None


def test_the_watcher_registers_each_store_once(open_store: StoreFactory, url: str) -> None:
    store = open_store()
    assert isinstance(store, CoreStore)
    for _ in range(3):
        assert store.queue("q").claim_wait("w", timeout=0.01) is None
    shared = shared_state(url)
    assert shared is not None
    assert len(shared.watcher._sinks) == 1


def test_a_commit_from_another_store_wakes_a_waiter_in_this_process(
    open_store: StoreFactory,
) -> None:
    waiting = open_store(repoll_s=3600).queue("q")
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(waiting.claim_wait("w", timeout=30)))
    thread.start()
    time.sleep(0.2)  # let it block first (sequencing only)
    job_id = open_store().queue("q").enqueue({"n": 1})
    thread.join()
    assert [getattr(h, "id", None) for h in result] == [job_id]
