"""A writer that holds the writer lock and does not let go (a store.transaction() kept
open, a process stopped or hung inside one): every other call gives up within its
own time limit, busy_timeout_s or the caller's timeout, with EngineUnavailable."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlite_helpers import HOLD_AT_MOST_S, StoreFactory, hold_transaction, sqlite_driver

import alkstore
from alkstore import EngineUnavailable

GENEROUS_S = 3.0
"""Every call below is limited to 1 s (0.5 s); without the limit it waits for the holder."""


def _wait_until_holding(child: Any, holding: Any) -> None:
    """Wait for ``holding``, failing at once if the child dies first."""
    give_up_at = time.monotonic() + HOLD_AT_MOST_S
    while not holding.wait(0.1):
        assert child.is_alive(), f"the child exited ({child.exitcode}) before holding"
        assert time.monotonic() < give_up_at, "the child never entered its transaction"


def _elapsed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    try:
        outcome: Any = call()
    except EngineUnavailable as exc:
        outcome = exc
    return outcome, time.monotonic() - started


@pytest.fixture(params=["sleeping", "stopped"])
def held_by_another_process(request: pytest.FixtureRequest, url: str) -> Iterator[None]:
    """Another process inside ``store.transaction()`` (after a write), asleep or frozen
    with SIGSTOP; it is always woken, released and reaped afterwards."""
    alkstore.open(url).close()  # the schema exists before the child holds the lock
    ctx = mp.get_context("spawn")
    holding, let_go = ctx.Event(), ctx.Event()
    child = ctx.Process(target=hold_transaction, args=(url, holding, let_go))
    child.start()
    assert child.pid is not None
    try:
        _wait_until_holding(child, holding)
        if request.param == "stopped":
            os.kill(child.pid, signal.SIGSTOP)
        yield
    finally:
        os.kill(child.pid, signal.SIGCONT)
        let_go.set()
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(10)


@pytest.mark.usefixtures("held_by_another_process")
def test_a_write_gives_up_after_busy_timeout_s(open_store: StoreFactory) -> None:
    queue = open_store(busy_timeout_s=1).queue("q")
    outcome, elapsed = _elapsed(lambda: queue.enqueue({"n": 1}))
    assert isinstance(outcome, EngineUnavailable)
    assert "another process" in str(outcome)
    assert "busy_timeout_s=1" in str(outcome)
    assert 0.8 <= elapsed < GENEROUS_S


@pytest.mark.usefixtures("held_by_another_process")
def test_claim_wait_returns_none_at_its_timeout(open_store: StoreFactory) -> None:
    queue = open_store().queue("q")  # busy_timeout_s=5: only the caller's timeout is short
    outcome, elapsed = _elapsed(lambda: queue.claim_wait("w", timeout=1))
    assert outcome is None
    assert elapsed < GENEROUS_S


@pytest.mark.usefixtures("held_by_another_process")
def test_a_driver_write_waits_no_longer_than_wait_s(open_store: StoreFactory) -> None:
    driver = sqlite_driver(open_store(busy_timeout_s=30))
    outcome, elapsed = _elapsed(lambda: driver.write(lambda c: None, wait_s=0.5))
    assert isinstance(outcome, EngineUnavailable)
    assert "caller's remaining timeout" in str(outcome)
    assert 0.4 <= elapsed < GENEROUS_S


@pytest.mark.usefixtures("held_by_another_process")
def test_a_transaction_gives_up_after_busy_timeout_s(open_store: StoreFactory) -> None:
    store = open_store(busy_timeout_s=1)

    def transact() -> None:
        with store.transaction() as tx:
            tx.enqueue("q", {"n": 1})

    outcome, elapsed = _elapsed(transact)
    assert isinstance(outcome, EngineUnavailable)
    assert 0.8 <= elapsed < GENEROUS_S


@pytest.mark.usefixtures("held_by_another_process")
def test_reads_go_on_behind_a_stalled_writer(open_store: StoreFactory) -> None:
    queue = open_store(busy_timeout_s=1).queue("q")
    outcome, elapsed = _elapsed(lambda: queue.get_job(1))
    assert outcome is None  # the holder's job is not committed
    assert elapsed < GENEROUS_S


def test_a_write_gives_up_behind_another_threads_transaction(
    open_store: StoreFactory,
) -> None:
    holder, waiter = open_store(), open_store(busy_timeout_s=0.5)
    holding, let_go = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.transaction() as tx:
            tx.enqueue("q", {"held": True})
            holding.set()
            let_go.wait(HOLD_AT_MOST_S)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(HOLD_AT_MOST_S)
        outcome, elapsed = _elapsed(lambda: waiter.queue("q").enqueue({"n": 1}))
    finally:
        let_go.set()
        thread.join()
    assert isinstance(outcome, EngineUnavailable)
    assert "another thread of this process" in str(outcome)
    assert 0.4 <= elapsed < GENEROUS_S


def test_writes_go_on_once_the_holder_lets_go(url: str, open_store: StoreFactory) -> None:
    store = open_store(busy_timeout_s=0.5)
    ctx = mp.get_context("spawn")
    holding, let_go = ctx.Event(), ctx.Event()
    child = ctx.Process(target=hold_transaction, args=(url, holding, let_go))
    child.start()
    try:
        _wait_until_holding(child, holding)
        with pytest.raises(EngineUnavailable):
            store.queue("q").enqueue({"n": 1})
    finally:
        let_go.set()
        child.join(10)
    assert child.exitcode == 0
    job_id = store.queue("q").enqueue({"n": 2})
    assert [h.payload for h in store.queue("q").claim_batch("w", 10)] == [
        {"held": True},
        {"n": 2},
    ]
    assert job_id > 0
