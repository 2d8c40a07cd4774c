"""§19 (contract 1.2, the workers profile): the registry of live worker processes.

A worker registers (``register_worker``: its id, host, pid, queues and start),
heartbeats (``heartbeat_worker``) within ``WORKER_LEASE_S`` to stay listed, and
deregisters when it stops; ``workers()`` lists the registered workers whose lease
has not lapsed, by id. ``Worker.run`` does all three. Time is the test's
``FakeClock`` (a real clock for the running worker).
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import (
    MAX_NAME_LENGTH,
    THROUGHPUT_WINDOW_S,
    WORKER_LEASE_S,
    EngineProvider,
    InvalidName,
    InvalidOptions,
    ProfileUnavailable,
    ReservedName,
    Store,
    WorkerInfo,
)
from alkstore.constants import MAX_FINISHED_COUNT, MAX_HOST_CHARS, MAX_WORKER_QUEUES
from alkstore.testing import FakeClock
from alkstore.worker import Worker
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.workers import RunningWorker, eventually

LIMIT_S = 20.0
"""The bound on a worker test's waits: far above what a passing engine needs."""


def _info(worker_id: Any = "w1", **changes: Any) -> WorkerInfo:
    fields: dict[str, Any] = {
        "id": worker_id,
        "host": "host-a",
        "pid": 4242,
        "queues": ("emails", "reports"),
        "started_at": 1_000,
    }
    fields.update(changes)
    return WorkerInfo(**fields)


def _ids(store: Store) -> list[str]:
    return [worker.id for worker in store.workers()]


# -- WORKERS-REGISTERED-LISTED ------------------------------------------------------------


@pytest.mark.property("WORKERS-REGISTERED-LISTED")
def test_a_registered_worker_is_listed_as_it_registered(
    clocked_store: Store, clock: FakeClock
) -> None:
    now = int(clock.now())
    stored = clocked_store.register_worker(_info(queues=["reports", "emails"]))
    expected = WorkerInfo(
        "w1",
        "host-a",
        4242,
        ("reports", "emails"),
        1_000,
        last_seen=now,
        lease_until=now + WORKER_LEASE_S,
    )
    assert stored == expected
    assert clocked_store.workers() == [expected]


@pytest.mark.property("WORKERS-REGISTERED-LISTED")
def test_registering_an_id_again_replaces_its_row(clocked_store: Store, clock: FakeClock) -> None:
    clocked_store.register_worker(_info())
    clock.advance(5)
    again = _info(host="host-b", pid=7, queues=("other",), started_at=2_000)
    clocked_store.register_worker(again)
    (listed,) = clocked_store.workers()
    assert (listed.host, listed.pid, listed.queues, listed.started_at) == (
        "host-b",
        7,
        ("other",),
        2_000,
    )
    assert listed.last_seen == int(clock.now())


@pytest.mark.property("WORKERS-REGISTERED-LISTED")
def test_workers_are_listed_by_id_byte_wise(clocked_store: Store) -> None:
    for worker_id in ["w-b", "W-Z", "w-a", "w-\u00e9", "w-\U0001f600"]:
        clocked_store.register_worker(_info(worker_id))
    assert _ids(clocked_store) == sorted(
        ["w-b", "W-Z", "w-a", "w-\u00e9", "w-\U0001f600"], key=lambda s: s.encode("utf-8")
    )


@pytest.mark.property("WORKERS-REGISTERED-LISTED")
def test_a_worker_with_no_queue_and_the_longest_fields_is_listed(clocked_store: Store) -> None:
    longest = "w" * MAX_NAME_LENGTH
    host = "h" * MAX_HOST_CHARS
    queues = tuple(f"q{n}" for n in range(MAX_WORKER_QUEUES))
    clocked_store.register_worker(_info(longest, host=host, queues=queues, pid=2**31 - 1))
    clocked_store.register_worker(_info("idle", queues=()))
    listed = {worker.id: worker for worker in clocked_store.workers()}
    assert (listed[longest].host, listed[longest].queues) == (host, queues)
    assert listed[longest].pid == 2**31 - 1
    assert listed["idle"].queues == ()


# -- WORKERS-LEASE-LAPSES --------------------------------------------------------------------


@pytest.mark.property("WORKERS-LEASE-LAPSES")
def test_a_worker_that_stops_heartbeating_drops_out_at_its_lease(
    clocked_store: Store, clock: FakeClock
) -> None:
    start = int(clock.now())
    clocked_store.register_worker(_info())
    clock.set(start + WORKER_LEASE_S - 1)
    assert _ids(clocked_store) == ["w1"]
    clock.set(start + WORKER_LEASE_S)
    assert clocked_store.workers() == []
    clock.set(start + 10 * WORKER_LEASE_S)
    assert clocked_store.workers() == []


@pytest.mark.property("WORKERS-LEASE-LAPSES")
def test_a_heartbeating_worker_stays_listed_for_many_leases(
    clocked_store: Store, clock: FakeClock
) -> None:
    start = int(clock.now())
    clocked_store.register_worker(_info())
    step = WORKER_LEASE_S // 3
    for n in range(1, 31):  # ten leases
        clock.set(start + n * step)
        assert clocked_store.heartbeat_worker("w1")
        assert _ids(clocked_store) == ["w1"]
    (listed,) = clocked_store.workers()
    assert listed.last_seen == start + 30 * step
    assert listed.lease_until == start + 30 * step + WORKER_LEASE_S
    assert listed.started_at == 1_000


@pytest.mark.property("WORKERS-LEASE-LAPSES")
def test_a_heartbeat_after_the_lease_lapsed_renews_nothing_until_it_registers_again(
    clocked_store: Store, clock: FakeClock
) -> None:
    clocked_store.register_worker(_info())
    clock.advance(WORKER_LEASE_S)
    assert not clocked_store.heartbeat_worker("w1")
    assert clocked_store.workers() == []
    assert not clocked_store.heartbeat_worker("never-registered")
    clocked_store.register_worker(_info())
    assert _ids(clocked_store) == ["w1"]


@pytest.mark.property("WORKERS-LEASE-LAPSES")
def test_a_lapsed_worker_drops_out_while_the_others_stay(
    clocked_store: Store, clock: FakeClock
) -> None:
    clocked_store.register_worker(_info("lapsing"))
    clocked_store.register_worker(_info("beating"))
    for _ in range(4):
        clock.advance(WORKER_LEASE_S // 2)
        assert clocked_store.heartbeat_worker("beating")
    assert _ids(clocked_store) == ["beating"]


# -- WORKERS-DEREGISTER -------------------------------------------------------------------


@pytest.mark.property("WORKERS-DEREGISTER")
def test_a_deregistered_worker_is_no_longer_listed(clocked_store: Store) -> None:
    clocked_store.register_worker(_info("leaving"))
    clocked_store.register_worker(_info("staying"))
    assert clocked_store.deregister_worker("leaving")
    assert _ids(clocked_store) == ["staying"]
    assert not clocked_store.deregister_worker("leaving")
    assert not clocked_store.heartbeat_worker("leaving")
    assert _ids(clocked_store) == ["staying"]


@pytest.mark.property("WORKERS-DEREGISTER")
def test_a_running_worker_is_listed_holding_its_job_and_gone_once_it_stops(
    store: Store,
) -> None:
    queue_name = unique_name("registered")
    name = unique_name("worker")
    worker = Worker(store, name=name, shutdown_grace_s=LIMIT_S)
    started: list[Any] = []

    @worker.task(queue_name)
    def hold(job: Any) -> None:
        started.append(job)
        eventually(lambda: len(started) > 1, "the test let the job finish", LIMIT_S)

    job_id = store.queue(queue_name).enqueue({"n": 1})
    with RunningWorker(worker, LIMIT_S) as running:
        eventually(lambda: started, "the worker ran the job", LIMIT_S)
        (listed,) = [w for w in store.workers() if w.id == name]
        assert listed.queues == (queue_name,)
        assert listed.pid > 0
        assert listed.host
        job = started[0]
        assert (job.id, job.worker_id) == (job_id, name)  # the job it holds
        assert job.claimed_at is not None
        started.append(None)  # let the handler return
        running.stop()
    assert name not in _ids(store)


# -- WORKERS-THROUGHPUT ----------------------------------------------------------------------

BUCKETS = THROUGHPUT_WINDOW_S // 60


def _per_minute(store: Store) -> dict[str, tuple[int, ...]]:
    found = store.throughput()
    for counted in found:
        assert len(counted.per_minute) == BUCKETS
        assert counted.total == sum(counted.per_minute)
    return {counted.queue: counted.per_minute for counted in found}


@pytest.mark.property("WORKERS-THROUGHPUT")
def test_the_heartbeats_of_one_minute_add_up_in_its_count(
    clocked_store: Store, clock: FakeClock
) -> None:
    clock.set(clock.now() - clock.now() % 60 + 5)  # early in a minute
    for worker_id in ("w1", "w2"):
        clocked_store.register_worker(_info(worker_id))
    assert clocked_store.heartbeat_worker("w1", {"emails": 3, "reports": 1})
    assert clocked_store.heartbeat_worker("w2", {"emails": 4})
    assert clocked_store.heartbeat_worker("w1", {"emails": 2})
    counts = _per_minute(clocked_store)
    assert set(counts) == {"emails", "reports"}
    assert counts["emails"] == (0,) * (BUCKETS - 1) + (9,)
    assert counts["reports"] == (0,) * (BUCKETS - 1) + (1,)


@pytest.mark.property("WORKERS-THROUGHPUT")
def test_each_count_is_its_minutes_and_the_hour_slides_past_it(
    clocked_store: Store, clock: FakeClock
) -> None:
    start = int(clock.now()) - int(clock.now()) % 60
    clock.set(start)
    clocked_store.register_worker(_info())
    for minute in range(3):
        clock.set(start + 60 * minute + 30)
        clocked_store.heartbeat_worker("w1", {"emails": minute + 1})  # renewed or not
    assert _per_minute(clocked_store)["emails"][-3:] == (1, 2, 3)
    clock.set(start + THROUGHPUT_WINDOW_S)  # the first minute has left the hour
    assert _per_minute(clocked_store)["emails"][-BUCKETS:][:2] == (2, 3)
    assert sum(_per_minute(clocked_store)["emails"]) == 5
    clock.set(start + THROUGHPUT_WINDOW_S + 180)
    assert clocked_store.throughput() == []


@pytest.mark.property("WORKERS-THROUGHPUT")
def test_no_count_and_zero_counts_add_nothing_and_a_lapsed_worker_still_counts(
    clocked_store: Store, clock: FakeClock
) -> None:
    clocked_store.register_worker(_info())
    assert clocked_store.heartbeat_worker("w1")
    assert clocked_store.heartbeat_worker("w1", {})
    assert clocked_store.heartbeat_worker("w1", {"emails": 0})
    assert clocked_store.throughput() == []
    clock.advance(WORKER_LEASE_S)
    assert not clocked_store.heartbeat_worker("w1", {"emails": 2})  # lapsed: not renewed
    assert sum(_per_minute(clocked_store)["emails"]) == 2  # but the jobs it finished count


@pytest.mark.property("WORKERS-THROUGHPUT")
def test_a_running_workers_acked_jobs_are_counted_once_it_stops(store: Store) -> None:
    queue_name = unique_name("counted")
    worker = Worker(store, name=unique_name("worker"))
    done: list[int] = []

    @worker.task(queue_name)
    def handle(job: Any) -> None:
        done.append(job.id)

    store.queue(queue_name).enqueue_many([{"n": n} for n in range(5)])
    with RunningWorker(worker, LIMIT_S) as running:
        eventually(lambda: len(done) == 5, "the worker ran every job", LIMIT_S)
        running.stop()
    (counted,) = [t for t in store.throughput() if t.queue == queue_name]
    assert counted.total == 5


# -- WORKERS-ARGUMENTS ---------------------------------------------------------------------

REFUSED: dict[str, tuple[Any, type[Exception]]] = {
    "not-an-info": ({"id": "w1"}, InvalidOptions),
    "empty-id": (_info(""), InvalidName),
    "long-id": (_info("w" * (MAX_NAME_LENGTH + 1)), InvalidName),
    "nul-id": (_info("w\x00"), InvalidName),
    "int-id": (_info(7), InvalidName),
    "empty-host": (_info(host=""), InvalidOptions),
    "long-host": (_info(host="h" * (MAX_HOST_CHARS + 1)), InvalidOptions),
    "nul-host": (_info(host="h\x00"), InvalidOptions),
    "surrogate-host": (_info(host="h\ud800"), InvalidOptions),
    "bytes-host": (_info(host=b"h"), InvalidOptions),
    "negative-pid": (_info(pid=-1), InvalidOptions),
    "huge-pid": (_info(pid=2**31), InvalidOptions),
    "bool-pid": (_info(pid=True), InvalidOptions),
    "float-pid": (_info(pid=1.5), InvalidOptions),
    "str-queues": (_info(queues="emails"), InvalidOptions),
    "too-many-queues": (
        _info(queues=[f"q{n}" for n in range(MAX_WORKER_QUEUES + 1)]),
        InvalidOptions,
    ),
    "twice-named-queue": (_info(queues=["q", "q"]), InvalidOptions),
    "empty-queue-name": (_info(queues=[""]), InvalidName),
    "reserved-queue-name": (_info(queues=["__alkstore_x"]), ReservedName),
    "negative-start": (_info(started_at=-1), InvalidOptions),
    "float-start": (_info(started_at=1.5), InvalidOptions),
}


@pytest.mark.property("WORKERS-ARGUMENTS")
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_malformed_registration_is_refused_and_writes_nothing(
    clocked_store: Store, case: str
) -> None:
    info, error = REFUSED[case]
    with pytest.raises(error):
        clocked_store.register_worker(info)
    assert clocked_store.workers() == []


REFUSED_COUNTS: dict[str, tuple[Any, type[Exception]]] = {
    "a-list": ([("emails", 1)], InvalidOptions),
    "negative": ({"emails": -1}, InvalidOptions),
    "too-many-jobs": ({"emails": MAX_FINISHED_COUNT + 1}, InvalidOptions),
    "bool-count": ({"emails": True}, InvalidOptions),
    "float-count": ({"emails": 1.0}, InvalidOptions),
    "empty-queue-name": ({"": 1}, InvalidName),
    "reserved-queue-name": ({"__alkstore_x": 1}, ReservedName),
    "too-many-queues": ({f"q{n}": 1 for n in range(MAX_WORKER_QUEUES + 1)}, InvalidOptions),
}


@pytest.mark.property("WORKERS-ARGUMENTS")
@pytest.mark.parametrize("case", sorted(REFUSED_COUNTS))
def test_a_heartbeat_with_malformed_counts_is_refused_and_writes_nothing(
    clocked_store: Store, clock: FakeClock, case: str
) -> None:
    registered = clocked_store.register_worker(_info())
    clock.advance(5)
    finished, error = REFUSED_COUNTS[case]
    with pytest.raises(error):
        clocked_store.heartbeat_worker("w1", finished)
    assert clocked_store.workers() == [registered]  # not renewed
    assert clocked_store.throughput() == []


@pytest.mark.property("WORKERS-ARGUMENTS")
@pytest.mark.parametrize("worker_id", ["", "w" * (MAX_NAME_LENGTH + 1), "w\x00", 7, None])
def test_a_malformed_worker_id_is_refused_by_heartbeat_and_deregister(
    clocked_store: Store, worker_id: Any
) -> None:
    clocked_store.register_worker(_info())
    with pytest.raises(InvalidName):
        clocked_store.heartbeat_worker(worker_id)
    with pytest.raises(InvalidName):
        clocked_store.deregister_worker(worker_id)
    assert _ids(clocked_store) == ["w1"]


# -- WORKERS-PROFILE-DECLARED (every engine) ------------------------------------------------


@pytest.mark.property("WORKERS-PROFILE-DECLARED")
def test_the_registry_works_exactly_when_the_engine_declares_the_profile(
    store: Store, engine: EngineProvider
) -> None:
    if engine.capabilities.workers:
        assert store.register_worker(_info()).id == "w1"
        assert store.heartbeat_worker("w1")
        assert _ids(store) == ["w1"]
        assert store.deregister_worker("w1")
        return
    for call in (
        lambda: store.register_worker(_info()),
        lambda: store.heartbeat_worker("w1"),
        lambda: store.deregister_worker("w1"),
        store.workers,
        store.throughput,
    ):
        with pytest.raises(ProfileUnavailable):
            call()
    # A worker still runs on such an engine: it just is not registered.
    queue_name = unique_name("unregistered")
    worker = Worker(store, name=unique_name("worker"))
    done: list[int] = []

    @worker.task(queue_name)
    def handle(job: Any) -> None:
        done.append(job.id)

    job_id = store.queue(queue_name).enqueue({"n": 1})
    with RunningWorker(worker, LIMIT_S) as running:
        eventually(lambda: done, "the worker ran the job", LIMIT_S)
        running.stop()
    assert done == [job_id]
