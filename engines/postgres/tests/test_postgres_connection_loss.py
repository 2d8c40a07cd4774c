"""Connection loss: unreachable servers, restarts, killed connections, and calls
that wait no longer than their caller allows while the server is down.

These tests stop and restart a server, so they get a private throwaway one
(``running_pg``) rather than the session's shared server.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import psycopg
import pytest
from pg_helpers import BackgroundClaim, fresh_schema_name, wait_until

import alkstore
from alkstore import EngineUnavailable
from alkstore.worker import Worker
from alkstore_postgres.testing.server import LocalPostgres


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens here once the socket is closed


def test_open_on_an_unreachable_server_raises_engine_unavailable() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    with pytest.raises(EngineUnavailable) as info:
        alkstore.open(url, connect_timeout_s=2)
    assert isinstance(info.value.__cause__, psycopg.OperationalError)


def test_calls_raise_engine_unavailable_while_the_server_is_down_then_recover(
    running_pg: LocalPostgres,
) -> None:
    with alkstore.open(running_pg.dsn, schema=fresh_schema_name(), connect_timeout_s=2) as store:
        queue = store.queue("q")
        queue.enqueue("before")

        running_pg.stop()
        with pytest.raises(EngineUnavailable) as info:
            queue.enqueue("while down")
        assert isinstance(info.value.__cause__, psycopg.Error)

        running_pg.start()
        after = queue.enqueue("after")  # the pool replaced its dead connections
        handles = queue.claim_batch("w", 10)
        assert [h.payload for h in handles] == ["before", "after"]
        assert handles[-1].id == after


def test_pooled_connections_killed_by_the_server_are_replaced(
    running_pg: LocalPostgres,
) -> None:
    with (
        alkstore.open(running_pg.dsn, schema=fresh_schema_name(), pool_min_size=3) as store,
        psycopg.connect(running_pg.dsn, autocommit=True) as admin,
    ):
        queue = store.queue("q")
        queue.enqueue_many(["a", "b"])
        pids = [
            row[0]
            for row in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'alkstore'"
            ).fetchall()
        ]
        assert pids
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))

        def all_gone() -> bool:
            query = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
            return admin.execute(query, (pids,)).fetchone() == (0,)

        assert wait_until(all_gone)  # the server said goodbye on every idle connection
        handle = queue.claim("w")  # no error: dead connections are skipped and replaced
        assert handle is not None
        assert handle.payload == "a"


def test_claim_wait_survives_a_server_restart(running_pg: LocalPostgres) -> None:
    schema = fresh_schema_name()
    # An hour between safety-net re-polls: only the reconnected listener's wakes
    # (its re-poll of everyone after reconnecting, then the NOTIFY) bring the job.
    with (
        alkstore.open(running_pg.dsn, schema=schema, repoll_s=3600) as worker,
        alkstore.open(running_pg.dsn, schema=schema) as producer,
    ):
        listener: Any = worker.driver.listener  # type: ignore[attr-defined]
        waiting = BackgroundClaim(worker.queue("jobs"), "w")
        assert wait_until(lambda: listener.connections == 1)

        running_pg.restart()
        assert wait_until(lambda: listener.connections == 2)  # it reconnected
        job_id = producer.queue("jobs").enqueue({"after": "restart"})

        handle = waiting.result()
        assert handle.id == job_id
        assert handle.ack()


def _seconds(call: Any) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


def test_claim_wait_finds_no_work_at_its_timeout_while_the_server_is_down(
    running_pg: LocalPostgres,
) -> None:
    # connect_timeout_s stays at its 10 s default: the caller's 1 s must bound the wait.
    with alkstore.open(running_pg.dsn, schema=fresh_schema_name()) as store:
        queue = store.queue("q")
        running_pg.stop()
        got: list[Any] = []
        elapsed = _seconds(lambda: got.append(queue.claim_wait("w", timeout=1)))
        assert got == [None]
        assert elapsed < 3  # the bug: 10 s, the connect timeout


def test_a_unit_waits_for_a_connection_only_as_long_as_its_caller_allows(
    running_pg: LocalPostgres,
) -> None:
    with alkstore.open(running_pg.dsn, schema=fresh_schema_name(), pool_min_size=0) as store:
        driver: Any = store.driver  # type: ignore[attr-defined]
        running_pg.stop()
        started = time.monotonic()
        with pytest.raises(EngineUnavailable):
            driver.write(lambda c: None, wait_s=0.5)
        assert time.monotonic() - started < 2  # connect_timeout_s is 10 s


def test_a_call_raises_engine_unavailable_within_connect_timeout_while_the_server_is_down(
    running_pg: LocalPostgres,
) -> None:
    with alkstore.open(
        running_pg.dsn, schema=fresh_schema_name(), connect_timeout_s=2, pool_min_size=3
    ) as store:
        queue = store.queue("q")
        queue.enqueue("before")
        running_pg.stop()
        started = time.monotonic()
        with pytest.raises(EngineUnavailable):
            queue.enqueue("while down")
        assert time.monotonic() - started < 2 + 1.5


def test_a_worker_s_ack_made_while_the_server_is_down_lands_once_it_is_back(
    running_pg: LocalPostgres,
) -> None:
    # Contract §12.9: the outcome is written again, so the job runs once, not twice.
    with alkstore.open(running_pg.dsn, schema=fresh_schema_name(), connect_timeout_s=1) as store:
        job_id = store.queue("q").enqueue({"n": 1})
        started, release = threading.Event(), threading.Event()
        runs: list[int] = []

        def handler(job: Any) -> None:
            runs.append(job.id)
            started.set()
            assert release.wait(60)

        worker = Worker(store, name="w")
        worker.task("q")(handler)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            assert started.wait(60)
            running_pg.stop()
            release.set()  # the handler returns; its ack meets no server
            time.sleep(4)  # past connect_timeout_s: its writes are refused
            running_pg.start()
            assert wait_until(lambda: store.queue("q").get_job(job_id) is None, timeout=60)
        finally:
            worker.stop()
            thread.join(60)
        assert not thread.is_alive()
        assert runs == [job_id]
