"""SIGTERM and SIGINT stop the worker while ``run`` runs on the main thread.

The signal handler itself only writes the signal's number to a pipe: Python
runs it on the main thread between two bytecodes, wherever that thread is, and
it may hold any lock at that instant (the slots', a stop token's, a logging
handler's); taking one of those again would hang the process until it is
killed. A thread of ours reads the pipe and does the stopping.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("alkstore.worker")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stopping_on_signals(on_signal: Callable[[int], None]) -> Iterator[None]:
    """Relay ``STOP_SIGNALS`` to ``on_signal`` (on a thread of its own) while inside."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread; the caller stops us
        return
    readable, writable = os.pipe()
    relay = threading.Thread(
        target=relay_signals, args=(readable, on_signal), name="alkstore-signals", daemon=True
    )
    relay.start()

    def write_signal(signum: int, frame: object) -> None:
        os.write(writable, bytes([signum]))

    previous = {sig: signal.signal(sig, write_signal) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(writable)  # the relay reads to the end of the pipe, then returns
        relay.join()
        os.close(readable)


def relay_signals(readable: int, on_signal: Callable[[int], None]) -> None:
    """Call ``on_signal`` for each signal number read, until the pipe closes."""
    while signals := os.read(readable, 64):
        for signum in signals:
            try:
                on_signal(signum)
            except Exception:  # a stop callback of a handler's; the next signal still counts
                log.exception("stopping on a signal raised")
