"""The limits profile's statements (``alkstore.driver.LimitsDriver``), one test per
docstring rule, and what ``claim``, ``next_wake_at`` and the settles of a limited
queue then do."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from alkstore.driver import queue_topic
from alkstore.options import Limits
from alkstore.params import Bury, BuryClaims, Cancel, ClaimRef, NextWake, SetLimits
from alkstore.values import Job

from .base import SeamTests
from .many_outcomes import bury_claims
from .support import (
    DEFAULT_STAMPS,
    T0,
    SeamDriver,
    claim,
    claim_one,
    enqueue,
    watching,
)

QUEUE = DEFAULT_STAMPS.queue
VISIBILITY_S = DEFAULT_STAMPS.visibility_timeout_s


def _set(driver: SeamDriver, concurrency: int | None, queue: str = QUEUE) -> bool:
    return driver.write(lambda c: driver.set_limits(c, SetLimits(queue, concurrency)))


def _limits(driver: SeamDriver, queue: str | None = QUEUE) -> dict[str, Limits]:
    return driver.read(lambda c: driver.queue_limits(c, queue))


Settle = Callable[[SeamDriver, Job], bool]


def _ack(driver: SeamDriver, job: Job) -> bool:
    return driver.write(lambda c: driver.ack(c, ClaimRef(job.id, job.attempts, T0)))


def _bury(driver: SeamDriver, job: Job) -> bool:
    params = Bury(job.id, job.attempts, T0, "broken", "broken")
    return driver.write(lambda c: driver.bury(c, params))


def _bury_claims(driver: SeamDriver, job: Job) -> bool:
    """``tx.fail_all``'s statement (or, without it, the ``bury`` the core runs)."""
    params = BuryClaims([job.id], [job.attempts], T0, ["broken"], ["broken"])
    return driver.write(lambda c: bury_claims(driver, c, params)) == [job.id]


def _cancel(driver: SeamDriver, job: Job) -> bool:
    return driver.write(lambda c: driver.cancel(c, Cancel(QUEUE, job.id)))


class LimitsStatements(SeamTests):
    requires = frozenset({"limits"})

    def test_set_limits_stores_a_limit_and_says_whether_it_changed(
        self, driver: SeamDriver
    ) -> None:
        assert _limits(driver) == {}
        assert _set(driver, 2) is True
        assert _set(driver, 2) is False
        assert _set(driver, 3) is True
        assert _limits(driver) == {QUEUE: Limits(3)}
        assert _set(driver, None) is True
        assert _set(driver, None) is False
        assert _limits(driver) == {}

    def test_queue_limits_of_none_lists_every_limited_queue(self, driver: SeamDriver) -> None:
        _set(driver, 2, "b")
        _set(driver, 5, "a")
        assert _limits(driver, None) == {"a": Limits(5), "b": Limits(2)}
        assert _limits(driver, "c") == {}

    def test_set_limits_announces_its_queue_when_it_changed_anything(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        sink.clear()
        assert _set(driver, 1) is True
        assert sink.wait_for(lambda s: s.woken_for(queue_topic(QUEUE)))

    def test_a_claim_takes_no_more_than_the_free_slots(self, driver: SeamDriver) -> None:
        enqueue(driver, "1", "2", "3", "4", "5")
        _set(driver, 3)
        assert len(claim(driver, limit=1)) == 1
        assert len(claim(driver, limit=10)) == 2
        assert claim(driver, limit=10) == []

    def test_a_lapsed_claim_holds_no_slot(self, driver: SeamDriver) -> None:
        enqueue(driver, "1", "2", "3")
        _set(driver, 1)
        first = claim_one(driver)
        assert claim(driver, T0 + VISIBILITY_S - 1) == []
        (retaken,) = claim(driver, T0 + VISIBILITY_S, limit=10)
        assert retaken.id == first.id

    def test_next_wake_at_of_a_queue_at_its_limit_is_its_earliest_deadline(
        self, driver: SeamDriver
    ) -> None:
        enqueue(driver, "1")
        enqueue(driver, "2", run_at=T0 + 5, created_at=T0)
        _set(driver, 1)
        claim_one(driver)
        due = driver.read(lambda c: driver.next_wake_at(c, NextWake(QUEUE, T0)))
        assert due == T0 + VISIBILITY_S
        _set(driver, 2)
        due = driver.read(lambda c: driver.next_wake_at(c, NextWake(QUEUE, T0)))
        assert due == T0 + 5

    @pytest.mark.parametrize(
        "settle", [_ack, _bury, _bury_claims, _cancel], ids=["ack", "bury", "bury_claims", "cancel"]
    )
    def test_the_end_of_a_limited_queues_claim_announces_the_queue_while_a_claim_is_held_back(
        self, driver: SeamDriver, other: SeamDriver, settle: Settle
    ) -> None:
        # Contract §16.4: an ack announces the freed slot when a claim was held back by
        # the limit while it held its slot (a fail and a cancel, always).
        enqueue(driver, "1")
        enqueue(driver, "2")
        _set(driver, 1)
        job = claim_one(driver)
        assert claim(driver) == []  # held back by the limit
        sink = watching(other)
        sink.clear()
        assert settle(driver, job) is True
        assert sink.wait_for(lambda s: s.woken_for(queue_topic(QUEUE)))
