"""Which installed distribution an engine comes from (for the report).

An entry-point name answers directly (the entry point knows its distribution).
A ``module:object`` reference is looked up by the provider's top-level module:
among the distributions' top-level packages, then among distributions whose
entry points name that module (editable installs list no packages), and is
``None`` for code that no distribution installed.
"""

from __future__ import annotations

import importlib.metadata as metadata
from typing import Any


def engine_distribution(reference: str, group: str, provider: object) -> dict[str, str] | None:
    """``{"name", "version"}`` of the distribution that ships ``provider``, if any."""
    if ":" not in reference:
        for entry_point in metadata.entry_points(group=group):
            if entry_point.name == reference and entry_point.dist is not None:
                return _describe(entry_point.dist)
    top = _top_level_module(provider)
    if not top:
        return None
    names = metadata.packages_distributions().get(top, [])
    if names:
        return {"name": names[0], "version": metadata.version(names[0])}
    for dist in metadata.distributions():
        if any(ep.value.partition(":")[0].split(".")[0] == top for ep in dist.entry_points):
            return _describe(dist)
    return None


def entry_point_value(reference: str, group: str) -> str | None:
    """What the entry point ``reference`` of ``group`` names (``module:object``)."""
    if ":" in reference:
        return reference
    for entry_point in metadata.entry_points(group=group):
        if entry_point.name == reference:
            return str(entry_point.value)
    return None


def _top_level_module(provider: object) -> str:
    module: Any = getattr(type(provider), "__module__", "") or ""
    if module == "builtins":  # a module object or function used as the provider
        module = getattr(provider, "__module__", None) or getattr(provider, "__name__", "")
    return str(module).partition(".")[0]


def _describe(dist: metadata.Distribution) -> dict[str, str]:
    return {"name": str(dist.metadata["Name"]), "version": str(dist.version)}
