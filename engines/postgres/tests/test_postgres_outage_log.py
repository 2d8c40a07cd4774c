"""An outage is logged once per change of state (down, back), not once per connect
attempt: psycopg_pool's own per-attempt warnings about the engine's pools are
dropped, and every other record of its logger passes."""

from __future__ import annotations

import logging
import time

import pytest
from pg_helpers import fresh_schema_name

import alkstore
from alkstore import EngineUnavailable
from alkstore_postgres.connections import QuietPoolLog
from alkstore_postgres.testing.server import LocalPostgres

ENGINE_LOG = "alkstore_postgres.connections"
DOWN_S = 4.0
"""Long enough for several failed calls and several of the pool's own attempts."""


def _record(msg: str, *args: object, name: str = "psycopg.pool") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)


def _engine_lines(caplog: pytest.LogCaptureFixture, level: int, words: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == ENGINE_LOG and r.levelno == level and words in r.getMessage()
    ]


def test_an_outage_is_logged_once_when_it_begins_and_once_when_it_ends(
    running_pg: LocalPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with alkstore.open(running_pg.dsn, schema=fresh_schema_name(), connect_timeout_s=1) as store:
        queue = store.queue("q")
        queue.enqueue("before")
        running_pg.stop("immediate")
        failures = 0
        until = time.monotonic() + DOWN_S
        while time.monotonic() < until:
            with pytest.raises(EngineUnavailable):
                queue.enqueue("while down")
            failures += 1
        running_pg.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                queue.enqueue("after")
                break
            except EngineUnavailable:
                assert time.monotonic() < deadline, "the store never recovered"
    assert failures >= 2
    assert len(_engine_lines(caplog, logging.WARNING, "cannot connect to PostgreSQL")) == 1
    assert len(_engine_lines(caplog, logging.INFO, "accepts connections again")) == 1
    pool_noise = [
        r for r in caplog.records if r.name == "psycopg.pool" and r.levelno >= logging.WARNING
    ]
    assert pool_noise == []


@pytest.mark.parametrize(
    "record",
    [
        _record("error connecting in %r: %s", "alkstore:s1", "connection refused"),
        _record("reconnection attempt in pool %r failed after %s sec", "alkstore-aio:s1", 1.0),
    ],
    ids=["connect-error", "reconnect-gave-up"],
)
def test_the_pools_per_attempt_warnings_about_an_alkstore_pool_are_dropped(
    record: logging.LogRecord,
) -> None:
    assert QuietPoolLog().filter(record) is False


class _OurConnection:
    alkstore_pool = True


@pytest.mark.parametrize(
    ("record", "passes"),
    [
        (_record("discarding closed connection: %s", _OurConnection()), False),
        (_record("discarding closed connection: %s", object()), True),
        (_record("error connecting in %r: %s", "someone-else", "refused"), True),
        (_record("rolling back returned connection: %s", _OurConnection()), True),
    ],
    ids=["our-dead-connection", "another-connection", "another-pool", "not-per-attempt"],
)
def test_only_records_about_our_pools_connects_are_dropped(
    record: logging.LogRecord, passes: bool
) -> None:
    assert QuietPoolLog().filter(record) is passes
