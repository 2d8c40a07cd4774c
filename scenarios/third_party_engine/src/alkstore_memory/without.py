"""The memory engine with optional profiles switched off, by name.

``alkstore.load_engine("alkstore_memory.without:locks")`` (and so
``alkstore-conformance run --engine alkstore_memory.without:locks``) is the memory
engine without the ``locks`` profile; ``without:locks+streams`` switches off
both. Its ``capabilities`` declare the profiles absent and its stores raise
``ProfileUnavailable`` for them, so a run against it shows what an engine that
never had them would see: their properties not_applicable, and nothing else
broken. The name is looked up as an attribute of this module (PEP 562), so
every profile the engine offers has one.
"""

from __future__ import annotations

from . import MemoryEngine

SEPARATOR = "+"


def __getattr__(name: str) -> MemoryEngine:
    if name.startswith("_"):  # dunder lookups (pickle, inspect, importlib): not profiles
        raise AttributeError(name)
    try:
        return MemoryEngine(without=name.split(SEPARATOR))
    except ValueError as exc:
        raise AttributeError(f"{__name__}:{name}: {exc}") from exc
