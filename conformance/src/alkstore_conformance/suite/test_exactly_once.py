"""§2: exactly one concurrent claimer wins a row (threads, and spawned processes).

Claimers record every claim they make (job id, attempt, claimed_at, deadline,
acked?). Some first claims are abandoned on purpose, as if the worker
crashed, so those jobs lapse and are reclaimed. Afterwards: nothing lost,
every job acked exactly once, and no two claims of one job overlap in time.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict

import pytest

from alkstore import EngineSpec, QueueOpts, Store
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.processes import (
    ClaimRecord,
    ThreadCounter,
    abandon_first_claim_of_every,
    claim_until_all_acked,
    claimer_process,
)
from alkstore_conformance.helpers.profiles import Children
from alkstore_conformance.helpers.trials import Trial

JOBS = 120
CLAIMERS = 4
ABANDON_EVERY = 15
VISIBILITY_S = 2
"""Short, so abandoned claims lapse quickly on the system clock (whole seconds)."""
TIME_LIMIT_S = 90.0


def _fill(store: Store, name: str) -> list[int]:
    queue = store.queue(name, QueueOpts(visibility_timeout_s=VISIBILITY_S, max_attempts=10))
    return [job_id.id for job_id in queue.enqueue_many([{"n": n} for n in range(JOBS)])]


def _check_history(store: Store, name: str, ids: list[int], records: list[ClaimRecord]) -> None:
    by_job: dict[int, list[ClaimRecord]] = defaultdict(list)
    for record in records:
        by_job[record.job_id].append(record)
    assert set(by_job) == set(ids), "every enqueued job was claimed, and nothing else"
    for job_id in ids:
        claims = sorted(by_job[job_id], key=lambda r: r.attempt)
        acks = [r for r in claims if r.acked]
        assert len(acks) == 1, f"job {job_id} acked {len(acks)} times: {claims}"
        attempts = [r.attempt for r in claims]
        assert attempts == list(range(1, len(claims) + 1)), f"job {job_id}: {claims}"
        for earlier, later in itertools.pairwise(claims):
            assert later.claimed_at >= earlier.deadline, f"overlapping claims: {claims}"
    queue = store.queue(name)
    assert [job_id for job_id in ids if queue.get_job(job_id) is not None] == []
    abandoned = [r for r in records if not r.acked]
    assert abandoned, "some claims were abandoned, so reclaims were exercised"


@pytest.mark.property("QUEUE-CLAIM-EXACTLY-ONCE")
def test_threads_claim_each_job_exactly_once(
    store: Store, open_store: StoreFactory, trial: Trial
) -> None:
    ids = _fill(store, "contended")
    second = open_store()  # half the threads share a second store object
    barrier = threading.Barrier(CLAIMERS)
    acked = ThreadCounter()
    histories: list[list[ClaimRecord]] = []
    errors: list[BaseException] = []

    def claimer(index: int) -> None:
        queue = (store if index % 2 else second).queue("contended")
        try:
            barrier.wait(timeout=TIME_LIMIT_S)
            histories.append(
                claim_until_all_acked(
                    queue,
                    f"thread-{index}",
                    total=JOBS,
                    acked=acked,
                    abandon=abandon_first_claim_of_every(ABANDON_EVERY, trial.seed),
                    batch=3,
                    time_limit_s=TIME_LIMIT_S,
                )
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(CLAIMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIME_LIMIT_S * 2)
    assert errors == []
    _check_history(store, "contended", ids, [r for history in histories for r in history])


@pytest.mark.property("QUEUE-CLAIM-EXACTLY-ONCE")
@pytest.mark.requires("multi_process")
def test_processes_claim_each_job_exactly_once(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    ids = _fill(store, "contended")
    with Children(TIME_LIMIT_S * 2) as children:
        barrier = children.context.Barrier(CLAIMERS)
        acked = children.context.Value("i", 0)
        for index in range(CLAIMERS):
            children.start(
                claimer_process,
                engine_name,
                engine_group,
                engine_spec,
                "contended",
                f"process-{index}",
                barrier=barrier,
                acked=acked,
                total=JOBS,
                abandon_every=ABANDON_EVERY,
                time_limit_s=TIME_LIMIT_S,
                results=children.results,
                abandon_offset=trial.seed,
            )
        outcomes = [children.expect("claims") for _ in range(CLAIMERS)]
    records = [record for _, history in outcomes for record in history]
    _check_history(store, "contended", ids, records)
