"""Locks in the model (contract §4): leases by owner, lapsing at their deadline."""

from __future__ import annotations

from datetime import timedelta

from alkstore import LockInfo

from .state import ModelState
from .values import ModelLock, whole_seconds


class LocksModel(ModelState):
    """Acquire, renew, release and read a lock."""

    def _live_lock(self, name: str, now: int) -> ModelLock | None:
        lock = self._locks.get(name)
        return lock if lock is not None and lock.expires_at > now else None

    def lock_acquire(self, name: str, owner: str, ttl: int | float | timedelta) -> bool:
        """Free, lapsed or already ``owner``'s: taken (or renewed) until ``now + ttl``."""
        now = self.now
        held = self._live_lock(name, now)
        if held is not None and held.owner != owner:
            return False
        self._locks[name] = ModelLock(owner, now + whole_seconds(ttl))
        return True

    def lock_renew(self, name: str, owner: str, ttl: int | float | timedelta) -> bool:
        """Only a live lock of ``owner``'s renews; a lapsed one is lost silently."""
        now = self.now
        held = self._live_lock(name, now)
        if held is None or held.owner != owner:
            return False
        held.expires_at = now + whole_seconds(ttl)
        return True

    def lock_release(self, name: str, owner: str) -> bool:
        held = self._live_lock(name, self.now)
        if held is None or held.owner != owner:
            return False
        del self._locks[name]
        return True

    def lock_holder(self, name: str) -> LockInfo | None:
        held = self._live_lock(name, self.now)
        return None if held is None else LockInfo(held.owner, held.expires_at)
