"""One suite of ``alkstore.driver`` seam tests for every engine.

The kit's property suite (``alkstore_conformance.suite``) checks what a store does
through the public API; this suite checks the seam below it: each test calls
``Driver`` (and ``SchedulerDriver``/``StreamDriver``/``PubSubDriver``/``OpsDriver``) methods
directly inside ``write``/``read``/``transaction()`` and asserts one rule of
``alkstore.driver``'s docstrings. An engine runs it from its own tests with one
small module::

    import pytest
    from alkstore_conformance.driver_suite import DriverFactory, driver_suite, opened_drivers

    TestMyDriver = driver_suite(MyEngine.capabilities)

    @pytest.fixture
    def driver_factory(tmp_path) -> Iterator[DriverFactory]:
        # a fresh store per test; each call opens another driver on it
        with opened_drivers(lambda: MyDriver(tmp_path / "db")) as factory:
            yield factory

Capabilities are data: a profile the engine lacks contributes no tests at all
(nothing is generated, so nothing is skipped). Nothing here is a pytest plugin
and no module is named ``test_*``, so the suite runs only where a test module
builds it.
"""

from __future__ import annotations

from alkstore import Capabilities

from .base import SeamTests
from .dependencies import DependencyStatements
from .key_limits import KeyLimitsStatements
from .limits import LimitsStatements
from .locks import LockStatements
from .many_outcomes import ManyOutcomeHistories, ManyOutcomeStatements
from .operations import OperationStatements
from .periodic import PeriodicStatements
from .pubsub import PubSubInTransactions, PubSubStatements
from .queue_statements import QueueStatements, ValidClaimRule
from .results import ResultsStatements
from .scheduler import CronScheduleStatements, SchedulerStatements
from .snooze import SnoozeStatements
from .streams import StreamStatements
from .support import (
    DriverFactory,
    RecordingSink,
    SeamDriver,
    insert,
    opened_drivers,
    stamps,
)
from .transactions import TransactionRules, WriteRules
from .unique import UniqueStatements
from .wakes import QueueWakes
from .workers import WorkerStatements

SUITES: tuple[type[SeamTests], ...] = (
    WriteRules,
    QueueStatements,
    ValidClaimRule,
    QueueWakes,
    ManyOutcomeStatements,
    ManyOutcomeHistories,
    TransactionRules,
    LockStatements,
    SchedulerStatements,
    CronScheduleStatements,
    PeriodicStatements,
    StreamStatements,
    PubSubStatements,
    PubSubInTransactions,
    OperationStatements,
    SnoozeStatements,
    UniqueStatements,
    LimitsStatements,
    KeyLimitsStatements,
    ResultsStatements,
    WorkerStatements,
    DependencyStatements,
)
"""Every suite class; each names the profiles it needs in ``requires`` (data)."""


def suites_for(capabilities: Capabilities) -> tuple[type[SeamTests], ...]:
    """The suite classes that apply to an engine with ``capabilities``."""
    declared = capabilities.profiles()
    return tuple(suite for suite in SUITES if suite.requires <= declared)


def driver_suite(capabilities: Capabilities, name: str = "TestDriverSuite") -> type:
    """One test class holding every test that applies to ``capabilities``.

    Bind it to a ``Test*`` name in the engine's test module; that module (or its
    conftest) provides the ``driver_factory`` fixture."""
    return type(name, suites_for(capabilities), {"capabilities": capabilities})


__all__ = [
    "SUITES",
    "DriverFactory",
    "RecordingSink",
    "SeamDriver",
    "driver_suite",
    "insert",
    "opened_drivers",
    "stamps",
    "suites_for",
]
