"""Small helpers the suite shares (public API only; no engine internals)."""

from __future__ import annotations

import importlib
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NoReturn

from alkstore import JobHandle, QueueConsumer, QueueOpts, StopToken, Store, Transaction

from ..certify.guide import SQL_CONNECTION, see

_TABLE = re.compile(r"kit_[a-z0-9_]{1,40}")


class Rollback(Exception):
    """Raised inside a transaction so that it rolls back."""


def claimed_in_order(store: Store, name: str, count: int, opts: QueueOpts) -> list[JobHandle]:
    """``count`` new jobs of the queue ``name`` (stamped with ``opts``), claimed in one
    batch by one worker: every one of them, in id order."""
    queue = store.queue(name, opts)
    ids = queue.enqueue_many([{"order": n} for n in range(count)])
    handles = queue.claim_batch("w1", count)
    assert sorted(h.id for h in handles) == sorted(ids)
    return sorted(handles, key=lambda h: h.id)


def raise_inside(
    transaction: AbstractContextManager[Transaction], work: Callable[[Transaction], object]
) -> NoReturn:
    """Run ``work(tx)`` in ``transaction``, then raise ``Rollback`` out of it."""
    with transaction as tx:
        work(tx)
        raise Rollback


def unique_name(prefix: str) -> str:
    """A fresh queue/lock name, so Hypothesis examples sharing a store never meet."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def paramstyle(connection: Any) -> str:
    """The DB-API ``paramstyle`` (PEP 249) of the driver behind ``connection``.

    The connection's class may be a subclass defined elsewhere (an engine's or an
    app's wrapper around the driver's connection), so the class and its bases are
    asked in order: the first whose top-level module declares one names the style."""
    modules = [cls.__module__.partition(".")[0] for cls in type(connection).__mro__]
    for module_name in dict.fromkeys(modules):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        style = getattr(module, "paramstyle", None)
        if isinstance(style, str):
            return style
    raise TypeError(
        f"{type(connection).__qualname__}: no DB-API paramstyle in {modules}: the kit "
        "learns the sql profile's parameter style from the module attribute paramstyle "
        "(PEP 249) of the top-level module of the connection's class or of one of its "
        f"bases; {see(SQL_CONNECTION)}"
    )


def native_sql(connection: Any, sql: str) -> str:
    """Rewrite ``?`` markers into ``connection``'s positional parameter style."""
    style = paramstyle(connection)
    if style == "qmark":
        return sql
    if style in ("format", "pyformat"):
        return sql.replace("?", "%s")
    if style == "numeric":
        parts = sql.split("?")
        return "".join(f"{part}:{i}" for i, part in enumerate(parts[:-1], 1)) + parts[-1]
    raise TypeError(
        f"paramstyle {style!r} is not positional; the kit writes its business statements "
        "with qmark, format, pyformat or numeric markers (? / %s / :1): give the sql "
        f"profile's connection a driver of one of those styles; {see(SQL_CONNECTION)}"
    )


def quoted_table(name: str) -> str:
    """A kit-generated table name, validated and quoted (never caller input)."""
    if not _TABLE.fullmatch(name):
        raise ValueError(f"not a kit table name: {name!r}")
    return f'"{name}"'


BUSINESS_TABLE_NOTE = (
    'the kit creates its business table with tx.execute(\'CREATE TABLE "kit_orders_..." '
    "(id INTEGER PRIMARY KEY)') in store.transaction(): portable SQL, the identifier "
    "quoted with double quotes as the SQL standard has it (MySQL and MariaDB need "
    f"sql_mode ANSI_QUOTES on the connection for that); {see(SQL_CONNECTION)}"
)
"""Added to the error when the kit's business table cannot be created."""


@contextmanager
def business_table(store: Store) -> Iterator[str]:
    """A throwaway business table ``(id INTEGER PRIMARY KEY)``; yields its quoted name.

    Created and dropped through ``store.transaction()`` with portable SQL, so
    it works on any engine whose connection speaks SQL.
    """
    table = quoted_table(f"kit_orders_{uuid.uuid4().hex[:12]}")
    try:
        with store.transaction() as tx:
            tx.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY)")
    except Exception as exc:
        exc.add_note(BUSINESS_TABLE_NOTE)
        raise
    try:
        yield table
    finally:
        if not store.closed:
            with store.transaction() as tx:
                tx.execute(f"DROP TABLE {table}")


def business_ids(store: Store, table: str) -> list[int]:
    """The ids committed in a business table, read in a transaction of the store."""
    with store.transaction() as tx:
        cursor = tx.connection.cursor()
        try:
            cursor.execute(f"SELECT id FROM {table} ORDER BY id")
            return [int(row[0]) for row in cursor.fetchall()]
        finally:
            cursor.close()


def insert_business_row(connection: Any, table: str, row_id: int) -> None:
    """A caller's own business write on a DB-API connection, parameterized."""
    cursor = connection.cursor()
    try:
        cursor.execute(native_sql(connection, f"INSERT INTO {table} (id) VALUES (?)"), (row_id,))
    finally:
        cursor.close()


def claim_wait_in_thread(
    queue: QueueConsumer, timeout: float | None, stop: StopToken | None = None
) -> Callable[[], JobHandle | None]:
    """Start ``claim_wait`` in a thread; the returned call joins it and gives its result.

    Without a timeout the caller must set ``stop``; the join is bounded either way.
    """
    result: list[JobHandle | None] = []
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            result.append(queue.claim_wait("waiter", timeout=timeout, stop=stop))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()

    def join() -> JobHandle | None:
        thread.join((timeout or 0) + 30)
        assert not thread.is_alive(), "claim_wait did not return"
        assert errors == []
        return result[0]

    return join


RESERVED_NAMES: list[str] = [
    "__alkstore",
    "__alkstore_scheduler",
    "__alkstore_outbox:sync",
    "__alkstoreX",
]
"""Names every name-taking surface must refuse with ``ReservedName``."""

MALFORMED_NAMES: list[Any] = ["", "x" * 201, "a\x00b", "bad-\ud800", None, 7, b"bytes"]
MALFORMED_IDS = ["empty", "201-chars", "nul", "lone-surrogate", "none", "int", "bytes"]
"""Values every name-taking surface must refuse with ``InvalidName`` (not reserved)."""
