"""The surface is written once: ``alkstore.api``'s Protocols, mirrored without drift.

Each Protocol member has a twin in the core (which implements it) and in
``alkstore.aio`` (generated from it, or written by hand where it needs logic).
A twin that differs in parameters, defaults, return shape or documented errors
fails here, as does a generated module that regenerating would change.
"""

from __future__ import annotations

import ast
import inspect
import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import alkstore.aio
from alkstore import _surface, api, core
from alkstore.core.pubsub import CoreSubscription
from alkstore.core.streams import CoreStream
from alkstore.core.watching import CoreWakeWatcher

ROOT = Path(__file__).resolve().parents[2]
API_SOURCE = ROOT / "contract/src/alkstore/api.py"


GENERATOR = SimpleNamespace(**runpy.run_path(str(ROOT / "tools/generate_surface.py")))
"""The generator's table and functions (``tools/`` is a script folder, not a package)."""
SURFACE: tuple[Any, ...] = GENERATOR.SURFACE

CORE = {
    "JobHandle": core.CoreJobHandle,
    "QueueConsumer": core.CoreQueue,
    "Queue": core.CoreQueue,
    "Outbox": core.CoreOutbox,
    "Lock": core.CoreLock,
    "Stream": CoreStream,
    "Subscription": CoreSubscription,
    "WakeWatcher": CoreWakeWatcher,
    "Transaction": core.CoreTransaction,
    "Store": core.CoreStore,
}

ASYNC_DUNDERS = {"__iter__": "__aiter__", "__enter__": "__aenter__", "__exit__": "__aexit__"}
"""A sync dunder's async twin."""

RAISES_APART = {
    ("Subscription", "__enter__"): "async with a closed AsyncSubscription is not refused",
}
"""Async twins whose documented errors differ from the Protocol's, and why."""

RETURNS_APART = {
    ("Transaction", "execute"): "list[Any]",  # the rows, fetched on the transaction's thread
    ("Transaction", "connection"): "Any",
    # the refused handles as the caller gave them, sync or async
    ("Transaction", "ack_all"): "tuple[JobHandle | AsyncJobHandle, ...]",
    ("Transaction", "retry_all"): "tuple[JobHandle | AsyncJobHandle, ...]",
    ("Transaction", "fail_all"): "tuple[JobHandle | AsyncJobHandle, ...]",
    ("Store", "transaction"): "TransactionBlock",
    ("Store", "attach"): "TransactionBlock",
    ("Store", "__enter__"): "AsyncStore",
    ("Subscription", "__iter__"): "AsyncIterator[Any]",
}
"""Async return annotations that are not the sync one with each handle type mapped."""


def _pairs() -> list[tuple[str, str, Any]]:
    return [(t.protocol, name, how) for t in SURFACE for name, how in t.members.items()]


def _ids(pairs: list[tuple[str, str, Any]]) -> list[str]:
    return [f"{protocol}.{name}" for protocol, name, _ in pairs]


PAIRS = _pairs()


def _declared(protocol: str, name: str) -> Any:
    return inspect.getattr_static(getattr(api, protocol), name)


def _async_twin(protocol: str, name: str) -> Any:
    target = next(t for t in SURFACE if t.protocol == protocol)
    cls = getattr(alkstore.aio, target.aio)
    return inspect.getattr_static(cls, ASYNC_DUNDERS.get(name, name))


def _function(member: Any) -> Any:
    return member.fget if isinstance(member, property) else member


# -- the table covers the surface ------------------------------------------------------
def test_the_generator_table_names_every_protocol_member() -> None:
    for target in SURFACE:
        declared = {
            name
            for name in vars(getattr(api, target.protocol))
            if name in _surface.protocol_members(getattr(api, target.protocol))
        }
        assert set(target.members) == declared, target.protocol


# -- alkstore.aio ----------------------------------------------------------------------
@pytest.mark.parametrize(("protocol", "name", "how"), PAIRS, ids=_ids(PAIRS))
def test_each_async_twin_takes_the_protocols_parameters_and_documents_its_errors(
    protocol: str, name: str, how: Any
) -> None:
    drift = _surface.twin_drift(_declared(protocol, name), _async_twin(protocol, name))
    if (protocol, name) in RAISES_APART:
        drift = [d for d in drift if not d.startswith("Raises")]
    assert drift == []


@pytest.mark.parametrize(("protocol", "name", "how"), PAIRS, ids=_ids(PAIRS))
def test_each_async_twin_returns_the_sync_shape_with_handles_made_async(
    protocol: str, name: str, how: Any
) -> None:
    declared = inspect.signature(_function(_declared(protocol, name))).return_annotation
    twin = inspect.signature(_function(_async_twin(protocol, name))).return_annotation
    expected = RETURNS_APART.get(
        (protocol, name), GENERATOR.map_names(declared, GENERATOR.AIO_NAMES)
    )
    assert twin == expected


@pytest.mark.parametrize(("protocol", "name", "how"), PAIRS, ids=_ids(PAIRS))
def test_each_async_twin_that_touches_storage_is_a_coroutine(
    protocol: str, name: str, how: Any
) -> None:
    twin = _async_twin(protocol, name)
    if how.aio in ("call", "claim", "wait"):
        assert inspect.iscoroutinefunction(twin)
    elif how.aio == "factory":
        assert inspect.isfunction(twin)
        assert not inspect.iscoroutinefunction(twin)
    elif how.aio == "property":
        assert isinstance(twin, property)


# -- the core --------------------------------------------------------------------------
@pytest.mark.parametrize(("protocol", "name", "how"), PAIRS, ids=_ids(PAIRS))
def test_each_core_member_takes_the_protocols_parameters_and_its_docstring(
    protocol: str, name: str, how: Any
) -> None:
    declared = _function(_declared(protocol, name))
    implemented = _function(inspect.getattr_static(CORE[protocol], name))
    assert _surface.parameters(implemented) == _surface.parameters(declared)
    assert implemented.__doc__ == declared.__doc__


def _default_texts(path: Path, classes: set[str]) -> dict[tuple[str, str], list[str | None]]:
    """Each method's parameter defaults as source text, by ``(method, parameter)``."""
    source = path.read_text()
    texts: dict[tuple[str, str], list[str | None]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name in classes:
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    args = item.args
                    defaults = [*args.defaults, *args.kw_defaults]
                    texts[(node.name, item.name)] = [
                        None if d is None else ast.get_source_segment(source, d) for d in defaults
                    ]
    return texts


def test_core_defaults_are_the_protocols_source_text_not_a_restated_value() -> None:
    # ``limit=MAX_REDRIVE`` and ``limit=10_000`` are equal values but two homes.
    declared = _default_texts(API_SOURCE, {t.protocol for t in SURFACE})
    mismatches = []
    for protocol, cls in CORE.items():
        implemented = _default_texts(Path(inspect.getfile(cls)), {cls.__name__})
        for (owner, method), texts in declared.items():
            key = (cls.__name__, method)
            if owner == protocol and key in implemented and implemented[key] != texts:
                mismatches.append(f"{cls.__name__}.{method}: {implemented[key]} != {texts}")
    assert mismatches == []


# -- generated files are fresh -----------------------------------------------------------
def test_the_generated_async_surface_is_what_the_generator_writes_now() -> None:
    aio_text, _ = GENERATOR.generate(API_SOURCE.read_text())
    assert GENERATOR.AIO_OUT.read_text() == aio_text, "run python tools/generate_surface.py"


def test_the_generated_kit_facade_is_what_the_generator_writes_now() -> None:
    _, facade_text = GENERATOR.generate(API_SOURCE.read_text())
    assert GENERATOR.FACADE_OUT.read_text() == facade_text, "run python tools/generate_surface.py"


def test_generated_defaults_keep_their_source_text() -> None:
    assert "limit: int = MAX_REDRIVE" in GENERATOR.AIO_OUT.read_text()


# -- the mechanism itself can fail ----------------------------------------------------------
def _lock_like(**overrides: Any) -> type:
    def holder(self: Any) -> None:
        return None

    namespace: dict[str, Any] = {
        "name": property(lambda self: "n"),
        "acquire": lambda self, owner, ttl: True,
        "renew": lambda self, owner, ttl: True,
        "release": lambda self, owner: True,
        "holder": holder,
    }
    namespace.update(overrides)
    return type("LockLike", (), {k: v for k, v in namespace.items() if v is not None})


def test_implements_gives_each_member_its_protocols_docstring() -> None:
    cls = _surface.implements(api.Lock)(_lock_like())
    assert cls.acquire.__doc__ == api.Lock.acquire.__doc__
    assert inspect.getattr_static(cls, "name").__doc__ == api.Lock.name.__doc__


def test_implements_refuses_a_member_whose_parameters_differ() -> None:
    with pytest.raises(_surface.SurfaceDrift, match="parameters"):
        _surface.implements(api.Lock)(_lock_like(renew=lambda self, owner, ttl=30: True))


def test_implements_refuses_a_member_that_restates_a_docstring() -> None:
    def holder(self: Any) -> None:
        """A copy of the contract."""

    with pytest.raises(_surface.SurfaceDrift, match="restates"):
        _surface.implements(api.Lock)(_lock_like(holder=holder))


def test_implements_refuses_a_class_missing_a_member() -> None:
    with pytest.raises(_surface.SurfaceDrift, match="lacks release"):
        _surface.implements(api.Lock)(_lock_like(release=None))


def test_twin_drift_names_a_default_and_a_documented_error_that_differ() -> None:
    def renew(self: Any, owner: str, ttl: int = 1) -> bool:
        """Renew.

        Raises:
            StoreClosed: the store was closed.
        """
        return True

    drift = _surface.twin_drift(api.Lock.renew, renew)
    assert [d.split(" ")[0] for d in drift] == ["parameters", "Raises"]


def test_raises_reads_each_entry_of_a_raises_section_and_nothing_after_it() -> None:
    assert _surface.raises(api.JobHandle.ack_and_claim.__doc__) == [
        "InvalidName",
        "InvalidOptions",
        "ResultError",
        "StoreClosed",
        "EngineUnavailable",
    ]
