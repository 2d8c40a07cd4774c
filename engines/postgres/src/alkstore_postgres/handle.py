"""The driver's ``C`` (a connection inside one unit of work) and how statements run on it.

A ``write``/``read`` unit starts in autocommit: each statement commits on its
own, one round trip, and one that loses a deadlock or serialization race can
be re-run because it rolled back alone. A statement that must commit *together
with what follows it* -- the scheduler's compare-and-set advance and the job
its boundary fires -- first calls ``begin_transaction``: from there to the end
of the unit everything is one real transaction, committed when the unit
returns and rolled back if it raises. ``transaction()`` and ``attach()``
handles are inside a transaction from the start.

A statement that waited out ``lock_timeout`` (a lock another session holds, see
``lock_waits``) is run again while it is standalone and its unit's deadline has
not passed; then, or inside a transaction, it raises ``EngineUnavailable``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import psycopg

from alkstore.errors import EngineUnavailable

from .errors import contract_error
from .lock_waits import set_local

if TYPE_CHECKING:
    from .lock_waits import LockWaits

CONFLICT_RETRIES: Final = 3
"""A standalone statement that lost a deadlock or serialization race is re-run this often."""


class SqlCursor(Protocol):
    """What the driver reads of a cursor: psycopg's, or ``loop_io``'s buffered one."""

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class SqlConnection(Protocol):
    """What the driver uses of a connection: a ``psycopg.Connection``, or -- for a store
    opened on an event loop -- ``loop_io.LoopConnection`` over a ``psycopg.AsyncConnection``
    (the same statements, their I/O done on the loop)."""

    def execute(
        self,
        query: bytes | str,
        params: Mapping[str, Any] | None = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> SqlCursor: ...

    def transaction(self) -> AbstractContextManager[Any]: ...

    @property
    def info(self) -> psycopg.ConnectionInfo: ...

    @property
    def autocommit(self) -> bool: ...


@dataclass(eq=False, slots=True)
class PgHandle:
    """A connection plus what this unit of work already announced."""

    conn: SqlConnection
    standalone: bool
    """True while every statement commits on its own (autocommit)."""
    announced: set[str] = field(default_factory=set)
    unit: ExitStack | None = None
    """For a ``write``/``read`` unit: where a transaction begun mid-unit is closed
    when the unit ends (``None`` for ``transaction()``/``attach()`` handles)."""
    lock_waits: LockWaits | None = None
    """The store's lock-wait policy (``None`` on a caller's attached connection)."""
    lock_deadline: float | None = None
    """Until when (``time.monotonic()``) a standalone statement that waited out
    ``lock_timeout`` is run again (``None``: never)."""
    local_lock_ms: int | None = None
    """Behind a transaction pooler: the ``lock_timeout`` a standalone statement sets
    for itself (``SET LOCAL``, pipelined with it), as no session keeps a setting."""
    async_ack: bool = False
    """The unit's next ack may commit without waiting for the disk (the async_acks
    profile, §12.11): set by ``commit_acks_without_waiting``, spent by that ack."""


class PipelinedConnection(Protocol):
    """A connection that sends a statement and then another in one pipeline, in one
    implicit transaction (``loop_io.LoopConnection``; a ``psycopg.Connection`` does it
    with ``pipeline()``)."""

    def execute_after(
        self,
        prelude: bytes,
        query: bytes,
        params: Mapping[str, Any] | None,
        *,
        prepare: bool | None,
        binary: bool,
    ) -> SqlCursor: ...


def _run(
    c: PgHandle,
    query: bytes,
    params: Mapping[str, Any] | None,
    prepare: bool | None,
    binary: bool,
) -> SqlCursor:
    ms = c.local_lock_ms
    if ms is None or not c.standalone:
        return c.conn.execute(query, params, prepare=prepare, binary=binary)
    # No Sync between them: one implicit transaction, so one server connection of a
    # transaction pooler, and the SET LOCAL holds for this statement only.
    prelude = set_local(ms)
    conn = c.conn
    if isinstance(conn, psycopg.Connection):
        with conn.pipeline():
            conn.execute(prelude, prepare=False)
            cursor = conn.execute(query, params, prepare=prepare, binary=binary)
        return cursor
    pipelined: PipelinedConnection = conn  # type: ignore[assignment]
    return pipelined.execute_after(prelude, query, params, prepare=prepare, binary=binary)


def begin_transaction(c: PgHandle) -> None:
    """Make the rest of ``c``'s unit of work one transaction (idempotent)."""
    if not c.standalone:
        return
    if c.unit is None:
        raise TypeError("only the handle of a write/read unit can begin a transaction")
    if c.lock_waits is not None:
        c.lock_waits.for_transaction(c.conn)
    # Entered on the unit's exit stack: committed when the unit returns, rolled
    # back when it raises, before the connection goes back to the pool.
    c.unit.enter_context(c.conn.transaction())
    c.standalone = False
    if c.lock_waits is not None:
        c.lock_waits.in_transaction(c.conn)


def execute(
    c: PgHandle,
    query: bytes,
    params: Mapping[str, Any] | None = None,
    *,
    binary: bool = False,
    prepare: bool | None = None,
) -> SqlCursor:
    """Run ``query``; ``binary`` asks for results in binary format (cheaper to convert
    for rows of many integer columns, such as a claim's); ``prepare=False`` never
    prepares it (psycopg otherwise prepares a statement after a few runs)."""
    retries = CONFLICT_RETRIES if c.standalone else 0
    while True:
        try:
            return _run(c, query, params, prepare, binary)
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            # Safe only for a standalone statement: it rolled back alone.
            if retries <= 0:
                raise
            retries -= 1
        except psycopg.errors.LockNotAvailable as exc:
            deadline = c.lock_deadline
            if c.standalone and deadline is not None and time.monotonic() < deadline:
                continue  # it rolled back alone: wait for the lock again
            raise lock_held(exc, c) from exc
        except psycopg.Error as exc:
            error = contract_error(exc, "running a statement")
            if error is not None:
                raise error from exc
            raise


def lock_held(exc: psycopg.Error, c: PgHandle) -> EngineUnavailable:
    """The contract's error for a lock another session held past the call's limit."""
    limit = "" if c.lock_waits is None else f" (lock_timeout_s={c.lock_waits.limit_s:g})"
    return EngineUnavailable(
        "PostgreSQL is unavailable: a lock another session holds was not released within "
        f"the call's time limit{limit} or the caller's remaining timeout: {exc}"
    )


def rowcount(c: PgHandle, query: bytes, params: Mapping[str, Any]) -> int:
    return execute(c, query, params).rowcount
