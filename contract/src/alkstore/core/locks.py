"""Leases with a TTL (contract §6): expiry is silent, learned at the next renew."""

from __future__ import annotations

from .. import api
from .._surface import implements
from ..names import validate_identifier
from ..params import LockHolder, LockLease, LockRelease
from ..timeconv import Duration, duration_seconds
from ..values import LockInfo
from .context import StoreContext


@implements(api.Lock)
class CoreLock:
    """A named lease with a TTL; returned by ``store.lock(name)`` (contract §6).

    Full contract: ``alkstore.api.Lock``.
    """

    def __init__(self, context: StoreContext, name: str) -> None:
        self._context = context
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def acquire(self, owner: str, ttl: Duration) -> bool:
        validate_identifier(owner, "owner")
        seconds = duration_seconds(ttl, "ttl", minimum=1)
        ctx = self._context
        now = ctx.now()
        return ctx.write(
            lambda c: ctx.driver.lock_acquire(c, LockLease(self._name, owner, now, now + seconds))
        )

    def renew(self, owner: str, ttl: Duration) -> bool:
        validate_identifier(owner, "owner")
        seconds = duration_seconds(ttl, "ttl", minimum=1)
        ctx = self._context
        now = ctx.now()
        return ctx.write(
            lambda c: ctx.driver.lock_renew(c, LockLease(self._name, owner, now, now + seconds))
        )

    def release(self, owner: str) -> bool:
        validate_identifier(owner, "owner")
        ctx = self._context
        now = ctx.now()
        return ctx.write(lambda c: ctx.driver.lock_release(c, LockRelease(self._name, owner, now)))

    def holder(self) -> LockInfo | None:
        ctx = self._context
        now = ctx.now()
        return ctx.read(lambda c: ctx.driver.lock_holder(c, LockHolder(self._name, now)))

    def __repr__(self) -> str:
        return f"<Lock {self._name!r}>"
