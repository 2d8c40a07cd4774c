"""URLs name a database file; anything that is not one is refused with InvalidOptions."""

from __future__ import annotations

import os

import pytest

import alkstore
from alkstore import InvalidOptions
from alkstore_sqlite import database_path, database_url


def test_three_slashes_name_a_path_relative_to_the_working_directory() -> None:
    assert database_path("sqlite:///app.db") == os.path.join(os.getcwd(), "app.db")


def test_four_slashes_name_an_absolute_path() -> None:
    assert database_path("sqlite:////var/lib/app/jobs.db") == "/var/lib/app/jobs.db"


def test_relative_paths_are_resolved_once_at_open(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    resolved = database_path("sqlite:///sub/app.db")
    monkeypatch.chdir("/")
    assert resolved == os.path.join(str(tmp_path), "sub", "app.db")


def test_percent_escapes_are_decoded() -> None:
    assert database_path("sqlite:////tmp/my%20jobs.db") == "/tmp/my jobs.db"


def test_the_scheme_is_case_insensitive() -> None:
    assert database_path("SQLite:////tmp/a.db") == "/tmp/a.db"


def test_database_url_round_trips_a_path_with_spaces() -> None:
    assert database_path(database_url("/tmp/my jobs.db")) == "/tmp/my jobs.db"


@pytest.mark.parametrize(
    "url", ["sqlite:///:memory:", "sqlite://", "sqlite:///", "sqlite:///file::memory:"]
)
def test_in_memory_databases_are_refused_with_the_reason(url: str) -> None:
    with pytest.raises(InvalidOptions, match="WAL mode needs a file"):
        database_path(url)


def test_memory_refusal_reaches_the_caller_of_open() -> None:
    with pytest.raises(InvalidOptions, match="in-memory"):
        alkstore.open("sqlite:///:memory:")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("sqlite://host/app.db", "no host"),
        ("sqlite:///app.db?synchronous=FULL", "keyword arguments"),
        ("sqlite:///app.db#frag", "keyword arguments"),
        ("sqlite:app.db", "sqlite:///<path>"),
        ("postgresql:///app.db", "sqlite:///<path>"),
    ],
)
def test_malformed_urls_are_refused(url: str, reason: str) -> None:
    with pytest.raises(InvalidOptions, match=reason.replace("?", r"\?")):
        database_path(url)


def test_a_nul_in_the_path_is_refused() -> None:
    with pytest.raises(InvalidOptions, match="NUL"):
        database_path("sqlite:////tmp/a%00b.db")
