"""The reference model's examples replay alike (QUEUE-MODEL-AGREEMENT).

Hypothesis runs an example's choices again to explore past it and to shrink it,
and refuses one whose bundles changed between runs (``FlakyStrategyDefinition``).
A default backoff's jitter decides which later claims meet a job, so the model
seeds the store's jitter (``alkstore.testing.seed_jitter``) every time it opens it.
"""

from __future__ import annotations

from alkstore_conformance.suite.test_stateful import START, QueueModelMachine
from alkstore_memory import ENGINE

JOBS = 4
RUNS = 5


def _default_backoffs_of_one_example() -> list[int]:
    """Enqueue ``JOBS`` jobs, claim and retry each without a delay: their delays."""
    machine = QueueModelMachine()
    try:
        ids = machine.ready_work([("mail", n, 0, None) for n in range(JOBS)]).values
        for _ in ids:
            (held,) = machine.claim("mail", "w1").values
            machine.retry(held, "boom", None)
        jobs = [machine.consumers["mail"].get_job(job_id) for job_id in ids]
        return [job.run_at - START for job in jobs if job is not None]
    finally:
        machine.teardown()


def test_an_example_run_again_draws_the_same_default_backoffs() -> None:
    QueueModelMachine.provider = ENGINE
    try:
        runs = [_default_backoffs_of_one_example() for _ in range(RUNS)]
    finally:
        QueueModelMachine.provider = None
    assert len(runs[0]) == JOBS
    assert all(run == runs[0] for run in runs), runs
