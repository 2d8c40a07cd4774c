"""Prompt wakes (§2, §5, §7): waiting returns well inside the re-poll interval.

``WAKE-DELAYED-JOB`` allows a minute; an engine with no timer for a delayed
row, or no cross-process wake, still passes it on the core's 1 s re-poll.
These properties bound the lateness instead. They are mechanism checks on a
noisy machine: each starts waiting at a random phase (so a re-poll that
happens to line up with the due instant cannot pass), takes several samples
and bounds the median, far below the 1 s a re-poll-only engine needs.
Timestamps are whole seconds: a row with ``run_at = t`` is due once the
clock reads ``t.0``.
"""

from __future__ import annotations

import functools
import math
import statistics
import threading
import time

import pytest

from alkstore import EngineSpec, EnqueueOpts, StopToken, Store
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.profile_processes import writer_on_signals
from alkstore_conformance.helpers.profiles import Children, in_thread
from alkstore_conformance.helpers.trials import Trial

SAMPLES = 3
PROMPT_S = 0.25
"""The median lateness allowed: a quarter of the core's default 1 s re-poll."""
WAIT_PHASE_S = (0.3, 0.7)
"""How long before the due instant (or the write) waiting starts: a re-poll-only
engine is then at least 0.3 s late on every sample."""
GENEROUS_S = 30.0


def _sleep_until(instant: float) -> None:
    time.sleep(max(0.0, instant - time.time()))


def _median_ms(lateness: list[float]) -> str:
    return (
        f"median {statistics.median(lateness) * 1000:.0f} ms of {[round(x, 3) for x in lateness]}"
    )


# -- WAKE-DELAYED-JOB-PROMPT ------------------------------------------------------------


@pytest.mark.property("WAKE-DELAYED-JOB-PROMPT")
def test_claim_wait_returns_a_delayed_job_promptly_after_its_run_at(
    store: Store, trial: Trial
) -> None:
    rng = trial.random()
    queue = store.queue(unique_name("delayed"))
    first_due = math.ceil(time.time()) + 2
    ids = [queue.enqueue({"n": n}, EnqueueOpts(run_at=first_due + n)) for n in range(SAMPLES)]
    lateness: list[float] = []
    for n, job_id in enumerate(ids):
        due = first_due + n
        _sleep_until(due - rng.uniform(*WAIT_PHASE_S))
        handle = queue.claim_wait("waiter", timeout=GENEROUS_S)
        returned = time.time()
        assert handle is not None
        assert handle.id == job_id
        assert returned >= due - 0.05, "a delayed job was claimed before its run_at"
        lateness.append(returned - due)
        assert handle.ack() is True
    assert statistics.median(lateness) < PROMPT_S, _median_ms(lateness)


# -- WAKE-CROSS-PROCESS-PROMPT, STREAM-WAIT-PROMPT --------------------------------------


@pytest.mark.property("WAKE-CROSS-PROCESS-PROMPT")
@pytest.mark.requires("multi_process")
def test_claim_wait_returns_a_job_another_process_enqueued_promptly(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rng = trial.random()
    queue = store.queue(unique_name("cross"))
    lateness: list[float] = []
    with Children(GENEROUS_S) as children:
        commands = children.context.Queue()
        children.start(
            writer_on_signals,
            engine_name,
            engine_group,
            engine_spec,
            "queue",
            queue.name,
            commands,
            children.results,
            GENEROUS_S,
        )
        children.expect("ready")
        for _ in range(SAMPLES):
            waiting = in_thread(lambda: queue.claim_wait("waiter", timeout=GENEROUS_S))
            time.sleep(rng.uniform(*WAIT_PHASE_S))
            commands.put("write")
            job_id, committed_at = children.expect("wrote")
            handle = waiting.join(GENEROUS_S)
            returned = time.time()
            assert handle is not None
            assert handle.id == job_id
            lateness.append(returned - committed_at)
            assert handle.ack() is True
        commands.put(None)
        children.expect("done")
    assert statistics.median(lateness) < PROMPT_S, _median_ms(lateness)


@pytest.mark.property("STREAM-WAIT-PROMPT")
@pytest.mark.requires("multi_process")
def test_stream_wait_returns_promptly_when_another_process_appends(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rng = trial.random()
    stream = store.stream(unique_name("waited"))
    lateness: list[float] = []
    with Children(GENEROUS_S) as children:
        commands = children.context.Queue()
        children.start(
            writer_on_signals,
            engine_name,
            engine_group,
            engine_spec,
            "stream",
            stream.name,
            commands,
            children.results,
            GENEROUS_S,
        )
        children.expect("ready")
        after = 0
        for _ in range(SAMPLES):
            waiting = in_thread(functools.partial(stream.wait, after, timeout=GENEROUS_S))
            time.sleep(rng.uniform(*WAIT_PHASE_S))
            commands.put("write")
            offset, committed_at = children.expect("wrote")
            assert waiting.join(GENEROUS_S) is True
            lateness.append(time.time() - committed_at)
            after = offset
        commands.put(None)
        children.expect("done")
    assert statistics.median(lateness) < PROMPT_S, _median_ms(lateness)


# -- SCHED-BOUNDARY-PROMPT ---------------------------------------------------------------

BOUNDARY_PROMPT_S = 0.3


@pytest.mark.property("SCHED-BOUNDARY-PROMPT")
def test_run_schedules_fires_each_boundary_promptly(store: Store) -> None:
    target = unique_name("boundaries")
    name = unique_name("every-second")
    store.schedule(name, "@every 1s", target, {"schedule": name})
    stop = StopToken()
    leader = threading.Thread(target=store.run_schedules, args=(stop, "prompt-leader"), daemon=True)
    leader.start()
    lateness: list[float] = []
    try:
        queue = store.queue(target)
        for _ in range(SAMPLES + 1):
            schedule = store.get_schedule(name)
            assert schedule is not None
            handle = queue.claim_wait("waiter", timeout=GENEROUS_S)
            returned = time.time()
            assert handle is not None
            # The job of boundary b is fired at or after b; it is late by returned - b.
            boundary = min(handle.job.run_at, schedule.next_fire_at)
            lateness.append(returned - boundary)
            assert handle.ack() is True
    finally:
        stop.stop()
        leader.join(GENEROUS_S)
    assert not leader.is_alive()
    # The first boundary may predate the leader (a catch-up fire): judge the rest.
    assert statistics.median(lateness[1:]) < BOUNDARY_PROMPT_S, _median_ms(lateness[1:])
