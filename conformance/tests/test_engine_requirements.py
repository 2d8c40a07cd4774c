"""What the kit tells an engine's author before and while it runs: the server a
provision uses, what a provider declares that the kit cannot check, and the
requirement behind a failure, each with the guide section that states it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kit_engines import ReferenceWithoutLocks, StubProvider, stub
from kit_runs import RunIn, output

from alkstore import CONTRACT_VERSION, Capabilities
from alkstore_conformance.certify.cli import RunOptions, parse, pytest_args
from alkstore_conformance.certify.manifest import load_manifest
from alkstore_conformance.certify.requirements import masked, notes, provision_note
from alkstore_conformance.helpers.common import BUSINESS_TABLE_NOTE, business_table
from alkstore_conformance.hooks import SERVER_ENV
from alkstore_memory import ENGINE as MEMORY

ONE_CORE_TEST = "test_provisioned_store_starts_empty"
MANIFEST = load_manifest()


# -- the server a provision uses -------------------------------------------------------


def test_the_cli_hands_the_server_to_the_plugin() -> None:
    options, extra = parse(["run", "--engine", "mariadb", "--server", "mysql://db:3306/"])
    assert (options.server, extra) == ("mysql://db:3306/", [])
    args = pytest_args(options)
    assert args[args.index("--alkstore-server") + 1] == "mysql://db:3306/"
    assert "--alkstore-server" not in pytest_args(RunOptions(engine="mariadb"))


def test_a_server_engine_provisions_on_the_server_the_run_names(run_in: RunIn) -> None:
    # One xdist worker: the variable reaches the process that provisions.
    result = run_in.cli(
        *("run", "--engine", "kit_engines:ReferenceOnTheNamedServer"),
        *("--server", "file:kit-server", "-n", "1", "--", "-k", ONE_CORE_TEST),
    )
    assert result.returncode == 0, output(result)
    assert f"server for provision() (${SERVER_ENV}): file:kit-server" in result.stdout


def test_a_failed_provision_says_how_a_server_engine_finds_its_server(run_in: RunIn) -> None:
    result = run_in.cli(
        *("run", "--engine", "kit_engines:ReferenceOnTheNamedServer", "--report", "r.json"),
        *("-n", "0", "--", "-k", ONE_CORE_TEST),
    )
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output(result)
    (entry,) = run_in.report("r.json")["properties"]
    message = entry["failures"][0]["message"]
    assert "no server to provision on (got None)" in message
    assert f"${SERVER_ENV} (alkstore-conformance run --server URL)" in message
    assert "which in this run is not set" in message
    assert 'docs/certify-your-engine.md, "Provisioning and servers"' in message


def test_the_provision_note_masks_a_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVER_ENV, "mysql://root:s3cret@db:3306/")
    assert "which in this run is mysql://root:***@db:3306/;" in provision_note()
    assert "s3cret" not in provision_note()


@pytest.mark.parametrize(
    ("server", "shown"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("host=h password=pw dbname=x", "host=h password=*** dbname=x"),
        ("mysql://h:3306/", "mysql://h:3306/"),
    ],
)
def test_a_printed_server_never_shows_its_password(server: str, shown: str) -> None:
    assert masked(server) == shown


# -- what a provider declares that the kit cannot check --------------------------------


def test_a_provider_with_every_hook_and_the_contract_gets_no_note() -> None:
    assert notes(MEMORY, MANIFEST) == []


def test_attach_without_a_connection_factory_is_named_unchecked() -> None:
    (attach, crash_points) = notes(ReferenceWithoutLocks(), MANIFEST)
    assert "declares attach but has no native_connection_factory(spec) hook" in attach
    assert "TX-ATTACH, TX-ACK-ATTACH not_applicable" in attach
    assert attach.endswith('see docs/certify-your-engine.md, "Attach"')
    assert "no open_with_driver_wrapper(url, wrap, ...) hook" in crash_points


class AsyncNativeWithoutOpenOnLoop(StubProvider):
    contract_version = CONTRACT_VERSION
    capabilities = Capabilities(attach=False, async_native=True)

    def open_with_driver_wrapper(self, url: str, wrap: Any, **opts: Any) -> Any:
        raise AssertionError("never opened")


def test_async_native_without_open_on_loop_is_named() -> None:
    (note,) = notes(AsyncNativeWithoutOpenOnLoop(), MANIFEST)
    assert "declares async_native but has no open_on_loop(url, loop, ...)" in note


def test_another_contract_version_is_named_before_its_property_fails() -> None:
    claims_another = dataclasses.replace(stub.capabilities, attach=False)
    provider = type("Old", (StubProvider,), {"capabilities": claims_another})()
    (contract, _) = notes(provider, MANIFEST)
    assert "implements contract '1'; this kit checks contract" in contract
    assert "ENGINE-PROVIDER-SURFACE fails" in contract


def test_the_run_header_shows_the_notes(run_in: RunIn) -> None:
    result = run_in.pytest(
        *("--pyargs", "alkstore_conformance.suite", "--engine", "kit_engines:stub"),
        "--collect-only",
    )
    assert result.returncode == 0, output(result)
    assert "alkstore-conformance: note: the engine implements contract '1'" in result.stdout


# -- the sql profile's connection ---------------------------------------------------------


def test_a_business_table_the_connection_cannot_create_names_the_quoting() -> None:
    # The memory engine has no SQL connection: its tx.execute raises.
    with (
        MEMORY.provision() as spec,
        MEMORY.open(spec.url) as store,
        pytest.raises(NotImplementedError) as failed,
        business_table(store),
    ):
        raise AssertionError("never reached")
    assert BUSINESS_TABLE_NOTE in getattr(failed.value, "__notes__", [])
    assert "sql_mode ANSI_QUOTES" in BUSINESS_TABLE_NOTE
    assert BUSINESS_TABLE_NOTE.endswith('"The sql profile\'s connection"')
