"""Optional engine hooks the kit uses when an engine offers them.

``store.attach(conn)`` joins a connection the *caller* opened, and only the
engine knows how to open one (``sqlite3.connect(path)``,
``psycopg.connect(dsn)``, …). An engine that wants ``attach`` certified
exposes on its provider::

    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], Any]:
        '''A zero-argument callable; each call opens a NEW DB-API 2.0
        connection to the store ``spec`` names (the type ``store.attach``
        accepts), with a transaction already open. The caller owns it: it
        commits or rolls back and closes it.'''

Without the hook the attach properties are reported not_applicable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from alkstore import EngineSpec

NATIVE_CONNECTION_HOOK = "native_connection_factory"


@runtime_checkable
class NativeConnectionFactoryProvider(Protocol):
    def native_connection_factory(self, spec: EngineSpec) -> Callable[[], Any]: ...


def native_connection_factory(provider: object, spec: EngineSpec) -> Callable[[], Any] | None:
    """The engine's factory of caller-owned connections for ``spec``, if it has one."""
    if not isinstance(provider, NativeConnectionFactoryProvider):
        return None
    return provider.native_connection_factory(spec)
