"""The conformance kit's contention hooks (``alkstore_conformance.hooks``) for SQLite.

* ``hold_write_path``: a connection alkstore does not control holds the file's
  write lock (``BEGIN IMMEDIATE``), as the ``sqlite3`` shell or an
  application's own connection would. Readers go on (WAL); every write of
  every store on the file waits at most its limit, ``busy_timeout_s`` or the
  caller's own remaining time.
* ``outage_switch``: "unavailable" holds the engine's writer gate as well,
  as an alkstore process stopped inside a transaction would. A WAL database
  never blocks its readers, so reads go on even then; every write raises
  ``EngineUnavailable`` once its limit has passed. Stores opened for the
  switch get a short ``busy_timeout_s``.

Both hold from a thread of the calling process, on a descriptor and a
connection of their own: SQLite's locks and the gate's ``flock`` exclude other
connections and descriptors of one process as they exclude other processes.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass

from alkstore import EngineSpec

from .budget import pause
from .gate import LOCK_SUFFIX
from .url import database_path

OUTAGE_BUSY_TIMEOUT_S = 1.0
"""``busy_timeout_s`` of the stores the outage switch's spec opens."""


def hold_write_path(spec: EngineSpec, seconds: float) -> AbstractContextManager[None]:
    """SQLite's write lock on ``spec``'s file (the store has been opened once, so the
    file and its tables exist), held from entering until exit, ``seconds`` at most."""
    return _holding(database_path(spec.url), seconds, gate=False)


@dataclass(frozen=True, slots=True)
class OutageSwitch:
    """What ``outage_switch`` yields: the spec to open stores on, their limit for a
    call that does not wait, and the switch itself."""

    spec: EngineSpec
    give_up_s: float = OUTAGE_BUSY_TIMEOUT_S

    def unavailable(self, seconds: float) -> AbstractContextManager[None]:
        return _holding(database_path(self.spec.url), seconds, gate=True)


def outage_switch(spec: EngineSpec) -> OutageSwitch:
    return OutageSwitch(
        EngineSpec(url=spec.url, opts={**spec.opts, "busy_timeout_s": OUTAGE_BUSY_TIMEOUT_S})
    )


@contextmanager
def _holding(path: str, seconds: float, *, gate: bool) -> Iterator[None]:
    holding, let_go = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    def hold() -> None:
        try:
            with ExitStack() as held:
                deadline = time.monotonic() + seconds
                if gate:
                    held.enter_context(_gate_held(path, deadline))
                conn = sqlite3.connect(path, timeout=seconds, isolation_level=None)
                held.callback(conn.close)
                conn.execute("BEGIN IMMEDIATE")
                held.callback(conn.execute, "ROLLBACK")
                holding.set()
                let_go.wait(max(0.0, deadline - time.monotonic()))
        except BaseException as exc:
            failed.append(exc)
            holding.set()

    holder = threading.Thread(target=hold, name="alkstore-sqlite-holder", daemon=True)
    holder.start()
    holding.wait(seconds)
    try:
        if failed:
            raise RuntimeError(f"could not hold {path!r}") from failed[0]
        yield
    finally:
        let_go.set()
        holder.join(seconds)


@contextmanager
def _gate_held(path: str, deadline: float) -> Iterator[None]:
    fd = os.open(path + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        attempt = 0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not pause(attempt, deadline):
                    raise TimeoutError("the writer gate stayed held") from None
                attempt += 1
        yield
    finally:
        os.close(fd)  # closing the descriptor drops its flock
