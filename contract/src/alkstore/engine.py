"""Engines plug in through entry points (CONTRACT.md §1).

An engine distribution registers an ``EngineProvider`` under the entry-point
group ``alkstore.engines``; ``alkstore.open(url)`` picks it by URL scheme.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from .api import Store
from .clock import Clock, check_clock
from .errors import EngineNotFound, InvalidOptions

ENGINE_GROUP = "alkstore.engines"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Which optional profiles an engine implements (the queue core is never optional)."""

    transactions: bool = True
    sql: bool = True
    """``tx.connection`` is a DB-API connection, so business writes share the transaction."""
    attach: bool = True
    locks: bool = True
    multi_process: bool = True
    scheduler: bool = False
    streams: bool = False
    pubsub: bool = False

    def profiles(self) -> frozenset[str]:
        return frozenset(name for name in self.__dataclass_fields__ if getattr(self, name) is True)


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """A picklable recipe for reopening one provisioned store (in any process)."""

    url: str
    opts: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class EngineProvider(Protocol):
    name: str
    version: str
    contract_version: str
    capabilities: Capabilities

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Store: ...

    def provision(self) -> AbstractContextManager[EngineSpec]: ...


def installed_engines(group: str = ENGINE_GROUP) -> list[str]:
    return sorted({ep.name for ep in entry_points(group=group)})


def load_engine(name: str, group: str = ENGINE_GROUP) -> EngineProvider:
    """Load an engine by entry-point name, or ``module:object`` for an unpublished one."""
    if ":" in name and not name.endswith(":"):
        module_name, _, attr = name.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise EngineNotFound(name, installed_engines(group)) from exc
        return _as_provider(obj)
    for ep in entry_points(group=group):
        if ep.name == name:
            return _as_provider(ep.load())
    raise EngineNotFound(name, installed_engines(group))


def _as_provider(obj: Any) -> EngineProvider:
    provider = obj() if isinstance(obj, type) else obj
    if not isinstance(provider, EngineProvider):
        raise TypeError(f"{obj!r} does not satisfy alkstore.EngineProvider")
    return provider


def url_scheme(url: str) -> str:
    """``sqlite:///x.db`` -> ``sqlite``; a driver suffix (``+psycopg``) is dropped."""
    scheme, sep, _ = url.partition(":")
    if not sep or not scheme:
        raise EngineNotFound(url, installed_engines())
    return scheme.split("+", 1)[0].lower()


def open(url: str, *, clock: Clock | None = None, **opts: Any) -> Store:
    """Open a store; the URL scheme names the engine.

    Raises ``InvalidOptions`` for a URL that is not a ``str`` or a ``clock`` that is
    not a ``Clock`` (before any engine is loaded), ``EngineNotFound`` when no
    installed engine has the URL's scheme, and whatever the engine raises for its
    own URL and options (``InvalidOptions``, ``EngineUnavailable``,
    ``EngineMisconfigured``)."""
    if not isinstance(url, str):
        raise InvalidOptions(
            f"url must be a str such as 'sqlite:///app.db', got {type(url).__name__}"
        )
    check_clock(clock)
    return load_engine(url_scheme(url)).open(url, clock=clock, **opts)
