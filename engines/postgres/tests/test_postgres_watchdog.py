"""The watchdog behind ``call_timeout_s`` (``alkstore_postgres.watchdog``), on stand-in
connections: which units it cancels, and that no cancel outlives its unit. The lost
synchronous standby it exists for is in ``test_postgres_failover``."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from alkstore_postgres import watchdog as watchdog_module
from alkstore_postgres.watchdog import POLL_S, Watchdog, timed_out

SAFETY_NET_S = 10.0


class Native:
    """What a store on an event loop hands out as ``native``: ``cancel()`` only."""

    def __init__(self) -> None:
        self.cancels = 0

    def cancel(self) -> None:
        self.cancels += 1


class LoopConnection:
    def __init__(self) -> None:
        self.native = Native()


def _eventually(condition: Any) -> bool:
    deadline = time.monotonic() + SAFETY_NET_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_unit_outlasting_the_bound_is_cancelled_and_finish_says_so() -> None:
    dog = Watchdog(0.1)
    conn = LoopConnection()
    try:
        key = dog.start(conn)
        assert _eventually(lambda: conn.native.cancels == 1)
        assert dog.finish(key) is True
    finally:
        dog.close()


def test_a_unit_still_running_after_its_cancel_is_cancelled_again_until_it_finishes() -> None:
    # A cancel that reached the server between two statements of a unit ended nothing:
    # found a unit of several statements (a heartbeat and its throughput rows) hanging.
    dog = Watchdog(0.1)
    conn = LoopConnection()
    try:
        key = dog.start(conn)
        assert _eventually(lambda: conn.native.cancels >= 3)
        assert dog.finish(key) is True
        after = conn.native.cancels
        time.sleep(POLL_S * 3)
        assert conn.native.cancels == after  # none once it has finished
    finally:
        dog.close()


def test_a_unit_finished_within_the_bound_is_never_cancelled() -> None:
    dog = Watchdog(POLL_S * 2)
    conn = LoopConnection()
    try:
        assert dog.finish(dog.start(conn)) is False
        time.sleep(POLL_S * 5)  # past the bound and several looks: nothing to cancel
        assert conn.native.cancels == 0
    finally:
        dog.close()


def test_only_the_units_past_the_bound_are_cancelled() -> None:
    dog = Watchdog(0.3)
    old, young = LoopConnection(), LoopConnection()
    try:
        old_key = dog.start(old)
        time.sleep(0.25)
        young_key = dog.start(young)
        assert dog.finish(young_key) is False
        assert _eventually(lambda: old.native.cancels == 1)
        assert dog.finish(old_key) is True
        assert young.native.cancels == 0
    finally:
        dog.close()


def test_the_watchdog_thread_starts_with_the_first_unit_and_stops_at_close() -> None:
    dog = Watchdog(60)
    before = dog._thread  # a store that runs nothing keeps no thread
    dog.finish(dog.start(LoopConnection()))
    thread: Any = dog._thread
    assert (before, thread.is_alive()) == (None, True)
    dog.close()
    assert not thread.is_alive()


def test_a_cancelled_commit_says_it_committed_here_and_a_failover_may_lose_it() -> None:
    error = timed_out(30, True, None)
    assert "call_timeout_s=30" in str(error)
    assert "committed on this server, and a failover may lose it" in str(error)


def test_a_cancelled_statement_says_it_wrote_nothing() -> None:
    error = timed_out(30, False, RuntimeError("canceling statement due to user request"))
    assert "cancelled, and wrote nothing" in str(error)
    assert "canceling statement" in str(error)


def test_a_cancel_the_server_cannot_take_is_left_to_the_call_itself() -> None:
    # The connection is gone: its call fails on its own, and the watchdog goes on.
    class Gone:
        def cancel(self) -> None:
            raise psycopg.OperationalError("server closed the connection")

    class Connection:
        native = Gone()

    watchdog_module._cancel(Connection())
