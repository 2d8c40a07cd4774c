"""The key_limits profile's statements (``alkstore.driver.LimitsDriver``'s per-key
rules), one test per docstring rule: the stored per-key limit and rate, the stamped
limit key, and what ``claim`` of a queue with a per-key limit then does."""

from __future__ import annotations

from collections import Counter

from alkstore.options import Limits
from alkstore.params import NextWake, SetLimits

from .base import SeamTests
from .support import T0, SeamDriver, claim, enqueue

QUEUE = "q"


def _set(driver: SeamDriver, **fields: int | None) -> bool:
    params = SetLimits(QUEUE, fields.pop("concurrency", None), **fields)
    return driver.write(lambda c: driver.set_limits(c, params))


def _keys(driver: SeamDriver, now: int = T0, limit: int = 100) -> list[str | None]:
    return [job.limit_key for job in claim(driver, now, limit)]


class KeyLimitsStatements(SeamTests):
    requires = frozenset({"limits", "key_limits"})

    def test_set_limits_stores_a_per_key_limit_and_rate(self, driver: SeamDriver) -> None:
        assert _set(driver, concurrency_per_key=2) is True
        assert _set(driver, concurrency_per_key=2) is False
        limits = driver.read(lambda c: driver.queue_limits(c, QUEUE))
        assert limits == {QUEUE: Limits(concurrency_per_key=2)}
        assert _set(driver, per_s=60, rate_per_key=5) is True
        limits = driver.read(lambda c: driver.queue_limits(c, QUEUE))
        assert limits == {QUEUE: Limits(rate_per_key=5, per=60)}

    def test_a_job_row_keeps_its_limit_key(self, driver: SeamDriver) -> None:
        enqueue(driver, "1", limit_key="tenant")
        enqueue(driver, "2")
        assert sorted(_keys(driver), key=str) == [None, "tenant"]

    def test_a_claim_takes_no_more_than_each_keys_free_slots(self, driver: SeamDriver) -> None:
        enqueue(driver, "1", "2", "3", limit_key="a")
        enqueue(driver, "4", "5", "6", limit_key="b")
        _set(driver, concurrency_per_key=2)
        assert Counter(_keys(driver, limit=1)) == {"a": 1}
        assert Counter(_keys(driver)) == {"a": 1, "b": 2}
        assert claim(driver) == []

    def test_a_claim_serves_the_keys_in_turn_after_the_last_served_key(
        self, driver: SeamDriver
    ) -> None:
        enqueue(driver, "1", "2", "3", "4", limit_key="big")
        enqueue(driver, "5", "6", limit_key="small")
        _set(driver, concurrency_per_key=10)
        assert _keys(driver, limit=1) == ["big"]
        assert _keys(driver, limit=1) == ["small"]
        assert _keys(driver, limit=1) == ["big"]
        assert Counter(_keys(driver, limit=2)) == {"small": 1, "big": 1}

    def test_a_per_key_rate_counts_each_keys_starts_in_the_window(self, driver: SeamDriver) -> None:
        enqueue(driver, "1", "2", limit_key="a")
        enqueue(driver, "3", "4", limit_key="b")
        _set(driver, per_s=10, rate_per_key=1)
        assert Counter(_keys(driver)) == {"a": 1, "b": 1}
        assert claim(driver, T0 + 9) == []
        due = driver.read(lambda c: driver.next_wake_at(c, NextWake(QUEUE, T0 + 9)))
        assert due is not None
        assert due <= T0 + 10
        assert Counter(_keys(driver, T0 + 10)) == {"a": 1, "b": 1}
