"""The shared core's queue rules, checked over a recording fake driver."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fakes import FakeDriver

from alkstore.backoff import retry_delay_range
from alkstore.core import CoreStore
from alkstore.driver import ERROR_EXHAUSTED, one_commit_hint, queue_topic
from alkstore.errors import InvalidOptions, PayloadError
from alkstore.options import EnqueueOpts, QueueOpts
from alkstore.testing import FakeClock
from alkstore.values import JobState


def test_store_queue_touches_no_storage(store: CoreStore, driver: FakeDriver) -> None:
    store.queue("emails", QueueOpts(max_attempts=9))
    assert driver.calls == []


def test_enqueue_stamps_the_queue_opts_on_the_row(store: CoreStore, driver: FakeDriver) -> None:
    queue = store.queue("emails", QueueOpts(42, 7, 3, 99))
    job = queue.get_job(queue.enqueue({"to": "a@b"}))
    assert job is not None
    assert (
        job.queue,
        job.state,
        job.payload,
        job.visibility_timeout_s,
        job.max_attempts,
        job.backoff_base_s,
        job.dead_letter_retention_s,
    ) == ("emails", JobState.PENDING, {"to": "a@b"}, 42, 7, 3, 99)


def test_enqueue_uses_the_clock_floored_to_a_second(
    store: CoreStore, clock: FakeClock, driver: FakeDriver
) -> None:
    clock.set(1_700_000_000.9)
    job = store.queue("q").get_job(store.queue("q").enqueue(1, EnqueueOpts(delay=5)))
    assert job is not None
    assert (job.created_at, job.run_at) == (1_700_000_000, 1_700_000_005)


def test_enqueue_many_inserts_every_job_in_one_write(store: CoreStore, driver: FakeDriver) -> None:
    ids = store.queue("q").enqueue_many([1, 2, 3])
    assert len(set(ids)) == 3
    (insert,) = driver.statements()
    assert insert.name == "insert_jobs"
    stamps, payloads = insert.args
    assert (stamps.queue, payloads) == ("q", ("1", "2", "3"))  # one set of stamps, once


def test_an_enqueue_announces_its_queue_through_the_insert(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.queue("q").enqueue(1)
    assert driver.calls_named("announce") == []
    assert driver.committed_announcements == [queue_topic("q")]


def test_enqueue_many_with_a_bad_payload_writes_nothing(
    store: CoreStore, driver: FakeDriver
) -> None:
    with pytest.raises(PayloadError):
        store.queue("q").enqueue_many([{"ok": 1}, {"bad": object()}])
    assert driver.calls == []


def test_enqueue_many_of_nothing_writes_nothing(store: CoreStore, driver: FakeDriver) -> None:
    assert store.queue("q").enqueue_many([]) == []
    assert driver.calls == []


def test_enqueue_many_refuses_a_string_as_the_payload_list(
    store: CoreStore, driver: FakeDriver
) -> None:
    with pytest.raises(InvalidOptions):
        store.queue("q").enqueue_many("abc")
    assert driver.calls == []


def test_enqueue_refuses_opts_of_the_wrong_type(store: CoreStore) -> None:
    with pytest.raises(InvalidOptions, match="opts"):
        store.queue("q").enqueue(1, QueueOpts())  # type: ignore[arg-type]


def test_claim_is_one_driver_claim_in_one_write(store: CoreStore, driver: FakeDriver) -> None:
    # Dead-lettering exhausted lapsed rows is the driver claim's first step (its
    # docstring), so an engine can do both in one round trip: the core asks once.
    queue = store.queue("q")
    queue.enqueue(1)
    driver.calls.clear()
    assert queue.claim("w1") is not None
    assert driver.statement_names() == ["claim"]
    assert [call.args[0] for call in driver.calls_named("begin")] == ["write"]


def test_ack_and_claim_is_the_ack_then_the_claim_in_one_write(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    first, second = queue.enqueue_many([1, 2])
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == first
    driver.calls.clear()
    acked, claimed = handle.ack_and_claim("w1")
    assert (acked, [h.id for h in claimed]) == (True, [second])
    assert driver.statement_names() == ["ack", "claim"]
    assert [call.args[0] for call in driver.calls_named("begin")] == ["write"]


def test_ack_and_claim_asks_the_engine_for_one_commit_before_its_statements(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue_many([1, 2])
    handle = queue.claim("w1")
    assert handle is not None
    driver.calls.clear()
    handle.ack_and_claim("w1")
    names = [call.name for call in driver.calls if call.name != "begin"]
    assert names[:3] == ["prefer_one_commit", "ack", "claim"]
    assert len({call.txn for call in driver.calls}) == 1


def test_ack_and_claim_with_a_bad_limit_writes_nothing(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    driver.calls.clear()
    with pytest.raises(InvalidOptions, match="limit"):
        handle.ack_and_claim("w1", 0)
    assert driver.calls == []


def test_claim_never_hands_out_a_lapsed_exhausted_row(store: CoreStore, clock: FakeClock) -> None:
    queue = store.queue("q", QueueOpts(visibility_timeout_s=10, max_attempts=1))
    job_id = queue.enqueue(1)
    assert queue.claim("w1") is not None
    clock.advance(10)
    assert queue.claim("w2") is None
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, ERROR_EXHAUSTED)


def test_claim_batch_returns_jobs_in_claim_order(store: CoreStore) -> None:
    queue = store.queue("q")
    low = queue.enqueue("low", EnqueueOpts(priority=0))
    high = queue.enqueue("high", EnqueueOpts(priority=5))
    later_low = queue.enqueue("later", EnqueueOpts(priority=0))
    assert [h.id for h in queue.claim_batch("w1", 10)] == [high, low, later_low]


@pytest.mark.parametrize("limit", [0, -1, 10_001, True, 1.0], ids=repr)
def test_claim_batch_refuses_a_bad_limit(
    store: CoreStore, driver: FakeDriver, limit: object
) -> None:
    with pytest.raises(InvalidOptions, match="limit"):
        store.queue("q").claim_batch("w1", limit)  # type: ignore[arg-type]
    assert driver.calls == []


def test_retry_at_budget_buries_with_max_attempts_exceeded(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q", QueueOpts(max_attempts=1))
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.retry("boom") is True
    (bury,) = driver.calls_named("bury")
    assert bury.args[-2:] == (ERROR_EXHAUSTED, "boom")  # last_error, then the history
    assert "reschedule" not in driver.statement_names()
    job = queue.get_job(handle.id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, ERROR_EXHAUSTED)


def test_retry_at_budget_ignores_an_explicit_delay(store: CoreStore, driver: FakeDriver) -> None:
    queue = store.queue("q", QueueOpts(max_attempts=1))
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.retry("boom", delay=5) is True
    assert "reschedule" not in driver.statement_names()
    assert driver.calls_named("bury")[0].args[-2] == ERROR_EXHAUSTED


def test_retry_refuses_a_bad_delay_even_at_budget(store: CoreStore, driver: FakeDriver) -> None:
    queue = store.queue("q", QueueOpts(max_attempts=1))
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    driver.calls.clear()
    with pytest.raises(InvalidOptions, match="delay"):
        handle.retry("boom", delay=-1)
    assert driver.calls == []


def test_retry_refuses_a_non_str_error(store: CoreStore, driver: FakeDriver) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    driver.calls.clear()
    with pytest.raises(InvalidOptions, match="error"):
        handle.retry(RuntimeError("boom"))  # type: ignore[arg-type]
    assert driver.calls == []


def test_retry_without_delay_reschedules_within_the_backoff_range(
    store: CoreStore, driver: FakeDriver, clock: FakeClock
) -> None:
    queue = store.queue("q", QueueOpts(backoff_base_s=10, max_attempts=6))
    queue.enqueue(1)
    for attempt in range(1, 6):
        handle = queue.claim("w1")
        assert handle is not None
        assert handle.attempts == attempt
        assert handle.retry("boom") is True
        job_id, claim_attempt, now, run_at, _ = driver.calls_named("reschedule")[-1].args
        assert (job_id, claim_attempt) == (handle.id, attempt)
        low, high = retry_delay_range(10, attempt)
        assert low <= run_at - now <= high
        clock.set(run_at)


def test_retry_with_delay_reschedules_at_now_plus_the_delay_rounded_up(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.retry("later", delay=2.5) is True
    _, _, now, run_at, _ = driver.calls_named("reschedule")[0].args
    assert run_at == now + 3


def test_fail_buries_with_the_callers_error(store: CoreStore, driver: FakeDriver) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.fail("bad input") is True
    job = queue.get_job(handle.id)
    assert job is not None
    assert (job.state, job.last_error) == (JobState.DEAD, "bad input")


@pytest.mark.parametrize(
    ("extend", "seconds"), [(60, 60), (2.1, 3), (timedelta(seconds=1, microseconds=1), 2)]
)
def test_heartbeat_passes_now_plus_extend_rounded_up(
    store: CoreStore, driver: FakeDriver, clock: FakeClock, extend: object, seconds: int
) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    clock.advance(1.7)
    assert handle.heartbeat(extend) is True  # type: ignore[arg-type]
    job_id, attempt, now, deadline = driver.calls_named("heartbeat")[0].args
    assert (job_id, attempt) == (handle.id, 1)
    assert now == int(clock.now())
    assert deadline == now + seconds


def test_heartbeat_refuses_a_zero_extension(store: CoreStore, driver: FakeDriver) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    with pytest.raises(InvalidOptions, match="extend"):
        handle.heartbeat(0)
    assert driver.calls_named("heartbeat") == []


def test_a_handle_from_an_earlier_claim_is_invalid_after_a_reclaim(
    store: CoreStore, clock: FakeClock
) -> None:
    queue = store.queue("q", QueueOpts(visibility_timeout_s=10))
    queue.enqueue(1)
    first = queue.claim("w1")
    assert first is not None
    clock.advance(10)
    second = queue.claim("w2")
    assert second is not None
    assert first.ack() is False
    assert second.ack() is True


def test_sweep_runs_expiry_exhaustion_and_purge_in_that_order(
    store: CoreStore, driver: FakeDriver
) -> None:
    store.queue("q").sweep_expired()
    assert driver.statement_names() == ["bury_expired", "bury_exhausted", "purge_dead"]


def test_get_job_is_id_global(store: CoreStore) -> None:
    job_id = store.queue("a").enqueue(1)
    job = store.queue("b").get_job(job_id)
    assert job is not None
    assert job.queue == "a"


def test_get_job_of_an_absent_id_is_none(store: CoreStore) -> None:
    assert store.queue("q").get_job(12345) is None


@pytest.mark.parametrize("job_id", ["1", 1.0, True, None], ids=repr)
def test_job_ids_must_be_ints(store: CoreStore, job_id: object) -> None:
    with pytest.raises(InvalidOptions, match="job_id"):
        store.queue("q").get_job(job_id)  # type: ignore[arg-type]


def test_ack_batch_of_nothing_writes_nothing(store: CoreStore, driver: FakeDriver) -> None:
    assert store.queue("q").ack_batch([], "w1") == 0
    assert driver.calls == []


def test_ack_batch_sends_the_engine_the_ids_of_a_tuple(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue_many([1, 2])
    ids = tuple(handle.id for handle in queue.claim_batch("w1", 2))
    assert queue.ack_batch(ids, "w1") == 2
    (call,) = driver.calls_named("ack_batch")
    assert call.args[1] == ids


def test_ack_batch_leaves_out_an_id_outside_int64_among_valid_ones(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue_many([1, 2])
    first, second = (handle.id for handle in queue.claim_batch("w1", 2))
    assert queue.ack_batch([first, 2**63, second], "w1") == 2
    (call,) = driver.calls_named("ack_batch")
    assert call.args[1] == (first, second)


def test_ack_batch_refuses_an_id_that_is_not_an_int_among_valid_ones(store: CoreStore) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    (handle,) = queue.claim_batch("w1", 1)
    with pytest.raises(InvalidOptions, match="job_id"):
        queue.ack_batch([handle.id, True], "w1")


def test_retry_is_one_reschedule_which_announces_the_queue(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue(1)
    handle = queue.claim("w1")
    assert handle is not None
    driver.committed_announcements.clear()
    assert handle.retry("boom", delay=30) is True
    (reschedule,) = driver.calls_named("reschedule")
    assert driver.statement_names_in(reschedule.txn) == ["reschedule"]
    assert driver.committed_announcements == [queue_topic("q")]


@pytest.mark.parametrize("job_id", [-1, 2**63, 2**64])
def test_an_id_outside_int64_names_no_job(
    store: CoreStore, driver: FakeDriver, job_id: int
) -> None:
    queue = store.queue("q")
    driver.calls.clear()
    assert queue.get_job(job_id) is None
    assert queue.cancel(job_id) is False
    assert queue.ack_batch([job_id], "w1") == 0
    assert driver.calls == []


def test_an_error_s_nul_characters_reach_the_engine_as_the_stand_in(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    queue.enqueue({})
    first = queue.claim("w")
    assert first is not None
    assert first.retry("a\x00b", delay=0) is True
    second = queue.claim("w")
    assert second is not None
    assert second.fail("\x00") is True
    (reschedule,) = driver.calls_named("reschedule")
    (bury,) = driver.calls_named("bury")
    assert reschedule.args[-1] == "a\u2400b"
    assert bury.args[-2:] == ("\u2400", "\u2400")


def test_the_one_commit_hint_is_the_drivers_own_or_else_does_nothing() -> None:
    asked: list[object] = []

    class Hinted:
        def prefer_one_commit(self, c: object) -> None:
            asked.append(c)

    one_commit_hint(Hinted())("unit")
    one_commit_hint(object())("unit")  # an engine without the hint: nothing happens
    assert asked == ["unit"]
