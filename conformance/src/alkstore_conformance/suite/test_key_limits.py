"""§16.9, §16.10 (key_limits profile): per-key limits and fairness.

``Limits(concurrency_per_key=N)`` bounds each limit key's processing jobs
(``EnqueueOpts(limit_key=...)``; the jobs without a key share one key) across every
process, and claims serve the keys in turn: every key's first claimable job, then
every key's second, the keys of each turn starting after the key the queue's last
claim served, so a key with a big backlog cannot starve a key with a few jobs.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

import pytest

from alkstore import (
    MAX_CONCURRENCY_LIMIT,
    MAX_LIMIT_KEY_CHARS,
    MAX_RATE_LIMIT,
    EngineProvider,
    EngineSpec,
    EnqueueOpts,
    InvalidOptions,
    JobState,
    Limits,
    ProfileUnavailable,
    Queue,
    Store,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.profile_processes import limited_worker_process
from alkstore_conformance.helpers.profiles import Children
from alkstore_conformance.helpers.trials import Trial
from alkstore_conformance.suite.test_limits import HOLD_S, TIME_LIMIT_S, WORKERS, max_overlap

PER_KEY = 2
KEYS = ("alpha", "beta", "gamma", None)
JOBS_PER_KEY = 10
BIG = 200
SMALL = 10


def _keyed(store: Store, per_key: int, **limits: Any) -> Queue:
    queue = store.queue(unique_name("keyed"))
    assert queue.set_limits(Limits(concurrency_per_key=per_key, **limits)) is True
    return queue


def _key(job_key: str | None) -> str:
    return "" if job_key is None else job_key


# -- KEYLIMITS-PROFILE-DECLARED (every engine) ---------------------------------------------


@pytest.mark.property("KEYLIMITS-PROFILE-DECLARED")
def test_per_key_limits_work_exactly_when_the_engine_declares_the_profile(
    store: Store, engine: EngineProvider
) -> None:
    queue = store.queue(unique_name("declared"))
    capabilities = engine.capabilities
    if capabilities.key_limits and capabilities.limits:
        assert queue.set_limits(Limits(concurrency_per_key=1)) is True
        assert queue.limits() == Limits(concurrency_per_key=1)
    else:
        with pytest.raises(ProfileUnavailable):
            queue.set_limits(Limits(concurrency_per_key=1))
    if capabilities.key_limits:
        job_id = queue.enqueue({"n": 1}, EnqueueOpts(limit_key="tenant"))
        job = queue.get_job(job_id)
        assert job is not None
        assert job.limit_key == "tenant"
        return
    with pytest.raises(ProfileUnavailable):
        queue.enqueue({"n": 1}, EnqueueOpts(limit_key="tenant"))
    with pytest.raises(ProfileUnavailable):
        queue.enqueue_many([], EnqueueOpts(limit_key="tenant"))
    assert queue.claim("w") is None  # nothing was written


# -- KEYLIMITS-STORED ------------------------------------------------------------------------


@pytest.mark.property("KEYLIMITS-STORED")
def test_a_per_key_limit_is_stored_beside_the_queue_limits_and_shown_in_stats(
    store: Store,
) -> None:
    queue = _keyed(store, 3, concurrency=5)
    assert queue.limits() == Limits(5, concurrency_per_key=3)
    assert queue.set_limits(Limits(5, concurrency_per_key=3)) is False
    assert queue.stats().concurrency_per_key == 3
    assert queue.set_limits(Limits(concurrency=5)) is True
    assert queue.stats().concurrency_per_key is None
    assert queue.clear_limits() is True
    assert queue.limits() is None


@pytest.mark.property("KEYLIMITS-STORED")
def test_a_job_keeps_its_limit_key_pending_claimed_and_dead(store: Store) -> None:
    queue = store.queue(unique_name("kept"))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(limit_key="customer-42"))
    pending = queue.get_job(job_id)
    assert pending is not None
    assert pending.limit_key == "customer-42"
    handle = queue.claim("w")
    assert handle is not None
    assert handle.job.limit_key == "customer-42"
    handle.fail("boom")
    dead = queue.get_job(job_id)
    assert dead is not None
    assert dead.state is JobState.DEAD
    assert dead.limit_key == "customer-42"
    keyless = queue.get_job(queue.enqueue({"n": 2}))
    assert keyless is not None
    assert keyless.limit_key is None


# -- KEYLIMITS-ARGUMENTS ---------------------------------------------------------------------


@pytest.mark.property("KEYLIMITS-ARGUMENTS")
@pytest.mark.parametrize("per_key", [0, -1, 1.5, "2", True, MAX_CONCURRENCY_LIMIT + 1], ids=repr)
def test_a_malformed_concurrency_per_key_is_refused_naming_the_field(per_key: Any) -> None:
    with pytest.raises(InvalidOptions, match="concurrency_per_key"):
        Limits(concurrency_per_key=per_key)


@pytest.mark.property("KEYLIMITS-ARGUMENTS")
@pytest.mark.parametrize(
    "key", ["", 42, b"tenant", "a\x00b", "x" * (MAX_LIMIT_KEY_CHARS + 1), "\ud800"], ids=repr
)
def test_a_malformed_limit_key_is_refused_naming_the_field(key: Any) -> None:
    with pytest.raises(InvalidOptions, match="limit_key"):
        EnqueueOpts(limit_key=key)


@pytest.mark.property("KEYLIMITS-ARGUMENTS")
def test_the_longest_limit_key_is_stored_as_given(store: Store) -> None:
    queue = store.queue(unique_name("longest"))
    key = "k" * MAX_LIMIT_KEY_CHARS
    job = queue.get_job(queue.enqueue({"n": 1}, EnqueueOpts(limit_key=key)))
    assert job is not None
    assert job.limit_key == key


# -- KEYLIMITS-BOUND -----------------------------------------------------------------------


@pytest.mark.property("KEYLIMITS-BOUND")
def test_no_key_has_more_processing_jobs_than_the_per_key_limit(store: Store) -> None:
    queue = _keyed(store, PER_KEY)
    for key in KEYS:
        queue.enqueue_many([{"key": key, "n": n} for n in range(5)], EnqueueOpts(limit_key=key))
    claimed = queue.claim_batch("w", 100)
    held = Counter(_key(h.job.limit_key) for h in claimed)
    assert held == {_key(key): PER_KEY for key in KEYS}
    assert queue.claim_batch("w", 100) == []
    stats = queue.stats()
    assert (stats.ready, stats.processing) == (len(KEYS) * 5 - len(claimed), len(claimed))


@pytest.mark.property("KEYLIMITS-BOUND")
def test_jobs_without_a_key_share_one_key(store: Store) -> None:
    queue = _keyed(store, 1)
    queue.enqueue_many([{"n": n} for n in range(3)])
    assert len(queue.claim_batch("w", 10)) == 1
    assert queue.claim("w") is None


@pytest.mark.property("KEYLIMITS-BOUND")
def test_an_ended_claim_frees_its_keys_slot_and_held_back_jobs_spend_no_attempt(
    store: Store,
) -> None:
    queue = _keyed(store, 1)
    first, second = queue.enqueue_many([{"n": 1}, {"n": 2}], EnqueueOpts(limit_key="t"))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.job.id == first
    assert queue.claim("w") is None
    waiting = queue.get_job(second)
    assert waiting is not None
    assert (waiting.state, waiting.attempts) == (JobState.PENDING, 0)
    handle.ack()
    again = queue.claim("w")
    assert again is not None
    assert again.job.id == second


@pytest.mark.property("KEYLIMITS-BOUND")
def test_the_queue_concurrency_still_binds_beside_the_per_key_limit(store: Store) -> None:
    queue = _keyed(store, PER_KEY, concurrency=3)
    for key in KEYS:
        queue.enqueue_many([{"n": n} for n in range(3)], EnqueueOpts(limit_key=key))
    assert len(queue.claim_batch("w", 100)) == 3


@pytest.mark.property("KEYLIMITS-BOUND")
@pytest.mark.requires("multi_process")
def test_eight_processes_never_hold_more_claims_of_a_key_than_the_per_key_limit(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    queue = _keyed(store, PER_KEY)
    for key in KEYS:
        queue.enqueue_many(
            [{"key": key, "n": n} for n in range(JOBS_PER_KEY)], EnqueueOpts(limit_key=key)
        )
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
    by_key: dict[str, list[tuple[float, float]]] = {}
    for report in reports:
        for claimed, settled, key in report:
            by_key.setdefault(_key(key), []).append((claimed, settled))
    assert {key: len(spans) for key, spans in by_key.items()} == {
        _key(key): JOBS_PER_KEY for key in KEYS
    }
    most = {key: max_overlap(spans) for key, spans in by_key.items()}
    assert max(most.values()) <= PER_KEY, f"claims of one key at once: {most}"
    stats = queue.stats()
    assert (stats.ready, stats.processing) == (0, 0)


# -- KEYLIMITS-FAIRNESS ----------------------------------------------------------------------


def _claimed_keys(queue: Queue, claims: int) -> list[str | None]:
    """The keys of ``claims`` claims of one job each, each acked before the next."""
    keys = []
    for _ in range(claims):
        handle = queue.claim("w")
        assert handle is not None
        keys.append(handle.job.limit_key)
        handle.ack()
    return keys


@pytest.mark.property("KEYLIMITS-FAIRNESS")
def test_a_small_key_is_served_in_turn_beside_a_big_backlog(store: Store) -> None:
    queue = _keyed(store, PER_KEY)
    queue.enqueue_many([{"n": n} for n in range(BIG)], EnqueueOpts(limit_key="big"))
    queue.enqueue_many([{"n": n} for n in range(SMALL)], EnqueueOpts(limit_key="small"))
    keys = _claimed_keys(queue, 2 * SMALL)
    # Two keys, served in turn: the small key's jobs all within 2 * SMALL claims.
    assert keys.count("small") == SMALL, keys
    assert all(a != b for a, b in pairwise(keys)), keys


@pytest.mark.property("KEYLIMITS-FAIRNESS")
def test_keys_are_served_in_key_order_after_the_last_served_key(store: Store) -> None:
    queue = _keyed(store, PER_KEY)
    for key in ("c", "a", "b"):
        queue.enqueue_many([{"n": n} for n in range(3)], EnqueueOpts(limit_key=key))
    queue.enqueue_many([{"n": n} for n in range(3)])  # the shared key "", first of all
    assert _claimed_keys(queue, 6) == [None, "a", "b", "c", None, "a"]


@pytest.mark.property("KEYLIMITS-FAIRNESS")
def test_a_batch_takes_each_keys_first_job_before_any_keys_second(store: Store) -> None:
    queue = _keyed(store, 5)
    queue.enqueue_many([{"n": n} for n in range(BIG)], EnqueueOpts(limit_key="big"))
    queue.enqueue_many([{"n": n} for n in range(3)], EnqueueOpts(limit_key="small"))
    claimed = queue.claim_batch("w", 6)
    assert Counter(h.job.limit_key for h in claimed) == {"big": 3, "small": 3}
    for handle in claimed:
        handle.ack()
    # The turn goes on after the key the batch served last.
    nxt = queue.claim_batch("w", 2)
    assert [h.job.limit_key for h in nxt] == ["big", "big"]


@pytest.mark.property("KEYLIMITS-FAIRNESS")
def test_within_a_key_jobs_are_claimed_in_claim_order(store: Store) -> None:
    queue = _keyed(store, PER_KEY)
    low = queue.enqueue({"n": "low"}, EnqueueOpts(limit_key="t"))
    high = queue.enqueue({"n": "high"}, EnqueueOpts(limit_key="t", priority=5))
    first = queue.claim("w")
    assert first is not None
    assert first.job.id == high
    second = queue.claim("w")
    assert second is not None
    assert second.job.id == low


# -- KEYLIMITS-RATE --------------------------------------------------------------------------

RATE_PER_S = 10


@pytest.mark.property("KEYLIMITS-RATE")
def test_a_per_key_rate_lets_each_key_start_rate_claims_in_any_window(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("key-rated"))
    assert queue.set_limits(Limits(rate_per_key=2, per=RATE_PER_S)) is True
    assert queue.limits() == Limits(rate_per_key=2, per=RATE_PER_S)
    for key in ("a", "b"):
        queue.enqueue_many([{"n": n} for n in range(5)], EnqueueOpts(limit_key=key))
    first = queue.claim_batch("w", 10)
    assert Counter(h.job.limit_key for h in first) == {"a": 2, "b": 2}
    for handle in first:
        assert handle.ack() is True  # an ended claim still started in the window
    clock.advance(RATE_PER_S - 1)
    assert queue.claim_batch("w", 10) == []  # every start is still inside the window
    clock.advance(1)  # now - per: the first starts just left the window
    again = queue.claim_batch("w", 10)
    assert Counter(h.job.limit_key for h in again) == {"a": 2, "b": 2}


@pytest.mark.property("KEYLIMITS-RATE")
def test_a_keys_starts_do_not_count_against_another_key(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("key-rated"))
    assert queue.set_limits(Limits(rate_per_key=1, per=RATE_PER_S)) is True
    queue.enqueue_many([{"n": n} for n in range(3)], EnqueueOpts(limit_key="a"))
    held = queue.claim("w")
    assert held is not None
    assert held.job.limit_key == "a"
    assert queue.claim("w") is None  # "a" started its one claim of the window
    queue.enqueue({"n": "b"}, EnqueueOpts(limit_key="b"))
    other = queue.claim("w")
    assert other is not None
    assert other.job.limit_key == "b"
    waiting = [job for job in queue.jobs(JobState.PENDING) if job.limit_key == "a"]
    assert [(job.state, job.attempts) for job in waiting] == [(JobState.PENDING, 0)] * 2


@pytest.mark.property("KEYLIMITS-RATE")
def test_the_queue_rate_and_the_per_key_limit_still_bind_beside_a_per_key_rate(
    clocked_store: Store,
) -> None:
    queue = clocked_store.queue(unique_name("key-rated"))
    limits = Limits(rate=3, per=RATE_PER_S, concurrency_per_key=1, rate_per_key=2)
    assert queue.set_limits(limits) is True
    for key in ("a", "b", "c", "d"):
        queue.enqueue_many([{"n": n} for n in range(3)], EnqueueOpts(limit_key=key))
    claimed = queue.claim_batch("w", 10)
    assert len(claimed) == 3  # the queue's rate
    assert max(Counter(h.job.limit_key for h in claimed).values()) == 1  # one per key


@pytest.mark.property("KEYLIMITS-RATE")
@pytest.mark.parametrize(
    "fields",
    [
        {"rate_per_key": 2},
        {"rate_per_key": 0, "per": 10},
        {"rate_per_key": True, "per": 10},
        {"rate_per_key": 2.5, "per": 10},
        {"rate_per_key": MAX_RATE_LIMIT + 1, "per": 10},
    ],
    ids=repr,
)
def test_a_malformed_rate_per_key_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidOptions, match="rate"):
        Limits(**fields)
