"""The property manifest shipped with the suite (contract §10).

Each property has a stable id, a title, the contract section it checks and the
profile it belongs to (``queues`` for the core, else an optional profile named
like a field of ``alkstore.Capabilities``). Two keys are optional:

- ``requires``: the other profiles every test of the property needs (a list, e.g.
  ``requires = ["transactions"]`` for the async surface's transaction property).
  A property is not_applicable on an engine that lacks its profile or any of these;
  a dependency only some of its tests have stays a ``requires`` mark on those tests.
- ``time_budget_s``: the time budget of each of its tests, for the long ones
  (``budget.DEFAULT_TIME_BUDGET_S`` otherwise).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

from alkstore import Capabilities

CORE_PROFILE = "queues"
"""The profile every engine implements; it is never not-applicable."""

WORKER_PROFILE = "worker"
"""The worker runtime (``alkstore.worker``): built on the core alone, so it applies
to every engine, as the core does; reported as a profile of its own."""

ASYNC_PROFILE = "async"
"""The async surface (``alkstore.aio``, contract §13): an ``AsyncStore`` runs over the
engine's sync store (or, for an ``async_native`` engine, over ``open_on_loop``'s), so
it too applies to every engine; reported as a profile of its own."""

ALWAYS_APPLICABLE: frozenset[str] = frozenset({CORE_PROFILE, WORKER_PROFILE, ASYNC_PROFILE})

PROFILES: frozenset[str] = frozenset({*ALWAYS_APPLICABLE, *(f.name for f in fields(Capabilities))})

_ID = re.compile(r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+")
_SECTION = re.compile(r"§[0-9]+")
_MANIFEST_FILE = "manifest.toml"
_PACKAGE = "alkstore_conformance.certify"


class ManifestError(ValueError):
    """The manifest is malformed (a packaging bug, not an engine's fault)."""


@dataclass(frozen=True, slots=True)
class Property:
    id: str
    title: str
    contract: str
    profile: str
    requires: tuple[str, ...] = ()
    """Profiles besides ``profile`` that every test of the property needs."""
    time_budget_s: int | None = None
    """Each test's time budget, when the default is too short for this property."""

    @property
    def profiles(self) -> tuple[str, ...]:
        """Every profile the property needs: its own first, then what it requires."""
        return (self.profile, *self.requires)


class Manifest(Mapping[str, Property]):
    """Properties by id, in manifest order; ``sha256`` names the exact text they came from."""

    def __init__(self, properties: list[Property], sha256: str = "") -> None:
        self.sha256 = sha256
        self._by_id: dict[str, Property] = {}
        for prop in properties:
            if prop.id in self._by_id:
                raise ManifestError(f"property id {prop.id!r} appears twice")
            self._by_id[prop.id] = prop

    def __getitem__(self, key: str) -> Property:
        return self._by_id[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


def parse_manifest(text: str) -> Manifest:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"manifest is not valid TOML: {exc}") from exc
    entries = data.get("property")
    if not isinstance(entries, list) or not entries:
        raise ManifestError("manifest has no [[property]] entries")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Manifest([_property(entry) for entry in entries], sha256=digest)


_REQUIRED_KEYS = frozenset({"id", "title", "contract", "profile"})
_OPTIONAL_KEYS = frozenset({"requires", "time_budget_s"})


def _property(entry: Any) -> Property:
    if not isinstance(entry, dict):
        raise ManifestError(f"a property must be a table, got {entry!r}")
    keys = set(entry)
    if not _REQUIRED_KEYS <= keys <= _REQUIRED_KEYS | _OPTIONAL_KEYS:
        raise ManifestError(
            f"property {entry!r} must have exactly the keys {sorted(_REQUIRED_KEYS)} "
            f"(and optionally {sorted(_OPTIONAL_KEYS)})"
        )
    if not all(isinstance(entry[key], str) and entry[key] for key in _REQUIRED_KEYS):
        raise ManifestError(f"property {entry!r}: every field is a non-empty string")
    prop = Property(
        id=entry["id"],
        title=entry["title"],
        contract=entry["contract"],
        profile=entry["profile"],
        requires=_requires(entry),
        time_budget_s=_time_budget(entry),
    )
    if not _ID.fullmatch(prop.id):
        raise ManifestError(f"property id {prop.id!r} is not of the form WORD-WORD[-WORD...]")
    if not _SECTION.fullmatch(prop.contract):
        raise ManifestError(f"property {prop.id}: contract section {prop.contract!r} is not '§N'")
    for profile in prop.profiles:
        if profile not in PROFILES:
            raise ManifestError(
                f"property {prop.id}: unknown profile {profile!r} (known: {sorted(PROFILES)})"
            )
    if len(set(prop.profiles)) != len(prop.profiles):
        raise ManifestError(f"property {prop.id}: requires repeats a profile: {prop.profiles}")
    return prop


def _requires(entry: dict[str, Any]) -> tuple[str, ...]:
    requires = entry.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(p, str) for p in requires):
        raise ManifestError(f"property {entry['id']!r}: requires is a list of profile names")
    return tuple(requires)


def _time_budget(entry: dict[str, Any]) -> int | None:
    budget = entry.get("time_budget_s")
    if budget is None:
        return None
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise ManifestError(f"property {entry['id']!r}: time_budget_s is a whole number >= 1")
    return budget


def load_manifest() -> Manifest:
    """The manifest shipped as package data."""
    text = resources.files(_PACKAGE).joinpath(_MANIFEST_FILE).read_text(encoding="utf-8")
    return parse_manifest(text)
