"""What the core requires of a driver, checked when the store opens: the params seam
(a driver of the positional seam is refused) and every method it calls; and
``tx.execute``'s connection."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from fakes import FakeDriver

import alkstore.driver as driver_module
from alkstore import Capabilities
from alkstore.core import CoreStore
from alkstore.driver import ANNOUNCES, PROFILE_DRIVERS, Driver, protocol_methods
from alkstore.errors import EngineMisconfigured
from alkstore.params import Claim


class PositionalSeamDriver(FakeDriver):
    """What an engine written for alkstore 0.1's seam has: scalars, one by one."""

    def claim(self, c: Any, queue: str, worker_id: str, now: int, limit: int) -> list[Any]:
        raise AssertionError("never called")


def test_a_positional_seam_driver_is_refused_naming_what_changed() -> None:
    with pytest.raises(EngineMisconfigured) as refused:
        CoreStore(PositionalSeamDriver())
    message = str(refused.value)
    assert "PositionalSeamDriver.claim(c, queue, worker_id, now, limit)" in message
    assert "alkstore.params" in message
    assert "docs/certify-your-engine.md" in message


def test_a_refused_driver_is_closed() -> None:
    driver = PositionalSeamDriver()
    with pytest.raises(EngineMisconfigured):
        CoreStore(driver)
    assert driver.closed


class ParamsSeamDriver(FakeDriver):
    def claim(self, c: Any, params: Claim) -> list[Any]:
        raise AssertionError("never called")


def test_a_params_seam_driver_opens() -> None:
    driver = ParamsSeamDriver()
    CoreStore(driver).close()
    assert driver.close_count == 1


def test_a_wrapper_taking_any_arguments_opens() -> None:
    # The fake records statements through a (c, *args) wrapper, as the kit's
    # fault wrappers do: nothing in its signature says which seam it speaks.
    driver = FakeDriver()
    CoreStore(driver).close()
    assert driver.close_count == 1


# -- every method the core calls ---------------------------------------------------


class DriverWithout(FakeDriver):
    """A driver whose engine forgot some methods (the fake finds the rest in its
    memory driver, as an attribute lookup would)."""

    forgotten: frozenset[str] = frozenset()

    def __getattr__(self, name: str) -> Any:
        if name in self.forgotten:
            raise AttributeError(name)
        return super().__getattr__(name)


class NoReleaseNoRedrive(DriverWithout):
    forgotten = frozenset({"release_claim", "redrive"})


def test_a_driver_lacking_a_method_of_the_seam_is_refused_naming_it_and_the_guide() -> None:
    driver = NoReleaseNoRedrive()
    with pytest.raises(EngineMisconfigured) as refused:
        CoreStore(driver, capabilities=Capabilities(ops=True))
    message = str(refused.value)
    assert "NoReleaseNoRedrive lacks 2 method(s)" in message
    assert "release_claim (Driver)" in message
    assert "redrive (OpsDriver, profile ops)" in message
    assert 'docs/certify-your-engine.md, "The driver\'s methods"' in message
    assert driver.closed


class NoRedrive(DriverWithout):
    forgotten = frozenset({"redrive"})


def test_a_profile_the_engine_does_not_declare_needs_no_methods() -> None:
    driver = NoRedrive()
    CoreStore(driver, capabilities=Capabilities(ops=False)).close()
    assert driver.close_count == 1


@pytest.mark.parametrize("profile", sorted(PROFILE_DRIVERS))
def test_each_declared_profile_requires_its_protocols_methods(profile: str) -> None:
    protocol = PROFILE_DRIVERS[profile]
    first = protocol_methods(protocol)[0]
    driver = type("Partial", (DriverWithout,), {"forgotten": frozenset({first})})()
    with pytest.raises(EngineMisconfigured, match=rf"{first} \({protocol.__name__}, profile"):
        CoreStore(driver, capabilities=Capabilities(**{profile: True}))


def test_every_profile_protocol_names_a_capabilities_field() -> None:
    fields = {field.name for field in dataclasses.fields(Capabilities)}
    assert set(PROFILE_DRIVERS) <= fields


def test_every_protocol_of_the_seam_is_the_driver_a_profile_or_a_helper() -> None:
    declared = {
        value
        for value in vars(driver_module).values()
        if isinstance(value, type)
        and value.__module__ == driver_module.__name__
        and getattr(value, "_is_protocol", False)
    }
    helpers = {driver_module.WakeSink, *driver_module.OPTIONAL_DRIVERS}
    assert declared == {Driver, *PROFILE_DRIVERS.values(), *helpers}


def _seam_docstrings() -> dict[str, str]:
    protocols = [
        Driver,
        *driver_module.OPTIONAL_DRIVERS,
        *PROFILE_DRIVERS.values(),
    ]
    return {
        name: inspect.getdoc(getattr(protocol, name)) or ""
        for protocol in protocols
        for name in protocol_methods(protocol)
    }


def test_the_statements_that_announce_are_those_whose_docstrings_say_so() -> None:
    said = {
        name for name, doc in _seam_docstrings().items() if "nnounces" in doc and name != "announce"
    }
    assert said == set(ANNOUNCES)


# -- tx.execute needs a connection with execute ----------------------------------


class ConnectionWithoutExecute:
    """A DB-API connection whose execute lives on its cursors only."""

    def cursor(self) -> Any:
        raise AssertionError("never called")


class CursorOnlyDriver(FakeDriver):
    def native_connection(self, c: Any) -> Any:
        return ConnectionWithoutExecute()


def test_tx_execute_on_a_connection_without_execute_names_the_requirement() -> None:
    with (
        CoreStore(CursorOnlyDriver()) as store,
        store.transaction() as tx,
        pytest.raises(EngineMisconfigured) as refused,
    ):
        tx.execute("SELECT 1")
    message = str(refused.value)
    assert "ConnectionWithoutExecute has none" in message
    assert "execute(sql, params)" in message
    assert 'docs/certify-your-engine.md, "The sql profile\'s connection"' in message
