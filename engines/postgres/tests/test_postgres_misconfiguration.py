"""A server that refuses this configuration raises ``EngineMisconfigured``, not
``EngineUnavailable``: retrying a wrong database name, role or password never helps.

These tests create roles and change ``pg_hba.conf``, so they get a private
throwaway server (``private_pg``) rather than the session's shared one.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from pg_helpers import fresh_schema_name, wait_until

import alkstore
from alkstore import EngineMisconfigured, EngineUnavailable
from alkstore_postgres import migrate
from alkstore_postgres.testing.server import LocalPostgres

PASSWORD_ROLE = "alk_password_role"
PASSWORD = "right horse battery"
UNPRIVILEGED_ROLE = "alk_no_create"


def _url(pg: LocalPostgres, *, user: str = "postgres", password: str | None = None,
         database: str = "postgres") -> str:  # fmt: skip
    auth = user if password is None else f"{user}:{password.replace(' ', '%20')}"
    return f"postgresql://{auth}@{pg.host}:{pg.port}/{database}"


def _refuses(url: str) -> bool:
    try:
        psycopg.connect(url).close()
    except psycopg.OperationalError:
        return True
    return False


@pytest.fixture(scope="module")
def password_role(private_pg: LocalPostgres) -> str:
    """A role that must log in with a password (scram-sha-256 over TCP), the rest of
    the server staying on trust."""
    with psycopg.connect(private_pg.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'")
        admin.execute(f"GRANT CREATE ON DATABASE postgres TO {PASSWORD_ROLE}")
        hba = private_pg.data_dir / "pg_hba.conf"
        rules = hba.read_text(encoding="utf-8")
        # The first matching line wins: this one goes before the trust lines.
        with open(hba, "w", encoding="utf-8") as file:  # keeps the server's ownership
            file.write(f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n{rules}")
        admin.execute("SELECT pg_reload_conf()")
    assert wait_until(lambda: _refuses(_url(private_pg, user=PASSWORD_ROLE)))
    return PASSWORD_ROLE


@pytest.fixture(scope="module")
def unprivileged_role(private_pg: LocalPostgres) -> str:
    """A role that may log in but not create schemas in the database."""
    with psycopg.connect(private_pg.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {UNPRIVILEGED_ROLE} LOGIN")
    return UNPRIVILEGED_ROLE


def _open_refused(url: str, **opts: Any) -> EngineMisconfigured:
    with pytest.raises(EngineMisconfigured) as info:
        alkstore.open(url, schema=fresh_schema_name(), connect_timeout_s=2, **opts)
    assert not isinstance(info.value, EngineUnavailable)
    assert isinstance(info.value.__cause__, psycopg.Error)
    return info.value


def test_a_database_that_does_not_exist_is_a_misconfiguration(
    private_pg: LocalPostgres,
) -> None:
    error = _open_refused(_url(private_pg, database="no_such_database"))
    assert 'database "no_such_database" does not exist' in str(error)


def test_a_role_that_does_not_exist_is_a_misconfiguration(private_pg: LocalPostgres) -> None:
    error = _open_refused(_url(private_pg, user="no_such_role"))
    assert 'role "no_such_role" does not exist' in str(error)


def test_a_wrong_password_is_a_misconfiguration(
    private_pg: LocalPostgres, password_role: str
) -> None:
    error = _open_refused(_url(private_pg, user=password_role, password="wrong"))
    assert "password authentication failed" in str(error)


def test_a_missing_password_is_a_misconfiguration(
    private_pg: LocalPostgres, password_role: str
) -> None:
    error = _open_refused(_url(private_pg, user=password_role))
    assert "no password supplied" in str(error)


def test_the_right_password_opens_the_store(private_pg: LocalPostgres, password_role: str) -> None:
    url = _url(private_pg, user=password_role, password=PASSWORD)
    with alkstore.open(url, schema=fresh_schema_name()) as store:
        assert store.queue("q").enqueue("hello") >= 1


def test_no_privilege_to_create_the_schema_is_a_misconfiguration(
    private_pg: LocalPostgres, unprivileged_role: str
) -> None:
    schema = fresh_schema_name()
    with pytest.raises(EngineMisconfigured) as info:
        alkstore.open(_url(private_pg, user=unprivileged_role), schema=schema)
    assert "permission denied" in str(info.value)
    with psycopg.connect(private_pg.dsn) as admin:
        found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        assert found.fetchone() is None


def test_migrate_on_a_database_that_does_not_exist_is_a_misconfiguration(
    private_pg: LocalPostgres,
) -> None:
    with pytest.raises(EngineMisconfigured, match="no_such_database"):
        migrate(_url(private_pg, database="no_such_database"), schema=fresh_schema_name())


def test_calls_after_the_password_changed_are_misconfigured(
    private_pg: LocalPostgres, password_role: str
) -> None:
    url = _url(private_pg, user=password_role, password=PASSWORD)
    with (
        alkstore.open(url, schema=fresh_schema_name(), connect_timeout_s=2) as store,
        psycopg.connect(private_pg.dsn, autocommit=True) as admin,
    ):
        queue = store.queue("q")
        queue.enqueue("before")
        admin.execute(f"ALTER ROLE {password_role} PASSWORD 'rotated'")
        try:
            # The pool must reconnect: its connections are gone.
            sessions = "SELECT pid FROM pg_stat_activity WHERE usename = %s"
            admin.execute(
                f"SELECT pg_terminate_backend(pid) FROM ({sessions}) AS s", (password_role,)
            )
            assert wait_until(lambda: admin.execute(sessions, (password_role,)).fetchone() is None)
            started = time.monotonic()
            with pytest.raises(EngineMisconfigured, match="password authentication failed"):
                queue.enqueue("after")
            assert time.monotonic() - started < 2 + 1.5  # within connect_timeout_s
        finally:
            admin.execute(f"ALTER ROLE {password_role} PASSWORD '{PASSWORD}'")
