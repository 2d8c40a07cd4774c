"""Test helpers shipped with the contract."""

from __future__ import annotations

import threading

from .errors import InvalidOptions


class FakeClock:
    """A settable clock: ``set(t)``, ``advance(s)``; ``sleep(s)`` advances it at once.

    Open a store with it to drive time in tests (contract §1):
    ``alkstore.open(url, clock=FakeClock(1_700_000_000))``. Thread-safe.

    Args:
        start: the initial reading in epoch seconds.
    """

    def __init__(self, start: float = 1_700_000_000) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current reading in epoch seconds."""
        with self._lock:
            return self._now

    def set(self, t: float) -> None:
        """Jump to ``t`` epoch seconds (backwards too: tests may need it)."""
        with self._lock:
            self._now = float(t)

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new reading.

        Raises:
            InvalidOptions: ``seconds`` is negative.
        """
        if seconds < 0:
            raise InvalidOptions(f"a clock only moves forward; advance({seconds!r})")
        with self._lock:
            self._now += seconds
            return self._now

    def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` at once, without blocking (nothing for zero or less)."""
        if seconds > 0:
            self.advance(seconds)

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"


def seed_jitter(store: object, seed: int) -> None:
    """Make ``store``'s retry jitter repeatable: its default backoffs (contract §2)
    come from its random source seeded with ``seed``.

    For tests, as ``FakeClock`` drives time: a store seeds its jitter from the
    operating system, so that a fleet's stores never retry in step. A test that
    replays a run (a property-based test's example, say) needs the same delays again.

    Args:
        store: a store ``alkstore.open`` made, or an ``alkstore.aio.AsyncStore``.
        seed: any int.

    Raises:
        InvalidOptions: ``store`` is neither, or ``seed`` is not an int.
    """
    # (Imported here: the core and aio import this module's package first.)
    from .aio.store import AsyncStore
    from .core.store import CoreStore

    sync = store.sync if isinstance(store, AsyncStore) else store
    if not isinstance(sync, CoreStore):
        raise InvalidOptions(
            "seed_jitter takes a store alkstore.open or alkstore.aio.open made, "
            f"got {type(store).__name__}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidOptions(f"seed must be an int, got {seed!r}")
    # Seeded in place: a source that is not a plain Random (a test's own) keeps its type.
    sync._context.rng.seed(seed)
