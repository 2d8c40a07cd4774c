"""StopToken: the one cancellation signal every waiting call accepts."""

from __future__ import annotations

import threading
from collections.abc import Callable


class StopToken:
    """Set once; waiting calls return soon after. Thread-safe; shareable."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def stop(self) -> None:
        with self._lock:
            self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def add_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on ``stop()`` (at once if already stopped)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def remove_callback(self, callback: Callable[[], None]) -> None:
        with self._lock:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

    def __repr__(self) -> str:
        return f"StopToken(stopped={self.is_set()})"
