"""The cuttable loopback proxy behind the conformance kit's outage switch."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from alkstore_postgres.testing.proxy import HOST, CuttableProxy


def _through(dsn: str, proxy: CuttableProxy) -> str:
    params = conninfo_to_dict(dsn)
    params.update(host=HOST, port=str(proxy.port))
    return make_conninfo(**{k: str(v) for k, v in params.items()})


def _target(dsn: str) -> tuple[str, int]:
    params = conninfo_to_dict(dsn)
    return (str(params["host"]), int(str(params["port"])))


def test_connections_through_the_proxy_reach_the_server(pg_dsn: str) -> None:
    with CuttableProxy(_target(pg_dsn)) as proxy, psycopg.connect(_through(pg_dsn, proxy)) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_cut_closes_open_connections_and_turns_new_ones_away(pg_dsn: str) -> None:
    with CuttableProxy(_target(pg_dsn)) as proxy:
        conn = psycopg.connect(_through(pg_dsn, proxy), autocommit=True)
        proxy.cut()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(_through(pg_dsn, proxy), connect_timeout=2)
        conn.close()


def test_connections_get_through_again_once_restored(pg_dsn: str) -> None:
    with CuttableProxy(_target(pg_dsn)) as proxy:
        with proxy.down(), pytest.raises(psycopg.OperationalError):
            psycopg.connect(_through(pg_dsn, proxy), connect_timeout=2)
        with psycopg.connect(_through(pg_dsn, proxy)) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
