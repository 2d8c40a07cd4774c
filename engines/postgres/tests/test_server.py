"""Tests for alkstore_postgres.testing.server (run with PYTHONPATH=engines/postgres/src)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, NoReturn

import psycopg
import pytest

from alkstore_postgres.testing import server
from alkstore_postgres.testing.server import (
    BINDIR_ENV,
    DSN_ENV,
    LocalPostgres,
    PostgresStartError,
    ProvisionedServer,
    provision_server,
)


def _alive(pid: int) -> bool:
    """True if the process exists and has not exited.

    A zombie counts as dead: it has exited, its (re)parent just has not reaped
    it yet -- some container inits only reap every few seconds.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _postmaster_pid(pg: LocalPostgres) -> int:
    return int((pg.data_dir / "postmaster.pid").read_text().split()[0])


def _must_not_be_called(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError("must not be called")


@pytest.fixture
def no_docker_no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(DSN_ENV, raising=False)
    monkeypatch.delenv(BINDIR_ENV, raising=False)
    monkeypatch.setattr(server, "_docker_available", lambda: False)
    return monkeypatch


def test_local_postgres_serves_then_leaves_nothing_behind() -> None:
    with LocalPostgres() as pg:
        assert pg.dsn == f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
            row = conn.execute(
                "select current_setting('listen_addresses'), current_setting('max_connections')"
            ).fetchone()
            assert row == ("127.0.0.1", "200")
        # The unix socket in the temp dir works too.
        with psycopg.connect(host=str(pg.socket_dir), port=pg.port, user="postgres") as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        pid = _postmaster_pid(pg)
        tmp = pg.socket_dir
        assert _alive(pid)
        if os.geteuid() == 0:  # PostgreSQL refuses root; we must have dropped to postgres
            assert Path(f"/proc/{pid}").stat().st_uid != 0
    assert not _alive(pid)
    assert not tmp.exists()
    pg.stop()  # idempotent after close
    pg.close()


def test_restart_keeps_port_and_data() -> None:
    with LocalPostgres() as pg:
        port, pid = pg.port, _postmaster_pid(pg)
        old = psycopg.connect(pg.dsn, autocommit=True)
        old.execute("create table jobs (id int)")
        old.execute("insert into jobs values (1)")

        pg.restart()

        assert pg.port == port
        assert _postmaster_pid(pg) != pid
        with pytest.raises(psycopg.OperationalError):
            old.execute("select 1")
        old.close()
        with psycopg.connect(pg.dsn) as new:
            assert new.execute("select id from jobs").fetchall() == [(1,)]


def test_startup_error_carries_log_tail_and_cleans_up() -> None:
    pg = LocalPostgres(settings={"shared_buffers": "plenty"})
    with pytest.raises(PostgresStartError, match='"shared_buffers"'), pg:
        pass
    assert not pg.socket_dir.exists()


def test_env_dsn_is_yielded_unchanged_and_nothing_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dsn = "postgresql://someone:secret@db.invalid:6543/jobs?sslmode=disable"
    monkeypatch.setenv(DSN_ENV, dsn)
    monkeypatch.setattr(server, "LocalPostgres", _must_not_be_called)
    monkeypatch.setattr(server, "_docker_available", _must_not_be_called)
    monkeypatch.setattr(server, "_start_container", _must_not_be_called)
    with provision_server() as provisioned:
        assert provisioned == ProvisionedServer(dsn, "env", None)


def test_without_env_or_docker_falls_back_to_local(no_docker_no_env: pytest.MonkeyPatch) -> None:
    with provision_server() as provisioned:
        assert provisioned.route == "local"
        assert provisioned.server_version is not None
        with psycopg.connect(provisioned.dsn) as conn:
            row = conn.execute("show server_version").fetchone()
            assert row is not None
            assert row[0].startswith(provisioned.server_version)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(provisioned.dsn, connect_timeout=2)


def test_no_route_at_all_names_every_route(no_docker_no_env: pytest.MonkeyPatch) -> None:
    no_docker_no_env.setenv(BINDIR_ENV, "/nonexistent")
    no_docker_no_env.setenv("PATH", "")
    with pytest.raises(RuntimeError) as info, provision_server():
        pass
    message = str(info.value)
    for route in ("ALKSTORE_PG_DSN", "Docker", "testcontainers", "apt-get install postgresql"):
        assert route in message


def test_unreachable_docker_daemon_means_no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend testcontainers is installed; the ping to a dead daemon (or a
    # missing docker SDK) must read as "no docker", not raise.
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, package=None: object() if name == "testcontainers" else real_find_spec(name),
    )
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert server._docker_available() is False


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql+psycopg2://test:test@localhost:32768/test", "postgresql://test:test@localhost:32768/test"),
        ("postgresql+psycopg://u@h:1/d", "postgresql://u@h:1/d"),
        ("postgres+asyncpg://u@h:1/d", "postgresql://u@h:1/d"),
        ("postgresql://u@h:1/d", "postgresql://u@h:1/d"),
    ],
)  # fmt: skip
def test_testcontainers_url_becomes_plain_libpq(url: str, expected: str) -> None:
    assert server._libpq_url(url) == expected
