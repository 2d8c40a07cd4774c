"""§16 (limits profile): fleet-wide concurrency limits per queue.

``q.set_limits(Limits(concurrency=N))`` is queue state, stored by the engine as a
pause is: at most N jobs of the queue are processing (claimed, deadline not
passed) at any instant, across every process, by every claim path. A lapsed
claim frees its slot at its deadline; an ack, retry, fail, release, snooze or
cancel at once, and a waiter in any process then takes it promptly. Jobs held
back stay pending, spend no attempt and keep their order.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from alkstore import (
    MAX_CONCURRENCY_LIMIT,
    EngineProvider,
    EngineSpec,
    InvalidOptions,
    JobHandle,
    JobState,
    Limits,
    ProfileUnavailable,
    Queue,
    QueueOpts,
    Store,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import limited_worker_process
from alkstore_conformance.helpers.profiles import Children
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

WORKERS = 8
LIMIT = 3
JOBS = 40
HOLD_S = (0.01, 0.08)
TIME_LIMIT_S = 120.0
SHORT_WAIT_S = 0.3
"""How long a claim_wait at the limit is given: it must come back empty."""
VISIBILITY_S = 10


def _limited(store: Store, concurrency: int, **opts: Any) -> Queue:
    queue = store.queue(unique_name("limited"), QueueOpts(**opts) if opts else None)
    assert queue.set_limits(Limits(concurrency=concurrency)) is True
    return queue


SLOT_BACK_S = 30.0
"""How long a sample waits for the waiter elsewhere to ack the job it reported: a
liveness bound, never a timing check."""


def _claimed_once_the_waiter_acked(queue: Queue, worker: str) -> JobHandle:
    """A claim of the sample's first job. The waiter elsewhere reports its claim before
    it acks it, so its slot may still be taken for a moment: claim until it is free."""
    deadline = time.monotonic() + SLOT_BACK_S
    while (handle := queue.claim(worker)) is None:
        assert time.monotonic() < deadline, "the waiter's ack never freed its slot"
        time.sleep(0.01)
    return handle


def _claimed(queue: Queue, worker: str = "w") -> JobHandle:
    handle = queue.claim(worker)
    assert handle is not None
    return handle


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals ``[start, end)`` that hold one instant: a sweep over their
    ends, an end before a start at the same instant."""
    events = sorted([(end, -1) for _, end in intervals] + [(start, 1) for start, _ in intervals])
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


# -- LIMITS-PROFILE-DECLARED (every engine) -----------------------------------------------


@pytest.mark.property("LIMITS-PROFILE-DECLARED")
def test_limits_work_exactly_when_the_engine_declares_the_profile(
    store: Store, engine: EngineProvider
) -> None:
    queue = store.queue(unique_name("declared"))
    queue.enqueue({"n": 1})
    if engine.capabilities.limits:
        assert queue.set_limits(Limits(concurrency=1)) is True
        assert queue.limits() == Limits(concurrency=1)
        assert queue.clear_limits() is True
        return
    with pytest.raises(ProfileUnavailable):
        queue.set_limits(Limits(concurrency=1))
    with pytest.raises(ProfileUnavailable):
        queue.clear_limits()
    with pytest.raises(ProfileUnavailable):
        queue.limits()
    assert len(queue.claim_batch("w", 10)) == 1  # nothing was written: no limit holds


# -- LIMITS-STORED ------------------------------------------------------------------------


@pytest.mark.property("LIMITS-STORED")
def test_set_and_clear_say_whether_they_changed_the_stored_limit(store: Store) -> None:
    queue = store.queue(unique_name("stored"))
    assert queue.limits() is None
    assert queue.clear_limits() is False
    assert queue.set_limits(Limits(concurrency=2)) is True
    assert queue.set_limits(Limits(concurrency=2)) is False
    assert queue.limits() == Limits(concurrency=2)
    assert queue.set_limits(Limits(concurrency=5)) is True
    assert queue.limits() == Limits(concurrency=5)
    assert queue.clear_limits() is True
    assert queue.limits() is None


@pytest.mark.property("LIMITS-STORED")
def test_a_limit_is_durable_and_seen_by_another_store(open_store: StoreFactory) -> None:
    first = open_store()
    name = unique_name("durable")
    first.queue(name).set_limits(Limits(concurrency=4))
    other = open_store()
    assert other.queue(name).limits() == Limits(concurrency=4)
    first.close()
    assert open_store().queue(name).limits() == Limits(concurrency=4)


@pytest.mark.property("LIMITS-STORED")
def test_a_limit_is_its_own_queues_only(store: Store) -> None:
    limited = _limited(store, 1)
    free = store.queue(unique_name("free"))
    assert limited.limits() == Limits(concurrency=1)
    free.enqueue_many([{"n": n} for n in range(3)])
    assert free.limits() is None
    assert len(free.claim_batch("w", 10)) == 3


@pytest.mark.property("LIMITS-STORED")
def test_stats_show_the_limit_and_list_a_limited_queue_holding_nothing(store: Store) -> None:
    limited = _limited(store, 2)
    assert limited.stats().concurrency_limit == 2
    listed = {s.queue: s for s in store.stats()}
    assert listed[limited.name].concurrency_limit == 2
    assert (listed[limited.name].ready, listed[limited.name].processing) == (0, 0)
    plain = store.queue(unique_name("plain"))
    plain.enqueue({"n": 1})
    assert plain.stats().concurrency_limit is None
    limited.clear_limits()
    assert limited.name not in {s.queue for s in store.stats()}


# -- LIMITS-ARGUMENTS --------------------------------------------------------------------


@pytest.mark.property("LIMITS-ARGUMENTS")
@pytest.mark.parametrize(
    "concurrency",
    [0, -1, MAX_CONCURRENCY_LIMIT + 1, 10**18, 1.0, 2.5, "3", None, True, False],
    ids=repr,
)
def test_a_malformed_concurrency_is_refused_naming_the_field(concurrency: Any) -> None:
    with pytest.raises(InvalidOptions, match="concurrency"):
        Limits(concurrency=concurrency)


@pytest.mark.property("LIMITS-ARGUMENTS")
def test_the_bounds_of_concurrency_are_accepted() -> None:
    assert Limits(concurrency=1).concurrency == 1
    assert Limits(concurrency=MAX_CONCURRENCY_LIMIT).concurrency == MAX_CONCURRENCY_LIMIT


@pytest.mark.property("LIMITS-ARGUMENTS")
@pytest.mark.parametrize("limits", [3, None, {"concurrency": 3}, "3"], ids=repr)
def test_set_limits_refuses_what_is_not_limits_before_writing(store: Store, limits: Any) -> None:
    queue = store.queue(unique_name("refused"))
    with pytest.raises(InvalidOptions, match="limits"):
        queue.set_limits(limits)
    assert queue.limits() is None


# -- LIMITS-CONCURRENCY ------------------------------------------------------------------


@pytest.mark.property("LIMITS-CONCURRENCY")
def test_no_claim_path_takes_more_than_the_free_slots(store: Store) -> None:
    queue = _limited(store, 3)
    queue.enqueue_many([{"n": n} for n in range(10)])
    first = _claimed(queue)
    assert len(queue.claim_batch("w", 10)) == 2  # the other two slots
    assert queue.claim("w") is None
    assert queue.claim_batch("w", 10) == []
    assert queue.claim_wait("w", timeout=SHORT_WAIT_S) is None
    assert store.claim_wait_any([queue], "w", timeout=SHORT_WAIT_S) is None
    outcome = first.ack_and_claim("w", 5)
    assert outcome.acked is True
    assert len(outcome.claimed) == 1  # the one slot its ack freed
    assert queue.stats().processing == 3


@pytest.mark.property("LIMITS-CONCURRENCY")
def test_held_back_jobs_stay_pending_spend_no_attempt_and_keep_their_order(
    store: Store,
) -> None:
    queue = _limited(store, 1)
    ids = queue.enqueue_many([{"n": n} for n in range(4)])
    holder = _claimed(queue)
    assert holder.id == ids[0]
    for _ in range(5):
        assert queue.claim("w") is None
    for job_id in ids[1:]:
        job = queue.get_job(job_id)
        assert job is not None
        assert (job.state, job.attempts) == (JobState.PENDING, 0)
    taken = [holder.id]
    handle = holder
    for _ in ids[1:]:
        assert handle.ack() is True
        handle = _claimed(queue)
        taken.append(handle.id)
    assert taken == ids
    assert handle.attempts == 1


@pytest.mark.property("LIMITS-CONCURRENCY")
def test_a_raised_or_cleared_limit_frees_slots_at_once(store: Store) -> None:
    queue = _limited(store, 1)
    queue.enqueue_many([{"n": n} for n in range(5)])
    _claimed(queue)
    assert queue.claim("w") is None
    assert queue.set_limits(Limits(concurrency=3)) is True
    assert len(queue.claim_batch("w", 10)) == 2
    assert queue.clear_limits() is True
    assert len(queue.claim_batch("w", 10)) == 2


@pytest.mark.property("LIMITS-CONCURRENCY")
def test_a_lowered_limit_holds_back_claims_until_enough_are_settled(store: Store) -> None:
    queue = _limited(store, 3)
    queue.enqueue_many([{"n": n} for n in range(5)])
    held = queue.claim_batch("w", 3)
    assert len(held) == 3
    assert queue.set_limits(Limits(concurrency=1)) is True
    assert held[0].ack() is True
    assert queue.claim("w") is None  # two still processing, over the new limit of one
    assert held[1].ack() is True
    assert queue.claim("w") is None
    assert held[2].ack() is True
    assert queue.claim("w") is not None


# -- LIMITS-SLOTS-FREED -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settle:
    name: str
    settle: Callable[[Queue, JobHandle], bool]


SETTLES = (
    Settle("ack", lambda q, h: h.ack()),
    Settle("retry", lambda q, h: h.retry("again", delay=60)),
    Settle("fail", lambda q, h: h.fail("broken")),
    Settle("release", lambda q, h: h.release()),
    Settle("cancel", lambda q, h: q.cancel(h.id)),
)


@pytest.mark.property("LIMITS-SLOTS-FREED")
@pytest.mark.parametrize("way", SETTLES, ids=lambda s: s.name)
def test_every_end_of_a_claim_frees_its_slot_at_once(
    clocked_store: Store, clock: FakeClock, way: Settle
) -> None:
    queue = _limited(clocked_store, 1)
    queue.enqueue_many([{"n": 1}, {"n": 2}])
    holder = _claimed(queue)
    assert queue.claim("w") is None
    assert way.settle(queue, holder) is True
    assert queue.claim("w") is not None


@pytest.mark.property("LIMITS-SLOTS-FREED")
@pytest.mark.requires("snooze")
def test_a_snooze_frees_its_slot_at_once(clocked_store: Store) -> None:
    queue = _limited(clocked_store, 1)
    queue.enqueue_many([{"n": 1}, {"n": 2}])
    holder = _claimed(queue)
    assert queue.claim("w") is None
    assert holder.snooze(60) is True
    handle = queue.claim("w")
    assert handle is not None
    assert handle.id != holder.id


@pytest.mark.property("LIMITS-SLOTS-FREED")
def test_a_lapsed_claim_frees_its_slot_at_its_deadline_and_not_before(
    open_store: StoreFactory, clock: FakeClock
) -> None:
    store = open_store(clock=clock)
    queue = _limited(store, 1, visibility_timeout_s=VISIBILITY_S)
    ids = queue.enqueue_many([{"n": 1}, {"n": 2}])
    abandoned = _claimed(queue, "crashed")
    clock.advance(VISIBILITY_S - 1)
    assert queue.claim("w") is None
    clock.advance(1)  # the deadline: the claim lapsed, its slot is free
    retaken = _claimed(queue)
    assert retaken.id == abandoned.id  # the lapsed job first, in claim order
    assert queue.claim("w") is None  # and it holds the one slot again
    clock.advance(VISIBILITY_S)
    assert len(queue.claim_batch("w", 10)) == 1
    pending = queue.get_job(ids[1])
    assert pending is not None
    assert pending.attempts <= 1


@pytest.mark.property("LIMITS-SLOTS-FREED")
def test_lapsed_claims_hold_no_slot_however_many_lapse(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = _limited(clocked_store, 2, visibility_timeout_s=VISIBILITY_S)
    queue.enqueue_many([{"n": n} for n in range(6)])
    assert len(queue.claim_batch("crashed", 2)) == 2
    clock.advance(VISIBILITY_S)
    assert len(queue.claim_batch("w", 10)) == 2  # both lapsed: two free slots
    assert queue.stats().processing == 2


# -- LIMITS-ACROSS-PROCESSES -------------------------------------------------------------


@pytest.mark.property("LIMITS-ACROSS-PROCESSES")
@pytest.mark.requires("multi_process")
def test_eight_processes_never_hold_more_claims_than_the_limit(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    queue = _limited(store, LIMIT)
    queue.enqueue_many([{"n": n} for n in range(JOBS)])
    with Children(TIME_LIMIT_S * 2) as children:
        barrier = children.context.Barrier(WORKERS)
        for index in range(WORKERS):
            children.start(
                limited_worker_process,
                engine_name,
                engine_group,
                engine_spec,
                queue.name,
                f"process-{index}",
                trial.seed * WORKERS + index,
                HOLD_S,
                barrier=barrier,
                results=children.results,
                time_limit_s=TIME_LIMIT_S,
            )
        reports = [children.expect("intervals") for _ in range(WORKERS)]
    intervals = [(claimed, settled) for report in reports for claimed, settled, _ in report]
    assert len(intervals) == JOBS, f"{len(intervals)} claims of {JOBS} jobs"
    assert max_overlap(intervals) <= LIMIT, f"{max_overlap(intervals)} claims at once"
    stats = queue.stats()
    assert (stats.ready, stats.processing) == (0, 0)


@pytest.mark.property("LIMITS-ACROSS-PROCESSES")
def test_the_overlap_checker_counts_intervals_at_one_instant() -> None:
    assert max_overlap([(0.0, 1.0), (0.5, 1.5), (1.0, 2.0)]) == 2
    assert max_overlap([(0.0, 1.0), (0.2, 0.8), (0.3, 0.4)]) == 3
    assert max_overlap([(0.0, 1.0), (1.0, 2.0)]) == 1


# -- LIMITS-CHANGED-AT-RUNTIME -------------------------------------------------------------


@pytest.mark.property("LIMITS-CHANGED-AT-RUNTIME")
def test_a_limit_changed_elsewhere_is_honoured_by_the_next_claim(
    open_store: StoreFactory,
) -> None:
    claimer, operator = open_store(), open_store()
    queue = claimer.queue(unique_name("changed"))
    queue.enqueue_many([{"n": n} for n in range(6)])
    steered = operator.queue(queue.name)
    assert queue.claim("w") is not None  # unlimited so far
    assert steered.set_limits(Limits(concurrency=2)) is True
    assert len(queue.claim_batch("w", 10)) == 1
    assert steered.set_limits(Limits(concurrency=4)) is True
    assert len(queue.claim_batch("w", 10)) == 2
    assert steered.set_limits(Limits(concurrency=1)) is True
    assert queue.claim("w") is None
    assert steered.clear_limits() is True
    assert len(queue.claim_batch("w", 10)) == 2


# -- LIMITS-WAKE-SLOT-FREED ----------------------------------------------------------------


WAKING_SETTLES = (
    Settle("ack", lambda q, h: h.ack()),
    Settle("fail", lambda q, h: h.fail("broken")),
    Settle("cancel", lambda q, h: q.cancel(h.id)),
)


@pytest.mark.property("LIMITS-WAKE-SLOT-FREED")
@pytest.mark.parametrize("way", WAKING_SETTLES, ids=lambda s: s.name)
def test_a_waiter_elsewhere_takes_a_freed_slot_promptly(
    way: Settle,
    engine: EngineProvider,
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    open_store: StoreFactory,
    store: Store,
    trial: Trial,
) -> None:
    rng = trial.random()
    queue = _limited(store, 1)
    lateness: list[float] = []
    with claim_waiter_elsewhere(
        engine, engine_name, engine_group, engine_spec, open_store, queue.name
    ) as waiter:
        for _ in range(SAMPLES):
            queue.enqueue({"held": True})
            holder = _claimed_once_the_waiter_acked(queue, "holder")
            waiting = queue.enqueue({"waiting": True})
            waiter.wait()
            time.sleep(rng.uniform(*WAIT_PHASE_S))
            assert way.settle(queue, holder) is True
            freed_at = time.time()
            claimed, returned = waiter.claimed()
            assert claimed == waiting, f"the waiter claimed {claimed}, not {waiting}"
            lateness.append(returned - freed_at)
    assert statistics.median(lateness) < PROMPT_S, f"{way.name}: {median_ms(lateness)}"


@pytest.mark.property("LIMITS-WAKE-SLOT-FREED")
def test_a_waiter_at_the_limit_wakes_at_the_holding_claims_deadline(
    engine: EngineProvider,
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    open_store: StoreFactory,
    store: Store,
    trial: Trial,
) -> None:
    rng = trial.random()
    queue = _limited(store, 1, visibility_timeout_s=LAPSE_AFTER_S)
    lateness: list[float] = []
    with claim_waiter_elsewhere(
        engine, engine_name, engine_group, engine_spec, open_store, queue.name
    ) as waiter:
        for _ in range(SAMPLES):
            queue.enqueue({"held": True})
            abandoned = _claimed_once_the_waiter_acked(queue, "crashed")
            claimed_at = abandoned.job.claimed_at
            assert claimed_at is not None
            deadline = claimed_at + LAPSE_AFTER_S
            sleep_until(deadline - rng.uniform(*WAIT_PHASE_S))
            waiter.wait()
            claimed, returned = waiter.claimed()
            assert claimed == abandoned.id, f"the waiter claimed {claimed}, not {abandoned.id}"
            assert returned >= deadline - EARLY_TOLERANCE_S, "a slot was taken before it freed"
            lateness.append(returned - deadline)
    assert statistics.median(lateness) < PROMPT_S, median_ms(lateness)


# -- LIMITS-RATE-WINDOW ---------------------------------------------------------------------

RATE_PER_S = 10


@pytest.mark.property("LIMITS-RATE-WINDOW")
def test_a_rate_lets_rate_claims_start_in_any_window_of_per_seconds(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("rated"))
    assert queue.set_limits(Limits(rate=2, per=RATE_PER_S)) is True
    queue.enqueue_many([{"n": n} for n in range(8)])
    first = queue.claim_batch("w", 5)
    assert len(first) == 2
    for handle in first:
        assert handle.ack() is True  # an ended claim still started in the window
    clock.advance(RATE_PER_S - 1)
    assert queue.claim_batch("w", 5) == []  # both starts are still inside the window
    clock.advance(1)  # now - per: the first starts just left the window
    assert len(queue.claim_batch("w", 5)) == 2


@pytest.mark.property("LIMITS-RATE-WINDOW")
def test_the_window_slides_with_each_start(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue(unique_name("sliding"))
    queue.set_limits(Limits(rate=2, per=RATE_PER_S))
    queue.enqueue_many([{"n": n} for n in range(8)])
    assert len(queue.claim_batch("w", 1)) == 1  # a start at t
    clock.advance(5)
    assert len(queue.claim_batch("w", 5)) == 1  # a start at t + 5: two in the window
    clock.advance(4)
    assert queue.claim_batch("w", 5) == []  # t + 9: both still in
    clock.advance(1)
    assert len(queue.claim_batch("w", 5)) == 1  # t + 10: only t's start left
    clock.advance(4)
    assert queue.claim_batch("w", 5) == []  # t + 14: t + 5 and t + 10 are in
    clock.advance(1)
    assert len(queue.claim_batch("w", 5)) == 1


@pytest.mark.property("LIMITS-RATE-WINDOW")
def test_rate_held_jobs_stay_pending_and_concurrency_still_binds(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("both"))
    queue.set_limits(Limits(1, rate=3, per=RATE_PER_S))
    ids = queue.enqueue_many([{"n": n} for n in range(4)])
    holder = _claimed(queue)
    assert queue.claim("w") is None  # the concurrency limit binds first
    assert holder.ack() is True
    second = _claimed(queue)
    assert second.ack() is True
    third = _claimed(queue)
    assert third.ack() is True
    assert queue.claim("w") is None  # three starts: the rate binds
    job = queue.get_job(ids[3])
    assert job is not None
    assert (job.state, job.attempts) == (JobState.PENDING, 0)
    assert queue.limits() == Limits(1, rate=3, per=RATE_PER_S)
    assert queue.stats().rate_limit == 3
    assert queue.stats().rate_per_s == RATE_PER_S


@pytest.mark.property("LIMITS-RATE-WINDOW")
@pytest.mark.parametrize(
    "fields",
    [
        {"rate": 0, "per": 1},
        {"rate": 2},
        {"per": 5},
        {"rate": 2, "per": 0},
        {"rate": 2, "per": 86_401},
    ],
    ids=repr,
)
def test_a_malformed_rate_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidOptions, match=r"rate|per"):
        Limits(**fields)
