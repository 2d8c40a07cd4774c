"""What the plugin knows during one run with ``--engine`` (absent when inert)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from alkstore import EngineProvider

from ..helpers.via_aio import VIA_SYNC
from .budget import TimeBudgets
from .manifest import ALWAYS_APPLICABLE, PROFILES, Manifest
from .modes import RunMode
from .results import ResultBook


@dataclass
class KitState:
    engine_name: str
    engine_group: str
    provider: EngineProvider
    manifest: Manifest
    seed: str
    mode: RunMode
    is_worker: bool
    report_path: Path | None
    selected: frozenset[str] | None = None
    """``--property`` ids to run (``None``: every property)."""
    selected_profiles: frozenset[str] | None = None
    """``--profile`` names: run only their properties (``None``: every profile)."""
    via: str = VIA_SYNC
    """How the suite reaches the engine: its ``sync`` stores, or ``aio`` (``via_aio``)."""
    budgets: TimeBudgets = field(default_factory=TimeBudgets)
    """Each suite test's time budget (``budget``)."""
    backend_described: bool = False
    """This process has asked the provider to describe its backend."""
    results: ResultBook = field(init=False)

    def __post_init__(self) -> None:
        self.results = ResultBook(self.manifest)

    @property
    def hypothesis_profile(self) -> str:
        return self.mode.hypothesis_profile

    def engine_profiles(self) -> frozenset[str]:
        """The profiles the engine implements; the queue core (and the worker and
        the async surface, both built on it) is never optional."""
        return frozenset(self.provider.capabilities.profiles()) | ALWAYS_APPLICABLE

    def not_applicable_profiles(self) -> list[str]:
        """The optional profiles the engine lacks: what needs them is not_applicable."""
        return sorted(PROFILES - self.engine_profiles())


KIT_STATE = pytest.StashKey[KitState]()


def kit_state(config: pytest.Config) -> KitState | None:
    return config.stash.get(KIT_STATE, None)


def not_applicable_reason(profile: str) -> str:
    return f"not_applicable: engine lacks profile {profile}"
