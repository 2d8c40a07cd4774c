"""Leases with a TTL (contract §6): expiry is silent, learned at the next renew."""

from __future__ import annotations

from ..names import validate_identifier
from ..params import LockHolder, LockLease, LockRelease
from ..timeconv import Duration, duration_seconds
from ..values import LockInfo
from .context import StoreContext


class CoreLock:
    """A named lease with a TTL; returned by ``store.lock(name)`` (contract §6).

    Full contract: ``alkstore.api.Lock``.
    """

    def __init__(self, context: StoreContext, name: str) -> None:
        self._context = context
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
        ctx = self._context
        now = ctx.now()
        return ctx.write(
            lambda c: ctx.driver.lock_acquire(c, LockLease(self._name, owner, now, now + seconds))
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
        ctx = self._context
        now = ctx.now()
        return ctx.write(
            lambda c: ctx.driver.lock_renew(c, LockLease(self._name, owner, now, now + seconds))
        )

    def release(self, owner: str) -> bool:
        """Release ``owner``'s live lease; ``True`` if it held the lock.

        Raises:
            InvalidName: ``owner`` is malformed.
            StoreClosed: the store was closed.
        """
        validate_identifier(owner, "owner")
        ctx = self._context
        now = ctx.now()
        return ctx.write(lambda c: ctx.driver.lock_release(c, LockRelease(self._name, owner, now)))

    def holder(self) -> LockInfo | None:
        """The live holder, or ``None`` when free or lapsed."""
        ctx = self._context
        now = ctx.now()
        return ctx.read(lambda c: ctx.driver.lock_holder(c, LockHolder(self._name, now)))

    def __repr__(self) -> str:
        return f"<Lock {self._name!r}>"
