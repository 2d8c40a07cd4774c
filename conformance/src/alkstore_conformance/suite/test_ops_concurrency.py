"""§11: operators racing each other, and pauses seen across processes (ops profile)."""

from __future__ import annotations

import threading
import time
from functools import partial

import pytest

from alkstore import EngineSpec, JobState, Store
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.ops import make_dead, one_life_each, redrive_in_processes
from alkstore_conformance.helpers.profile_processes import (
    claim_waiter_process,
    pause_prober_process,
)
from alkstore_conformance.helpers.profiles import Children, in_thread
from alkstore_conformance.helpers.trials import Trial

GENEROUS_S = 60.0
SETTLE_S = 0.3
"""Time for a child's claim_wait to start waiting; it must not claim in it either way."""
DEAD_JOBS = 20
OPERATORS = 2

# -- OPS-REDRIVE-RACE ---------------------------------------------------------------------


def _redriven_once_each(store: Store, name: str, dead: list[int], new_ids: list[int]) -> None:
    assert sorted(new_ids) == sorted(set(new_ids)), f"a new id was returned twice: {new_ids}"
    assert len(new_ids) == len(dead), f"{len(dead)} dead jobs but {len(new_ids)} new ones"
    lives = one_life_each(store.queue(name), dead)
    assert lives == dict.fromkeys(dead, "redriven"), lives


def _orders(trial: Trial, dead: list[int]) -> list[list[int] | None]:
    """What each operator redrives: all (``None``) or the dead ids in a shuffled order."""
    rng = trial.random()
    orders: list[list[int] | None] = [None]
    for _ in range(OPERATORS - 1):
        named = list(dead)
        rng.shuffle(named)
        orders.append(named if trial.number % 2 else None)
    return orders


@pytest.mark.property("OPS-REDRIVE-RACE")
def test_operators_in_threads_redriving_at_once_make_one_new_job_per_dead_job(
    store: Store, open_store: StoreFactory, trial: Trial
) -> None:
    dead = make_dead(store.queue("raced"), DEAD_JOBS)
    barrier = threading.Barrier(OPERATORS)
    operators = [open_store().queue("raced") for _ in range(OPERATORS)]

    def redrive(index: int, ids: list[int] | None) -> list[int]:
        barrier.wait(GENEROUS_S)
        return operators[index].redrive(ids)

    running = [
        in_thread(partial(redrive, i, ids), f"operator-{i}")
        for i, ids in enumerate(_orders(trial, dead))
    ]
    new_ids = [job_id for outcome in running for job_id in outcome.join(GENEROUS_S)]
    _redriven_once_each(store, "raced", dead, new_ids)


@pytest.mark.property("OPS-REDRIVE-RACE")
@pytest.mark.requires("multi_process")
def test_operators_in_processes_redriving_at_once_make_one_new_job_per_dead_job(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    dead = make_dead(store.queue("raced"), DEAD_JOBS)
    engine_ref = (engine_name, engine_group, engine_spec)
    plans = [[("raced", ids)] for ids in _orders(trial, dead)]
    made = redrive_in_processes(engine_ref, plans, GENEROUS_S)
    new_ids = [job_id for (ids,) in made for job_id in ids]  # one round each
    _redriven_once_each(store, "raced", dead, new_ids)


# -- OPS-PAUSE-ACROSS-PROCESSES ---------------------------------------------------------------


def _probe(
    engine_name: str, engine_group: str, spec: EngineSpec, name: str
) -> tuple[bool, int | None]:
    with Children(GENEROUS_S) as children:
        children.start(
            pause_prober_process,
            engine_name,
            engine_group,
            spec,
            name,
            children.results,
            GENEROUS_S,
        )
        paused, claimed = children.expect("seen")
    return (paused, claimed)


@pytest.mark.property("OPS-PAUSE-ACROSS-PROCESSES")
@pytest.mark.requires("multi_process")
def test_a_pause_is_seen_by_another_process(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store
) -> None:
    queue = store.queue("paused-here")
    job_id = queue.enqueue({"n": 1})
    queue.pause()
    assert _probe(engine_name, engine_group, engine_spec, "paused-here") == (True, None)
    queue.resume()
    assert _probe(engine_name, engine_group, engine_spec, "paused-here") == (False, job_id)


@pytest.mark.property("OPS-PAUSE-ACROSS-PROCESSES")
def test_a_pause_made_through_another_store_stops_claims_through_this_one(
    open_store: StoreFactory,
) -> None:
    operator = open_store().queue("paused-there")  # another connection's view, opened first
    worker = open_store().queue("paused-there")
    operator.enqueue({"n": 1})
    assert worker.paused() is False
    operator.pause()
    assert (worker.paused(), worker.claim("w")) == (True, None)


@pytest.mark.property("OPS-PAUSE-ACROSS-PROCESSES")
@pytest.mark.requires("multi_process")
def test_a_resume_wakes_claim_wait_in_another_process(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store
) -> None:
    queue = store.queue("resumed-here")
    job_id = queue.enqueue({"n": 1})
    queue.pause()
    with Children(GENEROUS_S) as children:
        children.start(
            claim_waiter_process,
            engine_name,
            engine_group,
            engine_spec,
            "resumed-here",
            children.results,
            GENEROUS_S,
        )
        children.expect("ready")
        time.sleep(SETTLE_S)
        waiting = queue.get_job(job_id)
        assert waiting is not None
        assert waiting.state is JobState.PENDING, "another process claimed from a paused queue"
        assert queue.resume() is True
        assert children.expect("claimed") == job_id
