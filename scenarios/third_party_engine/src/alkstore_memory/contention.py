"""The conformance kit's contention hooks (``alkstore_conformance.hooks``) for this engine.

* ``hold_write_path``: another thread opens a write transaction on the store's
  database and keeps it open, as an application's ``store.transaction()`` left
  open on another thread would. Every call of every store on that database
  (writes and reads: both take the database's lock) then waits at most its
  limit, the store's ``lock_timeout_s`` or the caller's own remaining time.
* ``outage_switch``: the database refuses every call while it is "down"
  (``Database.take_down``), as a server refusing connections would. Stores
  opened for it get a short ``lock_timeout_s``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from alkstore import EngineSpec, InvalidOptions

from .database import Database

OUTAGE_LOCK_TIMEOUT_S = 1.0
"""``lock_timeout_s`` of the stores the outage switch's spec opens."""


def check_lock_timeout(value: object) -> float:
    """The ``lock_timeout_s`` option: seconds in (0, 3600]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidOptions(f"lock_timeout_s must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or not 0 < value <= 3600:
        raise InvalidOptions(f"lock_timeout_s must be within (0, 3600] seconds, got {value!r}")
    return float(value)


@contextmanager
def hold_write_path(database: Database, seconds: float) -> Iterator[None]:
    """Another thread holds a write transaction on ``database`` from entering (once
    it holds it) until exit, or ``seconds`` at most."""
    holding, let_go = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    def hold() -> None:
        try:
            with database.write_transaction(seconds):
                holding.set()
                let_go.wait(seconds)
                raise _RolledBack  # the holder writes nothing: roll back
        except _RolledBack:
            pass
        except BaseException as exc:
            failed.append(exc)
            holding.set()

    holder = threading.Thread(target=hold, name="alkstore-memory-holder", daemon=True)
    holder.start()
    holding.wait(seconds)
    try:
        if failed:
            raise RuntimeError("the holder could not take the database") from failed[0]
        yield
    finally:
        let_go.set()
        holder.join(seconds)


class _RolledBack(Exception):
    """Ends the holder's transaction without committing it."""


@dataclass(frozen=True, slots=True)
class OutageSwitch:
    """What ``outage_switch`` yields: the spec to open stores on, their limit for a
    call that does not wait, and the switch itself."""

    spec: EngineSpec
    database: Database
    give_up_s: float = OUTAGE_LOCK_TIMEOUT_S

    def unavailable(self, seconds: float) -> AbstractContextManager[None]:
        return _down(self.database, seconds)


@contextmanager
def _down(database: Database, seconds: float) -> Iterator[None]:
    database.take_down(seconds)
    try:
        yield
    finally:
        database.bring_up()


def outage_spec(spec: EngineSpec) -> EngineSpec:
    return EngineSpec(url=spec.url, opts={**spec.opts, "lock_timeout_s": OUTAGE_LOCK_TIMEOUT_S})
