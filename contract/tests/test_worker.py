"""``alkstore.worker``: registration, outcomes, heartbeats, stopping, maintenance,
and the one outcome path (a sync and an async handler settle alike).

The store is the core over the recording fake driver on a fake clock, so store
time moves only when a test moves it; handlers run on the worker's real
threads. Waits are safety nets (``SAFETY_NET_S``); no test asserts a duration.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from fakes import FakeDriver
from running import SAFETY_NET_S, eventually

from alkstore import EnqueueOpts, QueueOpts
from alkstore.core import CoreStore
from alkstore.engine import Capabilities
from alkstore.errors import (
    EngineUnavailable,
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    ProfileUnavailable,
    ReservedName,
)
from alkstore.testing import FakeClock
from alkstore.values import Job, JobState
from alkstore.worker import MAINTENANCE_QUEUE, MAINTENANCE_SCHEDULE, Fail, JobContext, Retry, Worker
from alkstore.worker.outcomes import Ack, Failed, Outcome, RetryLater, outcome_of
from alkstore.worker.runs import JobRun
from alkstore.worker.settle import Settler
from alkstore.worker.signals import relay_signals


class FakeEverythingDriver(FakeDriver):
    """The fake with the scheduler and operations profiles: what maintenance uses."""

    capabilities = Capabilities(scheduler=True, ops=True)


@pytest.fixture
def driver() -> FakeDriver:
    return FakeEverythingDriver()


def job_state(store: CoreStore, queue: str, job_id: int) -> JobState | None:
    job = store.queue(queue).get_job(job_id)
    return None if job is None else job.state


# -- registering ----------------------------------------------------------------------


def test_task_returns_the_handler_unchanged(store: CoreStore) -> None:
    worker = Worker(store)

    def handler(job: Job) -> None:
        return None

    assert worker.task("emails")(handler) is handler
    assert [task.queue for task in worker.tasks] == ["emails"]


@pytest.mark.parametrize("concurrency", [0, 1001, -1, 1.5, True, "2"])
def test_task_refuses_a_concurrency_outside_1_to_1000(store: CoreStore, concurrency: Any) -> None:
    with pytest.raises(InvalidOptions, match="concurrency"):
        Worker(store).task("emails", concurrency=concurrency)(lambda job: None)


def test_task_refuses_a_second_handler_for_one_queue(store: CoreStore) -> None:
    worker = Worker(store)
    worker.task("emails")(lambda job: None)
    with pytest.raises(InvalidOptions, match="already has a handler"):
        worker.task("emails")(lambda job: None)


def test_task_refuses_a_reserved_or_malformed_queue_name(store: CoreStore) -> None:
    with pytest.raises(ReservedName):
        Worker(store).task("__alkstore_x")
    with pytest.raises(InvalidName):
        Worker(store).task("")


def test_task_refuses_a_handler_that_takes_no_job(store: CoreStore) -> None:
    with pytest.raises(InvalidOptions, match="takes the job"):
        Worker(store).task("emails")(lambda: None)


def test_worker_refuses_malformed_options(store: CoreStore) -> None:
    with pytest.raises(InvalidOptions, match="shutdown_grace_s"):
        Worker(store, shutdown_grace_s=-1)
    with pytest.raises(InvalidSpec):
        Worker(store, maintenance_every="*/0 * * * *")
    with pytest.raises(InvalidName):
        Worker(store, name="")


def test_run_refuses_a_worker_without_a_store_or_a_task(store: CoreStore) -> None:
    without_store = Worker()
    without_store.task("emails")(lambda job: None)
    with pytest.raises(InvalidOptions, match="no store"):
        without_store.run()
    with pytest.raises(InvalidOptions, match="no task"):
        Worker(store).run()


def test_configure_keeps_only_the_named_queues_and_sets_each_concurrency(
    store: CoreStore,
) -> None:
    worker = Worker(store)
    worker.task("a")(lambda job: None)
    worker.task("b", concurrency=2)(lambda job: None)
    worker.configure(queues=["b"], concurrency=7)
    assert [(t.queue, t.concurrency) for t in worker.tasks] == [("b", 7)]
    with pytest.raises(InvalidOptions, match="no task is registered for queue"):
        worker.configure(queues=["missing"])


# -- outcomes ---------------------------------------------------------------------------


def test_a_returning_handler_acks_its_job(store: CoreStore, running: Any) -> None:
    worker = Worker(store, name="w")
    seen: list[Any] = []
    worker.task("q")(lambda job: seen.append(job.payload))
    job_id = store.queue("q").enqueue({"n": 1})
    run = running(worker)
    eventually(lambda: job_state(store, "q", job_id) is None, "the job acked")
    run.stop()
    assert seen == [{"n": 1}]


def test_retry_reschedules_after_its_delay_with_its_error(
    store: CoreStore, clock: FakeClock, running: Any
) -> None:
    worker = Worker(store, name="w")

    @worker.task("q")
    def handler(job: Job) -> None:
        raise Retry(delay=90, error="upstream busy")

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    eventually(lambda: bool(store.queue("q").get_job(job_id).errors), "rescheduled")  # type: ignore[union-attr]
    run.stop()
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert job.state is JobState.PENDING
    assert job.run_at == int(clock.now()) + 90
    assert [error.error for error in job.errors] == ["upstream busy"]


def test_fail_dead_letters_at_once_with_its_error(store: CoreStore, running: Any) -> None:
    worker = Worker(store, name="w")

    @worker.task("q")
    def handler(job: Job) -> None:
        raise Fail("bad address")

    job_id = store.queue("q", QueueOpts(max_attempts=5)).enqueue({})
    run = running(worker)
    eventually(lambda: job_state(store, "q", job_id) is JobState.DEAD, "dead")
    run.stop()
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert (job.attempts, job.last_error) == (1, "bad address")


def test_any_other_exception_retries_with_its_traceback(store: CoreStore, running: Any) -> None:
    worker = Worker(store, name="w")

    @worker.task("q")
    def handler(job: Job) -> None:
        raise ValueError("the payload is odd")

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    eventually(lambda: bool(store.queue("q").get_job(job_id).errors), "retried")  # type: ignore[union-attr]
    run.stop()
    (error,) = store.queue("q").get_job(job_id).errors  # type: ignore[union-attr]
    assert error.error.startswith("Traceback (most recent call last)")
    assert "ValueError: the payload is odd" in error.error


def test_an_async_handler_runs_on_the_loop_and_its_outcome_off_it(
    store: CoreStore, running: Any
) -> None:
    worker = Worker(store, name="w")
    threads: dict[str, str] = {}

    @worker.task("q")
    async def handler(job: Job) -> None:
        await asyncio.sleep(0)
        threads["handler"] = threading.current_thread().name

    original_ack = store.driver.ack  # type: ignore[attr-defined]

    def recording_ack(*args: Any) -> Any:
        threads["ack"] = threading.current_thread().name
        return original_ack(*args)

    store.driver.ack = recording_ack  # type: ignore[attr-defined]
    job_id = store.queue("q").enqueue({})
    run = running(worker)
    eventually(lambda: job_state(store, "q", job_id) is None, "acked")
    run.stop()
    assert threads["handler"] == "alkstore-loop"
    assert threads["ack"].startswith("alkstore-aio")


def test_an_async_handler_enqueues_follow_up_work_through_its_async_store(
    store: CoreStore, running: Any
) -> None:
    worker = Worker(store, name="w")

    @worker.task("q")
    async def handler(job: Job, context: JobContext) -> None:
        assert context.aio is not None
        await context.aio.queue("next").enqueue({"after": job.id})

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    eventually(lambda: job_state(store, "q", job_id) is None, "acked")
    run.stop()
    follow_up = store.queue("next").claim("w2")
    assert follow_up is not None
    assert follow_up.payload == {"after": job_id}
    assert not store.closed, "the worker closed the store it was given"


def test_a_handler_taking_two_arguments_gets_the_job_context(
    store: CoreStore, running: Any
) -> None:
    worker = Worker(store, name="w")
    contexts: list[JobContext] = []
    worker.task("q")(lambda job, context: contexts.append(context))
    job_id = store.queue("q").enqueue({"n": 1})
    run = running(worker)
    eventually(lambda: bool(contexts), "handled")
    run.stop()
    (context,) = contexts
    assert context.job.id == job_id
    assert context.job.payload == {"n": 1}
    assert context.lost is False


def test_each_outcome_is_logged_with_queue_id_attempt_and_duration(
    store: CoreStore, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    job_id = store.queue("q").enqueue({})
    run = running(worker)
    eventually(lambda: job_state(store, "q", job_id) is None, "acked")
    run.stop()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job ack")]
    assert len(lines) == 1
    assert f"queue=q id={job_id} attempt=1 duration=" in lines[0]


# -- claiming -----------------------------------------------------------------------------


def test_a_task_never_runs_more_than_its_concurrency_nor_claims_more(
    store: CoreStore, running: Any
) -> None:
    worker = Worker(store, name="w")
    release = threading.Event()
    lock = threading.Lock()
    now_running = [0]
    most = [0]

    @worker.task("q", concurrency=3)
    def handler(job: Job) -> None:
        with lock:
            now_running[0] += 1
            most[0] = max(most[0], now_running[0])
        release.wait(SAFETY_NET_S)
        with lock:
            now_running[0] -= 1

    queue = store.queue("q")
    ids = queue.enqueue_many([{"n": n} for n in range(10)])
    run = running(worker)
    eventually(lambda: now_running[0] == 3, "three running")
    held = [job_id for job_id in ids if job_state(store, "q", job_id) is JobState.PROCESSING]
    release.set()
    eventually(lambda: all(job_state(store, "q", i) is None for i in ids), "all acked")
    run.stop()
    assert most[0] == 3
    assert len(held) == 3


def test_a_finished_job_frees_a_slot_on_another_queue_being_waited_on(
    store: CoreStore, running: Any
) -> None:
    # The worker waits on "b" only while "a" is full; once "a" frees a slot, a
    # job on "a" is claimed without waiting for a wake from "a".
    worker = Worker(store, name="w")
    release = threading.Event()
    done: list[str] = []

    @worker.task("a")
    def on_a(job: Job) -> None:
        if job.payload == "block":
            release.wait(SAFETY_NET_S)
        done.append(f"a:{job.payload}")

    worker.task("b")(lambda job: done.append("b"))
    store.queue("a").enqueue("block")
    run = running(worker)
    eventually(lambda: job_state(store, "a", 1) is JobState.PROCESSING, "a full")
    store.queue("a").enqueue("next")
    release.set()
    eventually(lambda: done == ["a:block", "a:next"], "a's second job")
    run.stop()


# -- heartbeats and lost claims ---------------------------------------------------------


def test_a_running_handler_heartbeats_its_claim(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w")
    release = threading.Event()
    worker.task("q")(lambda job: release.wait(SAFETY_NET_S))
    store.queue("q", QueueOpts(visibility_timeout_s=1)).enqueue({})
    run = running(worker)
    eventually(lambda: len(driver.calls_named("heartbeat")) >= 2, "two heartbeats")
    release.set()
    run.stop()


def test_a_heartbeat_extends_by_the_visibility_timeout_plus_the_second_rounding_loses(
    store: CoreStore, clock: FakeClock, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w")
    release = threading.Event()
    worker.task("q")(lambda job: release.wait(SAFETY_NET_S))
    store.queue("q", QueueOpts(visibility_timeout_s=1)).enqueue({})
    run = running(worker)
    # A 1 s claim may have almost no time left: the first beat comes at once.
    eventually(lambda: bool(driver.calls_named("heartbeat")), "a heartbeat")
    release.set()
    run.stop()
    first = driver.calls_named("heartbeat")[0]
    job_id, attempt, now, deadline = first.args
    assert (job_id, attempt, deadline - now) == (1, 1, 2)


def test_a_refused_heartbeat_discards_the_run_s_outcome(
    store: CoreStore, clock: FakeClock, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w")
    release = threading.Event()
    contexts: list[JobContext] = []

    @worker.task("q")
    def handler(job: Job, context: JobContext) -> None:
        contexts.append(context)
        release.wait(SAFETY_NET_S)

    queue = store.queue("q", QueueOpts(visibility_timeout_s=1))
    job_id = queue.enqueue({})
    run = running(worker)
    eventually(lambda: bool(contexts), "handler started")
    # The claim lapses and another worker takes the job: the next beat is refused.
    clock.advance(5)
    other = queue.claim("other")
    assert other is not None
    eventually(lambda: contexts[0].lost, "the run marked lost")
    assert contexts[0].stop.is_set()
    release.set()
    run.stop()
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.worker_id, job.attempts) == (JobState.PROCESSING, "other", 2)
    assert driver.calls_named("ack") == []


# -- stopping ---------------------------------------------------------------------------


def test_stop_waits_for_running_handlers_and_acks_them(store: CoreStore, running: Any) -> None:
    worker = Worker(store, name="w")
    started = threading.Event()
    release = threading.Event()

    @worker.task("q")
    def handler(job: Job) -> None:
        started.set()
        release.wait(SAFETY_NET_S)

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    assert started.wait(SAFETY_NET_S)
    worker.stop()
    assert run.thread.is_alive(), "run() returned before its handler finished"
    release.set()
    run.join()
    assert job_state(store, "q", job_id) is None


def test_stop_claims_nothing_new(store: CoreStore, running: Any) -> None:
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    run = running(worker)
    run.stop()
    job_id = store.queue("q").enqueue({})
    assert job_state(store, "q", job_id) is JobState.PENDING
    assert store.queue("q").get_job(job_id).attempts == 0  # type: ignore[union-attr]


def test_a_handler_outliving_the_grace_is_never_acked(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w", shutdown_grace_s=0.05)
    started = threading.Event()
    release = threading.Event()
    contexts: list[JobContext] = []

    @worker.task("q")
    def handler(job: Job, context: JobContext) -> None:
        contexts.append(context)
        started.set()
        release.wait(SAFETY_NET_S)

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    assert started.wait(SAFETY_NET_S)
    run.stop()
    assert contexts[0].stop.is_set(), "the abandoned handler was not told to stop"
    release.set()
    time.sleep(0.05)  # let the abandoned handler return: its outcome must go nowhere
    assert job_state(store, "q", job_id) is JobState.PROCESSING
    assert driver.calls_named("ack") == []


def test_a_second_stop_returns_at_once(store: CoreStore, running: Any) -> None:
    worker = Worker(store, name="w", shutdown_grace_s=3600)
    started = threading.Event()
    release = threading.Event()

    @worker.task("q")
    def handler(job: Job) -> None:
        started.set()
        release.wait(SAFETY_NET_S)

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    assert started.wait(SAFETY_NET_S)
    worker.stop()
    worker.stop()
    run.join()
    release.set()
    assert job_state(store, "q", job_id) is JobState.PROCESSING


def test_sigterm_stops_a_worker_running_on_the_main_thread(store: CoreStore) -> None:
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        worker.run()  # returns (no exception) once the signal arrives
    finally:
        timer.cancel()
    assert worker.stopping
    assert signal.getsignal(signal.SIGTERM) is before


SIGNAL_UNDER_A_LOCK = """
import signal
import alkstore
from alkstore.worker import Worker
from alkstore.worker.dispatch import Dispatcher

worker = Worker(alkstore.open("memory://signal-under-a-lock"), name="w")
worker.task("q")(lambda job: None)
dispatch = Dispatcher.run

def dispatch_signalled_under_its_lock(self):
    with self._slots.lock:  # the main thread holds the lock a stop takes as SIGTERM arrives
        signal.raise_signal(signal.SIGTERM)
    return dispatch(self)

Dispatcher.run = dispatch_signalled_under_its_lock
worker.run()
print("run returned")
"""


def test_a_signal_arriving_while_the_main_thread_holds_a_lock_still_stops_the_worker() -> None:
    # A handler that stopped the worker itself would take that lock again on the
    # same thread and hang until killed. In a child process: a hang fails here.
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_UNDER_A_LOCK],
        capture_output=True,
        text=True,
        timeout=SAFETY_NET_S * 3,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "run returned"), done.stderr
    assert "SIGTERM: stopping" in done.stderr


def test_a_stop_that_raises_on_a_signal_does_not_lose_the_next_signal() -> None:
    # A handler's stop callback may raise; the second SIGTERM ("stop at once") must
    # still be relayed.
    relayed: list[int] = []

    def on_signal(signum: int) -> None:
        relayed.append(signum)
        if len(relayed) == 1:
            raise RuntimeError("a stop callback raised")

    readable, writable = os.pipe()
    relay = threading.Thread(target=relay_signals, args=(readable, on_signal))
    relay.start()
    os.write(writable, bytes([signal.SIGTERM]))
    os.write(writable, bytes([signal.SIGTERM]))
    os.close(writable)
    relay.join(SAFETY_NET_S)
    os.close(readable)
    assert not relay.is_alive()
    assert relayed == [signal.SIGTERM, signal.SIGTERM]


def test_a_worker_outlives_an_outage_while_claiming(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    worker = Worker(store, name="w")
    done: list[int] = []
    worker.task("q")(lambda job: done.append(job.id))
    driver.down = True
    run = running(worker)
    eventually(lambda: driver.refused > 0, "a refused claim")
    driver.down = False
    job_id = store.queue("q").enqueue({})
    eventually(lambda: done == [job_id], "the job handled after the outage")
    run.stop()


# -- maintenance ------------------------------------------------------------------------


def test_maintenance_registers_its_schedule_and_sweeps_every_queue(
    store: CoreStore, clock: FakeClock, running: Any
) -> None:
    worker = Worker(store, name="w", maintenance=True, maintenance_every="@every 5m")
    worker.task("q")(lambda job: None)
    expiring = store.queue("other").enqueue({}, EnqueueOpts(expires=1))
    clock.advance(10)
    run = running(worker)
    eventually(lambda: store.get_schedule(MAINTENANCE_SCHEDULE) is not None, "scheduled")
    schedule = store.get_schedule(MAINTENANCE_SCHEDULE)
    assert schedule is not None
    assert (schedule.spec, schedule.queue) == ("@every 5m", MAINTENANCE_QUEUE)
    # What the schedule fires: one maintenance job, claimed by the built-in task.
    store.queue(MAINTENANCE_QUEUE).enqueue({"sweep": "all"})
    eventually(lambda: job_state(store, "other", expiring) is JobState.DEAD, "swept")
    run.stop()
    job = store.queue("other").get_job(expiring)
    assert job is not None
    assert job.last_error == "expired"


def test_maintenance_without_a_scheduler_fails_run_and_leaves_no_thread() -> None:
    store = CoreStore(FakeDriver(), capabilities=FakeDriver.capabilities)
    worker = Worker(store, name="w", maintenance=True)
    worker.task("q")(lambda job: None)
    before = {thread.name for thread in threading.enumerate()}
    with pytest.raises(ProfileUnavailable):
        worker.run()
    leaked = {thread.name for thread in threading.enumerate()} - before
    store.close()
    assert leaked == set()


def test_configure_sets_the_name_and_the_grace(store: CoreStore) -> None:
    worker = Worker(store)
    worker.configure(name="web-7", shutdown_grace_s=5)
    assert (worker.name, worker.shutdown_grace_s) == ("web-7", 5.0)
    with pytest.raises(InvalidOptions, match="shutdown_grace_s"):
        worker.configure(shutdown_grace_s=86_401)


def test_a_graceful_stop_sets_each_running_handler_s_stop_token(
    store: CoreStore, running: Any
) -> None:
    worker = Worker(store, name="w")
    started = threading.Event()

    @worker.task("q")
    def handler(job: Job, context: JobContext) -> None:
        started.set()
        if context.stop.wait(SAFETY_NET_S):
            raise Retry(delay=60, error="stopping: try again later")

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    assert started.wait(SAFETY_NET_S)
    run.stop()
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert (job.state, [e.error for e in job.errors]) == (
        JobState.PENDING,
        ["stopping: try again later"],
    )


def test_a_busy_queue_s_handler_thread_claims_its_next_job_itself(
    store: CoreStore, driver: FakeDriver, running: Any
) -> None:
    # The slot goes straight to the queue's next job: no hand-off back to the
    # dispatcher between two jobs of a busy queue.
    claimers: list[str] = []
    original = driver.claim

    def recording_claim(*args: Any) -> Any:
        claimers.append(threading.current_thread().name)
        return original(*args)

    driver.claim = recording_claim
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(20)])
    run = running(worker)
    eventually(lambda: all(job_state(store, "q", i) is None for i in ids), "all acked")
    run.stop()
    from_handlers = [name for name in claimers if name.startswith("alkstore-handler")]
    assert len(from_handlers) >= 19, claimers


# -- one outcome path: sync and async handlers settle alike ------------------------------


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Outcome]]:
    """Every ``(queue, outcome)`` the settle step was given."""
    seen: list[tuple[str, Outcome]] = []
    original = Settler.settle

    def recording(self: Settler, run: JobRun, outcome: Outcome) -> Any:
        seen.append((run.task.queue, outcome))
        return original(self, run, outcome)

    monkeypatch.setattr(Settler, "settle", recording)
    return seen


def register(worker: Worker, kind: str, queue: str, body: Callable[[Job], object]) -> None:
    """``body`` as ``queue``'s handler: itself (``"sync"``) or inside a coroutine function."""
    if kind == "sync":
        worker.task(queue)(body)
        return

    async def handler(job: Job) -> None:
        body(job)

    worker.task(queue)(handler)


KINDS = ["sync", "async"]


def behave_ok() -> None:
    return None


def behave_retry() -> None:
    raise Retry(delay=5, error="later")


def behave_fail() -> None:
    raise Fail("no such user")


def behave_raise() -> None:
    raise ValueError("the payload is odd")


BEHAVIOURS = {
    "returns": (behave_ok, Ack()),
    "raises Retry": (behave_retry, RetryLater("later", 5.0)),
    "raises Fail": (behave_fail, Failed("no such user")),
    "raises ValueError": (
        behave_raise,
        RetryLater("ValueError: the payload is odd", raised="ValueError: the payload is odd"),
    ),
}


def comparable(outcome: Outcome) -> Outcome:
    """The outcome with a traceback cut to its last line (the frames differ)."""
    if isinstance(outcome, RetryLater) and outcome.raised is not None:
        return replace(outcome, error=outcome.error.strip().splitlines()[-1])
    return outcome


@pytest.mark.parametrize("behaviour", list(BEHAVIOURS))
def test_sync_and_async_handlers_settle_the_same_outcome_for_the_same_return_or_exception(
    store: CoreStore, running: Any, settled: list[tuple[str, Outcome]], behaviour: str
) -> None:
    behave, expected = BEHAVIOURS[behaviour]
    worker = Worker(store, name="w")
    for kind in KINDS:
        register(worker, kind, kind, lambda job: behave())
    store.queue("sync").enqueue({})
    store.queue("async").enqueue({})
    run = running(worker)
    eventually(lambda: {queue for queue, _ in settled} == {"sync", "async"}, "both settled")
    run.stop()
    outcomes = {queue: comparable(outcome) for queue, outcome in settled[:2]}
    assert outcomes == {"sync": expected, "async": expected}


def test_an_exception_s_outcome_keeps_its_traceback_for_the_job_s_history() -> None:
    try:
        behave_raise()
    except ValueError as exc:
        outcome = outcome_of(exc)
    assert isinstance(outcome, RetryLater)
    assert outcome.error.startswith("Traceback (most recent call last)")
    assert "behave_raise" in outcome.error


@pytest.mark.parametrize("kind", KINDS)
def test_a_busy_queue_s_ack_and_next_claim_share_one_transaction(
    store: CoreStore, driver: FakeDriver, running: Any, kind: str
) -> None:
    worker = Worker(store, name="w")
    register(worker, kind, "q", lambda job: None)
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(20)])
    run = running(worker)
    eventually(lambda: all(job_state(store, "q", i) is None for i in ids), "all acked")
    run.stop()
    acks = driver.calls_named("ack")
    assert len(acks) == 20
    # One commit per job: each ack went with the claim of the queue's next job.
    assert all(driver.statement_names_in(ack.txn) == ["ack", "claim"] for ack in acks)


@pytest.mark.parametrize("kind", KINDS)
def test_an_unconfirmed_ack_logs_not_confirmed_for_either_handler(
    store: CoreStore, driver: FakeDriver, running: Any, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")

    def lost_reply(*args: Any) -> Any:
        raise EngineUnavailable("the reply was lost")

    driver.ack = lost_reply  # type: ignore[method-assign]
    worker = Worker(store, name="w")
    register(worker, kind, "q", lambda job: None)
    # Written again until its claim's visibility timeout has passed (§12.9).
    job_id = store.queue("q", QueueOpts(visibility_timeout_s=1)).enqueue({})
    run = running(worker)
    eventually(lambda: any("not confirmed" in r.getMessage() for r in caplog.records), "logged")
    run.stop()
    (line,) = [r for r in caplog.records if r.getMessage().startswith("job not")]
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith(
        f"job not confirmed (EngineUnavailable: the reply was lost): queue=q id={job_id} attempt=1"
    )


def _unavailable_first(driver: FakeDriver, *, committed: bool) -> list[int]:
    """Make the driver's first ack raise ``EngineUnavailable``: before it is written,
    or (``committed``) once it has committed, as a reply lost on its way back would.
    Every ack's call is counted."""
    calls: list[int] = []
    ack = driver.ack

    def counted(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 1 and not committed:
            raise EngineUnavailable("the connection was lost")
        return ack(*args)

    def reply_lost(c: Any) -> None:
        if len(calls) == 1 and "ack" in driver.statement_names_in(c.number):
            calls.append(0)  # once
            raise EngineUnavailable("the connection was lost")

    driver.ack = counted  # type: ignore[method-assign]
    if committed:
        driver.after_transaction = reply_lost
    return calls


@pytest.mark.parametrize("kind", KINDS)
def test_an_ack_the_store_could_not_take_is_written_again_once_it_answers(
    store: CoreStore, driver: FakeDriver, running: Any, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    calls = _unavailable_first(driver, committed=False)
    worker = Worker(store, name="w")
    register(worker, kind, "q", lambda job: None)
    job_id = store.queue("q").enqueue({})
    run = running(worker)
    eventually(lambda: job_state(store, "q", job_id) is None, "acked")
    run.stop()
    assert len(calls) == 2
    (line,) = [r for r in caplog.records if r.getMessage().startswith("job ")]
    assert line.getMessage().startswith(f"job ack: queue=q id={job_id} attempt=1")


@pytest.mark.parametrize("kind", KINDS)
def test_an_ack_written_again_and_refused_is_not_confirmed(
    store: CoreStore, driver: FakeDriver, running: Any, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    # The first write committed and only its reply was lost: the claim is over, so
    # the second is refused and nothing is applied twice.
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    calls = _unavailable_first(driver, committed=True)
    worker = Worker(store, name="w")
    register(worker, kind, "q", lambda job: None)
    job_id = store.queue("q").enqueue({})
    run = running(worker)
    eventually(lambda: any("not confirmed" in r.getMessage() for r in caplog.records), "logged")
    run.stop()
    assert calls == [1, 0, 1]  # written, reply lost, written again
    assert job_state(store, "q", job_id) is None
    (line,) = [r for r in caplog.records if r.getMessage().startswith("job ")]
    assert line.getMessage().startswith(
        "job not confirmed (EngineUnavailable: the connection was lost; written again: refused)"
    )


def test_a_forced_stop_gives_up_writing_an_outcome_again(
    store: CoreStore, driver: FakeDriver, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    calls: list[int] = []

    def down(*args: Any) -> Any:
        calls.append(1)
        raise EngineUnavailable("down")

    driver.ack = down  # type: ignore[method-assign]
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    store.queue("q").enqueue({})  # a claim of 300 s: only the stop ends the writes
    run = running(worker)
    eventually(lambda: len(calls) >= 2, "written again")
    run.stop(force=True)  # returns within the safety net, not after 300 s
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("job not confirmed (EngineUnavailable: down)") for m in messages)


@pytest.mark.parametrize("kind", KINDS)
def test_a_job_claimed_as_the_worker_stops_is_given_back_unspent(
    store: CoreStore, driver: FakeDriver, running: Any, kind: str
) -> None:
    worker = Worker(store, name="w")
    ran: list[int] = []
    register(worker, kind, "q", lambda job: ran.append(job.id))
    first, second = store.queue("q").enqueue_many([{"n": 1}, {"n": 2}])

    def stop_once_the_next_job_is_claimed(tx: Any) -> None:
        if driver.statement_names_in(tx.number) == ["ack", "claim"]:
            driver.after_transaction = None
            worker.stop()

    driver.after_transaction = stop_once_the_next_job_is_claimed
    running(worker).join()
    assert ran == [first]
    job = store.queue("q").get_job(second)
    assert job is not None
    assert (job.state, job.max_attempts - job.attempts) == (
        JobState.PENDING,
        QueueOpts().max_attempts,
    )


def test_a_worker_s_state_is_all_set_before_it_runs(store: CoreStore, running: Any) -> None:
    worker = Worker(store, name="w")
    worker.task("q")(lambda job: None)
    before = set(vars(worker))
    running(worker).stop()
    assert set(vars(worker)) == before
