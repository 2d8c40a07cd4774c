"""What every store on one database file in this process shares: the writer gate
and the watcher. Reference-counted by the stores; the last one to close stops
the watcher thread and closes the gate's descriptor."""

from __future__ import annotations

import os
import threading

from .connections import connect
from .gate import WriterGate
from .options import SqliteOptions
from .watcher import Watcher

# The watcher only reads; a short busy handler lets it ride over SQLite's rare
# read-side lock (WAL recovery) without reconnecting, and never stalls it longer
# than its own reconnect pause.
_WATCHER_BUSY_HANDLER_S = 0.1


class SharedDatabase:
    def __init__(self, key: str, path: str) -> None:
        self.key = key
        self.path = path
        self.gate = WriterGate(path)
        self.watcher = Watcher(
            lambda: connect(path, SqliteOptions(), busy_handler_s=_WATCHER_BUSY_HANDLER_S)
        )
        self.users = 0


_lock = threading.Lock()
_shared: dict[str, SharedDatabase] = {}


def share(path: str) -> SharedDatabase:
    """The process's shared state for the database file at ``path`` (absolute)."""
    key = os.path.realpath(path)
    with _lock:
        shared = _shared.get(key)
        if shared is None:
            shared = _shared[key] = SharedDatabase(key, path)
        shared.users += 1
        return shared


def release(shared: SharedDatabase) -> None:
    with _lock:
        shared.users -= 1
        if shared.users > 0:
            return
        if _shared.get(shared.key) is shared:
            del _shared[shared.key]
    shared.watcher.stop()
    shared.gate.close()


def sole_user(shared: SharedDatabase) -> bool:
    """Whether exactly one store of this process (the caller) has the file open."""
    with _lock:
        return shared.users == 1


def _forget_after_fork() -> None:
    # A forked child must not share the parent's flock (one open file description
    # would let both "hold" it) nor expect the parent's watcher thread: stores the
    # child opens start afresh. Stores inherited from the parent are unusable.
    global _lock
    _lock = threading.Lock()
    _shared.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
