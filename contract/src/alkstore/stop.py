"""StopToken: the one cancellation signal every waiting call accepts."""

from __future__ import annotations

import threading
from collections.abc import Callable


class StopToken:
    """Set once; waiting calls return soon after. Thread-safe; shareable.

    Every waiting call accepts one: ``Queue.claim_wait``, ``Stream.wait`` and
    ``Store.run_schedules`` (contract §5). Stopping cannot be undone.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def stop(self) -> None:
        """Set the token and wake every call waiting on it. Idempotent."""
        with self._lock:
            self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def is_set(self) -> bool:
        """Whether ``stop()`` has been called."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until stopped or ``timeout`` seconds pass; ``True`` if stopped."""
        return self._event.wait(timeout)

    def add_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on ``stop()`` (at once if already stopped)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def remove_callback(self, callback: Callable[[], None]) -> None:
        """Forget ``callback`` (added by ``add_callback``); unknown ones are ignored."""
        with self._lock:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

    def __repr__(self) -> str:
        return f"StopToken(stopped={self.is_set()})"
