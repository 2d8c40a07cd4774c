"""Where handlers run: daemon threads for sync ones, one event loop for async ones.

Daemon threads on purpose: a handler still running when the grace period ends
must not keep the process alive (``concurrent.futures`` joins its threads at
exit), and its job is never acked anyway -- its claim lapses.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any


class DaemonThreads:
    """A fixed pool of daemon threads taking callables from one queue."""

    def __init__(self, size: int, name: str) -> None:
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._loop, name=f"{name}-{n}", daemon=True)
            for n in range(size)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, call: Callable[[], None]) -> None:
        self._work.put(call)

    def close(self) -> None:
        """Let idle threads exit; busy ones end with their handler (or the process)."""
        for _ in self._threads:
            self._work.put(None)

    def _loop(self) -> None:
        while (call := self._work.get()) is not None:
            call()


class LoopThread:
    """One asyncio event loop on a daemon thread, for async handlers."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, None]) -> Future[None]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            # Cancel what is left (abandoned handlers) and close quietly.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()
