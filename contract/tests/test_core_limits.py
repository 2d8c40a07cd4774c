"""The core's queue limits (contract 1.2 §16): the value, the profile's gate, one
statement each, and the limit shown in the statistics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import FakeLimitsDriver, FakeOpsDriver

from alkstore import MAX_CONCURRENCY_LIMIT, Limits
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions, ProfileUnavailable
from alkstore.testing import FakeClock


@pytest.fixture
def limits_driver() -> FakeLimitsDriver:
    return FakeLimitsDriver()


@pytest.fixture
def limits_store(limits_driver: FakeLimitsDriver, clock: FakeClock) -> Iterator[CoreStore]:
    with CoreStore(limits_driver, clock=clock, capabilities=limits_driver.capabilities) as store:
        yield store


def test_limits_is_a_frozen_value_compared_by_its_concurrency() -> None:
    assert Limits(concurrency=3) == Limits(3)
    with pytest.raises(AttributeError):
        Limits(3).concurrency = 4  # type: ignore[misc]


@pytest.mark.parametrize("bad", [0, -1, MAX_CONCURRENCY_LIMIT + 1, 2.0, "2", None, True])
def test_a_malformed_concurrency_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(InvalidOptions, match="concurrency"):
        Limits(bad)  # type: ignore[arg-type]


def test_a_zero_concurrency_points_at_clear_limits() -> None:
    with pytest.raises(InvalidOptions, match="clear_limits"):
        Limits(0)


def test_set_limits_is_one_statement_with_the_queue_and_its_concurrency(
    limits_store: CoreStore, limits_driver: FakeLimitsDriver
) -> None:
    assert limits_store.queue("q").set_limits(Limits(4)) is True
    (call,) = limits_driver.calls_named("set_limits")
    assert call.args == ("q", 4, None, None, None, None)
    assert limits_driver.statement_names() == ["set_limits"]


def test_clear_limits_stores_no_concurrency(
    limits_store: CoreStore, limits_driver: FakeLimitsDriver
) -> None:
    limits_store.queue("q").set_limits(Limits(4))
    assert limits_store.queue("q").clear_limits() is True
    assert limits_driver.calls_named("set_limits")[-1].args == ("q", None, None, None, None, None)
    assert limits_store.queue("q").limits() is None


def test_set_limits_refuses_what_is_not_limits_before_any_statement(
    limits_store: CoreStore, limits_driver: FakeLimitsDriver
) -> None:
    with pytest.raises(InvalidOptions, match="limits"):
        limits_store.queue("q").set_limits(4)  # type: ignore[arg-type]
    assert limits_driver.statement_names() == []


def test_without_the_profile_every_limits_call_is_refused_before_any_statement(
    clock: FakeClock,
) -> None:
    driver = FakeOpsDriver()
    with CoreStore(driver, clock=clock, capabilities=driver.capabilities) as store:
        queue = store.queue("q")
        for call in (lambda: queue.set_limits(Limits(1)), queue.clear_limits, queue.limits):
            with pytest.raises(ProfileUnavailable):
                call()
        assert store.queue("q").stats().concurrency_limit is None
    assert "set_limits" not in driver.statement_names()
    assert "queue_limits" not in driver.statement_names()


def test_stats_read_the_limit_in_the_same_unit_as_the_counts(
    limits_store: CoreStore, limits_driver: FakeLimitsDriver
) -> None:
    limits_store.queue("q").set_limits(Limits(2))
    limits_driver.calls.clear()
    assert limits_store.queue("q").stats().concurrency_limit == 2
    stats_call, limits_call = limits_driver.statements()
    assert (stats_call.name, limits_call.name) == ("queue_stats", "queue_limits")
    assert stats_call.txn == limits_call.txn


def test_store_stats_list_a_limited_queue_holding_nothing_in_name_order(
    limits_store: CoreStore,
) -> None:
    limits_store.queue("b").enqueue(1)
    limits_store.queue("c").set_limits(Limits(5))
    limits_store.queue("a").set_limits(Limits(1))
    listed = [(s.queue, s.ready, s.concurrency_limit) for s in limits_store.stats()]
    assert listed == [("a", 0, 1), ("b", 1, None), ("c", 0, 5)]


def test_a_rate_limit_is_stored_with_its_window_in_seconds(
    limits_store: CoreStore, limits_driver: FakeLimitsDriver
) -> None:
    assert limits_store.queue("q").set_limits(Limits(rate=5, per=60)) is True
    (call,) = limits_driver.calls_named("set_limits")
    assert call.args == ("q", None, 5, 60, None, None)
    assert limits_store.queue("q").limits() == Limits(rate=5, per=60)
