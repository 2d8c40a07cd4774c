"""Lock statements: leases that lapse at ``expires_at <= now``."""

from __future__ import annotations

from alkstore.params import LockHolder, LockLease, LockRelease
from alkstore.values import LockInfo

from .base import SeamTests
from .support import T0, SeamDriver


def _acquire(driver: SeamDriver, owner: str, now: int, expires_at: int) -> bool:
    return driver.write(lambda c: driver.lock_acquire(c, LockLease("l", owner, now, expires_at)))


def _renew(driver: SeamDriver, owner: str, now: int, expires_at: int) -> bool:
    return driver.write(lambda c: driver.lock_renew(c, LockLease("l", owner, now, expires_at)))


def _release(driver: SeamDriver, owner: str, now: int) -> bool:
    return driver.write(lambda c: driver.lock_release(c, LockRelease("l", owner, now)))


def _holder(driver: SeamDriver, now: int) -> LockInfo | None:
    return driver.read(lambda c: driver.lock_holder(c, LockHolder("l", now)))


class LockStatements(SeamTests):
    requires = frozenset({"locks"})

    def test_lock_acquire_takes_a_free_lock(self, driver: SeamDriver) -> None:
        assert _acquire(driver, "a", T0, T0 + 10)
        assert _holder(driver, T0) == LockInfo(owner="a", expires_at=T0 + 10)

    def test_lock_acquire_refuses_a_live_lock_of_another_owner(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert not _acquire(driver, "b", T0 + 9, T0 + 20)
        assert _holder(driver, T0 + 9) == LockInfo(owner="a", expires_at=T0 + 10)

    def test_lock_acquire_takes_a_lapsed_lock(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert _acquire(driver, "b", T0 + 10, T0 + 20)
        assert _holder(driver, T0 + 10) == LockInfo(owner="b", expires_at=T0 + 20)

    def test_lock_acquire_by_its_holder_extends_it(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert _acquire(driver, "a", T0 + 5, T0 + 30)
        assert _holder(driver, T0 + 5) == LockInfo(owner="a", expires_at=T0 + 30)

    def test_lock_acquire_of_one_name_leaves_other_names_free(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert driver.write(lambda c: driver.lock_acquire(c, LockLease("m", "b", T0, T0 + 10)))

    def test_lock_renew_extends_a_live_lock_of_its_owner(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert _renew(driver, "a", T0 + 9, T0 + 40)
        assert _holder(driver, T0 + 9) == LockInfo(owner="a", expires_at=T0 + 40)

    def test_lock_renew_refuses_another_owner(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert not _renew(driver, "b", T0 + 1, T0 + 40)
        assert _holder(driver, T0 + 1) == LockInfo(owner="a", expires_at=T0 + 10)

    def test_lock_renew_refuses_a_lapsed_lock(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert not _renew(driver, "a", T0 + 10, T0 + 40)
        assert _holder(driver, T0 + 10) is None

    def test_lock_release_frees_a_live_lock_of_its_owner(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert _release(driver, "a", T0 + 1)
        assert _holder(driver, T0 + 1) is None
        assert _acquire(driver, "b", T0 + 1, T0 + 10)

    def test_lock_release_refuses_another_owner(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert not _release(driver, "b", T0 + 1)
        assert _holder(driver, T0 + 1) == LockInfo(owner="a", expires_at=T0 + 10)

    def test_lock_release_of_a_lapsed_lock_matches_nothing(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert not _release(driver, "a", T0 + 10)

    def test_lock_holder_is_none_for_a_lock_never_taken(self, driver: SeamDriver) -> None:
        assert _holder(driver, T0) is None

    def test_lock_holder_is_none_once_the_lease_lapsed(self, driver: SeamDriver) -> None:
        _acquire(driver, "a", T0, T0 + 10)
        assert _holder(driver, T0 + 9) is not None
        assert _holder(driver, T0 + 10) is None
