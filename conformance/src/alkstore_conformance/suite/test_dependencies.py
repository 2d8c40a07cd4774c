"""§18 (dependencies profile): jobs that wait for other jobs.

``EnqueueOpts(after=[id, ...])`` makes a job ``waiting`` until every job it names has
completed; the last completion makes it ``pending`` in the same commit. A job it waits
for that moves to dead (or is cancelled) dead-letters it, with an error naming that
job, and so on down the graph: no waiting job is ever stranded. Ids must name jobs that
exist, so a cycle or a job waiting for itself cannot be written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from alkstore import (
    MAX_DEPENDENCIES,
    EngineProvider,
    EngineSpec,
    EnqueueOpts,
    InvalidOptions,
    Job,
    JobDependencies,
    JobHandle,
    JobState,
    Limits,
    ProfileUnavailable,
    QueueOpts,
    Store,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import Rollback, unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.ops import redrive_in_processes
from alkstore_conformance.helpers.profile_processes import (
    ack_at_the_barrier,
    dependency_acker_process,
)
from alkstore_conformance.helpers.profiles import Children, in_thread
from alkstore_conformance.helpers.trials import Trial

ACKERS = 8
"""How many processes (or threads) ack one group's dependencies at once."""
ROUNDS = 3
"""How many groups they ack, one after the other."""
DEPENDENTS = 3
"""How many jobs wait for every dependency of a group."""
TIME_LIMIT_S = 30.0
"""The bound on every wait of the concurrent properties: far above what a passing
engine needs."""
KEEP_S = 100


def _after(*ids: int) -> EnqueueOpts:
    return EnqueueOpts(after=list(ids))


def _job(queue: Any, job_id: int) -> Job:
    job: Job | None = queue.get_job(job_id)
    assert job is not None, f"job {job_id} is gone"
    return job


def _state(queue: Any, job_id: int) -> JobState | None:
    job = queue.get_job(job_id)
    return None if job is None else job.state


def _claim(queue: Any, job_id: int) -> Any:
    handle = queue.claim("w1")
    assert handle is not None, f"job {job_id} should be claimable"
    assert handle.id == job_id
    return handle


# -- DEPS-PROFILE-DECLARED (every engine) ----------------------------------------------


@pytest.mark.property("DEPS-PROFILE-DECLARED")
def test_after_works_exactly_when_the_engine_declares_the_profile(
    store: Store, engine: EngineProvider
) -> None:
    queue = store.queue(unique_name("declared"))
    first = int(queue.enqueue(1))
    if engine.capabilities.dependencies:
        waiting = queue.enqueue(2, _after(first))
        assert _state(queue, waiting) is JobState.WAITING
        assert queue.dependencies(waiting).waits_for == (first,)
        return
    with pytest.raises(ProfileUnavailable):
        queue.dependencies(first)
    for enqueue in (
        lambda: queue.enqueue(2, _after(first)),
        lambda: queue.enqueue_many([2, 3], _after(first)),
        lambda: queue.enqueue_many([], _after(first)),
    ):
        with pytest.raises(ProfileUnavailable):
            enqueue()
    if engine.capabilities.ops:
        with pytest.raises(ProfileUnavailable):
            queue.jobs(state="waiting")
        assert [job.id for job in queue.jobs()] == [first]  # nothing was written
    handle = _claim(queue, first)
    assert handle.ack()
    assert queue.claim("w1") is None


# -- DEPS-WAITING --------------------------------------------------------------------------


@pytest.mark.property("DEPS-WAITING")
def test_a_job_waits_until_its_last_dependency_completes(store: Store) -> None:
    queue = store.queue(unique_name("waits"))
    first, second = (int(i) for i in queue.enqueue_many([1, 2]))
    waiting = int(queue.enqueue({"after": "both"}, _after(first, second)))
    assert _state(queue, waiting) is JobState.WAITING
    one = _claim(queue, first)
    two = _claim(queue, second)
    assert queue.claim("w1") is None  # the waiting job is never handed out
    assert one.ack()
    assert _state(queue, waiting) is JobState.WAITING  # one dependency still runs
    assert queue.claim("w1") is None
    assert two.ack()
    job = _job(queue, waiting)
    assert (job.state, job.payload, job.attempts) == (JobState.PENDING, {"after": "both"}, 0)
    assert _claim(queue, waiting).ack()


@pytest.mark.property("DEPS-WAITING")
@pytest.mark.requires("key_limits")
def test_a_waiting_job_keeps_its_limit_key_when_released_and_when_dead(store: Store) -> None:
    queue = store.queue(unique_name("keyed"))
    first, second = (int(i) for i in queue.enqueue_many([1, 2]))
    keyed = EnqueueOpts(after=[first], limit_key="tenant-7")
    released = int(queue.enqueue({"n": "released"}, keyed))
    doomed = int(queue.enqueue({"n": "doomed"}, EnqueueOpts(after=[second], limit_key="t-8")))
    assert _job(queue, released).limit_key == "tenant-7"  # while waiting
    assert _claim(queue, first).ack()
    assert (_job(queue, released).state, _job(queue, released).limit_key) == (
        JobState.PENDING,
        "tenant-7",
    )
    assert _claim(queue, second).fail("broken")
    assert (_job(queue, doomed).state, _job(queue, doomed).limit_key) == (JobState.DEAD, "t-8")


@pytest.mark.property("DEPS-WAITING")
def test_a_waiting_job_of_another_queue_is_released_by_its_dependencys_ack(
    store: Store,
) -> None:
    charges = store.queue(unique_name("charge"))
    ships = store.queue(unique_name("ship"))
    charge = int(charges.enqueue({"order": 1}))
    ship = int(ships.enqueue({"order": 1}, _after(charge)))
    assert ships.claim("w1") is None
    assert ships.get_job(ship) is not None
    assert _claim(charges, charge).ack()
    assert _claim(ships, ship).payload == {"order": 1}


@pytest.mark.property("DEPS-WAITING")
def test_a_chain_runs_one_job_after_the_other(store: Store) -> None:
    queue = store.queue(unique_name("chain"))
    ids = [int(queue.enqueue(0))]
    for n in range(1, 4):
        ids.append(int(queue.enqueue(n, _after(ids[-1]))))
    for n, job_id in enumerate(ids):
        assert [_state(queue, i) for i in ids[n + 1 :]] == [JobState.WAITING] * (3 - n)
        handle = _claim(queue, job_id)
        assert queue.claim("w2") is None
        assert handle.ack()


def _released_by(store: Store, ack: Any, opts: QueueOpts | None = None) -> None:
    """A job waiting for one dependency (of a queue of ``opts``) is pending once
    ``ack(handle)`` acked that dependency's claim."""
    name = unique_name("paths")
    queue = store.queue(name, opts)
    plain = store.queue(name)
    dependency = int(queue.enqueue("dependency"))
    waiting = int(plain.enqueue("waiting", _after(dependency)))
    handle = _claim(queue, dependency)
    ack(handle, queue)
    assert _state(plain, waiting) is JobState.PENDING
    assert _claim(plain, waiting).ack()


@pytest.mark.property("DEPS-WAITING")
@pytest.mark.parametrize(
    "ack",
    [
        lambda h, q: h.ack(),
        lambda h, q: q.ack_batch([h.id], "w1"),
    ],
    ids=["ack", "ack_batch"],
)
def test_every_ack_path_releases_the_waiting_jobs(store: Store, ack: Any) -> None:
    _released_by(store, ack)


@pytest.mark.property("DEPS-WAITING")
def test_ack_and_claim_claims_the_job_its_ack_released(store: Store) -> None:
    queue = store.queue(unique_name("ack-and-claim"))
    dependency = int(queue.enqueue("dependency"))
    waiting = int(queue.enqueue("waiting", _after(dependency)))
    outcome = _claim(queue, dependency).ack_and_claim("w1", 1)
    assert outcome.acked
    assert [handle.id for handle in outcome.claimed] == [waiting]


@pytest.mark.property("DEPS-WAITING")
@pytest.mark.requires("results")
@pytest.mark.parametrize(
    "ack",
    [lambda h, q: h.ack(result={"ok": True}), lambda h, q: q.ack_batch([h.id], "w1")],
    ids=["ack-result", "ack_batch"],
)
def test_the_completion_of_a_kept_job_releases_the_waiting_jobs(store: Store, ack: Any) -> None:
    _released_by(store, ack, QueueOpts(completed_retention_s=KEEP_S))


def _acked_all(store: Store, handle: JobHandle) -> None:
    with store.transaction() as tx:
        assert tx.ack_all([handle]) == ()


@pytest.mark.property("DEPS-WAITING")
@pytest.mark.requires("transactions")
def test_tx_ack_all_releases_the_waiting_jobs(store: Store) -> None:
    _released_by(store, lambda h, q: _acked_all(store, h))


@pytest.mark.property("DEPS-WAITING")
@pytest.mark.requires("results", "transactions")
def test_tx_ack_all_of_a_kept_job_releases_the_waiting_jobs(store: Store) -> None:
    _released_by(store, lambda h, q: _acked_all(store, h), QueueOpts(completed_retention_s=KEEP_S))


@pytest.mark.property("DEPS-WAITING")
@pytest.mark.requires("ops")
def test_waiting_jobs_are_counted_and_listed(store: Store) -> None:
    queue = store.queue(unique_name("listed"))
    first = int(queue.enqueue(1))
    waiting = [int(i) for i in queue.enqueue_many([2, 3, 4], _after(first))]
    stats = queue.stats()
    assert (stats.waiting, stats.ready, stats.scheduled) == (3, 1, 0)
    assert [job.id for job in queue.jobs(state="waiting")] == waiting
    assert [job.id for job in queue.jobs(state=JobState.WAITING, after_id=waiting[0])] == (
        waiting[1:]
    )
    newest = queue.jobs(state="waiting", before_id=waiting[-1], limit=1)
    assert [job.id for job in newest] == [waiting[1]]
    assert [job.id for job in queue.jobs()] == [first, *waiting]
    assert queue.name in {s.queue for s in store.stats() if s.waiting == 3}


@pytest.mark.property("DEPS-FINISHED-DEPENDENCY")
@pytest.mark.requires("results")
def test_a_dependency_completed_and_kept_is_satisfied_at_enqueue(store: Store) -> None:
    kept = store.queue(unique_name("kept"), QueueOpts(completed_retention_s=KEEP_S))
    done = int(kept.enqueue(1))
    assert _claim(kept, done).ack(result=1)
    pending = int(kept.enqueue(2, _after(done)))
    assert _state(kept, pending) is JobState.PENDING
    live = int(kept.enqueue(3))
    both = int(kept.enqueue(4, _after(done, live)))
    assert _state(kept, both) is JobState.WAITING  # only the live one is waited for


@pytest.mark.property("DEPS-FINISHED-DEPENDENCY")
def test_a_dependency_acked_without_a_retention_cannot_be_waited_for(store: Store) -> None:
    queue = store.queue(unique_name("gone"))
    done = int(queue.enqueue(1))
    assert _claim(queue, done).ack()  # deleted: as absent as a job never issued
    with pytest.raises(InvalidOptions, match=f"no job {done}"):
        queue.enqueue(2, _after(done))
    assert queue.claim("w1") is None


@pytest.mark.property("DEPS-FINISHED-DEPENDENCY")
@pytest.mark.requires("results")
def test_a_dependency_swept_after_its_retention_cannot_be_waited_for(
    clocked_store: Store, clock: FakeClock
) -> None:
    kept = clocked_store.queue(unique_name("swept"), QueueOpts(completed_retention_s=KEEP_S))
    done = int(kept.enqueue(1))
    assert _claim(kept, done).ack()
    clock.advance(KEEP_S + 1)
    assert kept.sweep_expired().purged_completed == 1
    with pytest.raises(InvalidOptions, match=f"no job {done}"):
        kept.enqueue(2, _after(done))


# -- DEPS-RELEASE-IN-ACK-COMMIT -----------------------------------------------------------


@pytest.mark.property("DEPS-RELEASE-IN-ACK-COMMIT")
def test_the_dependent_is_pending_as_soon_as_the_ack_returns(store: Store) -> None:
    queue = store.queue(unique_name("same-commit"))
    others = store.queue(unique_name("same-commit-other"))
    dependency = int(queue.enqueue(1))
    waiting = int(others.enqueue(2, _after(dependency)))
    handle = _claim(queue, dependency)
    assert handle.ack()
    # No other write ran in between: the release was part of the ack's own commit.
    assert _state(others, waiting) is JobState.PENDING
    assert _claim(others, waiting).ack()


@pytest.mark.property("DEPS-RELEASE-IN-ACK-COMMIT")
@pytest.mark.requires("transactions")
def test_a_rolled_back_tx_ack_leaves_the_dependent_waiting(store: Store) -> None:
    queue = store.queue(unique_name("tx-ack"))
    dependency = int(queue.enqueue(1))
    waiting = int(queue.enqueue(2, _after(dependency)))
    handle = _claim(queue, dependency)

    def ack_then_roll_back() -> None:
        with store.transaction() as tx:
            tx.ack(handle)
            raise Rollback

    with pytest.raises(Rollback):
        ack_then_roll_back()
    queue.enqueue("a write after the rollback")
    assert _state(queue, waiting) is JobState.WAITING
    assert _state(queue, dependency) is JobState.PROCESSING
    with store.transaction() as tx:
        tx.ack(handle)
    assert _state(queue, waiting) is JobState.PENDING


def _concurrent_groups(
    store: Store, name: str, fan_in: bool = False
) -> tuple[list[str], dict[int, list[int]]]:
    """``ROUNDS`` groups of ``ACKERS`` dependencies, each on a queue of its own, and
    ``DEPENDENTS`` jobs of ``name`` waiting for every dependency of a group (to finish
    whatever its outcome, ``fan_in``): the queue names and, per dependent, its
    dependencies."""
    queues = [f"{name}-deps-{n}" for n in range(ROUNDS)]
    waits: dict[int, list[int]] = {}
    dependents = store.queue(name)
    for queue_name in queues:
        group = [int(i) for i in store.queue(queue_name).enqueue_many(list(range(ACKERS)))]
        opts = EnqueueOpts(after_finished=group) if fan_in else EnqueueOpts(after=group)
        for n in range(DEPENDENTS):
            waits[int(dependents.enqueue({"n": n}, opts))] = group
    return queues, waits


def _claim_dependents(store: Store, name: str, waits: dict[int, list[int]]) -> list[str]:
    """Claim and ack the dependents of ``name`` as they come, checking at each claim that
    every job it waits for has finished; what went wrong, if anything."""
    queue = store.queue(name)
    problems: list[str] = []
    claimed: list[int] = []
    while len(claimed) < len(waits):
        handle = queue.claim_wait("watcher", timeout=TIME_LIMIT_S)
        if handle is None:
            problems.append(f"dependents never released: {sorted(set(waits) - set(claimed))}")
            break
        live = [
            d
            for d in waits.get(handle.id, [])
            if _state(queue, d) in (JobState.PENDING, JobState.PROCESSING)
        ]
        if live:
            problems.append(f"job {handle.id} was claimed while {live} had not completed")
        claimed.append(handle.id)
        handle.ack()
    if sorted(claimed) != sorted(waits):
        problems.append(f"claimed {sorted(claimed)}, expected each of {sorted(waits)} once")
    return problems


@pytest.mark.property("DEPS-RELEASE-IN-ACK-COMMIT")
def test_threads_acking_the_dependencies_at_once_release_each_dependent_once(
    store: Store,
) -> None:
    name = unique_name("threads")
    queues, waits = _concurrent_groups(store, name)
    barrier = threading.Barrier(ACKERS)
    errors: list[BaseException] = []

    def acker(index: int) -> None:
        try:
            for queue_name in queues:
                ack_at_the_barrier(store.queue(queue_name), f"t{index}", barrier, TIME_LIMIT_S)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=acker, args=(i,), daemon=True) for i in range(ACKERS)]
    for thread in threads:
        thread.start()
    problems = _claim_dependents(store, name, waits)
    for thread in threads:
        thread.join(TIME_LIMIT_S)
    assert not errors, errors
    assert problems == []


@pytest.mark.property("DEPS-RELEASE-IN-ACK-COMMIT")
@pytest.mark.requires("multi_process")
def test_processes_acking_the_dependencies_at_once_release_each_dependent_once(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    name = unique_name(f"processes-{trial.seed}")
    queues, waits = _concurrent_groups(store, name)
    with Children(TIME_LIMIT_S * 2) as children:
        barrier = children.context.Barrier(ACKERS)
        for index in range(ACKERS):
            children.start(
                dependency_acker_process,
                engine_name,
                engine_group,
                engine_spec,
                queues,
                f"process-{index}",
                barrier=barrier,
                results=children.results,
                time_limit_s=TIME_LIMIT_S,
            )
        problems = _claim_dependents(store, name, waits)
        acked = [children.expect("acked") for _ in range(ACKERS)]
    assert problems == []
    assert sorted(i for ids in acked for i in ids) == sorted({d for g in waits.values() for d in g})
    assert store.queue(name).claim("w1") is None


# -- DEPS-DEAD-CASCADE --------------------------------------------------------------------


def _graph(store: Store) -> tuple[Any, int, int, int]:
    """A dependency, a job waiting for it and one waiting for that one."""
    queue = store.queue(unique_name("cascade"), QueueOpts(max_attempts=1))
    root = int(queue.enqueue("root"))
    child = int(queue.enqueue("child", _after(root)))
    grandchild = int(queue.enqueue("grandchild", _after(child)))
    return queue, root, child, grandchild


def _dead_because(queue: Any, job_id: int, dependency: int, verb: str = "is dead") -> None:
    job = _job(queue, job_id)
    assert job.state is JobState.DEAD
    assert job.last_error == f"dependency {dependency} {verb}"
    assert job.died_at is not None


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_a_failed_dependency_dead_letters_its_dependents_transitively(store: Store) -> None:
    queue, root, child, grandchild = _graph(store)
    assert _claim(queue, root).fail("broken")
    _dead_because(queue, child, root)
    _dead_because(queue, grandchild, child)
    assert queue.claim("w1") is None


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_a_dependency_retried_past_its_budget_dead_letters_its_dependents(
    store: Store,
) -> None:
    queue, root, child, grandchild = _graph(store)
    assert _claim(queue, root).retry("again")  # max_attempts=1: to dead
    _dead_because(queue, child, root)
    _dead_because(queue, grandchild, child)


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_a_cancelled_dependency_dead_letters_its_dependents(store: Store) -> None:
    queue, root, child, grandchild = _graph(store)
    assert queue.cancel(root)
    assert queue.get_job(root) is None
    _dead_because(queue, child, root, "was cancelled")
    _dead_because(queue, grandchild, child)


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_a_cancelled_waiting_job_is_gone_and_dead_letters_its_own_dependents(
    store: Store,
) -> None:
    queue, root, child, grandchild = _graph(store)
    assert queue.cancel(child)
    assert queue.get_job(child) is None
    _dead_because(queue, grandchild, child, "was cancelled")
    handle = _claim(queue, root)
    assert handle.ack()  # the cancelled job's edge is gone: nothing to release
    assert queue.claim("w1") is None


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_an_expired_dependency_swept_dead_letters_its_dependents(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("expired"))
    root = int(queue.enqueue("root", EnqueueOpts(expires=10)))
    child = int(queue.enqueue("child", _after(root)))
    clock.advance(11)
    assert queue.sweep_expired().expired == 1
    _dead_because(queue, child, root)


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_a_waiting_job_past_its_expiry_is_swept_dead_with_its_dependents(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("expires-waiting"))
    root = int(queue.enqueue("root"))
    child = int(queue.enqueue("child", EnqueueOpts(after=[root], expires=10)))
    grandchild = int(queue.enqueue("grandchild", _after(child)))
    clock.advance(11)
    assert queue.sweep_expired().expired == 1
    child_job = _job(queue, child)
    assert (child_job.state, child_job.last_error) == (JobState.DEAD, "expired")
    _dead_because(queue, grandchild, child)
    assert _claim(queue, root).ack()
    assert queue.claim("w1") is None  # the dead job stays dead


BURYING_LIMITS = {
    "concurrency": (Limits(concurrency=5), "limits"),
    "rate": (Limits(rate=100, per=1), "limits"),
    "per-key": (Limits(concurrency=5, concurrency_per_key=2), "key_limits"),
    "per-key-rate": (Limits(rate=100, per=1, rate_per_key=50), "key_limits"),
}
"""Limits that never bind, each taking the claim its engine makes of a limited queue
(a per-key one claims in turn): every claim path buries what it finds exhausted."""


@pytest.mark.property("DEPS-DEAD-CASCADE")
@pytest.mark.requires("limits")
@pytest.mark.parametrize("limits", sorted(BURYING_LIMITS))
def test_a_limited_claim_that_buries_a_lapsed_dependency_dead_letters_its_dependents(
    clocked_store: Store, clock: FakeClock, requires: Callable[[str], None], limits: str
) -> None:
    # §4: a claim first moves its queue's lapsed claims at their budget to dead; a
    # dependency buried there dead-letters its dependents as any other death does.
    chosen, profile = BURYING_LIMITS[limits]
    requires(profile)
    queue = clocked_store.queue(
        unique_name("buried"), QueueOpts(max_attempts=1, visibility_timeout_s=5)
    )
    assert queue.set_limits(chosen) is True
    keyed = profile == "key_limits"
    root = int(queue.enqueue("root", EnqueueOpts(limit_key="a" if keyed else None)))
    child = int(queue.enqueue("child", EnqueueOpts(after=[root], limit_key="b" if keyed else None)))
    assert _claim(queue, root).id == root
    clock.advance(6)  # the claim lapses at its budget
    assert queue.claim("w2") is None  # buries the root: its child dies with it
    assert _job(queue, root).state is JobState.DEAD
    _dead_because(queue, child, root)


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_a_job_waiting_for_two_dies_with_the_first_and_stays_dead(store: Store) -> None:
    queue = store.queue(unique_name("two"), QueueOpts(max_attempts=1))
    first, second = (int(i) for i in queue.enqueue_many([1, 2]))
    both = int(queue.enqueue(3, _after(first, second)))
    one, two = _claim(queue, first), _claim(queue, second)
    assert one.fail("broken")
    _dead_because(queue, both, first)
    assert two.ack()
    _dead_because(queue, both, first)
    assert queue.claim("w1") is None


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_a_diamond_dead_letters_the_job_below_it_once(store: Store) -> None:
    queue = store.queue(unique_name("diamond"))
    root = int(queue.enqueue("root"))
    left = int(queue.enqueue("left", _after(root)))
    right = int(queue.enqueue("right", _after(root)))
    bottom = int(queue.enqueue("bottom", _after(left, right, root)))
    assert _claim(queue, root).fail("broken")
    _dead_because(queue, left, root)
    _dead_because(queue, right, root)
    _dead_because(queue, bottom, root)  # it waited for root itself: it names root


@pytest.mark.property("DEPS-DEAD-CASCADE")
def test_the_cascade_goes_level_by_level_in_id_order(store: Store) -> None:
    queue = store.queue(unique_name("levels"))
    root = int(queue.enqueue("root"))
    first = int(queue.enqueue("first", _after(root)))
    second = int(queue.enqueue("second", _after(root)))
    below_first = int(queue.enqueue("below first", _after(first)))
    last = int(queue.enqueue("last", _after(below_first, second)))
    assert _claim(queue, root).fail("broken")
    _dead_because(queue, first, root)
    _dead_because(queue, second, root)
    _dead_because(queue, below_first, first)
    _dead_because(queue, last, below_first)  # first's line is passed on before second's


# -- DEPS-REFUSED ---------------------------------------------------------------------------


@pytest.mark.property("DEPS-REFUSED")
@pytest.mark.parametrize(
    "after",
    [
        ["1"],
        [True],
        [0],
        [-3],
        [1.5],
        "12",
        7,
        [5, 5],
        list(range(1, MAX_DEPENDENCIES + 2)),
    ],
    ids=["str", "bool", "zero", "negative", "float", "text", "int", "duplicate", "too-many"],
)
def test_after_that_is_not_a_list_of_distinct_job_ids_is_refused(after: Any) -> None:
    with pytest.raises(InvalidOptions, match="after"):
        EnqueueOpts(after=after)


@pytest.mark.property("DEPS-REFUSED")
def test_unknown_dead_and_not_yet_issued_ids_are_refused_with_nothing_written(
    store: Store,
) -> None:
    queue = store.queue(unique_name("refused"))
    failing = store.queue(unique_name("refused-dead"))
    dead = int(failing.enqueue("dead"))
    assert _claim(failing, dead).fail("broken")
    live = int(queue.enqueue("live"))
    unissued = live + 1_000_000  # an id no job of this store has: itself, a cycle's
    for after, message in (
        ([unissued], f"no job {unissued}"),
        ([live, dead], f"job {dead} is dead"),
        ([live, unissued], f"no job {unissued}"),
    ):
        with pytest.raises(InvalidOptions, match=message):
            queue.enqueue("refused", _after(*after))
        with pytest.raises(InvalidOptions, match=message):
            queue.enqueue_many(["refused", "too"], _after(*after))
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == live  # nothing else was written: the live job is the only one
    assert queue.claim("w2") is None


@pytest.mark.property("DEPS-REFUSED")
@pytest.mark.requires("unique")
def test_after_with_a_unique_key_is_refused(store: Store) -> None:
    queue = store.queue(unique_name("unique"))
    first = int(queue.enqueue(1))
    with pytest.raises(InvalidOptions, match="unique"):
        queue.enqueue(2, EnqueueOpts(after=[first], unique="k"))


# -- DEPS-TRANSACTIONS ------------------------------------------------------------------------


@pytest.mark.property("DEPS-TRANSACTIONS")
@pytest.mark.requires("transactions")
def test_a_graph_enqueued_in_one_transaction_waits_after_its_commit(store: Store) -> None:
    name = unique_name("graph")
    queue = store.queue(name)
    with store.transaction() as tx:
        charge = int(tx.enqueue(name, "charge"))
        ship = int(tx.enqueue(name, "ship", _after(charge)))
        email = int(tx.enqueue(name, "email", _after(ship)))
    assert [_state(queue, i) for i in (charge, ship, email)] == [
        JobState.PENDING,
        JobState.WAITING,
        JobState.WAITING,
    ]
    for job_id in (charge, ship, email):
        assert _claim(queue, job_id).ack()


@pytest.mark.property("DEPS-TRANSACTIONS")
@pytest.mark.requires("transactions")
def test_a_rolled_back_graph_leaves_nothing(store: Store) -> None:
    name = unique_name("rolled-back")
    queue = store.queue(name)
    ids: list[int] = []

    def enqueue_then_roll_back() -> None:
        with store.transaction() as tx:
            ids.append(int(tx.enqueue(name, "first")))
            ids.append(int(tx.enqueue(name, "second", _after(ids[0]))))
            raise Rollback

    with pytest.raises(Rollback):
        enqueue_then_roll_back()
    assert [queue.get_job(i) for i in ids] == [None, None]
    assert queue.claim("w1") is None


@pytest.mark.property("DEPS-TRANSACTIONS")
@pytest.mark.requires("transactions")
def test_a_refused_dependency_in_a_transaction_raises_there_and_writes_nothing(
    store: Store,
) -> None:
    name = unique_name("tx-refused")
    queue = store.queue(name)
    with store.transaction() as tx:
        kept = int(tx.enqueue(name, "kept"))
        with pytest.raises(InvalidOptions, match="no job"):
            tx.enqueue(name, "refused", _after(kept + 1_000_000))
    handle = _claim(queue, kept)
    assert handle.ack()
    assert queue.claim("w1") is None


# -- DEPS-EDGES ------------------------------------------------------------------------------


def _edges(queue: Any, job_id: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    found: JobDependencies = queue.dependencies(job_id)
    assert found.job_id == job_id
    return found.waits_for, found.waited_by


@pytest.mark.property("DEPS-EDGES")
def test_the_edges_of_a_graph_are_read_both_ways_across_queues(store: Store) -> None:
    charges = store.queue(unique_name("charges"))
    ships = store.queue(unique_name("ships"))
    first, second = (int(i) for i in charges.enqueue_many([1, 2]))
    ship = int(ships.enqueue("ship", _after(second, first)))
    email = int(charges.enqueue("email", _after(ship)))
    assert _edges(ships, ship) == ((first, second), (email,))
    assert _edges(charges, first) == ((), (ship,))
    assert _edges(ships, second) == ((), (ship,))  # whatever queue handle reads it
    assert _edges(charges, email) == ((ship,), ())
    assert _edges(charges, email + 1_000_000) == ((), ())
    assert _claim(charges, first).ack()
    assert _edges(ships, ship) == ((second,), (email,))  # the finished one is gone
    assert _edges(charges, first) == ((), ())
    assert _claim(charges, second).ack()
    assert _state(ships, ship) is JobState.PENDING
    assert _edges(ships, ship) == ((), (email,))  # released: it waits no more


@pytest.mark.property("DEPS-EDGES")
def test_a_fan_in_lists_the_members_it_still_waits_for(store: Store) -> None:
    members = store.queue(unique_name("fan-members"), QueueOpts(max_attempts=1))
    ids = [int(i) for i in members.enqueue_many([1, 2, 3])]
    callback = int(members.enqueue("report", EnqueueOpts(after_finished=ids)))
    assert _edges(members, callback) == (tuple(ids), ())
    handles = {h.id: h for h in members.claim_batch("w1", 3)}
    assert handles[ids[1]].fail("declined")  # a dead member has finished: no cascade
    assert _edges(members, callback) == ((ids[0], ids[2]), ())
    assert _edges(members, ids[1]) == ((), ())
    assert members.cancel(ids[2])
    assert handles[ids[0]].ack()
    assert _edges(members, callback) == ((), ())


@pytest.mark.property("DEPS-EDGES")
def test_a_waiting_job_that_dies_or_is_cancelled_leaves_no_edge(store: Store) -> None:
    queue = store.queue(unique_name("edges-gone"), QueueOpts(max_attempts=1))
    root = int(queue.enqueue("root"))
    doomed, cancelled = (int(i) for i in queue.enqueue_many(["doomed", "cancelled"], _after(root)))
    leaf = int(queue.enqueue("leaf", _after(doomed)))
    assert _edges(queue, root) == ((), (doomed, cancelled))
    assert queue.cancel(cancelled)
    assert _edges(queue, root) == ((), (doomed,))
    assert _claim(queue, root).fail("broken")  # doomed and leaf die with it
    assert [_state(queue, i) for i in (doomed, leaf)] == [JobState.DEAD] * 2
    assert [_edges(queue, i) for i in (root, doomed, leaf)] == [((), ())] * 3


# -- DEPS-REDRIVE ------------------------------------------------------------------------------


def _revived(queue: Any, new_dependency: int) -> int:
    """The one job brought back waiting for ``new_dependency`` by its redrive (§18.4)."""
    _, waited_by = _edges(queue, new_dependency)
    assert len(waited_by) == 1, f"one job should wait for {new_dependency}, got {waited_by}"
    return waited_by[0]


@pytest.mark.property("DEPS-REDRIVE")
@pytest.mark.requires("ops")
def test_a_dependent_redriven_itself_is_a_new_pending_job_without_dependencies(
    store: Store,
) -> None:
    queue, root, child, _ = _graph(store)
    assert _claim(queue, root).fail("broken")
    (new_child,) = queue.redrive([child])
    job = _job(queue, new_child)
    assert (job.state, job.payload, job.redriven_from) == (JobState.PENDING, "child", child)
    assert _edges(queue, new_child)[0] == ()
    assert _state(queue, root) is JobState.DEAD


@pytest.mark.property("DEPS-REDRIVE")
@pytest.mark.requires("ops")
def test_a_dependent_redriven_itself_waits_for_its_dependencies_that_can_still_complete(
    store: Store,
) -> None:
    queue = store.queue(unique_name("redrive-live"), QueueOpts(max_attempts=1))
    failed, running = (int(i) for i in queue.enqueue_many(["failed", "running"]))
    both = int(queue.enqueue("both", _after(failed, running)))
    assert _claim(queue, failed).fail("broken")
    (new_both,) = queue.redrive([both])
    assert _state(queue, new_both) is JobState.WAITING
    assert _edges(queue, new_both) == ((running,), ())
    assert _claim(queue, running).ack()
    assert _state(queue, new_both) is JobState.PENDING


@pytest.mark.property("DEPS-REDRIVE")
@pytest.mark.requires("ops")
def test_a_dependent_redriven_itself_brings_its_own_dependents_back(store: Store) -> None:
    queue, root, child, grandchild = _graph(store)
    assert _claim(queue, root).fail("broken")
    (new_child,) = queue.redrive([child])
    new_grandchild = _revived(queue, new_child)
    job = _job(queue, new_grandchild)
    assert (job.state, job.redriven_from) == (JobState.WAITING, grandchild)
    (new_root,) = queue.redrive([root])  # child is no dead job any more: none comes back
    assert _edges(queue, new_root) == ((), ())


# -- DEPS-REDRIVE-REVIVES ----------------------------------------------------------------------


@pytest.mark.property("DEPS-REDRIVE-REVIVES")
@pytest.mark.requires("ops")
def test_a_redriven_dependency_brings_its_dependents_back_waiting_down_the_graph(
    store: Store,
) -> None:
    roots = store.queue(unique_name("revive-roots"), QueueOpts(max_attempts=1))
    others = store.queue(unique_name("revive-others"))
    root = int(roots.enqueue("root"))
    child = int(others.enqueue("child", _after(root)))
    grandchild = int(roots.enqueue("grandchild", _after(child)))
    assert _claim(roots, root).fail("broken")
    (new_root,) = roots.redrive([root])
    new_child = _revived(roots, new_root)
    new_grandchild = _revived(roots, new_child)
    revived = [_job(others, new_child), _job(roots, new_grandchild)]
    assert [(j.state, j.queue, j.payload, j.redriven_from) for j in revived] == [
        (JobState.WAITING, others.name, "child", child),
        (JobState.WAITING, roots.name, "grandchild", grandchild),
    ]
    assert _edges(others, new_child) == ((new_root,), (new_grandchild,))
    assert [_state(roots, i) for i in (child, grandchild)] == [None, None]  # dead rows gone


@pytest.mark.property("DEPS-REDRIVE-REVIVES")
@pytest.mark.requires("ops")
def test_revived_dependents_run_in_order_once_the_new_dependency_completes(store: Store) -> None:
    queue, root, _, _ = _graph(store)
    assert _claim(queue, root).fail("broken")
    (new_root,) = queue.redrive([root])
    new_child = _revived(queue, new_root)
    new_grandchild = _revived(queue, new_child)
    assert queue.stats().waiting == 2
    assert _claim(queue, new_root).ack()
    assert [_state(queue, i) for i in (new_child, new_grandchild)] == [
        JobState.PENDING,
        JobState.WAITING,
    ]
    assert _claim(queue, new_child).ack()
    assert _claim(queue, new_grandchild).ack()
    assert queue.claim("w1") is None


@pytest.mark.property("DEPS-REDRIVE-REVIVES")
@pytest.mark.requires("ops")
def test_a_dependent_of_two_dead_jobs_comes_back_once_both_are_redriven(store: Store) -> None:
    queue = store.queue(unique_name("revive-two"), QueueOpts(max_attempts=1))
    first, second = (int(i) for i in queue.enqueue_many(["first", "second"]))
    both = int(queue.enqueue("both", _after(first, second)))
    handles = {h.id: h for h in queue.claim_batch("w1", 2)}
    assert handles[first].fail("broken")
    assert handles[second].fail("broken too")
    (new_first,) = queue.redrive([first])
    assert _edges(queue, new_first) == ((), ())
    _dead_because(queue, both, first)  # it still waits for a dead job: it stays dead
    (new_second,) = queue.redrive([second])
    revived = _revived(queue, new_second)
    assert _edges(queue, revived) == ((new_first, new_second), ())
    assert _job(queue, revived).redriven_from == both


@pytest.mark.property("DEPS-REDRIVE-REVIVES")
@pytest.mark.requires("ops")
def test_a_kept_dependency_that_completed_meanwhile_is_not_waited_for_again(
    store: Store,
) -> None:
    queue = store.queue(unique_name("revive-done"), QueueOpts(max_attempts=1))
    failed, acked = (int(i) for i in queue.enqueue_many(["failed", "acked"]))
    both = int(queue.enqueue("both", _after(failed, acked)))
    handles = {h.id: h for h in queue.claim_batch("w1", 2)}
    assert handles[failed].fail("broken")
    assert handles[acked].ack()  # both is dead by now; acked has completed all the same
    (new_failed,) = queue.redrive([failed])
    revived = _revived(queue, new_failed)
    assert _job(queue, revived).redriven_from == both
    assert _edges(queue, revived) == ((new_failed,), ())
    assert _claim(queue, new_failed).ack()
    assert _state(queue, revived) is JobState.PENDING


@pytest.mark.property("DEPS-REDRIVE-REVIVES")
@pytest.mark.requires("ops")
def test_a_dependent_of_a_cancelled_dependency_stays_dead(store: Store) -> None:
    queue = store.queue(unique_name("revive-cancelled"), QueueOpts(max_attempts=1))
    cancelled, failed = (int(i) for i in queue.enqueue_many(["cancelled", "failed"]))
    both = int(queue.enqueue("both", _after(cancelled, failed)))
    assert queue.cancel(cancelled)
    _dead_because(queue, both, cancelled, "was cancelled")
    assert _claim(queue, failed).fail("broken")
    (new_failed,) = queue.redrive([failed])
    assert _edges(queue, new_failed) == ((), ())
    _dead_because(queue, both, cancelled, "was cancelled")


@pytest.mark.property("DEPS-REDRIVE-REVIVES")
@pytest.mark.requires("ops")
def test_a_purged_dependent_is_left_alone_and_so_are_its_dependents(store: Store) -> None:
    queue, root, child, grandchild = _graph(store)
    assert _claim(queue, root).fail("broken")
    assert queue.purge_dead([child]) == 1
    (new_root,) = queue.redrive([root])
    assert _edges(queue, new_root) == ((), ())
    _dead_because(queue, grandchild, child)


@pytest.mark.property("DEPS-REDRIVE")
@pytest.mark.requires("ops")
def test_dependents_redriven_with_their_dependency_wait_for_its_new_job(store: Store) -> None:
    queue, root, child, grandchild = _graph(store)
    assert _claim(queue, root).fail("broken")
    new_root, new_child, new_grandchild = queue.redrive()  # all died at once: id order
    assert [_job(queue, i).redriven_from for i in (new_root, new_child, new_grandchild)] == [
        root,
        child,
        grandchild,
    ]
    assert [_edges(queue, i) for i in (new_root, new_child, new_grandchild)] == [
        ((), (new_child,)),
        ((new_root,), (new_grandchild,)),
        ((new_child,), ()),
    ]
    assert queue.stats().waiting == 2


# -- DEPS-REDRIVE-RACE ---------------------------------------------------------------------------

RACED_PAIRS = 8
"""How many dead dependents, each of two dead dependencies, two operators race over in
one round."""
RACE_ROUNDS = 4
"""How many rounds of that race one trial runs, each on a graph of its own: a race the
two redrives' timing hides in one round shows in another."""
OPERATORS = 2

Pairs = list[tuple[int, int, int]]


def _dead_pairs(store: Store, name: str) -> tuple[Any, Pairs]:
    """``RACED_PAIRS`` jobs, each waiting for two jobs of its own; all three are dead
    (the two failed, so each dependent died of them): ``(first, second, dependent)``."""
    queue = store.queue(name, QueueOpts(max_attempts=1))
    ids = [int(i) for i in queue.enqueue_many(list(range(2 * RACED_PAIRS)))]
    pairs = [(ids[2 * i], ids[2 * i + 1]) for i in range(RACED_PAIRS)]
    dependents = [int(queue.enqueue("both", _after(first, second))) for first, second in pairs]
    handles = queue.claim_batch("w1", 2 * RACED_PAIRS)
    assert sorted(h.id for h in handles) == ids
    for handle in handles:
        assert handle.fail("broken")
    for (first, _), dependent in zip(pairs, dependents, strict=True):
        _dead_because(queue, dependent, first)
    return queue, [(f, s, d) for (f, s), d in zip(pairs, dependents, strict=True)]


def _race_rounds(store: Store, trial: Trial) -> list[tuple[Any, Pairs, list[list[int]]]]:
    """``RACE_ROUNDS`` graphs of dead pairs, each in a queue of its own, with what each
    operator redrives in it: one dependency of every pair each, which one drawn by the
    trial."""
    rng = trial.random()
    rounds = []
    for number in range(RACE_ROUNDS):
        queue, pairs = _dead_pairs(store, unique_name(f"raced-pairs-{trial.seed}-{number}"))
        halves: list[list[int]] = [[] for _ in range(OPERATORS)]
        for first, second, _ in pairs:
            mine, theirs = (first, second) if rng.random() < 0.5 else (second, first)
            halves[0].append(mine)
            halves[1].append(theirs)
        rounds.append((queue, pairs, halves))
    return rounds


def _each_dependent_back_once(queue: Any, pairs: Pairs, made: list[int]) -> None:
    """Every dependent came back once, waiting for both new jobs of its dependencies
    (``made``: the new ids the operators' redrives of this queue returned)."""
    new = {_job(queue, fresh).redriven_from: fresh for fresh in made}
    assert len(new) == 2 * len(pairs), f"{2 * len(pairs)} dead dependencies, new jobs {made}"
    for first, second, dependent in pairs:
        new_first, new_second = new[first], new[second]
        _, first_waited_by = _edges(queue, new_first)
        _, second_waited_by = _edges(queue, new_second)
        waited_by = {new_first: first_waited_by, new_second: second_waited_by}
        assert (first_waited_by, len(first_waited_by)) == (second_waited_by, 1), (
            f"dependent {dependent} of {first} and {second} should come back once, waiting "
            f"for their new jobs; the jobs waiting for each new job: {waited_by} "
            f"(it is {_state(queue, dependent)} still)"
        )
        (revived,) = first_waited_by
        job = _job(queue, revived)
        assert (job.state, job.redriven_from) == (JobState.WAITING, dependent)
        assert _edges(queue, revived) == (tuple(sorted((new_first, new_second))), ())
        assert _state(queue, dependent) is None  # its dead row went with its revival


def _each_round_back_once(
    rounds: list[tuple[Any, Pairs, list[list[int]]]], made: list[list[list[int]]]
) -> None:
    """``made``: for each operator, the new ids its redrive of each round returned."""
    for number, (queue, pairs, _) in enumerate(rounds):
        _each_dependent_back_once(queue, pairs, [i for mine in made for i in mine[number]])


@pytest.mark.property("DEPS-REDRIVE-RACE")
@pytest.mark.requires("ops")
def test_operators_in_threads_redriving_both_dependencies_at_once_bring_each_dependent_back(
    store: Store, open_store: StoreFactory, trial: Trial
) -> None:
    rounds = _race_rounds(store, trial)
    barrier = threading.Barrier(OPERATORS)
    operators = [open_store() for _ in range(OPERATORS)]

    def redrive(index: int) -> list[list[int]]:
        made: list[list[int]] = []
        for queue, _, halves in rounds:
            barrier.wait(TIME_LIMIT_S)
            made.append(operators[index].queue(queue.name).redrive(halves[index]))
        return made

    running = [in_thread(partial(redrive, i), f"operator-{i}") for i in range(OPERATORS)]
    _each_round_back_once(rounds, [outcome.join(TIME_LIMIT_S) for outcome in running])


@pytest.mark.property("DEPS-REDRIVE-RACE")
@pytest.mark.requires("ops", "multi_process")
def test_operators_in_processes_redriving_both_dependencies_at_once_bring_each_dependent_back(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rounds = _race_rounds(store, trial)
    plans: list[list[tuple[str, list[int] | None]]] = [
        [(queue.name, halves[index]) for queue, _, halves in rounds] for index in range(OPERATORS)
    ]
    engine_ref = (engine_name, engine_group, engine_spec)
    _each_round_back_once(rounds, redrive_in_processes(engine_ref, plans, TIME_LIMIT_S))


# -- DEPS-FAN-IN ---------------------------------------------------------------------------------


@pytest.mark.property("DEPS-FAN-IN")
def test_a_fan_in_runs_once_every_member_finished_whatever_its_outcome(store: Store) -> None:
    members = store.queue(unique_name("members"), QueueOpts(max_attempts=1))
    report = store.queue(unique_name("report"))
    acked, failed, cancelled, retried = (int(i) for i in members.enqueue_many([1, 2, 3, 4]))
    callback = int(
        report.enqueue("report", EnqueueOpts(after_finished=[acked, failed, cancelled, retried]))
    )
    handles = {h.id: h for h in members.claim_batch("w1", 3)}
    assert set(handles) == {acked, failed, cancelled}
    assert handles[failed].fail("declined")
    assert _state(report, callback) is JobState.WAITING  # a dead member finished: no cascade
    assert members.cancel(cancelled)
    assert handles[acked].ack()
    assert _state(report, callback) is JobState.WAITING
    assert report.claim("w1") is None
    assert _claim(members, retried).retry("again")  # past its budget: dead, the last one
    assert _state(report, callback) is JobState.PENDING
    assert _claim(report, callback).ack()
    assert report.claim("w1") is None


@pytest.mark.property("DEPS-FAN-IN")
@pytest.mark.requires("results")
def test_a_fan_in_reads_its_members_outcomes(store: Store) -> None:
    members = store.queue(unique_name("kept-members"), QueueOpts(completed_retention_s=KEEP_S))
    ids = [int(i) for i in members.enqueue_many([{"n": 1}, {"n": 2}])]
    callback = int(members.enqueue({"members": ids}, EnqueueOpts(after_finished=ids)))
    first, second = (_claim(members, i) for i in ids)
    assert first.ack(result={"charged": 10})
    assert second.fail("card declined")
    handle = _claim(members, callback)
    outcomes = [_job(members, i) for i in handle.payload["members"]]
    assert [(job.state, job.result, job.last_error) for job in outcomes] == [
        (JobState.COMPLETED, {"charged": 10}, None),
        (JobState.DEAD, None, "card declined"),
    ]


@pytest.mark.property("DEPS-FAN-IN")
def test_a_fan_in_on_finished_members_is_pending_at_once(store: Store) -> None:
    members = store.queue(unique_name("finished-members"))
    dead = int(members.enqueue("dead"))
    assert _claim(members, dead).fail("broken")
    callback = int(members.enqueue("report", EnqueueOpts(after_finished=[dead])))
    assert _state(members, callback) is JobState.PENDING
    assert _claim(members, callback).ack()
    done = int(members.enqueue("acked"))
    assert _claim(members, done).ack()
    with pytest.raises(InvalidOptions, match=f"no job {done}"):  # gone: never finished, to it
        members.enqueue("report", EnqueueOpts(after_finished=[done]))


@pytest.mark.property("DEPS-FAN-IN")
def test_a_fan_in_waiting_for_a_dependent_counts_its_cascaded_death(store: Store) -> None:
    queue = store.queue(unique_name("fan-in-cascade"))
    root = int(queue.enqueue("root"))
    child = int(queue.enqueue("child", _after(root)))
    callback = int(queue.enqueue("report", EnqueueOpts(after_finished=[root, child])))
    assert _claim(queue, root).fail("broken")  # child dies with it: both finished
    _dead_because(queue, child, root)
    assert _state(queue, callback) is JobState.PENDING


CLAIM_PATHS = {"unlimited": (None, "dependencies"), **BURYING_LIMITS}
"""Every claim path: the plain claim, and each a limited queue takes."""


@pytest.mark.property("DEPS-FAN-IN")
@pytest.mark.parametrize("batch", [1, 2], ids=["claim", "claim_batch"])
@pytest.mark.parametrize("limits", sorted(CLAIM_PATHS))
def test_a_claim_that_buries_the_last_member_hands_out_the_callback_in_claim_order(
    clocked_store: Store,
    clock: FakeClock,
    requires: Callable[[str], None],
    limits: str,
    batch: int,
) -> None:
    # §2.7: the claim moves the exhausted member to dead before it chooses, so the
    # callback that move released is among what it chooses from, ahead of a job of
    # lower priority that was pending all along.
    chosen, profile = CLAIM_PATHS[limits]
    requires(profile)
    if chosen is not None:
        requires("limits")  # every limit is set through the limits profile
    queue = clocked_store.queue(
        unique_name("last-member"), QueueOpts(max_attempts=1, visibility_timeout_s=5)
    )
    if chosen is not None:
        assert queue.set_limits(chosen) is True
    # In turn (a per-key limit), the key after the last one served goes first: the
    # member's "a", then the callback's "b", then the other job's "c".
    key = {"member": "a", "callback": "b", "other": "c"} if profile == "key_limits" else {}
    member = int(queue.enqueue("member", EnqueueOpts(limit_key=key.get("member"))))
    callback_opts = EnqueueOpts(after_finished=[member], priority=5, limit_key=key.get("callback"))
    callback = int(queue.enqueue("callback", callback_opts))
    assert _claim(queue, member).id == member
    other = int(queue.enqueue("other", EnqueueOpts(limit_key=key.get("other"))))
    clock.advance(6)  # the member's claim lapses at its budget
    if batch == 1:
        _claim(queue, callback)
    else:
        assert [h.id for h in queue.claim_batch("w2", batch)] == [callback, other]
    assert _job(queue, member).state is JobState.DEAD


@pytest.mark.property("DEPS-FAN-IN")
def test_after_and_after_finished_together_are_refused() -> None:
    with pytest.raises(InvalidOptions, match="after_finished"):
        EnqueueOpts(after=[1], after_finished=[2])
    with pytest.raises(InvalidOptions, match="after_finished"):
        EnqueueOpts(after_finished=[3, 3])


@pytest.mark.property("DEPS-FAN-IN")
@pytest.mark.requires("multi_process")
def test_processes_failing_the_members_at_once_run_each_fan_in_once(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    name = unique_name(f"fan-in-{trial.seed}")
    queues, waits = _concurrent_groups(store, name, fan_in=True)
    with Children(TIME_LIMIT_S * 2) as children:
        barrier = children.context.Barrier(ACKERS)
        for index in range(ACKERS):
            children.start(
                dependency_acker_process,
                engine_name,
                engine_group,
                engine_spec,
                queues,
                f"process-{index}",
                barrier=barrier,
                results=children.results,
                time_limit_s=TIME_LIMIT_S,
                fail=index % 2 == 0,  # half the members die, half complete
            )
        problems = _claim_dependents(store, name, waits)
        for _ in range(ACKERS):
            children.expect("acked")
    assert problems == []
    assert store.queue(name).claim("w1") is None


@pytest.mark.property("DEPS-FAN-IN")
def test_threads_finishing_the_members_at_once_run_each_fan_in_once(store: Store) -> None:
    name = unique_name("fan-in-threads")
    queues, waits = _concurrent_groups(store, name, fan_in=True)
    barrier = threading.Barrier(ACKERS)
    errors: list[BaseException] = []

    def finisher(index: int) -> None:
        try:
            for queue_name in queues:
                queue = store.queue(queue_name)
                ack_at_the_barrier(queue, f"t{index}", barrier, TIME_LIMIT_S, index % 2 == 0)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=finisher, args=(i,), daemon=True) for i in range(ACKERS)]
    for thread in threads:
        thread.start()
    problems = _claim_dependents(store, name, waits)
    for thread in threads:
        thread.join(TIME_LIMIT_S)
    assert not errors, errors
    assert problems == []
