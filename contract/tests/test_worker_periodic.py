"""``Worker.periodic``: schedules declared with the worker (contract 1.2 §5.11).

The store is the core over the recording fake driver on a fake clock; the worker's
threads are real. Waits are safety nets (``SAFETY_NET_S``); no test asserts a
duration.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from conftest import START
from fakes import FakeCronDriver, FakeDriver
from running import SAFETY_NET_S, eventually

from alkstore.constants import DECLARATION_LEASE_S
from alkstore.core import CoreStore
from alkstore.engine import Capabilities
from alkstore.errors import (
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    PayloadError,
    ProfileUnavailable,
    ReservedName,
)
from alkstore.options import ScheduleOpts
from alkstore.testing import FakeClock
from alkstore.values import Job
from alkstore.worker import Worker
from alkstore.worker.periodic import RENEW_EVERY_S, Declaration, Periodic


class FakeWorkerDriver(FakeDriver):
    """The fake with the scheduler, cron and periodic profiles."""

    capabilities = Capabilities(scheduler=True, cron=True, periodic=True)


@pytest.fixture
def driver() -> FakeDriver:
    return FakeWorkerDriver()


class StillClock(FakeClock):
    """A fake clock that only the test moves: the scheduler's sleeps pass a little real
    time instead of jumping it forward (which would outrun every lease)."""

    def sleep(self, seconds: float) -> None:
        time.sleep(min(max(seconds, 0.0), 0.005))


@pytest.fixture
def clock() -> FakeClock:
    return StillClock(START)


# -- declaring --------------------------------------------------------------------------


def test_periodic_over_a_function_declares_the_schedule_and_registers_its_queue_handler(
    store: CoreStore,
) -> None:
    worker = Worker(store)

    def digest(job: Job) -> None:
        return None

    opts = ScheduleOpts(timezone="Europe/Berlin")
    assert worker.periodic("digest", "0 9 * * *", payload={"n": 1}, opts=opts)(digest) is digest
    assert [(t.queue, t.handler, t.concurrency) for t in worker.tasks] == [("digest", digest, 1)]
    assert worker.declarations == [Declaration("digest", "0 9 * * *", "digest", {"n": 1}, opts)]


def test_periodic_without_a_function_only_declares(store: CoreStore) -> None:
    worker = Worker(store)
    worker.periodic("cleanup", "@every 1h", queue="maintenance")
    assert worker.tasks == []
    assert [(d.name, d.queue, d.payload) for d in worker.declarations] == [
        ("cleanup", "maintenance", None)
    ]


def test_periodic_gives_the_handler_its_concurrency(store: CoreStore) -> None:
    worker = Worker(store)
    worker.periodic("report", "@every 1h", queue="reports", concurrency=3)(lambda job: None)
    assert [(t.queue, t.concurrency) for t in worker.tasks] == [("reports", 3)]


REFUSED: dict[str, tuple[tuple[Any, ...], dict[str, Any], type[Exception]]] = {
    "empty-name": (("", "@every 1h"), {}, InvalidName),
    "reserved-name": (("__alkstore_x", "@every 1h"), {}, ReservedName),
    "reserved-queue": (("x", "@every 1h"), {"queue": "__alkstore_q"}, ReservedName),
    "bad-spec": (("x", "@every 0s"), {}, InvalidSpec),
    "opts-not-schedule-opts": (("x", "@every 1h"), {"opts": {"timezone": "UTC"}}, InvalidOptions),
    "payload": (("x", "@every 1h"), {"payload": {1, 2}}, PayloadError),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_periodic_refuses_a_malformed_declaration_when_called(
    store: CoreStore, driver: FakeDriver, case: str
) -> None:
    args, kwargs, error = REFUSED[case]
    worker = Worker(store)
    with pytest.raises(error):
        worker.periodic(*args, **kwargs)
    assert worker.declarations == []
    assert driver.statements() == []


def test_periodic_refuses_a_name_declared_twice(store: CoreStore) -> None:
    worker = Worker(store)
    worker.periodic("x", "@every 1h")
    with pytest.raises(InvalidOptions, match="already declared"):
        worker.periodic("x", "@every 2h")
    assert [d.spec for d in worker.declarations] == ["@every 1h"]


# -- running ----------------------------------------------------------------------------


def test_run_declares_every_schedule_before_its_first_claim(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w")
    worker.periodic("a", "@every 1h")(lambda job: None)
    worker.periodic("b", "@every 1d", queue="a")
    run = running(worker)
    eventually(lambda: driver.calls_named("claim") != [], "a claim")
    run.stop()
    names = driver.statement_names()
    upserts = [i for i, name in enumerate(names) if name == "schedule_upsert"]
    assert len(upserts) == 2
    assert max(upserts) < names.index("claim")
    for name in ("a", "b"):
        schedule = store.get_schedule(name)
        assert schedule is not None
        assert schedule.declared_until is not None


def test_run_leads_the_scheduler_so_a_declared_schedule_fires_into_its_handler(
    store: CoreStore, clock: FakeClock, running: Any
) -> None:
    worker = Worker(store, name="w")
    seen: list[Any] = []
    fired = threading.Event()

    @worker.periodic("tick", "@every 60s", payload={"from": "tick"})
    def handle(job: Job) -> None:
        seen.append(job.payload)
        fired.set()

    run = running(worker)
    eventually(lambda: store.get_schedule("tick") is not None, "declared")
    clock.advance(60)
    assert fired.wait(SAFETY_NET_S)
    run.stop()
    assert seen == [{"from": "tick"}]


def test_a_worker_serving_some_queues_declares_every_schedule(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w")
    worker.periodic("served", "@every 1h")(lambda job: None)
    worker.periodic("elsewhere", "@every 1h")(lambda job: None)
    worker.configure(queues=["served"])
    run = running(worker)
    eventually(lambda: driver.calls_named("claim") != [], "a claim")
    run.stop()
    for name in ("served", "elsewhere"):
        schedule = store.get_schedule(name)
        assert schedule is not None
        assert schedule.declared_until is not None
    assert {call.args[0] for call in driver.calls_named("claim")} == {"served"}


def test_a_worker_with_declarations_and_no_task_runs_as_the_fleets_scheduler(
    store: CoreStore, clock: FakeClock, running: Any
) -> None:
    # A beat-like process: it declares and fires; other processes run the handlers.
    worker = Worker(store, name="beat")
    worker.periodic("digest", "@every 60s", queue="digests", payload={"n": 1})
    run = running(worker)
    eventually(lambda: store.get_schedule("digest") is not None, "declared")
    clock.advance(60)
    fired: list[Any] = []
    eventually(lambda: bool(fired.append(store.queue("digests").claim("t")) or fired[-1]), "fired")
    run.stop()
    assert fired[-1].payload == {"n": 1}


def test_a_worker_with_neither_task_nor_declaration_nor_maintenance_is_refused(
    store: CoreStore,
) -> None:
    with pytest.raises(InvalidOptions, match="no task is registered"):
        Worker(store, name="w").run()


def test_a_worker_that_stops_leaves_its_declarations_leased(
    store: CoreStore, clock: FakeClock, running: Any
) -> None:
    worker = Worker(store, name="w", maintenance=True)  # maintenance leads; nothing fires
    worker.periodic("kept", "@every 1d")(lambda job: None)
    run = running(worker)
    eventually(lambda: store.get_schedule("kept") is not None, "declared")
    run.stop()
    kept = store.get_schedule("kept")
    assert kept is not None
    assert kept.declared_until is not None
    assert kept.declared_until >= START + DECLARATION_LEASE_S


def test_run_on_an_engine_without_the_periodic_profile_fails_before_writing() -> None:
    cron = FakeCronDriver()
    store = CoreStore(cron, capabilities=cron.capabilities, engine_name="fake")
    worker = Worker(store, name="w")
    worker.periodic("x", "@every 1h")(lambda job: None)
    before = {thread.name for thread in threading.enumerate()}
    with pytest.raises(ProfileUnavailable, match="periodic"):
        worker.run()
    leaked = {thread.name for thread in threading.enumerate()} - before
    statements = cron.statements()
    store.close()
    assert leaked == set()
    assert statements == []


def test_declarations_must_come_before_run(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    run = running(worker)
    eventually(lambda: driver.calls_named("claim") != [], "a claim")
    with pytest.raises(InvalidOptions, match="before run"):
        worker.periodic("late", "@every 1h")
    run.stop()
    assert store.get_schedule("late") is None


# -- renewing ---------------------------------------------------------------------------


def test_the_renewal_cadence_is_a_third_of_the_lease() -> None:
    assert RENEW_EVERY_S == DECLARATION_LEASE_S / 3


def _declarations(*names: str) -> list[Declaration]:
    return [Declaration(name, "@every 1d", "q", None, ScheduleOpts()) for name in names]


def test_a_renewal_extends_each_lease_and_keeps_each_boundary(
    store: CoreStore, clock: FakeClock
) -> None:
    periodic = Periodic(store, "w", _declarations("a", "b"), lead=False)
    periodic.start()
    periodic.close()
    before = {s.name: s for s in store.schedules()}
    clock.advance(RENEW_EVERY_S)
    periodic.renew_once()
    for name in ("a", "b"):
        after = store.get_schedule(name)
        assert after is not None
        assert after.next_fire_at == before[name].next_fire_at
        assert after.declared_until == int(clock.now()) + DECLARATION_LEASE_S


def test_a_renewal_declares_again_what_is_gone_and_leaves_what_schedule_took_over(
    store: CoreStore, clock: FakeClock
) -> None:
    periodic = Periodic(store, "w", _declarations("gone", "taken"), lead=False)
    periodic.start()
    periodic.close()
    assert store.unschedule("gone")
    store.schedule("taken", "@every 1d", "q", None)
    clock.advance(RENEW_EVERY_S)
    periodic.renew_once()
    gone = store.get_schedule("gone")
    taken = store.get_schedule("taken")
    assert gone is not None
    assert gone.declared_until == int(clock.now()) + DECLARATION_LEASE_S
    assert taken is not None
    assert taken.declared_until is None


def test_the_renewer_thread_renews_on_its_cadence(store: CoreStore, clock: FakeClock) -> None:
    periodic = Periodic(store, "w", _declarations("a"), lead=False, renew_every_s=0.01)
    periodic.start()
    clock.advance(RENEW_EVERY_S)
    renewed_until = int(clock.now()) + DECLARATION_LEASE_S

    def renewed() -> bool:
        schedule = store.get_schedule("a")
        return schedule is not None and schedule.declared_until == renewed_until

    try:
        eventually(renewed, "a renewal on the new clock")
    finally:
        periodic.close()
