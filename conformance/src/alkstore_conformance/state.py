"""What the plugin knows during one run with ``--engine`` (absent when inert)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from alkstore import EngineProvider

from .manifest import CORE_PROFILE, Manifest
from .results import ResultBook


@dataclass
class KitState:
    engine_name: str
    engine_group: str
    provider: EngineProvider
    manifest: Manifest
    seed: str
    hypothesis_profile: str
    is_worker: bool
    report_path: Path | None
    results: ResultBook = field(init=False)

    def __post_init__(self) -> None:
        self.results = ResultBook(self.manifest)

    def engine_profiles(self) -> frozenset[str]:
        return self.provider.capabilities.profiles() | {CORE_PROFILE}


KIT_STATE = pytest.StashKey[KitState]()


def kit_state(config: pytest.Config) -> KitState | None:
    return config.stash.get(KIT_STATE, None)


def not_applicable_reason(profile: str) -> str:
    return f"not_applicable: engine lacks profile {profile}"
