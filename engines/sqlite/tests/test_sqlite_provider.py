"""The provider: identity, provisioning, opening errors and closing."""

from __future__ import annotations

import os
import pickle
import sqlite3
from pathlib import Path

import pytest
from sqlite_helpers import shared_state

import alkstore
from alkstore import Capabilities, EngineUnavailable, StoreClosed
from alkstore.constants import CONTRACT_VERSION
from alkstore_sqlite import SqliteEngine, database_path, database_url, provider


def test_the_entry_point_sqlite_loads_the_provider() -> None:
    assert alkstore.load_engine("sqlite") is provider
    assert isinstance(provider, alkstore.EngineProvider)


def test_the_provider_names_itself_and_its_capabilities() -> None:
    assert (provider.name, provider.contract_version) == ("sqlite", CONTRACT_VERSION)
    assert provider.capabilities == Capabilities(
        scheduler=True,
        streams=True,
        pubsub=True,
        ops=True,
        snooze=True,
        cron=True,
        unique=True,
        periodic=True,
        limits=True,
        key_limits=True,
        results=True,
        workers=True,
        dependencies=True,
        metadata=True,
    )
    assert provider.capabilities.profiles() >= {
        "transactions",
        "attach",
        "locks",
        "scheduler",
        "streams",
        "pubsub",
        "ops",
        "snooze",
        "unique",
    }


def test_provision_yields_a_fresh_file_in_a_temp_dir_and_removes_the_dir() -> None:
    with provider.provision() as spec:
        path = database_path(spec.url)
        directory = os.path.dirname(path)
        assert os.listdir(directory) == []
        assert pickle.loads(pickle.dumps(spec)) == spec
        with alkstore.open(spec.url, **spec.opts) as store:
            store.queue("q").enqueue({"n": 1})
        assert os.path.exists(path)
    assert not os.path.exists(directory)


def test_two_provisioned_stores_share_nothing() -> None:
    with provider.provision() as first, provider.provision() as second:
        assert first.url != second.url
        with alkstore.open(first.url) as a, alkstore.open(second.url) as b:
            job_id = a.queue("q").enqueue({"n": 1})
            assert b.queue("q").get_job(job_id) is None


def test_provision_beside_yields_another_file_in_the_same_directory_and_removes_it() -> None:
    with provider.provision() as spec:
        directory = os.path.dirname(database_path(spec.url))
        with provider.provision_beside(spec) as beside:
            path = database_path(beside.url)
            assert os.path.dirname(path) == directory
            assert path != database_path(spec.url)
            with alkstore.open(spec.url) as a, alkstore.open(beside.url, **beside.opts) as b:
                job_id = b.queue("q").enqueue({"n": 1})
                assert a.queue("q").get_job(job_id) is None
            assert os.path.exists(path)
        assert not any(name.startswith(os.path.basename(path)) for name in os.listdir(directory))
        assert os.path.exists(database_path(spec.url))


def test_the_native_connection_hook_opens_a_connection_in_a_transaction() -> None:
    with provider.provision() as spec, alkstore.open(spec.url) as store:
        conn = SqliteEngine().native_connection_factory(spec)()
        try:
            assert conn.in_transaction
            with store.attach(conn) as tx:
                tx.enqueue("q", {"n": 1})
            conn.commit()
        finally:
            conn.close()
        assert store.queue("q").claim("w") is not None


# -- EngineUnavailable ------------------------------------------------------------


def test_a_missing_directory_is_unavailable_with_the_sqlite_error_chained(
    tmp_path: Path,
) -> None:
    url = database_url(str(tmp_path / "missing" / "store.db"))
    with pytest.raises(EngineUnavailable) as raised:
        alkstore.open(url)
    assert isinstance(raised.value.__cause__, sqlite3.Error)
    assert shared_state(url) is None


def test_a_directory_is_not_a_database_file(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailable) as raised:
        alkstore.open(database_url(str(tmp_path)))
    assert isinstance(raised.value.__cause__, sqlite3.Error)


def test_a_file_that_is_not_a_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are my notes, not a database\n" * 100)
    with pytest.raises(EngineUnavailable, match="not a database") as raised:
        alkstore.open(database_url(str(path)))
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)
    assert shared_state(database_url(str(path))) is None


# -- closing ------------------------------------------------------------------------


def test_a_closed_store_refuses_every_call(url: str) -> None:
    store = alkstore.open(url)
    queue = store.queue("q")
    store.close()
    with pytest.raises(StoreClosed):
        queue.enqueue({"n": 1})
    with pytest.raises(StoreClosed):
        queue.get_job(1)
    store.close()  # idempotent


def test_closing_the_last_store_on_a_file_releases_the_shared_state(url: str) -> None:
    first, second = alkstore.open(url), alkstore.open(url)
    shared = shared_state(url)
    assert shared is not None
    assert shared.users == 2
    first.close()
    assert shared_state(url) is shared
    second.close()
    assert shared_state(url) is None
