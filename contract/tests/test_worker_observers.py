"""``alkstore.worker`` observers (contract §12.6): each run heard once as it starts
and once as it ends, with the outcome's label; a refused heartbeat; an observer
that raises changes nothing.

The store is the core over the recording fake driver (with the snooze profile) on
a fake clock; handlers run on the worker's real threads. Waits are safety nets.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fakes import FakeDriver, FakeSnoozeDriver
from running import SAFETY_NET_S, eventually

from alkstore import QueueOpts
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions
from alkstore.testing import FakeClock
from alkstore.values import Job
from alkstore.worker import OUTCOMES, Fail, JobContext, Retry, Snooze, Worker, WorkerObserver
from alkstore.worker.observe import outcome_label


@pytest.fixture
def driver() -> FakeDriver:
    return FakeSnoozeDriver()


class Recorder:
    """A ``WorkerObserver`` keeping what it heard, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, str | None]] = []
        self.lock = threading.Lock()

    def run_started(self, job: Job) -> None:
        with self.lock:
            self.events.append(("started", job.id, None))

    def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
        assert duration_s >= 0
        with self.lock:
            self.events.append(("finished", job.id, outcome))

    def heartbeat_lost(self, job: Job) -> None:
        with self.lock:
            self.events.append(("heartbeat_lost", job.id, None))

    def outcomes(self) -> dict[int, str | None]:
        with self.lock:
            return {job_id: outcome for kind, job_id, outcome in self.events if kind == "finished"}


def test_each_run_is_heard_once_as_it_starts_and_once_with_its_outcome(
    store: CoreStore, running: Any
) -> None:
    recorder = Recorder()
    worker = Worker(store, name="w", observers=[recorder])

    @worker.task("q")
    def handler(job: Job) -> None:
        match job.payload:
            case "retry":
                raise Retry(delay=60)
            case "fail":
                raise Fail("no")
            case "snooze":
                raise Snooze(60)
            case "crash":
                raise RuntimeError("boom")

    q = store.queue("q", QueueOpts(max_attempts=5))
    ids = {payload: q.enqueue(payload) for payload in ("ack", "retry", "fail", "snooze", "crash")}
    running(worker)
    eventually(lambda: len(recorder.outcomes()) == len(ids), "every run ended")
    worker.stop()

    assert recorder.outcomes() == {
        ids["ack"]: "acked",
        ids["retry"]: "retried",
        ids["fail"]: "failed",
        ids["snooze"]: "snoozed",
        ids["crash"]: "retried",
    }
    starts = [job_id for kind, job_id, _ in recorder.events if kind == "started"]
    assert sorted(starts) == sorted(ids.values())
    for job_id in ids.values():
        kinds = [kind for kind, seen, _ in recorder.events if seen == job_id]
        assert kinds == ["started", "finished"]


def test_a_retry_at_the_attempt_budget_is_heard_as_dead(store: CoreStore, running: Any) -> None:
    recorder = Recorder()
    worker = Worker(store, name="w", observers=[recorder])
    worker.task("q")(lambda job: (_ for _ in ()).throw(Retry()))
    job_id = store.queue("q", QueueOpts(max_attempts=1)).enqueue({})
    running(worker)
    eventually(lambda: job_id in recorder.outcomes(), "the run ended")
    assert recorder.outcomes()[job_id] == "dead"


def test_a_refused_heartbeat_is_heard_and_the_run_ends_lost(
    store: CoreStore, clock: FakeClock, running: Any
) -> None:
    recorder = Recorder()
    worker = Worker(store, name="w", observers=[recorder])
    release = threading.Event()
    contexts: list[JobContext] = []

    @worker.task("q")
    def handler(job: Job, context: JobContext) -> None:
        contexts.append(context)
        release.wait(SAFETY_NET_S)

    queue = store.queue("q", QueueOpts(visibility_timeout_s=1))
    job_id = queue.enqueue({})
    running(worker)
    eventually(lambda: bool(contexts), "handler started")
    clock.advance(5)  # the claim lapses and another worker takes the job
    assert queue.claim("other") is not None
    eventually(lambda: contexts[0].lost, "the run marked lost")
    release.set()
    eventually(lambda: job_id in recorder.outcomes(), "the run ended")
    assert ("heartbeat_lost", job_id, None) in recorder.events
    assert recorder.outcomes()[job_id] == "lost"


def test_a_run_a_stop_cuts_off_is_heard_as_abandoned(store: CoreStore, running: Any) -> None:
    recorder = Recorder()
    worker = Worker(store, name="w", shutdown_grace_s=0, observers=[recorder])
    inside = threading.Event()
    release = threading.Event()

    @worker.task("q")
    def handler(job: Job) -> None:
        inside.set()
        release.wait(SAFETY_NET_S)

    job_id = store.queue("q").enqueue({})
    run = running(worker)
    assert inside.wait(SAFETY_NET_S)
    run.stop()
    release.set()
    assert recorder.outcomes() == {job_id: "abandoned"}


def test_an_observer_that_raises_changes_no_outcome_and_others_still_hear(
    store: CoreStore, running: Any
) -> None:
    class Broken(Recorder):
        def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
            raise RuntimeError("observer bug")

    recorder = Recorder()
    worker = Worker(store, name="w", observers=[Broken(), recorder])
    worker.task("q")(lambda job: None)
    job_id = store.queue("q").enqueue({})
    running(worker)
    eventually(lambda: job_id in recorder.outcomes(), "the run ended")
    assert recorder.outcomes()[job_id] == "acked"
    eventually(lambda: store.queue("q").get_job(job_id) is None, "the job acked")


def test_observe_adds_an_observer_before_run_and_refuses_one_after(
    store: CoreStore, running: Any
) -> None:
    recorder = Recorder()
    worker = Worker(store, name="w")
    worker.observe(recorder)
    worker.task("q")(lambda job: None)
    job_id = store.queue("q").enqueue({})
    running(worker)
    eventually(lambda: job_id in recorder.outcomes(), "the run ended")
    with pytest.raises(InvalidOptions, match="before run"):
        worker.observe(Recorder())


@pytest.mark.parametrize("observer", [object(), "metrics", lambda job: None])
def test_an_object_that_is_no_observer_is_refused(store: CoreStore, observer: Any) -> None:
    with pytest.raises(InvalidOptions, match="observer"):
        Worker(store, observers=[observer])
    with pytest.raises(InvalidOptions, match="observer"):
        Worker(store).observe(observer)


def test_a_recorder_is_a_worker_observer() -> None:
    assert isinstance(Recorder(), WorkerObserver)


@pytest.mark.parametrize(
    ("said", "label"),
    [
        ("ack", "acked"),
        ("ack refused (claim lost)", "lost"),
        ("retry", "retried"),
        ("retry refused (claim lost)", "lost"),
        ("dead (max attempts exceeded)", "dead"),
        ("dead (max snoozes exceeded)", "dead"),
        ("snooze", "snoozed"),
        ("fail", "failed"),
        ("release", "released"),
        ("lost", "lost"),
        ("abandoned", "abandoned"),
        ("not confirmed (EngineUnavailable: down)", "unconfirmed"),
    ],
)
def test_every_outcome_line_has_one_label(said: str, label: str) -> None:
    assert outcome_label(said) == label
    assert label in OUTCOMES


class RaisedRecorder(Recorder):
    """A ``Recorder`` with the optional ``run_raised`` too."""

    def run_raised(self, job: Job, exc: BaseException) -> None:
        with self.lock:
            self.events.append(("raised", job.id, type(exc).__name__))


def test_an_observer_with_run_raised_hears_a_handlers_exception_before_its_outcome(
    store: CoreStore, running: Any
) -> None:
    recorder = RaisedRecorder()
    plain = Recorder()
    worker = Worker(store, name="w", observers=[recorder, plain])

    @worker.task("q")
    def handler(job: Job) -> None:
        if job.payload == "crash":
            raise RuntimeError("boom")

    q = store.queue("q", QueueOpts(max_attempts=5))
    crash, fine = q.enqueue("crash"), q.enqueue("fine")
    running(worker)
    eventually(lambda: len(recorder.outcomes()) == 2, "both runs ended")
    worker.stop()
    crashed = [event for event in recorder.events if event[1] == crash]
    assert crashed == [
        ("started", crash, None),
        ("raised", crash, "RuntimeError"),
        ("finished", crash, "retried"),
    ]
    assert not any(kind == "raised" for kind, job_id, _ in recorder.events if job_id == fine)
    assert plain.outcomes() == {crash: "retried", fine: "acked"}
