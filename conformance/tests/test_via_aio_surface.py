"""The kit's ``--via aio`` facade mirrors ``alkstore.api`` without drift.

Each Protocol member has a facade twin (generated into ``via_aio_generated.py``,
or written by hand in ``via_aio.py``) that must take the Protocol's parameters
and defaults, return its shape and document its errors; the generated module
must be what the generator writes now.
"""

from __future__ import annotations

import inspect
import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from alkstore import _surface, api
from alkstore_conformance.helpers import via_aio

ROOT = Path(__file__).resolve().parents[2]


GENERATOR = SimpleNamespace(**runpy.run_path(str(ROOT / "tools/generate_surface.py")))
"""The generator's table and functions (``tools/`` is a script folder, not a package)."""
PROTOCOLS = GENERATOR.read_api(GENERATOR.API.read_text())
PAIRS = [(t, name) for t in GENERATOR.SURFACE for name in t.members]
IDS = [f"{t.protocol}.{name}" for t, name in PAIRS]

RAISES_APART = {
    ("Subscription", "__enter__"): "async with a closed AsyncSubscription is not refused",
}
"""Facade members whose documented errors differ from the Protocol's, and why."""

RETURNS_APART = {
    ("Transaction", "execute"): "FetchedRows",  # rows fetched on the transaction's thread
    ("Transaction", "enqueue"): "Enqueued",
    ("Store", "transaction"): "AioTransactionBlock",
    ("Store", "attach"): "AioTransactionBlock",
    ("Store", "claim_wait_any"): "AioJobHandle | None",
    ("Store", "__enter__"): "AioStore",
    ("Subscription", "__enter__"): "AioSubscription",
}
"""Facade return annotations other than the sync one with handle types mapped."""


def _declared(protocol: str, name: str) -> Any:
    return inspect.getattr_static(getattr(api, protocol), name)


def _twin(target: Any, name: str) -> Any:
    return inspect.getattr_static(getattr(via_aio, target.facade), name)


def _function(member: Any) -> Any:
    return member.fget if isinstance(member, property) else member


@pytest.mark.parametrize(("target", "name"), PAIRS, ids=IDS)
def test_each_facade_member_takes_the_protocols_parameters_and_documents_its_errors(
    target: Any, name: str
) -> None:
    drift = _surface.twin_drift(_declared(target.protocol, name), _twin(target, name))
    if (target.protocol, name) in RAISES_APART:
        drift = [d for d in drift if not d.startswith("Raises")]
    assert drift == []


@pytest.mark.parametrize(("target", "name"), PAIRS, ids=IDS)
def test_each_facade_member_returns_the_sync_shape_with_handles_mapped(
    target: Any, name: str
) -> None:
    declared = inspect.signature(_function(_declared(target.protocol, name))).return_annotation
    twin = inspect.signature(_function(_twin(target, name))).return_annotation
    expected = RETURNS_APART.get((target.protocol, name))
    if expected is None:
        member = PROTOCOLS[target.protocol].members[name]
        expected = GENERATOR.facade_returns(member)
    assert twin == expected
    assert declared  # every Protocol member is annotated


def test_the_generated_facade_is_what_the_generator_writes_now() -> None:
    _, facade_text = GENERATOR.generate(GENERATOR.API.read_text())
    assert GENERATOR.FACADE_OUT.read_text() == facade_text, "run python tools/generate_surface.py"
