"""The worker registry's rules in the core (contract 1.2 §19) and the worker runtime's
registration, on the memory engine with a fake clock."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import alkstore
from alkstore import WORKER_LEASE_S, ProfileUnavailable, Store, WorkerInfo
from alkstore.core.workers import checked_info
from alkstore.testing import FakeClock
from alkstore.worker import Worker
from alkstore.worker.registry import Registration, this_process

NOW = 1_700_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def store(clock: FakeClock) -> Iterator[Store]:
    with alkstore.open(f"memory://workers-{uuid.uuid4().hex}", clock=clock) as opened:
        yield opened


def test_a_registration_is_leased_from_the_stores_now(store: Store, clock: FakeClock) -> None:
    clock.advance(7)
    stored = store.register_worker(WorkerInfo("w", "h", 1, ("q",), NOW, last_seen=1, lease_until=2))
    assert (stored.last_seen, stored.lease_until) == (NOW + 7, NOW + 7 + WORKER_LEASE_S)


def test_a_heartbeat_moves_the_lease_to_a_lease_from_now(store: Store, clock: FakeClock) -> None:
    store.register_worker(WorkerInfo("w", "h", 1, (), NOW))
    clock.advance(WORKER_LEASE_S - 1)
    assert store.heartbeat_worker("w")
    (listed,) = store.workers()
    assert listed.lease_until == NOW + 2 * WORKER_LEASE_S - 1


def test_checked_info_makes_the_queues_a_tuple() -> None:
    assert checked_info(WorkerInfo("w", "h", 1, ["a", "b"], NOW)).queues == ("a", "b")  # type: ignore[arg-type]


def test_this_process_names_its_host_pid_and_queues() -> None:
    info = this_process("w", ["a"], NOW)
    assert info.pid > 0
    assert 1 <= len(info.host) <= 255
    assert (info.id, info.queues, info.started_at) == ("w", ("a",), NOW)


def test_a_registration_that_lapsed_registers_again_on_its_next_beat(
    store: Store, clock: FakeClock
) -> None:
    registration = Registration(store, "w", ["q"])
    registration.start()
    try:
        clock.advance(WORKER_LEASE_S)
        assert store.workers() == []
        registration.beat_once()
        assert [w.id for w in store.workers()] == ["w"]
    finally:
        registration.close()
    assert store.workers() == []


def test_a_running_worker_is_registered_until_it_stops(store: Store) -> None:
    worker = Worker(store, name="registered")
    running = threading.Event()
    release = threading.Event()

    @worker.task("q")
    def handle(job: Any) -> None:
        running.set()
        release.wait(10)

    store.queue("q").enqueue(1)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        assert running.wait(10)
        (listed,) = store.workers()
        assert (listed.id, listed.queues) == ("registered", ("q",))
    finally:
        release.set()
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert store.workers() == []


def test_a_worker_on_an_engine_without_the_registry_runs_unregistered() -> None:
    engine = alkstore.load_engine("alkstore_memory.without:workers")
    with engine.open(f"memory://workers-{uuid.uuid4().hex}") as lacking:
        worker = Worker(lacking, name="plain")
        done = threading.Event()

        @worker.task("q")
        def handle(job: Any) -> None:
            done.set()

        lacking.queue("q").enqueue(1)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            assert done.wait(10)
        finally:
            worker.stop()
            thread.join(10)
        assert not thread.is_alive()
        with pytest.raises(ProfileUnavailable):
            lacking.workers()


def test_throughput_counts_land_in_the_minute_of_the_heartbeat(
    store: Store, clock: FakeClock
) -> None:
    store.register_worker(WorkerInfo("w", "h", 1, ("q",), NOW))
    clock.set(NOW - NOW % 60 + 59)  # the minute's last second
    store.heartbeat_worker("w", {"q": 2})
    clock.advance(1)  # the next minute's first
    store.heartbeat_worker("w", {"q": 5})
    (counted,) = store.throughput()
    assert counted.per_minute[-2:] == (2, 5)
    assert counted.total == 7


def test_counts_a_heartbeat_failed_to_report_go_with_the_next_one(store: Store) -> None:
    registration = Registration(store, "w", ["q"])
    registration.finished.give_back({"q": 3})
    registration.finished.give_back({"q": 1})
    assert registration.finished.take() == {"q": 4}
    assert registration.finished.take() == {}


def test_a_stopping_registration_reports_its_last_counts_before_it_deregisters(
    store: Store,
) -> None:
    registration = Registration(store, "w", ["q"])
    registration.start()
    registration.finished.give_back({"q": 2})
    registration.close()
    assert store.workers() == []
    (counted,) = store.throughput()
    assert (counted.queue, counted.total) == ("q", 2)
