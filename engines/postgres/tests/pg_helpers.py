"""Helpers shared by the PostgreSQL engine's tests (a uniquely named module, so it
never collides with another package's test helpers on ``sys.path``)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable

from alkstore import JobHandle, QueueConsumer, StopToken
from alkstore.core import CoreStore

StoreFactory = Callable[..., CoreStore]
"""``open_store(**opts)``: a store on the test's fresh schema."""


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def fresh_schema_name() -> str:
    return "alkstore_t_" + secrets.token_hex(6)


class RecordingSink:
    """A ``WakeSink`` that remembers what it was told and lets a test wait for it."""

    def __init__(self) -> None:
        self.topics: list[str] = []
        self.everyone = 0
        self._changed = threading.Condition()

    def notify(self, topic: str) -> None:
        with self._changed:
            self.topics.append(topic)
            self._changed.notify_all()

    def notify_all(self) -> None:
        with self._changed:
            self.everyone += 1
            self._changed.notify_all()

    def has_waiters(self) -> bool:
        return True

    def deliver(self, channel: str, payload: str) -> None:
        raise AssertionError("this engine has no pub/sub profile")

    def wait_for(self, condition: Callable[[RecordingSink], bool], timeout: float = 30) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: condition(self), timeout)


class BackgroundClaim:
    """``claim_wait`` with no timeout in a thread, so only a wake can end it."""

    def __init__(self, queue: QueueConsumer, worker_id: str) -> None:
        self._stop = StopToken()
        self._got: list[JobHandle | None] = []
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._claim, args=(queue, worker_id), daemon=True)
        self._thread.start()

    def _claim(self, queue: QueueConsumer, worker_id: str) -> None:
        try:
            self._got.append(queue.claim_wait(worker_id, timeout=None, stop=self._stop))
        except BaseException as exc:
            self._errors.append(exc)

    def result(self, within: float = 60) -> JobHandle:
        """The claimed job; fails if the call was still waiting after ``within``
        seconds (a liveness bound for a wake that takes milliseconds)."""
        self._thread.join(within)
        woken = not self._thread.is_alive()
        self._stop.stop()
        self._thread.join()
        assert self._errors == []
        assert woken, "claim_wait was never woken"
        (handle,) = self._got
        assert handle is not None
        return handle
