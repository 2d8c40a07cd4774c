"""§12: the worker runtime on the engine under test, run on a thread of the test.

``alkstore.worker`` uses only the contract surface, so these properties hold on
every engine: they check that the engine gives the worker what it builds on
(claims that heartbeats keep, lapses that hand a job to the next worker, the
retry curve, wakes from any of several queues) and that the worker keeps its
promises on it. Signals and killed processes are in ``test_worker_signals``.

Where a property is about another process (a wake from it), a second test
checks the same with another store object in this process, so the property
is judged on an engine that one process owns, too.

Store timestamps are whole seconds: a claim with a visibility timeout of
``VISIBILITY_S`` lapses between ``VISIBILITY_S - 1`` and ``VISIBILITY_S``
seconds after its last claim or heartbeat, so bounds on ``run_at`` allow a
second of rounding.
"""

from __future__ import annotations

import itertools
import math
import queue
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from alkstore import EngineSpec, Job, JobState, QueueOpts, Store
from alkstore.backoff import retry_delay_range
from alkstore.worker import Fail, JobContext, Retry, Worker
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profiles import Children
from alkstore_conformance.helpers.trials import Trial
from alkstore_conformance.helpers.workers import RunningWorker, enqueuer_on_commands, eventually

VISIBILITY_S = 2
"""Short, so a lapse is quick; 2 not 1, so a claim always lives at least a second."""
LIMIT_S = 20.0
"""The bound on every wait: far above what a passing engine needs."""


def _gone(store: Store, queue_name: str, job_id: int) -> bool:
    return store.queue(queue_name).get_job(job_id) is None


def _in_state(store: Store, queue_name: str, job_id: int, state: JobState) -> Job | None:
    job = store.queue(queue_name).get_job(job_id)
    return job if job is not None and job.state is state else None


def _retried(store: Store, queue_name: str, job_id: int) -> Job | None:
    """The job once it is pending again after its first attempt."""
    job = _in_state(store, queue_name, job_id, JobState.PENDING)
    return job if job is not None and job.attempts == 1 else None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One handler call as the handler saw its job, and when it raised or returned."""

    attempt: int
    claimed_at: int
    run_at: int
    ended_at: float


def _attempt(job: Job) -> Attempt:
    assert job.claimed_at is not None, "a handler runs only claimed jobs"
    return Attempt(job.attempts, job.claimed_at, job.run_at, time.time())


def _retried_at_most(attempt: Attempt) -> int:
    """The latest store "now" the retry after ``attempt`` can have been written at:
    the handler's end, floored, plus a second of rounding and scheduling."""
    return math.floor(attempt.ended_at) + 1


# -- WORKER-GRACEFUL-STOP ----------------------------------------------------------------

GRACE_S = 0.5


@pytest.mark.property("WORKER-GRACEFUL-STOP")
def test_a_handler_outliving_the_grace_is_never_acked_and_its_claim_lapses(store: Store) -> None:
    name = unique_name("outlived")
    job_id = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S)).enqueue({"n": 0})
    started, release, returned = threading.Event(), threading.Event(), threading.Event()
    stop_seen: list[bool] = []
    worker = Worker(store, name="outlived", shutdown_grace_s=GRACE_S)

    @worker.task(name)
    def outlive(job: Job, context: JobContext) -> None:
        started.set()
        release.wait(LIMIT_S)
        stop_seen.append(context.stop.is_set())
        returned.set()

    try:
        with RunningWorker(worker, LIMIT_S) as run:
            assert started.wait(LIMIT_S)
            run.stop()  # graceful: waits GRACE_S for the handler, then gives up on it
        left = store.queue(name).get_job(job_id)
        assert left is not None, "a job whose handler had not finished was acked"
        assert (left.state, left.attempts) == (JobState.PROCESSING, 1)
        release.set()
        assert returned.wait(LIMIT_S)
        assert stop_seen == [True], "the abandoned handler's stop token was not set"
        # The handler returned well within a second of its last heartbeat, so its claim
        # was live: had the worker applied that late return as an ack, the job would be
        # gone and never claimable again.
        reclaimed = eventually(
            lambda: store.queue(name).claim("next-worker"),
            "the abandoned job became claimable once its claim lapsed",
            LIMIT_S,
        )
    finally:
        release.set()
    assert (reclaimed.id, reclaimed.attempts) == (job_id, 2)
    assert reclaimed.ack() is True


# -- WORKER-CRASH-RECLAIMED -----------------------------------------------------------------


@pytest.mark.property("WORKER-CRASH-RECLAIMED")
def test_jobs_held_by_a_worker_stopped_at_once_are_completed_once_by_the_next_worker(
    store: Store, open_store: StoreFactory
) -> None:
    """What a dead worker leaves (contract §12.5: claims nobody heartbeats), on any
    engine; ``test_worker_signals`` SIGKILLs a worker process where processes share
    the store."""
    name = unique_name("dropped")
    ids = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S)).enqueue_many(
        [{"n": n} for n in range(4)]
    )
    release = threading.Event()
    held: list[tuple[int, int]] = []
    completed: list[tuple[int, int]] = []
    first = Worker(store, name="dropped")
    successor = Worker(open_store(), name="successor")

    @first.task(name, concurrency=2)
    def hold(job: Job) -> None:
        held.append((job.id, job.attempts))
        release.wait(LIMIT_S)

    @successor.task(name, concurrency=2)
    def complete(job: Job) -> None:
        completed.append((job.id, job.attempts))

    try:
        with RunningWorker(first, LIMIT_S) as run:
            eventually(lambda: len(held) == 2, "the first worker took two jobs", LIMIT_S)
            run.stop(force=True)
        with RunningWorker(successor, LIMIT_S):
            eventually(
                lambda: all(_gone(store, name, job_id) for job_id in ids),
                "the successor completed every job",
                LIMIT_S,
            )
    finally:
        release.set()
    assert sorted(job_id for job_id, _ in completed) == sorted(ids), "each job completed once"
    successor_attempt = dict(completed)
    for job_id, attempt in held:
        assert successor_attempt[job_id] == attempt + 1, "a held job was reclaimed after it lapsed"


# -- WORKER-HEARTBEAT-KEEPS-CLAIM -------------------------------------------------------------

LONG_RUN_S = 3 * VISIBILITY_S


@pytest.mark.property("WORKER-HEARTBEAT-KEEPS-CLAIM")
def test_a_handler_running_past_its_visibility_timeout_keeps_its_claim_and_runs_once(
    store: Store, open_store: StoreFactory
) -> None:
    name = unique_name("long")
    job_id = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S)).enqueue({"n": 0})
    release = threading.Event()
    runs: list[tuple[str, int]] = []
    holder = Worker(store, name="holder")
    rival = Worker(open_store(), name="rival")  # waits on the queue while the holder runs

    def long_handler(worker_name: str) -> Callable[[Job], None]:
        def run_long(job: Job) -> None:
            runs.append((worker_name, job.attempts))
            release.wait(LONG_RUN_S)

        return run_long

    holder.task(name)(long_handler("holder"))
    rival.task(name)(long_handler("rival"))
    try:
        with RunningWorker(holder, LIMIT_S):
            eventually(lambda: runs, "the holder took the job", LIMIT_S)
            with RunningWorker(rival, LIMIT_S):
                eventually(
                    lambda: _gone(store, name, job_id),
                    "the long handler's job was acked",
                    LONG_RUN_S + LIMIT_S,
                )
    finally:
        release.set()
    assert runs == [("holder", 1)], "the job was claimed again while its handler ran"


# -- WORKER-RETRY-CURVE ---------------------------------------------------------------------

BACKOFF_BASE_S = 1
MAX_ATTEMPTS = 3


def _raising_worker(store: Store, name: str, attempts: list[Attempt]) -> Worker:
    worker = Worker(store, name="raiser")

    @worker.task(name)
    def raise_always(job: Job) -> None:
        attempts.append(_attempt(job))
        raise RuntimeError(f"boom on attempt {job.attempts}")

    return worker


@pytest.mark.property("WORKER-RETRY-CURVE")
def test_a_raising_handler_s_job_is_retried_on_the_backoff_curve_then_dead(store: Store) -> None:
    name = unique_name("raising")
    opts = QueueOpts(max_attempts=MAX_ATTEMPTS, backoff_base_s=BACKOFF_BASE_S)
    job_id = store.queue(name, opts).enqueue({"n": 0})
    attempts: list[Attempt] = []
    with RunningWorker(_raising_worker(store, name, attempts), LIMIT_S):
        dead = eventually(
            lambda: _in_state(store, name, job_id, JobState.DEAD),
            "the always-raising job went dead",
            LIMIT_S,
        )
    assert dead.last_error == "max attempts exceeded"
    assert [a.attempt for a in attempts] == list(range(1, MAX_ATTEMPTS + 1))
    for before, after in itertools.pairwise(attempts):
        low, high = retry_delay_range(BACKOFF_BASE_S, before.attempt)
        # The retry was written at a store "now" between the claim and just after the raise.
        assert before.claimed_at + low <= after.run_at <= _retried_at_most(before) + high, (
            f"retry {before.attempt}: run_at {after.run_at} off the curve [{low}, {high}] "
            f"from {before}"
        )
        assert after.claimed_at >= after.run_at, "a retried job ran before it was due"


@pytest.mark.property("WORKER-RETRY-CURVE")
@pytest.mark.requires("ops")
def test_every_attempt_s_traceback_is_kept_in_the_dead_job_s_errors(store: Store) -> None:
    name = unique_name("raising")
    # A zero base retries at once: the curve is the other test's business.
    job_id = store.queue(name, QueueOpts(max_attempts=MAX_ATTEMPTS, backoff_base_s=0)).enqueue(
        {"n": 0}
    )
    attempts: list[Attempt] = []
    with RunningWorker(_raising_worker(store, name, attempts), LIMIT_S):
        dead = eventually(
            lambda: _in_state(store, name, job_id, JobState.DEAD),
            "the always-raising job went dead",
            LIMIT_S,
        )
    assert [error.attempt for error in dead.errors] == list(range(1, MAX_ATTEMPTS + 1))
    for error in dead.errors:
        assert error.error.startswith("Traceback"), error.error
        assert f"RuntimeError: boom on attempt {error.attempt}" in error.error, error.error


# -- WORKER-OUTCOMES -----------------------------------------------------------------------

RETRY_DELAY_S = 2


@pytest.mark.property("WORKER-OUTCOMES")
def test_a_handler_returning_acks_its_job(store: Store) -> None:
    name = unique_name("returning")
    job_id = store.queue(name).enqueue({"n": 0})
    runs: list[int] = []
    worker = Worker(store, name="returner")

    @worker.task(name)
    def succeed(job: Job) -> None:
        runs.append(job.attempts)

    with RunningWorker(worker, LIMIT_S):
        eventually(lambda: _gone(store, name, job_id), "the job was acked", LIMIT_S)
    assert runs == [1]


@pytest.mark.property("WORKER-OUTCOMES")
def test_retry_puts_the_job_back_until_its_delay_has_passed(store: Store) -> None:
    name = unique_name("retrying")
    job_id = store.queue(name).enqueue({"n": 0})
    attempts: list[Attempt] = []
    worker = Worker(store, name="retrier")

    @worker.task(name)
    def retry_once(job: Job) -> None:
        attempts.append(_attempt(job))
        if job.attempts == 1:
            raise Retry(delay=RETRY_DELAY_S, error="x")

    with RunningWorker(worker, LIMIT_S):
        waiting = eventually(
            lambda: _retried(store, name, job_id), "the retried job was pending again", LIMIT_S
        )
        eventually(lambda: _gone(store, name, job_id), "the second attempt acked it", LIMIT_S)
    first, second = attempts
    assert first.claimed_at + RETRY_DELAY_S <= waiting.run_at
    assert waiting.run_at <= _retried_at_most(first) + RETRY_DELAY_S
    assert (second.attempt, second.run_at) == (2, waiting.run_at)
    assert second.claimed_at >= waiting.run_at, "the job ran again before its delay passed"


@pytest.mark.property("WORKER-OUTCOMES")
@pytest.mark.requires("ops")
def test_retry_s_error_goes_to_the_job_s_error_history(store: Store) -> None:
    name = unique_name("retrying")
    job_id = store.queue(name).enqueue({"n": 0})
    histories: list[list[tuple[int, str]]] = []
    worker = Worker(store, name="retrier")

    @worker.task(name)
    def retry_once(job: Job) -> None:
        histories.append([(error.attempt, error.error) for error in job.errors])
        if job.attempts == 1:
            raise Retry(delay=0, error="x")

    with RunningWorker(worker, LIMIT_S):
        eventually(lambda: _gone(store, name, job_id), "the second attempt acked it", LIMIT_S)
    assert histories == [[], [(1, "x")]]


@pytest.mark.property("WORKER-OUTCOMES")
def test_fail_dead_letters_the_job_at_once_with_its_error(store: Store) -> None:
    name = unique_name("failing")
    job_id = store.queue(name, QueueOpts(max_attempts=MAX_ATTEMPTS)).enqueue({"n": 0})
    runs: list[int] = []
    worker = Worker(store, name="failer")

    @worker.task(name)
    def fail(job: Job) -> None:
        runs.append(job.attempts)
        raise Fail("y")

    with RunningWorker(worker, LIMIT_S):
        dead = eventually(
            lambda: _in_state(store, name, job_id, JobState.DEAD), "the job went dead", LIMIT_S
        )
    assert (dead.last_error, dead.attempts) == ("y", 1)
    assert runs == [1], "a failed job was retried"


# -- WORKER-CONCURRENCY-BOUND -----------------------------------------------------------------

CONCURRENCY = 3
JOBS = 20
HANDLER_S = 0.1
"""Long enough that every slot's handler overlaps the others, on a loaded machine too."""


@pytest.mark.property("WORKER-CONCURRENCY-BOUND")
def test_a_task_never_runs_more_handlers_at_once_than_its_concurrency(store: Store) -> None:
    name = unique_name("bounded")
    ids = store.queue(name).enqueue_many([{"n": n} for n in range(JOBS)])
    lock = threading.Lock()
    running = 0
    most = 0
    runs: Counter[int] = Counter()
    worker = Worker(store, name="bounded")

    @worker.task(name, concurrency=CONCURRENCY)
    def count(job: Job) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            runs[job.id] += 1
        time.sleep(HANDLER_S)
        with lock:
            running -= 1

    with RunningWorker(worker, LIMIT_S):
        eventually(
            lambda: all(_gone(store, name, job_id) for job_id in ids), "every job acked", LIMIT_S
        )
    assert most <= CONCURRENCY
    assert most == CONCURRENCY, "the task never used all its slots"
    assert runs == Counter(dict.fromkeys(ids, 1))


@pytest.mark.property("WORKER-CONCURRENCY-BOUND")
@pytest.mark.requires("ops")
def test_the_worker_never_holds_more_claims_than_its_slots(
    store: Store, open_store: StoreFactory
) -> None:
    name = unique_name("bounded")
    ids = store.queue(name).enqueue_many([{"n": n} for n in range(JOBS)])
    observer = open_store().queue(name)
    held: list[int] = []
    worker = Worker(store, name="bounded")

    @worker.task(name, concurrency=CONCURRENCY)
    def sample(job: Job) -> None:
        # One statement reads every claim of the queue: an exact count at that instant.
        stats = observer.stats()
        held.append(stats.processing + stats.lapsed)
        time.sleep(HANDLER_S)

    with RunningWorker(worker, LIMIT_S):
        eventually(
            lambda: all(_gone(store, name, job_id) for job_id in ids), "every job acked", LIMIT_S
        )
    assert len(held) == JOBS
    assert max(held) <= CONCURRENCY, f"claims held, sampled from the handlers: {held}"


# -- WORKER-MULTI-QUEUE-WAKE -------------------------------------------------------------------

SAMPLES = 3
PROMPT_S = 0.25
"""The median lateness allowed: a quarter of the core's default 1 s re-poll."""
WAIT_PHASE_S = (0.3, 0.7)
"""How long the worker has been waiting when the job is enqueued: a re-poll-only
engine is then at least 0.3 s late on every sample."""
SERVED_QUEUES = 3


def recording_worker(
    store: Store, names: list[str], began: queue.Queue[tuple[int, float]]
) -> Worker:
    """A worker serving ``names`` whose handler reports each job's id and start time."""
    worker = Worker(store, name="waker")

    def record(job: Job) -> None:
        began.put((job.id, time.time()))

    for name in names:
        worker.task(name)(record)
    return worker


def median_ms(lateness: list[float]) -> str:
    median = statistics.median(lateness) * 1000
    return f"median {median:.0f} ms of {[round(x, 3) for x in lateness]}"


@pytest.mark.property("WORKER-MULTI-QUEUE-WAKE")
def test_a_worker_on_several_queues_starts_a_job_another_store_enqueued_promptly(
    store: Store, open_store: StoreFactory, trial: Trial
) -> None:
    """The same process, another store object: the wake every engine owes its own
    process (``test_worker_signals`` enqueues from another process)."""
    rng = trial.random()
    names = [unique_name(f"wake{n}") for n in range(SERVED_QUEUES)]
    began: queue.Queue[tuple[int, float]] = queue.Queue()
    other = open_store()
    lateness: list[float] = []
    with RunningWorker(recording_worker(store, names, began), LIMIT_S):
        for _ in range(SAMPLES):
            time.sleep(rng.uniform(*WAIT_PHASE_S))
            job_id = other.queue(rng.choice(names)).enqueue({"from": "another store"})
            committed_at = time.time()
            started_id, started_at = began.get(timeout=LIMIT_S)
            assert started_id == job_id
            lateness.append(started_at - committed_at)
    assert statistics.median(lateness) < PROMPT_S, median_ms(lateness)


@pytest.mark.property("WORKER-MULTI-QUEUE-WAKE")
@pytest.mark.requires("multi_process")
def test_a_worker_on_several_queues_starts_a_job_another_process_enqueued_promptly(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rng = trial.random()
    names = [unique_name(f"wake{n}") for n in range(SERVED_QUEUES)]
    began: queue.Queue[tuple[int, float]] = queue.Queue()
    lateness: list[float] = []
    with Children(LIMIT_S) as children:
        commands = children.context.Queue()
        children.start(
            enqueuer_on_commands,
            engine_name,
            engine_group,
            engine_spec,
            commands,
            children.results,
            LIMIT_S,
        )
        children.expect("ready")
        with RunningWorker(recording_worker(store, names, began), LIMIT_S):
            for _ in range(SAMPLES):
                time.sleep(rng.uniform(*WAIT_PHASE_S))
                commands.put(rng.choice(names))
                _, job_id, committed_at = children.expect("enqueued")
                started_id, started_at = began.get(timeout=LIMIT_S)
                assert started_id == job_id
                lateness.append(started_at - committed_at)
        commands.put(None)
        children.expect("done")
    assert statistics.median(lateness) < PROMPT_S, median_ms(lateness)
