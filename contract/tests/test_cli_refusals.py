"""The command line over an engine without the ops profile: a refusal, exit 1.

The reference engines all have the profile, so this runs the commands in-process
over the contract's fake driver (queue core only); ``scenarios/test_cli.py`` runs
the installed script against the real engines.
"""

from __future__ import annotations

from typing import Any

import pytest

import alkstore
from alkstore.core import CoreStore

testing = pytest.importorskip("click.testing")  # the cli extra

from alkstore.cli.app import cli  # noqa: E402


@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["jobs", "emails"],
        ["redrive", "emails", "--all", "--dry-run"],
        ["redrive", "emails", "--id", "1", "--dry-run"],
        ["purge", "emails", "--all"],
        ["pause", "emails"],
    ],
)
def test_an_engine_without_the_ops_profile_is_refused(
    command: list[str], store: CoreStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def open_fake(url: str, **opts: Any) -> CoreStore:
        return store

    monkeypatch.setattr(alkstore, "open", open_fake)

    result = testing.CliRunner().invoke(cli, ["--url", "fake://", *command])

    assert result.exit_code == 1
    assert "ops profile" in result.output
