"""A driver written for the positional seam is refused when the store opens."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeDriver

from alkstore.core import CoreStore
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
