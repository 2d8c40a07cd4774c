"""§6: locks — leases with a TTL whose expiry is silent until the next renew."""

from __future__ import annotations

import pytest

from alkstore import LockInfo, Store
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.fixtures import StoreFactory

TTL_S = 30

# -- LOCK-ACQUIRE-EXCLUSIVE ----------------------------------------------------------


@pytest.mark.property("LOCK-ACQUIRE-EXCLUSIVE")
def test_acquire_takes_a_free_lock(clocked_store: Store, clock: FakeClock) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    assert lock.holder() == LockInfo(owner="a", expires_at=int(clock.now()) + TTL_S)


@pytest.mark.property("LOCK-ACQUIRE-EXCLUSIVE")
def test_another_owner_is_refused_until_the_lock_lapses(
    clocked_store: Store, clock: FakeClock
) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    held = lock.holder()
    clock.advance(TTL_S - 1)
    assert lock.acquire("b", TTL_S) is False
    assert lock.holder() == held
    clock.advance(1)  # now == expires_at: lapsed
    assert lock.acquire("b", TTL_S) is True
    assert lock.holder() == LockInfo(owner="b", expires_at=int(clock.now()) + TTL_S)


@pytest.mark.property("LOCK-ACQUIRE-EXCLUSIVE")
def test_a_lock_is_exclusive_across_stores(open_store: StoreFactory, clock: FakeClock) -> None:
    first = open_store(clock=clock).lock("leader")
    second = open_store(clock=clock).lock("leader")
    assert first.acquire("a", TTL_S) is True
    assert second.acquire("b", TTL_S) is False
    holder = second.holder()
    assert holder is not None
    assert holder.owner == "a"


@pytest.mark.property("LOCK-ACQUIRE-EXCLUSIVE")
def test_locks_of_different_names_are_independent(clocked_store: Store) -> None:
    assert clocked_store.lock("one").acquire("a", TTL_S) is True
    assert clocked_store.lock("two").acquire("b", TTL_S) is True
    one = clocked_store.lock("one").holder()
    two = clocked_store.lock("two").holder()
    assert one is not None
    assert two is not None
    assert (one.owner, two.owner) == ("a", "b")


# -- LOCK-REACQUIRE-RENEWS -----------------------------------------------------------


@pytest.mark.property("LOCK-REACQUIRE-RENEWS")
def test_reacquiring_ones_own_live_lock_renews_it_from_now(
    clocked_store: Store, clock: FakeClock
) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    clock.advance(20)
    assert lock.acquire("a", 5) is True
    assert lock.holder() == LockInfo(owner="a", expires_at=int(clock.now()) + 5)


# -- LOCK-RENEW ----------------------------------------------------------------------


@pytest.mark.property("LOCK-RENEW")
def test_renew_extends_the_owners_live_lock_from_now(
    clocked_store: Store, clock: FakeClock
) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    clock.advance(TTL_S - 1)
    assert lock.renew("a", 100) is True
    assert lock.holder() == LockInfo(owner="a", expires_at=int(clock.now()) + 100)
    clock.advance(99)
    assert lock.acquire("b", TTL_S) is False


@pytest.mark.property("LOCK-RENEW")
def test_renew_after_silent_expiry_is_false(clocked_store: Store, clock: FakeClock) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    clock.advance(TTL_S)
    assert lock.renew("a", TTL_S) is False  # nobody else took it; it lapsed all the same
    assert lock.holder() is None


@pytest.mark.property("LOCK-RENEW")
def test_renew_by_another_owner_is_false(clocked_store: Store) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    held = lock.holder()
    assert lock.renew("b", TTL_S) is False
    assert lock.holder() == held


@pytest.mark.property("LOCK-RENEW")
def test_renew_of_a_lock_taken_over_is_false(clocked_store: Store, clock: FakeClock) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    clock.advance(TTL_S)
    assert lock.acquire("b", TTL_S) is True
    assert lock.renew("a", TTL_S) is False
    holder = lock.holder()
    assert holder is not None
    assert holder.owner == "b"


@pytest.mark.property("LOCK-RENEW")
def test_renew_of_a_never_acquired_lock_is_false(clocked_store: Store) -> None:
    lock = clocked_store.lock("leader")
    assert lock.renew("a", TTL_S) is False
    assert lock.holder() is None


# -- LOCK-RELEASE --------------------------------------------------------------------


@pytest.mark.property("LOCK-RELEASE")
def test_release_by_the_holder_frees_the_lock(clocked_store: Store) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    assert lock.release("a") is True
    assert lock.holder() is None
    assert lock.acquire("b", TTL_S) is True
    assert lock.release("a") is False


@pytest.mark.property("LOCK-RELEASE")
def test_release_by_another_owner_is_false(clocked_store: Store) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    held = lock.holder()
    assert lock.release("b") is False
    assert lock.holder() == held


@pytest.mark.property("LOCK-RELEASE")
def test_release_after_the_lock_lapsed_is_false(clocked_store: Store, clock: FakeClock) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    clock.advance(TTL_S)
    assert lock.release("a") is False


@pytest.mark.property("LOCK-RELEASE")
def test_second_release_is_false(clocked_store: Store) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", TTL_S) is True
    assert lock.release("a") is True
    assert lock.release("a") is False


# -- LOCK-HOLDER ---------------------------------------------------------------------


@pytest.mark.property("LOCK-HOLDER")
def test_holder_of_a_free_lock_is_none(clocked_store: Store) -> None:
    assert clocked_store.lock("never-taken").holder() is None


@pytest.mark.property("LOCK-HOLDER")
def test_holder_reports_the_live_owner_until_the_lapse(
    clocked_store: Store, clock: FakeClock
) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("a", 1.5) is True  # rounded up to 2 s
    expected = LockInfo(owner="a", expires_at=int(clock.now()) + 2)
    assert lock.holder() == expected
    clock.advance(1)
    assert lock.holder() == expected
    clock.advance(1)
    assert lock.holder() is None
