"""A statement's parameters by name, from the core's params value (``alkstore.params``).

Each statement names its values ``%(field)s`` after the fields of the params value
its driver method takes, so the mapping psycopg binds is that value's fields as
they are, plus the few values only the engine knows (a NOTIFY channel, a
constant error) or sends differently (ids sorted, an enum's text). The SQL reads
by name and the driver never lists a value's fields again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

_Getter = tuple[tuple[str, ...], Callable[[Any], Any]]

_GETTERS: dict[type, _Getter] = {}


def _getter(kind: type) -> _Getter:
    names = tuple(field.name for field in fields(kind))
    get = attrgetter(*names)
    if len(names) == 1:
        return names, lambda value: (get(value),)
    return names, get


def by_name(params: object, **values: Any) -> dict[str, Any]:
    """Every field of the dataclass value ``params`` by its name, then ``values``
    (the statement's other parameters, or a field as the statement takes it)."""
    kind = type(params)
    known = _GETTERS.get(kind)
    if known is None:
        known = _GETTERS[kind] = _getter(kind)
    names, get = known
    bound = dict(zip(names, get(params), strict=True))
    if values:
        bound.update(values)
    return bound


def id_array(ids: Sequence[int]) -> str:
    """``ids`` as the text of one ``bigint[]`` (``{1,2,3}``), which a batch statement
    casts (``%(job_ids)s::bigint[]``, ``ACK_BATCH``): about a fourth of what psycopg
    costs the client to send a list, which it adapts element by element."""
    return "{" + ",".join(map(int.__repr__, ids)) + "}"
