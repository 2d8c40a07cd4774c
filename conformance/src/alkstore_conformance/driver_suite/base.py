"""The fixtures every suite class shares: the driver under test, and another one."""

from __future__ import annotations

from typing import ClassVar, cast

import pytest

from .support import DriverFactory, SeamDriver


class SeamTests:
    """Base of the suite classes. The engine's test module provides the
    ``driver_factory`` fixture (see ``alkstore_conformance.driver_suite``)."""

    requires: ClassVar[frozenset[str]] = frozenset()
    """The ``Capabilities`` profiles an engine must declare for this class to apply."""

    @pytest.fixture
    def driver(self, driver_factory: DriverFactory) -> SeamDriver:
        """The driver under test, on the test's fresh store."""
        return cast(SeamDriver, driver_factory())

    @pytest.fixture
    def other(self, driver: SeamDriver, driver_factory: DriverFactory) -> SeamDriver:
        """A second driver on the same store: what "another process" sees."""
        return cast(SeamDriver, driver_factory())
