"""Running a ``Worker`` on a thread in a test, and waiting for what it does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from alkstore.worker import Worker

SAFETY_NET_S = 10.0
"""How long a test waits for a worker; no test asserts a duration."""


def eventually(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY_NET_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.005)


class Running:
    """``worker.run()`` on a thread, stopped (and joined) by the test."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:
            self.error = exc

    def stop(self, *, force: bool = False) -> None:
        self.worker.stop(force=force)
        self.join()

    def join(self) -> None:
        self.thread.join(SAFETY_NET_S)
        assert not self.thread.is_alive(), "run() did not return"
        assert self.error is None, self.error


@pytest.fixture
def running() -> Iterator[Callable[[Worker], Running]]:
    started: list[Running] = []

    def start(worker: Worker) -> Running:
        run = Running(worker)
        started.append(run)
        return run

    yield start
    for run in started:
        run.worker.stop(force=True)
        run.thread.join(SAFETY_NET_S)
