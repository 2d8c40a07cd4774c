"""Recovery after a long outage: calls work again about ``reconnect_max_s`` after the
server is back, however long it was gone.

psycopg_pool's own reconnect backoff doubles from 1 s (1, 2, 4, 8, 16, 32 s), so
after an outage of 17 s its next attempt is some 14 s past the server's return:
every outage here lasts that long, which is what makes this file slow. The
tests stop and start a server, so they get a private throwaway one.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pg_helpers import BackgroundClaim, fresh_schema_name, wait_until

import alkstore
from alkstore import EngineUnavailable, Queue
from alkstore_postgres.testing.server import LocalPostgres

OUTAGE_S = 17
"""Past psycopg_pool's attempt at about 15 s (jittered by up to 10%), before its next."""


def _first_success_after(call: Any, within: float) -> float:
    """Seconds until ``call`` first returns without ``EngineUnavailable`` (each failed
    call counts); fails after ``within`` seconds."""
    started = time.monotonic()
    while True:
        try:
            call()
            return time.monotonic() - started
        except EngineUnavailable:
            assert time.monotonic() - started < within, "the store never recovered"


def _fail_calls_for(queue: Queue, seconds: float) -> None:
    """Keep calling while the server is down, as a busy application does: the pool
    keeps trying to reconnect all along."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        with pytest.raises(EngineUnavailable):
            queue.enqueue("while down")


def test_calls_work_again_soon_after_a_long_outage(running_pg: LocalPostgres) -> None:
    with alkstore.open(running_pg.dsn, schema=fresh_schema_name(), connect_timeout_s=2) as store:
        queue = store.queue("q")
        queue.enqueue("before")
        running_pg.stop()
        _fail_calls_for(queue, OUTAGE_S)
        running_pg.start()
        recovered = _first_success_after(lambda: queue.enqueue("after"), within=30)
        assert recovered < 3  # reconnect_max_s is 1 s
        assert [h.payload for h in queue.claim_batch("w", 10)] == ["before", "after"]


def test_a_waiting_worker_claims_soon_after_a_long_outage(running_pg: LocalPostgres) -> None:
    schema = fresh_schema_name()
    # An hour between safety-net re-polls: after the outage only the listener brings
    # the worker back, and the worker's claim must then find a pooled connection.
    with alkstore.open(running_pg.dsn, schema=schema, repoll_s=3600, connect_timeout_s=2) as worker:
        listener: Any = worker.driver.listener  # type: ignore[attr-defined]
        queue = worker.queue("jobs")
        waiting = BackgroundClaim(queue, "w")
        assert wait_until(lambda: listener.connections == 1)
        running_pg.stop()
        _fail_calls_for(queue, OUTAGE_S)  # the worker's own store keeps trying
        running_pg.start()
        assert wait_until(lambda: listener.connections == 2, timeout=10)
        with alkstore.open(running_pg.dsn, schema=schema) as producer:
            job_id = producer.queue("jobs").enqueue("after the outage")
        handle = waiting.result(within=5)  # the bug: stuck until the next re-poll
        assert handle.id == job_id
