"""The workers profile's statements (``alkstore.driver.WorkersDriver``), one test per
docstring rule."""

from __future__ import annotations

from alkstore.params import (
    ThroughputAdd,
    ThroughputSince,
    WorkerRef,
    WorkerRegister,
    WorkerRenew,
    WorkersAt,
)
from alkstore.values import WorkerInfo

from .base import SeamTests
from .support import T0, SeamDriver

LEASE_S = 60


def _register(
    driver: SeamDriver, worker_id: str, now: int = T0, queues: tuple[str, ...] = ("q",)
) -> None:
    params = WorkerRegister(worker_id, "host", 7, queues, T0 - 5, now, now + LEASE_S)
    driver.write(lambda c: driver.worker_register(c, params))


def _listed(driver: SeamDriver, now: int = T0) -> list[WorkerInfo]:
    return driver.read(lambda c: driver.workers_list(c, WorkersAt(now)))


def _add(driver: SeamDriver, params: ThroughputAdd) -> None:
    driver.write(lambda c: driver.throughput_add(c, params))


class WorkerStatements(SeamTests):
    requires = frozenset({"workers"})

    def test_register_stores_every_field_and_the_queues_in_order(self, driver: SeamDriver) -> None:
        _register(driver, "w1", queues=("b", "a"))
        assert _listed(driver) == [
            WorkerInfo("w1", "host", 7, ("b", "a"), T0 - 5, last_seen=T0, lease_until=T0 + LEASE_S)
        ]

    def test_register_replaces_the_row_of_its_id(self, driver: SeamDriver) -> None:
        _register(driver, "w1", queues=("a",))
        _register(driver, "w1", now=T0 + 9, queues=())
        (listed,) = _listed(driver, T0 + 9)
        assert (listed.queues, listed.last_seen) == ((), T0 + 9)

    def test_register_deletes_the_lapsed_rows(self, driver: SeamDriver) -> None:
        _register(driver, "lapsed")
        _register(driver, "other", now=T0 + LEASE_S)
        gone = WorkerRef("lapsed")
        assert not driver.write(lambda c: driver.worker_deregister(c, gone))

    def test_renew_moves_the_lease_of_a_listed_worker(self, driver: SeamDriver) -> None:
        _register(driver, "w1")
        renew = WorkerRenew("w1", T0 + 30, T0 + 30 + LEASE_S)
        assert driver.write(lambda c: driver.worker_renew(c, renew))
        (listed,) = _listed(driver, T0 + 30)
        assert (listed.last_seen, listed.lease_until) == (T0 + 30, T0 + 30 + LEASE_S)

    def test_renew_of_a_lapsed_or_unknown_worker_changes_nothing(self, driver: SeamDriver) -> None:
        _register(driver, "w1")
        late = WorkerRenew("w1", T0 + LEASE_S, T0 + 2 * LEASE_S)
        assert not driver.write(lambda c: driver.worker_renew(c, late))
        unknown = WorkerRenew("nobody", T0, T0 + LEASE_S)
        assert not driver.write(lambda c: driver.worker_renew(c, unknown))
        assert _listed(driver, T0 + LEASE_S) == []

    def test_deregister_deletes_the_row_once(self, driver: SeamDriver) -> None:
        _register(driver, "w1")
        ref = WorkerRef("w1")
        assert driver.write(lambda c: driver.worker_deregister(c, ref))
        assert not driver.write(lambda c: driver.worker_deregister(c, ref))
        assert _listed(driver) == []

    def test_the_listing_holds_the_leases_after_now_by_id_byte_wise(
        self, driver: SeamDriver
    ) -> None:
        for worker_id in ("w-b", "W-a", "w-\u00e9"):
            _register(driver, worker_id)
        _register(driver, "w-later", now=T0 + 10)
        assert [w.id for w in _listed(driver, T0 + LEASE_S - 1)] == [
            "W-a",
            "w-b",
            "w-later",
            "w-\u00e9",
        ]
        assert [w.id for w in _listed(driver, T0 + LEASE_S)] == ["w-later"]

    def test_throughput_add_adds_to_its_minutes_count_and_never_replaces_it(
        self, driver: SeamDriver
    ) -> None:
        first = ThroughputAdd(T0, ("a", "b"), (3, 1), T0 - 3600)
        second = ThroughputAdd(T0, ("a",), (4,), T0 - 3600)
        driver.write(lambda c: driver.throughput_add(c, first))
        driver.write(lambda c: driver.throughput_add(c, second))
        rows = driver.read(lambda c: driver.throughput_read(c, ThroughputSince(T0 - 60)))
        assert sorted(rows) == [("a", T0, 7), ("b", T0, 1)]

    def test_throughput_add_deletes_the_minutes_through_its_prune_bound(
        self, driver: SeamDriver
    ) -> None:
        old = ThroughputAdd(T0, ("a",), (2,), T0 - 3600)
        later = ThroughputAdd(T0 + 120, ("a",), (5,), T0)
        driver.write(lambda c: driver.throughput_add(c, old))
        driver.write(lambda c: driver.throughput_add(c, later))
        rows = driver.read(lambda c: driver.throughput_read(c, ThroughputSince(0)))
        assert rows == [("a", T0 + 120, 5)]

    def test_throughput_read_returns_the_minutes_after_its_bound(self, driver: SeamDriver) -> None:
        for minute in (T0, T0 + 60, T0 + 120):
            _add(driver, ThroughputAdd(minute, ("a",), (1,), T0 - 3600))
        rows = driver.read(lambda c: driver.throughput_read(c, ThroughputSince(T0)))
        assert sorted(rows) == [("a", T0 + 60, 1), ("a", T0 + 120, 1)]
