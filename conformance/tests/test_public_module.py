"""The kit's public surface: the names an engine's author imports, and the entry points."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points

import alkstore_conformance
from alkstore import Capabilities, load_engine
from alkstore_conformance.certify import cli, plugin


def test_importing_the_package_loads_none_of_the_kit_machinery() -> None:
    probe = (
        "import sys, alkstore_conformance; "
        "print(sorted(m for m in sys.modules if m.startswith('alkstore_conformance')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['alkstore_conformance']"


def test_the_package_exports_the_version_the_suite_and_the_report_schema() -> None:
    assert sorted(alkstore_conformance.__all__) == ["SUITE_PACKAGE", "__version__", "report_schema"]
    assert alkstore_conformance.SUITE_PACKAGE == "alkstore_conformance.suite"
    schema = alkstore_conformance.report_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_driver_suite_builds_a_test_class_by_its_public_name() -> None:
    from alkstore_conformance.driver_suite import driver_suite

    assert isinstance(driver_suite(Capabilities(), "TestSeam"), type)


def test_a_provider_without_hooks_satisfies_none_of_the_public_hook_protocols() -> None:
    from alkstore_conformance.hooks import (
        DescribeBackendProvider,
        DriverWrapperProvider,
        HoldWritePathProvider,
        NativeConnectionFactoryProvider,
        OutageSwitchProvider,
        ProvisionBesideProvider,
    )

    hooks = (
        NativeConnectionFactoryProvider,
        DescribeBackendProvider,
        DriverWrapperProvider,
        ProvisionBesideProvider,
        HoldWritePathProvider,
        OutageSwitchProvider,
    )
    assert not any(isinstance(object(), hook) for hook in hooks)


def test_without_provision_beside_the_kit_provisions_a_second_store() -> None:
    from alkstore import EngineSpec
    from alkstore_conformance.hooks import provision_beside

    class ProvisionOnly:
        def __init__(self) -> None:
            self.provisioned: list[str] = []

        @contextmanager
        def provision(self) -> Iterator[EngineSpec]:
            self.provisioned.append("again")
            yield EngineSpec(url="provision-only://second", opts={})

    engine = ProvisionOnly()
    first = EngineSpec(url="provision-only://first", opts={})
    with provision_beside(engine, first) as second:  # type: ignore[arg-type]
        assert second.url == "provision-only://second"
    assert engine.provisioned == ["again"]


def test_every_reference_engine_offers_the_contention_hooks() -> None:
    from alkstore_conformance.hooks import has_hold_write_path, has_outage_switch

    for name in ("sqlite", "postgresql", "memory"):
        engine = load_engine(name)
        assert has_hold_write_path(engine), name
        assert has_outage_switch(engine), name


def test_the_pytest_entry_point_loads_the_certify_plugin() -> None:
    (entry,) = entry_points(group="pytest11", name="alkstore_conformance")
    assert entry.load() is plugin


def test_the_console_script_runs_the_certify_cli() -> None:
    (entry,) = entry_points(group="console_scripts", name="alkstore-conformance")
    assert entry.load() is cli.main
