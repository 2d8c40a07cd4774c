"""The ``Job`` of each row a claim returned (``statements._CLAIMED_COLUMNS``).

A claim's row is ``CLAIMED_COMMON``, then one value for ``RARE_CLAIMED``: NULL while
each of those columns holds ``Job``'s default, else a JSON array of their stored values.
The common case (every row's last value NULL) is decoded as it comes, the NULL read as
one of them and the others left out, so each ``Job`` takes their defaults; a batch with
any other row is decoded whole with them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from operator import itemgetter
from typing import Any

from alkstore.rows import claimed_decoder
from alkstore.values import Job

from .statements import CLAIMED_COMMON, RARE_CLAIMED

_RARE = tuple(RARE_CLAIMED)
_STORED_DEFAULTS: dict[str, Any] = {"errors": None, "snoozes": 0}
"""How a rare column stores ``Job``'s default where that is not NULL."""
_DEFAULTS = {f.name: f.default for f in fields(Job)}
_EXPECTED = {"errors": (), "snoozes": 0}
for _name in _RARE:
    if _DEFAULTS.get(_name) != _EXPECTED.get(_name):
        raise TypeError(f"Job.{_name} defaults to {_DEFAULTS.get(_name)!r}: see RARE_CLAIMED")

_STAND_IN = "redriven_from"
"""The rare column the packed value is decoded as when it is NULL: one whose default is
NULL and which is stored as is, so a common row is decoded as it comes (no copy of it
without its last value) and still takes every default."""
if _STAND_IN not in _RARE or _DEFAULTS[_STAND_IN] is not None or _STAND_IN in _STORED_DEFAULTS:
    raise TypeError(f"{_STAND_IN} cannot stand in for the packed rare columns")

_common = claimed_decoder((*CLAIMED_COMMON, _STAND_IN))
_whole = claimed_decoder(CLAIMED_COMMON + _RARE)
_DEFAULT_ROW = tuple(_STORED_DEFAULTS.get(name) for name in _RARE)
_PACKED = itemgetter(-1)
"""A row's packed value: NULL, or a JSON array's text (never empty, so never false)."""


def claimed_jobs(rows: Sequence[Sequence[Any]], queue: str, worker_id: str, now: int) -> list[Job]:
    """The claimed ``Job`` of each row, in order."""
    if any(map(_PACKED, rows)):  # in C: a generator's frame per row costs a job's slot
        whole = [
            (*row[:-1], *(_DEFAULT_ROW if row[-1] is None else json.loads(row[-1]))) for row in rows
        ]
        return _whole(whole, queue, worker_id, now)
    return _common(rows, queue, worker_id, now)
