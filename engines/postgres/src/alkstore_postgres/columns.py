"""The job tables' column lists, each derived once from the contract's.

The contract names a job row's columns (``alkstore.rows.JOB_COLUMNS``, a claim's
``CLAIMED_COLUMNS``) and an insert's stamps (``alkstore.options.JOB_STAMP_FIELDS``).
Here each of the engine's two job tables says only where it differs from them --
a column it computes instead of storing as the contract reads it -- and every
other column is selected, moved and inserted by its own name; the rows are decoded
by decoders made for the very columns selected. So a new job column is its
migration plus whatever SQL truly treats it differently, never another hand-kept
list.

Names come from the contract, not from a caller, but are still checked (plain
lower-case identifiers, so the quoted name is the very column the hand-written
SQL names bare) and quoted with ``psycopg.sql.Identifier``.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Final

from psycopg import sql

from alkstore.options import JOB_STAMP_FIELDS, JobStamps
from alkstore.rows import (
    CLAIMED_COLUMNS,
    JOB_COLUMNS,
    ClaimedDecoder,
    JobDecoder,
    claimed_decoder,
    job_decoder,
)

_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def column(name: str) -> str:
    """``name`` as a quoted identifier, once it is checked to be a plain one."""
    if not _PLAIN_NAME.fullmatch(name):
        raise ValueError(f"not a plain column name: {name!r}")
    return sql.Identifier(name).as_string(None)


_LINE: Final = 72


def listed(items: Iterable[str]) -> str:
    """``items`` separated by commas, wrapped so the statement stays readable."""
    lines = [""]
    for item in items:
        if lines[-1] and len(lines[-1]) + len(item) > _LINE:
            lines.append("")
        lines[-1] += f"{item}, "
    return "\n        ".join(line.rstrip() for line in lines).removesuffix(",")


def history(errors: str) -> str:
    """The ``errors`` array (one JSON ``[attempt, at, error]`` text per entry) as the
    JSON array text the contract's row decoder reads; NULL when the job has no history."""
    return f"'[' || array_to_string({errors}, ',') || ']'"


def select_list(columns: Iterable[str], computed: Mapping[str, str]) -> str:
    """``columns`` as a SELECT (or RETURNING) list: a stored column by its name, a
    ``computed`` one as its expression, each named as the contract reads it."""
    columns = tuple(columns)
    if unknown := set(computed) - set(columns):
        raise ValueError(f"computed columns that are not selected: {sorted(unknown)}")
    return listed(
        f"{computed[name]} AS {column(name)}" if name in computed else column(name)
        for name in columns
    )


_NOT_COMPLETED: Final[Mapping[str, str]] = {
    # Only a completed row (the results profile) holds these.
    "completed_at": "NULL::bigint",
    "result": "NULL::text",
}

LIVE_COMPUTED: Final[Mapping[str, str]] = {
    # A live row has not died; its state is stored, its history is an array.
    "last_error": "NULL::text",
    "died_at": "NULL::bigint",
    "errors": history("errors"),
    **_NOT_COMPLETED,
}
"""How ``alkstore_jobs`` gives the contract columns it does not store as they are read."""

DEAD_COMPUTED: Final[Mapping[str, str]] = {
    # The dead table holds dead rows only, so it stores no state.
    "state": "'dead'",
    "errors": history("errors"),
    **_NOT_COMPLETED,
}
"""How ``alkstore_dead_jobs`` gives the contract columns it does not store as they are read."""

COMPLETED_COMPUTED: Final[Mapping[str, str]] = {
    # The completed table holds completed rows only: no state, and none has died.
    "state": "'completed'",
    "last_error": "NULL::text",
    "died_at": "NULL::bigint",
    "errors": history("errors"),
}
"""How ``alkstore_completed_jobs`` (the results profile) gives the contract columns it
does not store as they are read."""

WAITING_COMPUTED: Final[Mapping[str, str]] = {
    # The waiting table (the dependencies profile) holds waiting rows only.
    "state": "'waiting'",
    "last_error": "NULL::text",
    "died_at": "NULL::bigint",
    "errors": history("errors"),
    **_NOT_COMPLETED,
}
"""How ``alkstore_waiting_jobs`` gives the contract columns it does not store as they are
read."""

JOB_SELECTED: Final = JOB_COLUMNS
"""The columns a statement reading jobs selects, live and dead alike."""

CLAIM_RETURNED: Final = CLAIMED_COLUMNS
"""The columns a claim returns: what it did not set itself."""

LIVE_JOB: Final = select_list(JOB_SELECTED, LIVE_COMPUTED)
"""A live row, in ``JOB_SELECTED`` order."""

DEAD_JOB: Final = select_list(JOB_SELECTED, DEAD_COMPUTED)
"""A dead row, in ``JOB_SELECTED`` order."""

COMPLETED_JOB: Final = select_list(JOB_SELECTED, COMPLETED_COMPUTED)
"""A completed row, in ``JOB_SELECTED`` order."""

WAITING_JOB: Final = select_list(JOB_SELECTED, WAITING_COMPUTED)
"""A waiting row, in ``JOB_SELECTED`` order."""

CLAIMED_JOB: Final = select_list(
    CLAIM_RETURNED, {name: how for name, how in LIVE_COMPUTED.items() if name in CLAIM_RETURNED}
)
"""A claimed (live) row, in ``CLAIM_RETURNED`` order."""

job_from_row: Final[JobDecoder] = job_decoder(JOB_SELECTED)
"""A ``LIVE_JOB`` or ``DEAD_JOB`` row as a ``Job``."""

claimed_jobs: Final[ClaimedDecoder] = claimed_decoder(CLAIM_RETURNED)
"""The ``Job`` of each ``CLAIMED_JOB`` row of a claim."""

MOVED: Final = listed(
    column(name) for name in JOB_COLUMNS if name not in LIVE_COMPUTED and name not in DEAD_COMPUTED
)
"""What a live row keeps as it is when it moves to the dead table (same id): every
column both tables store alike. Its history moves too, but each move says how
(one may append an entry), so it is not in this list. A row moving to the completed
table (the results profile) keeps the same columns."""

HOLD: Final = "unique_hold, hold_until, hold_dead"
"""The unique profile's columns no ``Job`` field reads: a job's hold of its key (the
key while held), when the hold ends, and whether a dead job keeps it."""

HOLD_KEPT_DEAD: Final = "CASE WHEN hold_dead THEN unique_hold END, hold_until, hold_dead"
"""``HOLD`` as a row moving to the dead table keeps it: the key only if it holds it
while dead, so a move frees every other job's key."""

# -- inserts -----------------------------------------------------------------------

_SQL_TYPES: Final[Mapping[type, str]] = {int: "bigint", str: "text"}


def parameters(record: type) -> str:
    """One named parameter per field of the dataclass ``record``, in field order; one
    that may be NULL is cast to its type, since a NULL parameter has none of its own
    (which an ``INSERT ... SELECT`` list needs)."""
    hints = typing.get_type_hints(record)
    return listed(_typed_parameter(field.name, hints[field.name]) for field in fields(record))


def _typed_parameter(name: str, hint: object) -> str:
    parameter = f"%({name})s"
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return parameter
    (value_type,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
    if value_type not in _SQL_TYPES:
        raise TypeError(f"{name} may be NULL: say which SQL type a {value_type} is sent as")
    return f"{parameter}::{_SQL_TYPES[value_type]}"


def column_list(record: type) -> str:
    """The fields of the dataclass ``record``, in field order, as columns."""
    return listed(column(field.name) for field in fields(record))


STAMP_COLUMNS: Final = listed(column(name) for name in JOB_STAMP_FIELDS)
"""The columns an enqueue stamps, in ``JOB_STAMP_FIELDS`` order."""

STAMP_PARAMETERS: Final = parameters(JobStamps)
"""``STAMP_COLUMNS``' values: one named parameter per ``JobStamps`` field."""


def restamped(row: str, fresh: Mapping[str, str]) -> str:
    """``STAMP_COLUMNS``' values taken from the stamps of ``row`` (a job row's alias),
    but for the ``fresh`` ones, given as expressions."""
    if unknown := set(fresh) - set(JOB_STAMP_FIELDS):
        raise ValueError(f"not stamps: {sorted(unknown)}")
    return listed(fresh.get(name, f"{row}.{column(name)}") for name in JOB_STAMP_FIELDS)
