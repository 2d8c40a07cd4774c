"""Engines plug in through entry points and are picked by URL scheme (contract §1)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import EntryPoint
from typing import Any

import pytest

import alkstore
import alkstore.engine as engine_module
from alkstore.clock import Clock
from alkstore.engine import (
    ENGINE_GROUP,
    Capabilities,
    EngineProvider,
    EngineSpec,
    installed_engines,
    load_engine,
    url_scheme,
)
from alkstore.errors import EngineNotFound
from alkstore.testing import FakeClock


class RecordingProvider:
    """A minimal engine provider; ``open`` returns what it was asked for."""

    name = "recording"
    version = "0.0.1"
    contract_version = "1"
    capabilities = Capabilities()

    def open(self, url: str, *, clock: Clock | None = None, **opts: Any) -> Any:
        return ("opened", url, clock, opts)

    @contextmanager
    def provision(self) -> Iterator[EngineSpec]:
        yield EngineSpec("recording://x")


PROVIDER = RecordingProvider()


class Holder:
    provider = PROVIDER


NOT_A_PROVIDER = object()


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("sqlite:///app.db", "sqlite"),
        ("postgresql://u@host/db", "postgresql"),
        ("postgresql+psycopg://u@host/db", "postgresql"),
        ("postgres://u@host/db", "postgres"),
        ("SQLite:///x.db", "sqlite"),
    ],
)
def test_url_scheme_names_the_engine(url: str, scheme: str) -> None:
    assert url_scheme(url) == scheme


@pytest.mark.parametrize("url", ["app.db", "://x", ""])
def test_a_url_without_a_scheme_finds_no_engine(url: str) -> None:
    with pytest.raises(EngineNotFound):
        url_scheme(url)


def test_load_engine_accepts_module_colon_object() -> None:
    assert load_engine(f"{__name__}:PROVIDER") is PROVIDER


def test_load_engine_follows_a_dotted_attribute_path() -> None:
    assert load_engine(f"{__name__}:Holder.provider") is PROVIDER


def test_load_engine_instantiates_a_provider_class() -> None:
    provider = load_engine(f"{__name__}:RecordingProvider")
    assert isinstance(provider, RecordingProvider)
    assert isinstance(provider, EngineProvider)


@pytest.mark.parametrize(
    "name", ["no_such_module_for_alkstore:x", f"{__name__}:MISSING", "no-such-engine"]
)
def test_load_engine_refuses_an_unknown_name_with_engine_not_found(name: str) -> None:
    with pytest.raises(EngineNotFound) as caught:
        load_engine(name)
    assert caught.value.wanted == name
    assert caught.value.installed == tuple(installed_engines())


def test_load_engine_refuses_an_object_that_is_not_a_provider() -> None:
    with pytest.raises(TypeError):
        load_engine(f"{__name__}:NOT_A_PROVIDER")


def test_open_with_an_unknown_scheme_raises_engine_not_found() -> None:
    with pytest.raises(EngineNotFound) as caught:
        alkstore.open("nope://x")
    assert caught.value.wanted == "nope"


def test_open_dispatches_to_the_entry_point_the_scheme_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    point = EntryPoint(name="recording", value=f"{__name__}:PROVIDER", group=ENGINE_GROUP)
    monkeypatch.setattr(
        engine_module, "entry_points", lambda group: [point] if group == ENGINE_GROUP else []
    )
    clock = FakeClock(5)
    url = "recording+driver://somewhere"
    opened: Any = alkstore.open(url, clock=clock, schema="s")
    assert opened == ("opened", url, clock, {"schema": "s"})


def test_installed_engines_lists_entry_point_names_sorted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    points = [
        EntryPoint(name=name, value=f"{__name__}:PROVIDER", group=ENGINE_GROUP)
        for name in ("zeta", "alpha", "alpha")
    ]
    monkeypatch.setattr(engine_module, "entry_points", lambda group: points)
    assert installed_engines() == ["alpha", "zeta"]


def test_default_capabilities_profiles() -> None:
    assert Capabilities().profiles() == {"transactions", "sql", "attach", "locks", "multi_process"}


def test_full_capabilities_list_every_profile() -> None:
    full = Capabilities(scheduler=True, streams=True, pubsub=True)
    assert full.profiles() == {
        "transactions",
        "sql",
        "attach",
        "locks",
        "multi_process",
        "scheduler",
        "streams",
        "pubsub",
    }


def test_profiles_follow_the_flags() -> None:
    profiles = Capabilities(locks=False, streams=True).profiles()
    assert "streams" in profiles
    assert "locks" not in profiles


def test_engine_spec_is_picklable() -> None:
    import pickle

    spec = EngineSpec("sqlite:///x.db", {"schema": "s"})
    assert pickle.loads(pickle.dumps(spec)) == spec


class HalfAProvider:
    name = "half"
    version = "0"

    def open(self, url: str, **opts: Any) -> Any:
        raise AssertionError("never opened")


HALF_A_PROVIDER = HalfAProvider()


def test_a_partial_provider_is_refused_naming_what_it_lacks_and_the_guide() -> None:
    with pytest.raises(TypeError) as refused:
        load_engine(f"{__name__}:HALF_A_PROVIDER")
    message = str(refused.value)
    assert "does not satisfy alkstore.EngineProvider: it lacks contract_version, " in message
    assert "capabilities, provision" in message
    assert 'docs/certify-your-engine.md, "Publish a provider"' in message
