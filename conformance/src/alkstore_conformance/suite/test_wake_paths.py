"""Every path that makes work available wakes a waiter elsewhere promptly (§2.14).

A lost wake never loses work -- the waiter's safety-net re-poll finds it -- so a
path that forgets to announce passes every property that only checks delivery.
These bound the lateness instead, as ``WAKE-CROSS-PROCESS-PROMPT`` does for an
enqueue: a waiter blocked in ``claim_wait`` in another process (on an engine
without ``multi_process``: on another store of this process), the path performed
here at a random phase of the waiter's re-poll interval, and the median of a few
samples well under that interval (``helpers.wakes``).

``WRITE_PATHS`` is the table of paths that make a job claimable by a write, one
row each: its property, and how to bring a job to the brink and then push it
over. A path the contract adds is one more row. A lapsed claim has no write: the
job becomes claimable when the claim's deadline passes, so a waiter that began
waiting before must have timed its wait to that deadline (§2.14), and its
lateness runs from the deadline.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from alkstore import EngineProvider, EngineSpec, JobHandle, Queue, QueueOpts, Store
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.trials import Trial
from alkstore_conformance.helpers.wakes import (
    EARLY_TOLERANCE_S,
    LAPSE_AFTER_S,
    PROMPT_S,
    SAMPLES,
    WAIT_PHASE_S,
    claim_waiter_elsewhere,
    median_ms,
    sleep_until,
)

MakeAvailable = Callable[[], int]
"""Performs the path; returns the id of the job it made claimable."""


def _held(queue: Queue) -> JobHandle:
    """A job of ``queue`` claimed here: not claimable by the waiter."""
    job_id = queue.enqueue({"held": True})
    handle = queue.claim("holder")
    assert handle is not None
    assert handle.id == job_id
    return handle


def _released(store: Store, queue: Queue) -> MakeAvailable:
    held = _held(queue)

    def release() -> int:
        assert held.release() is True
        return held.id

    return release


def _retried_at_once(store: Store, queue: Queue) -> MakeAvailable:
    held = _held(queue)

    def retry() -> int:
        assert held.retry("try again at once", delay=0) is True
        return held.id

    return retry


def _retried_at_once_with_others(store: Store, queue: Queue) -> MakeAvailable:
    held = _held(queue)
    elsewhere = _held(store.queue(f"{queue.name}-elsewhere"))

    def retry_all() -> int:
        with store.transaction() as tx:
            assert tx.retry_all([elsewhere, held], "try again", [3600, 0]) == ()
        return held.id

    return retry_all


def _snoozed_to_now(store: Store, queue: Queue) -> MakeAvailable:
    held = _held(queue)

    def snooze() -> int:
        assert held.snooze(0) is True
        return held.id

    return snooze


def _redriven(store: Store, queue: Queue) -> MakeAvailable:
    dead = _held(queue)
    assert dead.fail("to the dead letters") is True

    def redrive() -> int:
        (new_id,) = queue.redrive([dead.id])
        return new_id

    return redrive


def _resumed(store: Store, queue: Queue) -> MakeAvailable:
    job_id = queue.enqueue({"paused": True})
    assert queue.pause() is True

    def resume() -> int:
        assert queue.resume() is True
        return job_id

    return resume


@dataclass(frozen=True, slots=True)
class WakePath:
    """One path that makes a job claimable by a write (its profile is the property's)."""

    property_id: str
    prepare: Callable[[Store, Queue], MakeAvailable]
    """Brings a job of the queue to the brink (nothing claimable yet); returns the push."""

    @property
    def name(self) -> str:
        return self.property_id.removeprefix("WAKE-PROMPT-").lower()


WRITE_PATHS = (
    WakePath("WAKE-PROMPT-RELEASE", _released),
    WakePath("WAKE-PROMPT-RETRY-NOW", _retried_at_once),
    WakePath("WAKE-PROMPT-RETRY-ALL-NOW", _retried_at_once_with_others),
    WakePath("WAKE-PROMPT-SNOOZE-NOW", _snoozed_to_now),
    WakePath("WAKE-PROMPT-REDRIVE", _redriven),
    WakePath("WAKE-PROMPT-RESUME", _resumed),
)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, id=path.name, marks=pytest.mark.property(path.property_id))
        for path in WRITE_PATHS
    ],
)
def test_a_waiter_elsewhere_wakes_promptly_when_a_write_makes_a_job_claimable(
    path: WakePath,
    engine: EngineProvider,
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    open_store: StoreFactory,
    store: Store,
    trial: Trial,
) -> None:
    rng = trial.random()
    queue = store.queue(unique_name(path.name))
    lateness: list[float] = []
    with claim_waiter_elsewhere(
        engine, engine_name, engine_group, engine_spec, open_store, queue.name
    ) as waiter:
        for _ in range(SAMPLES):
            make_available = path.prepare(store, queue)
            waiter.wait()
            time.sleep(rng.uniform(*WAIT_PHASE_S))
            job_id = make_available()
            committed_at = time.time()
            claimed, returned = waiter.claimed()
            assert claimed == job_id, f"the waiter claimed {claimed}, not the job {job_id}"
            lateness.append(returned - committed_at)
    assert statistics.median(lateness) < PROMPT_S, f"{path.name}: {median_ms(lateness)}"


@pytest.mark.property("WAKE-PROMPT-LAPSED-CLAIM")
def test_a_waiter_elsewhere_wakes_promptly_when_a_claim_lapses(
    engine: EngineProvider,
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    open_store: StoreFactory,
    store: Store,
    trial: Trial,
) -> None:
    rng = trial.random()
    queue = store.queue(unique_name("lapsing"), QueueOpts(visibility_timeout_s=LAPSE_AFTER_S))
    lateness: list[float] = []
    with claim_waiter_elsewhere(
        engine, engine_name, engine_group, engine_spec, open_store, queue.name
    ) as waiter:
        for _ in range(SAMPLES):
            abandoned = _held(queue)  # a worker that crashed holding it
            claimed_at = abandoned.job.claimed_at
            assert claimed_at is not None
            deadline = claimed_at + abandoned.job.visibility_timeout_s
            sleep_until(deadline - rng.uniform(*WAIT_PHASE_S))
            waiter.wait()
            claimed, returned = waiter.claimed()
            assert claimed == abandoned.id, f"the waiter claimed {claimed}, not {abandoned.id}"
            assert returned >= deadline - EARLY_TOLERANCE_S, "a claim was taken before it lapsed"
            lateness.append(returned - deadline)
    assert statistics.median(lateness) < PROMPT_S, median_ms(lateness)
