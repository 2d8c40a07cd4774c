"""Cross-process wakes over LISTEN/NOTIFY."""

from __future__ import annotations

from typing import Any

import psycopg
from pg_helpers import BackgroundClaim, StoreFactory, wait_until

from alkstore_conformance.driver_suite.support import RecordingSink
from alkstore_postgres.listener import WAKE_EVERYONE, NotifyListener, notify_payload


def _listener(pg_dsn: str, channel: str) -> NotifyListener:
    return NotifyListener(pg_dsn, {"connect_timeout": 5}, channel)


def test_listener_hands_each_notified_topic_to_the_sink(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    sink = RecordingSink()
    listener = _listener(pg_dsn, "test.wake.topics")
    try:
        listener.start(sink)
        assert sink.wait_for(lambda s: s.everyone >= 1)  # listening: it re-polled everyone
        admin.execute("SELECT pg_notify('test.wake.topics', 'queue:emails')")
        assert sink.wait_for(lambda s: s.topics == ["queue:emails"])
    finally:
        listener.close()
    assert not listener.running


def test_empty_payload_wakes_everyone(pg_dsn: str, admin: psycopg.Connection[Any]) -> None:
    sink = RecordingSink()
    listener = _listener(pg_dsn, "test.wake.all")
    try:
        listener.start(sink)
        assert sink.wait_for(lambda s: s.everyone == 1)
        admin.execute("SELECT pg_notify('test.wake.all', %s)", (WAKE_EVERYONE,))
        assert sink.wait_for(lambda s: s.everyone == 2)
    finally:
        listener.close()
    assert sink.topics == []


def test_a_topic_too_long_for_notify_becomes_wake_everyone() -> None:
    assert notify_payload("queue:emails") == "queue:emails"
    assert notify_payload("queue:" + "x" * 7994) == WAKE_EVERYONE  # 8000 bytes
    assert notify_payload("queue:" + "é" * 3997) == WAKE_EVERYONE  # 8000 bytes as UTF-8


def test_starting_twice_keeps_one_listening_connection(open_store: StoreFactory) -> None:
    driver: Any = open_store().driver
    sink = RecordingSink()
    driver.start_watching(sink)
    driver.start_watching(sink)
    assert sink.wait_for(lambda s: s.everyone >= 1)
    assert driver.listener.connections == 1


def test_claim_wait_wakes_on_another_stores_commit(open_store: StoreFactory) -> None:
    # The safety-net re-poll is an hour: only a NOTIFY can wake the worker.
    worker = open_store(repoll_s=3600)
    producer = open_store()
    listener = worker.driver.listener  # type: ignore[attr-defined]
    waiting = BackgroundClaim(worker.queue("q"), "w")
    assert wait_until(lambda: listener.connections == 1)

    job_id = producer.queue("q").enqueue({"n": 1})

    assert waiting.result().id == job_id


def test_retry_in_one_store_wakes_claim_wait_in_another(open_store: StoreFactory) -> None:
    worker = open_store(repoll_s=3600)
    producer = open_store()
    listener = worker.driver.listener  # type: ignore[attr-defined]
    job_id = producer.queue("q").enqueue("flaky")
    first = producer.queue("q").claim("producer")
    assert first is not None
    waiting = BackgroundClaim(worker.queue("q"), "w")
    assert wait_until(lambda: listener.connections == 1)

    assert first.retry("try again", delay=0)

    handle = waiting.result()
    assert (handle.id, handle.attempts) == (job_id, 2)
