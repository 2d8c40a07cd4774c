"""Contract 1.2's unique profile over ``sqlite3``: the unique enqueue.

A key is held by at most one live row of a queue because the unique index
``(queue, unique_hold)`` says so: the insert is ``INSERT ... ON CONFLICT DO
NOTHING``, never a read followed by a write, so no writer of any process (an
attached transaction included) can slip a second holder in. A dead row that
keeps its key lives in the dead table, outside that index; the insert checks it
in the same statement, and SQLite runs one writer at a time, so nothing can move
a job to dead between that check and the insert (the statement holds the write
lock throughout).

The common case is one statement: the key is free and the row goes in. Only a
key found held costs more: the holder is read, and a live holder whose hold has
passed gives the key up, in one write transaction with the insert tried again.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from alkstore.options import stamp_values
from alkstore.params import InsertUnique

from . import statements as sql
from .handle import begin_transaction

ROUNDS = 3
"""Inside a write transaction the second round settles every key (the first only
meets holders that were there); the third is a margin, never reached."""


class UniqueStatements:
    """``UniqueDriver`` for ``SqliteDriver``."""

    def insert_unique_jobs(
        self, c: sqlite3.Connection, params: InsertUnique
    ) -> list[tuple[int, bool]]:
        keys = params.keys
        stamps = params.stamps
        if len(keys) == 1:
            inserted = _insert_one(c, params)
            if inserted is not None:
                return [(inserted, False)]  # the common case: one statement
        else:
            begin_transaction(c)  # one enqueue is all of its jobs or none
            # A passed hold is given up before the insert, not found by it: one insert
            # then makes every new row, so their ids increase in payload order (a key
            # settled in a later round would take an id after the later payloads').
            named = {"queue": stamps.queue, "keys": json.dumps(keys), "now": stamps.created_at}
            c.execute(sql.GIVE_UP_PASSED_HOLDS_OF_KEYS, named)
        outcomes: dict[str, tuple[int, bool]] = {}
        todo = dict(zip(keys, params.payloads, strict=True))
        for round_number in range(ROUNDS):
            if round_number or len(keys) > 1:  # a lone key's first insert ran above
                outcomes.update(_insert(c, params, todo))
            todo = {key: payload for key, payload in todo.items() if key not in outcomes}
            if not todo:
                return [outcomes[key] for key in keys]
            # A key was held when the insert ran. Read the holders and insert again
            # where a hold passed (or its holder went meanwhile), all in one write
            # transaction from here: nothing can change in between.
            begin_transaction(c)
            passed: list[int] = []
            named = {
                "queue": stamps.queue,
                "keys": json.dumps(list(todo)),
                "now": stamps.created_at,
            }
            for holder, key, hold_until in _plain(c).execute(sql.KEY_HOLDERS, named):
                if hold_until is not None and hold_until <= stamps.created_at:
                    passed.append(holder)
                else:
                    outcomes[key] = (holder, True)
                    del todo[key]
            if passed:
                c.execute(sql.GIVE_UP_HOLDS, {"ids": json.dumps(passed)})
            if not todo:
                return [outcomes[key] for key in keys]
        raise RuntimeError(f"unique keys {sorted(todo)} neither inserted nor found held")


def _insert_one(c: sqlite3.Connection, params: InsertUnique) -> int | None:
    """The lone payload's row, if its key is free: its id, else ``None``."""
    stamps = params.stamps
    values = (
        *stamp_values(stamps),
        params.hold_until,
        int(params.hold_dead),
        stamps.created_at,
        params.payloads[0],
        params.keys[0],
    )
    cursor = c.execute(sql.INSERT_UNIQUE_ONE, values)
    # sqlite3 sets lastrowid after every INSERT; its type just admits None.
    return cast(int, cursor.lastrowid) if cursor.rowcount == 1 else None


def _insert(
    c: sqlite3.Connection, params: InsertUnique, todo: dict[str, str]
) -> Iterator[tuple[str, tuple[int, bool]]]:
    """Insert the ``todo`` rows (key -> payload) whose key is free; ``(key, (id, False))``
    of each row inserted."""
    values = stamp_values(params.stamps)
    head = (*values, params.hold_until, int(params.hold_dead), params.stamps.created_at)
    pairs = list(todo.items())
    inserted: list[tuple[int, str]] = []
    for start, size in _batches(len(pairs)):
        flat = [item for key, payload in pairs[start : start + size] for item in (payload, key)]
        inserted.extend(_plain(c).execute(sql.INSERT_UNIQUE[size], (*head, *flat)).fetchall())
    for job_id, key in inserted:  # RETURNING's order is SQLite's: matched by key
        yield key, (job_id, False)


def _batches(count: int) -> Iterator[tuple[int, int]]:
    """``(start, size)`` slices covering ``count`` rows, sizes from ``BATCH_SIZES``."""
    start = 0
    for size in sql.BATCH_SIZES:
        while count - start >= size:
            yield start, size
            start += size


def _plain(c: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor that returns plain tuples: an attached caller's connection may have
    its own ``row_factory``."""
    cursor = c.cursor()
    cursor.row_factory = None
    return cursor


if TYPE_CHECKING:
    from alkstore.driver import UniqueDriver

    # Static proof that these methods fill the profile the engine declares.
    def _conforms(u: UniqueStatements) -> UniqueDriver[sqlite3.Connection]:
        return u
