"""The core's per-key limits (contract 1.2 §16.9, §16.10): the values, the profile's
gate, the stamp, one statement each, and the limit shown in the statistics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import FakeKeyLimitsDriver, FakeLimitsDriver

from alkstore import (
    MAX_CONCURRENCY_LIMIT,
    MAX_LIMIT_KEY_CHARS,
    MAX_RATE_LIMIT,
    Capabilities,
    EnqueueOpts,
    Limits,
)
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions, ProfileUnavailable
from alkstore.options import DEFAULT_QUEUE_OPTS, resolve_stamps
from alkstore.testing import FakeClock


@pytest.fixture
def key_driver() -> FakeKeyLimitsDriver:
    return FakeKeyLimitsDriver()


@pytest.fixture
def key_store(key_driver: FakeKeyLimitsDriver, clock: FakeClock) -> Iterator[CoreStore]:
    with CoreStore(key_driver, clock=clock, capabilities=key_driver.capabilities) as store:
        yield store


def test_a_per_key_limit_alone_is_a_limit() -> None:
    limits = Limits(concurrency_per_key=2)
    assert (limits.concurrency, limits.rate, limits.concurrency_per_key) == (None, None, 2)


@pytest.mark.parametrize("bad", [0, -1, MAX_CONCURRENCY_LIMIT + 1, 2.0, "2", True])
def test_a_malformed_concurrency_per_key_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidOptions, match="concurrency_per_key"):
        Limits(concurrency_per_key=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", 7, "a\x00", "k" * (MAX_LIMIT_KEY_CHARS + 1), "\udc80"])
def test_a_malformed_limit_key_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidOptions, match="limit_key"):
        EnqueueOpts(limit_key=bad)  # type: ignore[arg-type]


def test_the_limit_key_is_stamped_on_the_jobs() -> None:
    stamps = resolve_stamps("q", DEFAULT_QUEUE_OPTS, EnqueueOpts(limit_key="tenant-7"), 100)
    assert stamps.limit_key == "tenant-7"
    assert resolve_stamps("q", DEFAULT_QUEUE_OPTS, EnqueueOpts(), 100).limit_key is None


def test_set_limits_sends_the_per_key_limit_in_one_statement(
    key_store: CoreStore, key_driver: FakeKeyLimitsDriver
) -> None:
    assert key_store.queue("q").set_limits(Limits(3, concurrency_per_key=2)) is True
    (call,) = key_driver.calls_named("set_limits")
    assert call.args == ("q", 3, None, None, 2, None)
    assert key_store.queue("q").limits() == Limits(3, concurrency_per_key=2)
    assert key_store.queue("q").stats().concurrency_per_key == 2


def test_without_the_profile_a_per_key_limit_and_a_limit_key_are_refused_before_writing(
    clock: FakeClock,
) -> None:
    driver = FakeLimitsDriver()
    with CoreStore(driver, clock=clock, capabilities=driver.capabilities) as store:
        queue = store.queue("q")
        with pytest.raises(ProfileUnavailable):
            queue.set_limits(Limits(concurrency_per_key=1))
        with pytest.raises(ProfileUnavailable):
            queue.enqueue(1, EnqueueOpts(limit_key="t"))
        with pytest.raises(ProfileUnavailable):
            queue.enqueue_many([], EnqueueOpts(limit_key="t"))
    names = driver.statement_names()
    assert "set_limits" not in names
    assert "insert_jobs" not in names


def test_without_the_profile_a_transactions_keyed_enqueue_is_refused(clock: FakeClock) -> None:
    driver = FakeKeyLimitsDriver()
    capabilities = Capabilities(transactions=True, ops=True, limits=True)
    with (
        CoreStore(driver, clock=clock, capabilities=capabilities) as store,
        store.transaction() as tx,
        pytest.raises(ProfileUnavailable),
    ):
        tx.enqueue("q", 1, EnqueueOpts(limit_key="t"))
    assert "insert_jobs" not in driver.statement_names()


def test_a_rate_per_key_needs_its_window_and_shares_the_queue_rates() -> None:
    with pytest.raises(InvalidOptions, match="per"):
        Limits(rate_per_key=2)
    limits = Limits(rate=10, per=60, rate_per_key=2)
    assert (limits.rate, limits.per, limits.rate_per_key) == (10, 60, 2)


@pytest.mark.parametrize("bad", [0, -1, MAX_RATE_LIMIT + 1, 2.0, "2", True])
def test_a_malformed_rate_per_key_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidOptions, match="rate_per_key"):
        Limits(rate_per_key=bad, per=60)  # type: ignore[arg-type]


def test_set_limits_sends_the_rate_per_key_with_its_window(
    key_store: CoreStore, key_driver: FakeKeyLimitsDriver
) -> None:
    assert key_store.queue("q").set_limits(Limits(rate_per_key=5, per=60)) is True
    (call,) = key_driver.calls_named("set_limits")
    assert call.args == ("q", None, None, 60, None, 5)
    assert key_store.queue("q").stats().rate_per_key == 5


def test_without_the_profile_a_rate_per_key_is_refused_before_writing(clock: FakeClock) -> None:
    driver = FakeLimitsDriver()
    with (
        CoreStore(driver, clock=clock, capabilities=driver.capabilities) as store,
        pytest.raises(ProfileUnavailable),
    ):
        store.queue("q").set_limits(Limits(rate_per_key=1, per=10))
    assert "set_limits" not in driver.statement_names()
