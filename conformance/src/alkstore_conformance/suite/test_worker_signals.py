"""§12.5: a worker process stopped by SIGTERM, or killed by SIGKILL.

The worker runs on the main thread of a child process (``WorkerChild``), where
signals land; its handlers report each start and finish on a pipe, and its log
lines (one per applied outcome) go there too, so the parent knows what the
worker did even after a SIGKILL. The SIGTERM children enqueue their own jobs
and report the jobs' states once ``run`` returned, so those properties hold on
an engine that one process owns; the SIGKILL property needs a store a second
process can open (the dead worker's store dies with it otherwise).
"""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from alkstore import EngineSpec, Job, JobState, QueueOpts, Store
from alkstore.worker import Worker
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.workers import (
    ChildHistory,
    RunningWorker,
    WorkerChild,
    WorkerPlan,
    eventually,
    job_states,
)

VISIBILITY_S = 2
"""Short, so the SIGKILLed worker's claims lapse quickly (whole seconds: 1 to 2 s)."""
LIMIT_S = 30.0
"""The bound on every wait, child start-up included: far above what a pass needs."""
AT_ONCE_S = 5.0
"""How long "at once" may take: a second SIGTERM may not wait for a 30 s handler."""
HANDLER_S = 1.0
CONCURRENCY = 2
JOBS = 6


def _plan(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    *,
    queue: str,
    sleep_s: float,
    jobs: int,
    grace_s: float,
) -> WorkerPlan:
    return WorkerPlan(
        engine_name=engine_name,
        engine_group=engine_group,
        spec=spec,
        queue=queue,
        worker_name="signalled",
        concurrency=CONCURRENCY,
        shutdown_grace_s=grace_s,
        visibility_timeout_s=VISIBILITY_S,
        payloads=[{"n": n, "sleep_s": sleep_s} for n in range(jobs)],
    )


def _mid_run(history: ChildHistory) -> bool:
    """Some jobs done, every slot busy with another: a worker in full swing."""
    return len(history.finished) >= CONCURRENCY and len(history.in_flight()) == CONCURRENCY


def _took_a_stop_signal(history: ChildHistory) -> bool:
    """The worker logged the first stop signal (it logs once the stop is under way)."""
    return any("SIGTERM: stopping" in line for line in history.log)


# -- WORKER-GRACEFUL-STOP ---------------------------------------------------------------------


@pytest.mark.property("WORKER-GRACEFUL-STOP")
def test_sigterm_lets_running_handlers_finish_acks_them_and_exits_0(
    engine_name: str, engine_group: str, engine_spec: EngineSpec
) -> None:
    plan = _plan(
        engine_name,
        engine_group,
        engine_spec,
        queue=unique_name("terminated"),
        sleep_s=HANDLER_S,
        jobs=JOBS,
        grace_s=LIMIT_S,
    )
    with WorkerChild(plan, LIMIT_S) as child:
        ids = child.expect("ready")
        child.wait_until("two finished jobs and two running", _mid_run)
        running_at_signal = child.history.in_flight()
        child.send_signal(signal.SIGTERM)
        states = job_states(child.expect("stopped"))
        code = child.wait(LIMIT_S)
        history = child.history
    assert code == 0, child.stderr
    assert "Traceback" not in child.stderr, child.stderr
    assert running_at_signal <= history.finished_ids(), "a running handler did not finish"
    assert history.in_flight() == set()
    assert Counter(run.job_id for run in history.started) == Counter(history.finished_ids())
    for job_id in history.finished_ids():
        assert states[job_id] is None, f"job {job_id}'s handler finished, it was not acked"
    never_started = set(ids) - history.started_ids()
    assert never_started, "the worker went on claiming after SIGTERM"
    for job_id in never_started:
        state = states[job_id]
        assert state is not None, f"job {job_id} was acked though no handler ran it"
        assert state[0] in (JobState.PENDING, JobState.PROCESSING), state


@pytest.mark.property("WORKER-GRACEFUL-STOP")
def test_a_second_sigterm_returns_at_once_without_acking_the_running_job(
    engine_name: str, engine_group: str, engine_spec: EngineSpec
) -> None:
    plan = _plan(
        engine_name,
        engine_group,
        engine_spec,
        queue=unique_name("terminated"),
        sleep_s=LIMIT_S,
        jobs=1,
        grace_s=LIMIT_S,
    )
    with WorkerChild(plan, LIMIT_S) as child:
        (job_id,) = child.expect("ready")
        child.wait_until("the job's handler started", lambda history: bool(history.started))
        child.send_signal(signal.SIGTERM)
        # Two SIGTERMs that reach a process before it has run its handler for the
        # first are one signal (POSIX does not queue them): send the second once
        # the worker has said it took the first.
        child.wait_until("the first SIGTERM taken", _took_a_stop_signal)
        assert child.running_after(0.5), "the first SIGTERM did not wait for the handler"
        child.send_signal(signal.SIGTERM)
        code = child.wait(AT_ONCE_S)
        states = job_states(child.expect("stopped"))
    assert code == 0, child.stderr
    assert "Traceback" not in child.stderr, child.stderr
    assert states[job_id] == (JobState.PROCESSING, 1), "an unfinished job was acked"


# -- WORKER-CRASH-RECLAIMED -------------------------------------------------------------------

KILL_JOBS = 8
KILL_HANDLER_S = 0.4


@pytest.mark.property("WORKER-CRASH-RECLAIMED")
@pytest.mark.requires("multi_process")
def test_a_sigkilled_worker_s_jobs_are_completed_once_by_a_restarted_worker(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store
) -> None:
    name = unique_name("killed")
    queue = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S, max_attempts=5))
    ids = queue.enqueue_many([{"n": n, "sleep_s": KILL_HANDLER_S} for n in range(KILL_JOBS)])
    plan = _plan(
        engine_name, engine_group, engine_spec, queue=name, sleep_s=0, jobs=0, grace_s=LIMIT_S
    )
    with WorkerChild(plan, LIMIT_S) as child:
        child.expect("ready")
        child.wait_until("two finished jobs and two running", _mid_run)
        child.send_signal(signal.SIGKILL)
        assert child.wait(LIMIT_S) == -signal.SIGKILL
        dead = child.history  # complete: every line written before the kill was read
    held = {run.job_id: run.attempt for run in set(dead.started) - set(dead.finished)}
    assert held, "the worker was killed with handlers running"
    completed: list[tuple[int, int]] = []
    successor = Worker(store, name="successor")

    @successor.task(name, concurrency=CONCURRENCY)
    def complete(job: Job) -> None:
        completed.append((job.id, job.attempts))

    with RunningWorker(successor, LIMIT_S):
        eventually(
            lambda: all(queue.get_job(job_id) is None for job_id in ids),
            "the successor acked every job",
            LIMIT_S,
        )
    assert queue.claim("checker") is None
    completed_ids = [job_id for job_id, _ in completed]
    assert set(ids) == dead.finished_ids() | set(completed_ids), "a job was lost"
    assert Counter(completed_ids) == Counter(set(completed_ids)), "the successor ran a job twice"
    acked_by_dead = {run.job_id for run in dead.acked}
    assert acked_by_dead.isdisjoint(completed_ids), "a job that was acked ran again"
    successor_attempt = dict(completed)
    for job_id, attempt in held.items():
        assert job_id in successor_attempt, f"job {job_id}, held by the dead worker, was lost"
        assert successor_attempt[job_id] > attempt
