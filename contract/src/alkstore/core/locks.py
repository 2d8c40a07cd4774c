"""Leases with a TTL (CONTRACT.md §6): expiry is silent, learned at the next renew."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..names import validate_identifier
from ..timeconv import Duration, duration_seconds
from ..values import LockInfo

if TYPE_CHECKING:
    from .store import CoreStore


class CoreLock:
    def __init__(self, store: CoreStore, name: str) -> None:
        self._store = store
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def acquire(self, owner: str, ttl: Duration) -> bool:
        validate_identifier(owner, "owner")
        seconds = duration_seconds(ttl, "ttl", minimum=1)
        store = self._store
        now = store._now()
        return store._write(
            lambda c: store._driver.lock_acquire(c, self._name, owner, now, now + seconds)
        )

    def renew(self, owner: str, ttl: Duration) -> bool:
        validate_identifier(owner, "owner")
        seconds = duration_seconds(ttl, "ttl", minimum=1)
        store = self._store
        now = store._now()
        return store._write(
            lambda c: store._driver.lock_renew(c, self._name, owner, now, now + seconds)
        )

    def release(self, owner: str) -> bool:
        validate_identifier(owner, "owner")
        store = self._store
        now = store._now()
        return store._write(lambda c: store._driver.lock_release(c, self._name, owner, now))

    def holder(self) -> LockInfo | None:
        store = self._store
        now = store._now()
        return store._read(lambda c: store._driver.lock_holder(c, self._name, now))

    def __repr__(self) -> str:
        return f"<Lock {self._name!r}>"
