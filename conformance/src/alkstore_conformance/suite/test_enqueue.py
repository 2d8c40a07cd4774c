"""§2 (and §0): what enqueue resolves, stamps and returns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alkstore import (
    DEFAULT_QUEUE_OPTS,
    EnqueueOpts,
    JobState,
    PayloadError,
    QueueOpts,
    Store,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory

# -- QUEUE-ENQUEUE-TIMING ---------------------------------------------------------


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_enqueue_without_options_is_ready_now(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("plain")
    job = queue.get_job(queue.enqueue({"n": 1}))
    now = int(clock.now())
    assert job is not None
    assert job.state is JobState.PENDING
    assert (job.created_at, job.run_at, job.expires_at) == (now, now, None)
    assert (job.priority, job.attempts, job.claimed_at, job.worker_id) == (0, 0, None, None)
    assert (job.last_error, job.died_at) == (None, None)
    assert queue.claim("worker") is not None


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_delay_wins_over_run_at(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("timing")
    now = int(clock.now())
    job = queue.get_job(queue.enqueue({"n": 1}, EnqueueOpts(delay=10, run_at=now + 100)))
    assert job is not None
    assert job.run_at == now + 10


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_future_run_at_is_not_claimable_until_due(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("timing")
    now = int(clock.now())
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(run_at=now + 10))
    clock.advance(9)
    assert queue.claim("worker") is None
    clock.advance(1)
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_delayed_job_is_not_claimable_until_due(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("timing")
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(delay=5))
    clock.advance(4)
    assert queue.claim("worker") is None
    clock.advance(1)
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_expires_is_relative_to_enqueue(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("timing")
    job = queue.get_job(queue.enqueue({"n": 1}, EnqueueOpts(expires=30, delay=10)))
    assert job is not None
    assert job.expires_at == int(clock.now()) + 30


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_expired_job_is_not_claimable(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("timing")
    first = queue.enqueue({"n": 1}, EnqueueOpts(expires=30))
    queue.enqueue({"n": 2}, EnqueueOpts(expires=30))
    clock.advance(29)
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == first
    clock.advance(1)
    assert queue.claim("worker") is None


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_lapsed_claim_past_its_expiry_is_not_reclaimed(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("timing", QueueOpts(visibility_timeout_s=10))
    queue.enqueue({"n": 1}, EnqueueOpts(expires=15))
    assert queue.claim("worker-1") is not None
    clock.advance(15)
    assert queue.claim("worker-2") is None


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
@pytest.mark.parametrize(
    ("opts", "field", "offset"),
    [
        (EnqueueOpts(delay=1.2), "run_at", 2),
        (EnqueueOpts(delay=timedelta(milliseconds=1)), "run_at", 1),
        (EnqueueOpts(expires=0.5), "expires_at", 1),
        (EnqueueOpts(expires=timedelta(seconds=59, microseconds=1)), "expires_at", 60),
    ],
    ids=["delay-float", "delay-timedelta", "expires-float", "expires-timedelta"],
)
def test_durations_round_up_to_whole_seconds(
    clocked_store: Store, clock: FakeClock, opts: EnqueueOpts, field: str, offset: int
) -> None:
    queue = clocked_store.queue("rounding")
    job = queue.get_job(queue.enqueue({"n": 1}, opts))
    assert getattr(job, field) == int(clock.now()) + offset


@pytest.mark.property("QUEUE-ENQUEUE-TIMING")
def test_run_at_instants_are_whole_epoch_seconds(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue("instants")
    now = int(clock.now())
    aware = datetime.fromtimestamp(now + 20, tz=UTC) + timedelta(microseconds=1)
    from_float = queue.get_job(queue.enqueue(1, EnqueueOpts(run_at=now + 5.5)))
    from_datetime = queue.get_job(queue.enqueue(2, EnqueueOpts(run_at=aware)))
    assert from_float is not None
    assert from_datetime is not None
    assert from_float.run_at == now + 6
    assert from_datetime.run_at == now + 21


# -- QUEUE-ENQUEUE-MANY -----------------------------------------------------------


@pytest.mark.property("QUEUE-ENQUEUE-MANY")
def test_enqueue_many_returns_ids_in_payload_order(store: Store) -> None:
    queue = store.queue("many")
    payloads = [{"n": n} for n in range(25)]
    ids = queue.enqueue_many(payloads, EnqueueOpts(priority=3))
    assert len(set(ids)) == len(payloads)
    jobs = [queue.get_job(job_id) for job_id in ids]
    assert [job.payload for job in jobs if job is not None] == payloads
    assert {job.priority for job in jobs if job is not None} == {3}


@pytest.mark.property("QUEUE-ENQUEUE-MANY")
def test_enqueue_many_is_atomic(store: Store) -> None:
    queue = store.queue("many")
    with pytest.raises(PayloadError):
        queue.enqueue_many([{"n": 1}, {"bad": object()}, {"n": 3}])
    assert queue.claim("worker") is None


@pytest.mark.property("QUEUE-ENQUEUE-MANY")
def test_enqueue_many_of_nothing_enqueues_nothing(store: Store) -> None:
    queue = store.queue("many")
    assert queue.enqueue_many([]) == []
    assert queue.claim("worker") is None


# -- QUEUE-OPTS-STAMPED -----------------------------------------------------------


@pytest.mark.property("QUEUE-OPTS-STAMPED")
def test_queue_opts_are_stamped_on_the_job(store: Store) -> None:
    opts = QueueOpts(
        visibility_timeout_s=120, max_attempts=4, backoff_base_s=7, dead_letter_retention_s=3600
    )
    queue = store.queue("stamped", opts)
    job = queue.get_job(queue.enqueue({"n": 1}))
    assert job is not None
    stamps = (
        job.visibility_timeout_s,
        job.max_attempts,
        job.backoff_base_s,
        job.dead_letter_retention_s,
    )
    assert stamps == (120, 4, 7, 3600)


@pytest.mark.property("QUEUE-OPTS-STAMPED")
def test_default_queue_opts_are_stamped(store: Store) -> None:
    queue = store.queue("defaults")
    job = queue.get_job(queue.enqueue({"n": 1}))
    assert job is not None
    assert QueueOpts(300, 3, 5, None) == DEFAULT_QUEUE_OPTS
    stamps = (
        job.visibility_timeout_s,
        job.max_attempts,
        job.backoff_base_s,
        job.dead_letter_retention_s,
    )
    assert stamps == (300, 3, 5, None)


@pytest.mark.property("QUEUE-OPTS-STAMPED")
def test_enqueue_max_attempts_overrides_the_queues(store: Store) -> None:
    queue = store.queue("override", QueueOpts(max_attempts=4))
    job = queue.get_job(queue.enqueue({"n": 1}, EnqueueOpts(max_attempts=9)))
    assert job is not None
    assert job.max_attempts == 9


@pytest.mark.property("QUEUE-OPTS-STAMPED")
def test_later_handle_opts_do_not_change_jobs_in_flight(
    clocked_store: Store, clock: FakeClock
) -> None:
    original = clocked_store.queue("shared", QueueOpts(visibility_timeout_s=30, max_attempts=2))
    job_id = original.enqueue({"n": 1})
    stamped = original.get_job(job_id)
    other = clocked_store.queue("shared", QueueOpts(visibility_timeout_s=900, max_attempts=7))
    assert other.get_job(job_id) == stamped
    first = other.claim("worker-1")
    assert first is not None
    assert first.job.visibility_timeout_s == 30
    clock.advance(30)  # the job's own 30 s stamp, not the handle's 900 s
    second = other.claim("worker-2")
    assert second is not None
    assert (second.id, second.attempts, second.job.max_attempts) == (job_id, 2, 2)


# -- QUEUE-IDS-NEVER-REUSED -------------------------------------------------------


@pytest.mark.property("QUEUE-IDS-NEVER-REUSED")
def test_ids_are_unique_across_queues_and_batches(store: Store) -> None:
    ids = store.queue("a").enqueue_many([1, 2, 3])
    ids += [store.queue("b").enqueue(4), store.queue("a").enqueue(5)]
    ids += store.queue("c").enqueue_many([6, 7])
    assert all(isinstance(job_id, int) for job_id in ids)
    assert len(set(ids)) == len(ids)


def _end_highest(queue: Any, clock: FakeClock, highest: int, how: str) -> None:
    if how == "cancel":
        assert queue.cancel(highest)
        return
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == highest
    if how == "ack":
        assert handle.ack()
    elif how == "fail":
        assert handle.fail("dead, keeps its id")
    elif how == "purge":
        assert handle.fail("about to be purged")
        clock.advance(1)
        assert queue.sweep_expired().purged == 1
    assert queue.get_job(highest) is None or how == "fail"


@pytest.mark.property("QUEUE-IDS-NEVER-REUSED")
@pytest.mark.parametrize("how", ["ack", "cancel", "fail", "purge"])
def test_id_of_the_newest_job_is_not_reused(
    open_store: StoreFactory, clock: FakeClock, how: str
) -> None:
    store = open_store(clock=clock)
    queue = store.queue("ids", QueueOpts(dead_letter_retention_s=0))
    older = queue.enqueue({"n": 1})
    newest = queue.enqueue({"n": 2}, EnqueueOpts(priority=1))
    _end_highest(queue, clock, newest, how)
    seen = {older, newest}
    fresh = queue.enqueue({"n": 3})
    assert fresh not in seen
    seen.add(fresh)
    store.close()
    reopened = open_store(clock=clock).queue("ids")
    assert reopened.enqueue({"n": 4}) not in seen


# -- QUEUE-PAYLOAD-ROUNDTRIP ------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.property("QUEUE-PAYLOAD-ROUNDTRIP")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=json_values)
def test_payload_round_trips_through_json(store: Store, payload: Any) -> None:
    queue = store.queue(unique_name("payloads"))
    job_id = queue.enqueue(payload)
    job = queue.get_job(job_id)
    assert job is not None
    assert job.payload == payload
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.payload == payload


@pytest.mark.property("QUEUE-PAYLOAD-ROUNDTRIP")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=st.lists(json_values, min_size=1, max_size=5))
def test_enqueue_many_payloads_round_trip(store: Store, payloads: list[Any]) -> None:
    queue = store.queue(unique_name("payloads"))
    ids = queue.enqueue_many(payloads)
    assert [job.payload for job in map(queue.get_job, ids) if job is not None] == payloads


@pytest.mark.property("QUEUE-PAYLOAD-ROUNDTRIP")
def test_nested_unicode_payload_round_trips(store: Store) -> None:
    payload = {
        "name": "Zoë 😀 日本語",
        "nul": "a\x00b",
        "quote": 'it\'s "quoted" \\ back',
        "numbers": [0, -1, 2**63, 1.5, -0.25, 1e300],
        "nested": {"deeper": [{"deepest": [None, True, False, ""]}]},
        "ключ": "значение",
    }
    queue = store.queue("unicode")
    job = queue.get_job(queue.enqueue(payload))
    assert job is not None
    assert job.payload == payload


@pytest.mark.property("QUEUE-PAYLOAD-ROUNDTRIP")
@pytest.mark.parametrize("payload", [None, 0, "", [], {}, "plain", 3.25, False])
def test_scalar_and_empty_payloads_round_trip(store: Store, payload: Any) -> None:
    queue = store.queue("scalars")
    job = queue.get_job(queue.enqueue(payload))
    assert job is not None
    assert job.payload == payload
    assert type(job.payload) is type(payload)
