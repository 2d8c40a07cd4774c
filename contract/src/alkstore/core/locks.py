"""Leases with a TTL (contract §6): expiry is silent, learned at the next renew."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..names import validate_identifier
from ..timeconv import Duration, duration_seconds
from ..values import LockInfo

if TYPE_CHECKING:
    from .store import CoreStore


class CoreLock:
    """A named lease with a TTL; returned by ``store.lock(name)`` (contract §6).

    Full contract: ``alkstore.api.Lock``.
    """

    def __init__(self, store: CoreStore, name: str) -> None:
        self._store = store
        self._name = name

    @property
    def name(self) -> str:
        """The lock's name."""
        return self._name

    def acquire(self, owner: str, ttl: Duration) -> bool:
        """Take (or renew one's own) lock until ``now + ttl``; ``True`` if ``owner`` holds it.

        Raises:
            InvalidName: ``owner`` is malformed.
            InvalidOptions: ``ttl`` is not a duration of at least 1 s.
            StoreClosed: the store was closed.
        """
        validate_identifier(owner, "owner")
        seconds = duration_seconds(ttl, "ttl", minimum=1)
        store = self._store
        now = store._now()
        return store._write(
            lambda c: store._driver.lock_acquire(c, self._name, owner, now, now + seconds)
        )

    def renew(self, owner: str, ttl: Duration) -> bool:
        """Extend ``owner``'s live lease to ``now + ttl``; ``False`` once lapsed or taken.

        Raises:
            InvalidName: ``owner`` is malformed.
            InvalidOptions: ``ttl`` is not a duration of at least 1 s.
            StoreClosed: the store was closed.
        """
        validate_identifier(owner, "owner")
        seconds = duration_seconds(ttl, "ttl", minimum=1)
        store = self._store
        now = store._now()
        return store._write(
            lambda c: store._driver.lock_renew(c, self._name, owner, now, now + seconds)
        )

    def release(self, owner: str) -> bool:
        """Release ``owner``'s live lease; ``True`` if it held the lock.

        Raises:
            InvalidName: ``owner`` is malformed.
            StoreClosed: the store was closed.
        """
        validate_identifier(owner, "owner")
        store = self._store
        now = store._now()
        return store._write(lambda c: store._driver.lock_release(c, self._name, owner, now))

    def holder(self) -> LockInfo | None:
        """The live holder, or ``None`` when free or lapsed."""
        store = self._store
        now = store._now()
        return store._read(lambda c: store._driver.lock_holder(c, self._name, now))

    def __repr__(self) -> str:
        return f"<Lock {self._name!r}>"
