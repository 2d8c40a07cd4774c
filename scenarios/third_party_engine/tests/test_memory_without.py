"""The memory engine with profiles switched off (``alkstore_memory.without``)."""

from __future__ import annotations

import pytest

import alkstore
from alkstore import EngineNotFound, ProfileUnavailable
from alkstore_memory import MemoryEngine


def test_a_profile_switched_off_is_declared_absent_and_refused_by_its_stores() -> None:
    engine = alkstore.load_engine("alkstore_memory.without:locks")
    assert isinstance(engine, MemoryEngine)
    assert engine.without == ("locks",)
    assert "locks" not in engine.capabilities.profiles()
    assert engine.capabilities.profiles() == MemoryEngine.capabilities.profiles() - {"locks"}
    with engine.provision() as spec, engine.open(spec.url, **spec.opts) as store:
        with pytest.raises(ProfileUnavailable, match="locks"):
            store.lock("leader")
        store.queue("still-served").enqueue({"n": 1})  # the queue core stays


def test_several_profiles_are_switched_off_with_a_plus() -> None:
    engine = alkstore.load_engine("alkstore_memory.without:streams+transactions")
    assert isinstance(engine, MemoryEngine)
    assert engine.without == ("streams", "transactions")
    with engine.provision() as spec, engine.open(spec.url, **spec.opts) as store:
        with pytest.raises(ProfileUnavailable, match="streams"):
            store.stream("events").append({"n": 1})
        with pytest.raises(ProfileUnavailable, match="transactions"), store.transaction():
            pass


def test_the_plain_engine_switches_nothing_off() -> None:
    assert MemoryEngine().capabilities == MemoryEngine.capabilities
    assert alkstore.load_engine("memory").capabilities == MemoryEngine.capabilities


@pytest.mark.parametrize("name", ["sql", "telepathy", "locks+multi_process"])
def test_a_profile_the_engine_does_not_have_cannot_be_switched_off(name: str) -> None:
    with pytest.raises(EngineNotFound) as raised:
        alkstore.load_engine(f"alkstore_memory.without:{name}")
    assert "to switch off" in str(raised.value.__cause__)
