"""The public surface written once: implementations take their docs from ``alkstore.api``.

The Protocols of ``alkstore.api`` state every public method's signature,
defaults and docstring. A class implementing them says so with
``@implements(api.Queue, ...)``: at import each member the Protocol declares
gets the Protocol's docstring (a member may not carry its own), and a member
whose parameters differ from the Protocol's (names, kinds, defaults) is an
import error, not a drift found later. A hand-written async member takes its
Protocol's docstring with ``@documented_as(api.Store.attach, "what async adds")``.

Nothing here runs on a call: it all happens once, when the class is made.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])

_RAISES_ENTRY = re.compile(r"^(\s+)([A-Z]\w*):")


class SurfaceDrift(TypeError):
    """An implementation's member does not match the Protocol member it implements."""


def protocol_members(protocol: type) -> dict[str, Any]:
    """The members ``protocol`` and the Protocols it extends declare (functions, or the
    getter of a property), by name."""
    members: dict[str, Any] = {}
    for cls in reversed(protocol.__mro__):
        if not getattr(cls, "_is_protocol", False) or cls.__module__ == "typing":
            continue
        for name, raw in vars(cls).items():
            if isinstance(raw, property):
                members[name] = raw.fget
            elif inspect.isfunction(raw) and (not name.startswith("_") or _is_dunder(name)):
                members[name] = raw
    return members


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and name not in _PROTOCOL_MACHINERY


_PROTOCOL_MACHINERY = frozenset(
    {"__init__", "__subclasshook__", "__class_getitem__", "__init_subclass__"}
)


def parameters(function: Callable[..., Any]) -> list[tuple[str, str, Any]]:
    """``(name, kind, default)`` of each parameter: what an implementation must match."""
    return [
        (p.name, p.kind.name, p.default) for p in inspect.signature(function).parameters.values()
    ]


def raises(doc: str | None) -> list[str]:
    """The exception names a docstring's ``Raises:`` section lists, in order."""
    if not doc:
        return []
    lines = inspect.cleandoc(doc).splitlines()
    names: list[str] = []
    inside = False
    entry_indent: int | None = None
    for line in lines:
        if not inside:
            inside = line.strip() == "Raises:"
            continue
        if line and not line[0].isspace():
            break  # the next section (or text) starts
        match = _RAISES_ENTRY.match(line)
        if match and (entry_indent is None or len(match.group(1)) == entry_indent):
            entry_indent = len(match.group(1))
            names.append(match.group(2))
    return names


def with_note(doc: str, note: str) -> str:
    """``doc`` (cleaned) with ``note`` as its second paragraph."""
    text = inspect.cleandoc(doc)
    summary, sep, rest = text.partition("\n\n")
    return f"{summary}\n\n{note}\n\n{rest}" if sep else f"{summary}\n\n{note}"


def implements(*protocols: type) -> Callable[[C], C]:
    """Class decorator: ``cls`` implements ``protocols``; its members inherit their docs.

    For each member a Protocol declares and ``cls`` defines itself: the member must
    have no docstring of its own (the Protocol's is the one) and the Protocol's
    parameters (names, kinds, defaults); it then gets the Protocol's docstring.
    Members ``cls`` inherits were checked on the class that defines them.

    Raises:
        SurfaceDrift: a member differs from its Protocol's, restates its docstring, or
            a member the Protocol declares is missing from ``cls`` altogether.
    """

    def decorate(cls: C) -> C:
        for protocol in protocols:
            for name, declared in protocol_members(protocol).items():
                _inherit(cls, protocol, name, declared)
        return cls

    return decorate


def _inherit(cls: type, protocol: type, name: str, declared: Any) -> None:
    where = f"{cls.__qualname__}.{name} (implementing {protocol.__name__}.{name})"
    if not hasattr(cls, name):
        raise SurfaceDrift(f"{cls.__qualname__} lacks {name}, which {protocol.__name__} declares")
    raw = vars(cls).get(name)
    if raw is None:
        return  # inherited from a base class, checked there
    function: Any = raw.fget if isinstance(raw, property) else raw
    if isinstance(raw, property) != isinstance(inspect.getattr_static(protocol, name), property):
        raise SurfaceDrift(f"{where}: one is a property, the other is not")
    if parameters(function) != parameters(declared):
        raise SurfaceDrift(
            f"{where}: parameters {parameters(function)} differ from {parameters(declared)}"
        )
    if function.__doc__ is not None:
        raise SurfaceDrift(f"{where}: restates a docstring; the Protocol's is the one")
    function.__doc__ = declared.__doc__
    if isinstance(raw, property):
        setattr(cls, name, property(raw.fget, raw.fset, raw.fdel, declared.__doc__))


def documented_as(declared: Any, note: str) -> Callable[[F], F]:
    """Method decorator for a hand-written twin of a Protocol member (``alkstore.aio``):
    the Protocol's docstring, with ``note`` (what the twin adds) as its second paragraph.
    ``declared`` is the Protocol's function or property (``api.Store.attach``)."""
    doc = (declared.fget if isinstance(declared, property) else declared).__doc__

    def decorate(function: F) -> F:
        function.__doc__ = with_note(doc or "", note)
        return function

    return decorate


def twin_drift(declared: Any, twin: Any) -> list[str]:
    """How ``twin`` (an async or facade member) differs from the Protocol member it
    mirrors: its parameters (names, kinds, defaults) and the errors its docstring
    documents (``Raises:``). Either may be a function or a property; ``[]``: none."""
    declared = declared.fget if isinstance(declared, property) else declared
    twin = twin.fget if isinstance(twin, property) else twin
    drift: list[str] = []
    if parameters(twin) != parameters(declared):
        drift.append(f"parameters {parameters(twin)} != {parameters(declared)}")
    if sorted(raises(twin.__doc__)) != sorted(raises(declared.__doc__)):
        drift.append(f"Raises {raises(twin.__doc__)} != {raises(declared.__doc__)}")
    return drift
