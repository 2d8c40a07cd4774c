"""One call run on a thread of its own, its outcome kept for the test to check."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

SAFETY_NET_S = 10
"""How long ``join`` waits; a call still running then fails the test."""


class InBackground:
    """Run ``call`` on a daemon thread; ``join`` returns its result or raises its error."""

    def __init__(self, call: Callable[[], Any], what: str) -> None:
        self.what = what
        self.result: Any = "not returned"
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = call()
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> Any:
        self.thread.join(SAFETY_NET_S)
        assert not self.thread.is_alive(), f"{self.what} did not return"
        if self.error is not None:
            raise self.error
        return self.result
