"""Every public callable of alkstore says what it does.

``help(store.queue("q").enqueue)`` shows the docstring of the core's method, so
the walk covers the ``alkstore.core`` classes a store hands out as well as the
names in ``alkstore.__all__`` and the members of the Protocols in ``alkstore.api``.

The Protocols are the one source of the surface's docs: a core method that
implements a Protocol member carries no docstring in its source and takes the
Protocol's at import (``alkstore._surface.implements``), and ``alkstore.aio``'s
members are generated with it. So the walk reads docstrings at run time
(``__doc__``): a member is documented once its class is made, and a public name
that neither writes a docstring nor implements a documented Protocol member fails.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

import alkstore
import alkstore.aio
import alkstore.aio._generated
import alkstore.worker
from alkstore import _surface, api, core
from alkstore.core.pubsub import CoreSubscription
from alkstore.core.streams import CoreStream
from alkstore.payload import UndecodablePayload

# Dunder methods that are part of the surface a caller uses (``with``, ``for``);
# every other dunder (``__init__``, ``__repr__``, generated dataclass methods) is
# documented by its class docstring or is Python's own.
SURFACE_DUNDERS = frozenset({"__enter__", "__exit__", "__iter__", "__next__", "__call__"})

PROTOCOLS = (
    api.Store,
    api.Queue,
    api.QueueConsumer,
    api.Outbox,
    api.JobHandle,
    api.Transaction,
    api.Lock,
    api.Stream,
    api.Subscription,
)

CORE_FRONT_ENDS = (
    core.CoreStore,
    core.CoreQueue,
    core.CoreOutbox,
    core.CoreJobHandle,
    core.CoreLock,
    CoreStream,
    CoreSubscription,
    core.CoreTransaction,
)

EXTRA_PUBLIC = (UndecodablePayload,)


def _is_public(name: str) -> bool:
    return not name.startswith("_") or name in SURFACE_DUNDERS


def _is_generated_dataclass_doc(cls: type, doc: str) -> bool:
    # dataclass() fills a missing class docstring with the constructor signature.
    return dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}(") and "\n" not in doc


def _own_doc(obj: Any) -> str | None:
    # ``__doc__`` itself: ``inspect.getdoc`` would borrow a base class's docstring.
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return None
    if isinstance(obj, type) and _is_generated_dataclass_doc(obj, doc):
        return None
    return doc


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public callables and properties ``cls`` itself defines (not inherited)."""
    for name, raw in vars(cls).items():
        if not _is_public(name):
            continue
        if isinstance(raw, property):
            yield name, raw.fget
        elif isinstance(raw, (staticmethod, classmethod)):
            yield name, raw.__func__
        elif inspect.isfunction(raw):
            yield name, raw


def undocumented(objects: Iterable[Any]) -> list[str]:
    """Qualified names of each class, function or member among ``objects`` lacking a
    docstring; a module stands for itself and the public names it defines."""
    missing: list[str] = []
    for obj in objects:
        if isinstance(obj, ModuleType):
            if _own_doc(obj) is None:
                missing.append(obj.__name__)
            missing += undocumented(_defined_in(obj))
        elif isinstance(obj, type):
            if _own_doc(obj) is None:
                missing.append(f"{obj.__module__}.{obj.__qualname__}")
            missing += [
                f"{obj.__module__}.{obj.__qualname__}.{name}"
                for name, member in _members(obj)
                if _own_doc(member) is None
            ]
        elif callable(obj) and _own_doc(obj) is None:
            missing.append(f"{obj.__module__}.{obj.__qualname__}")
    return missing


def _defined_in(module: ModuleType) -> list[Any]:
    return [
        value
        for name, value in vars(module).items()
        if _is_public(name)
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module.__name__
    ]


def undescribed_fields(cls: type) -> list[str]:
    """Fields of the dataclass ``cls`` its docstring never names."""
    doc = _own_doc(cls) or ""
    return [
        f"{cls.__qualname__}.{field.name}"
        for field in dataclasses.fields(cls)
        if f"{field.name}:" not in doc and f"``{field.name}``" not in doc
    ]


def _exported() -> list[Any]:
    return [getattr(alkstore, name) for name in alkstore.__all__]


def test_every_name_in_all_has_a_docstring() -> None:
    missing = undocumented([alkstore, *_exported(), *EXTRA_PUBLIC])
    assert missing == [], "public names without a docstring:\n" + "\n".join(missing)


def test_every_protocol_member_has_a_docstring() -> None:
    missing = undocumented(PROTOCOLS)
    assert missing == [], "Protocol members without a docstring:\n" + "\n".join(missing)


def test_every_member_of_the_objects_a_store_returns_has_a_docstring() -> None:
    missing = undocumented(CORE_FRONT_ENDS)
    assert missing == [], "core members without a docstring:\n" + "\n".join(missing)


def test_every_field_of_a_public_value_is_described() -> None:
    values = [
        obj
        for obj in (*_exported(), *EXTRA_PUBLIC)
        if isinstance(obj, type) and dataclasses.is_dataclass(obj)
    ]
    assert values, "the walk found no public dataclass"
    missing = [name for cls in values for name in undescribed_fields(cls)]
    assert missing == [], "value fields the class docstring does not describe:\n" + "\n".join(
        missing
    )


# -- the walk itself can fail --------------------------------------------------


class _Documented:
    """Has a docstring."""

    def method(self) -> None:
        """Has one too."""

    def __repr__(self) -> str:
        return "<no docstring needed>"


class _MissingOne(_Documented):
    """Has a docstring, but one member does not."""

    def bare(self) -> None:
        pass

    @property
    def bare_property(self) -> int:
        return 1

    def __enter__(self) -> _MissingOne:
        return self


@dataclasses.dataclass(frozen=True)
class _GeneratedDoc:
    value: int


def test_the_walk_names_each_member_without_a_docstring() -> None:
    prefix = f"{__name__}._MissingOne"
    assert undocumented([_Documented, _MissingOne]) == [
        f"{prefix}.bare",
        f"{prefix}.bare_property",
        f"{prefix}.__enter__",
    ]


def test_the_walk_does_not_take_a_generated_dataclass_docstring_for_one() -> None:
    assert undocumented([_GeneratedDoc]) == [f"{__name__}._GeneratedDoc"]


def test_the_walk_names_an_undocumented_function() -> None:
    def helper() -> None:
        pass

    assert undocumented([helper]) == [f"{__name__}.{helper.__qualname__}"]


def test_every_public_name_of_the_worker_and_aio_has_a_docstring() -> None:
    names = [
        getattr(module, name)
        for module in (alkstore.aio, alkstore.worker)
        for name in module.__all__
        if not isinstance(getattr(module, name), (int, float, str))
    ]
    missing = undocumented([alkstore.aio, alkstore.worker, *names])
    assert missing == [], "public names without a docstring:\n" + "\n".join(missing)


def test_every_generated_async_member_has_a_docstring() -> None:
    # The bases the hand-written async classes extend are not in alkstore.aio.__all__.
    missing = undocumented([alkstore.aio._generated])
    assert missing == [], "generated members without a docstring:\n" + "\n".join(missing)


def test_a_core_member_takes_its_docstring_from_the_protocol_it_implements() -> None:
    @_surface.implements(api.Lock)
    class _Implementation:
        """Implements ``api.Lock``; its members write no docstring."""

        @property
        def name(self) -> str:
            return "lock"

        def acquire(self, owner: str, ttl: float) -> bool:
            return True

        def renew(self, owner: str, ttl: float) -> bool:
            return True

        def release(self, owner: str) -> bool:
            return True

        def holder(self) -> None:
            return None

        def extra(self) -> None:
            pass

    assert undocumented([_Implementation]) == [f"{__name__}.{_Implementation.__qualname__}.extra"]
