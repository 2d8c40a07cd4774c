"""Options, schema names, URLs and the entry points: refused before anything is touched."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import InvalidOptions, PayloadError
from alkstore.constants import CONTRACT_VERSION, MAX_PAYLOAD_BYTES
from alkstore_postgres import ENGINE, libpq_url, message_channel, parse_options, wake_channel
from alkstore_postgres.options import PostgresOptions

HOSTILE_SCHEMAS = [
    'x"; drop table y; --',
    "Alkstore",
    "has space",
    "a" * 64,
    "",
    "9lives",
    "pg_temp_evil",
    "dash-ed",
    "é",
    "information_schema",
    "pg_catalog",
    "pg_toast",
]


def _schemas(conn: psycopg.Connection[Any]) -> set[str]:
    return {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace").fetchall()}


@pytest.mark.parametrize("schema", HOSTILE_SCHEMAS)
def test_hostile_schema_is_refused_and_nothing_is_created(
    pg_dsn: str, admin: psycopg.Connection[Any], schema: str
) -> None:
    admin.execute("CREATE TABLE IF NOT EXISTS public.y (id int)")
    before = _schemas(admin)

    with pytest.raises(InvalidOptions, match="schema"):
        alkstore.open(pg_dsn, schema=schema)

    assert _schemas(admin) == before
    assert admin.execute("SELECT to_regclass('public.y') IS NOT NULL").fetchone() == (True,)


def test_schema_must_be_a_str() -> None:
    with pytest.raises(InvalidOptions, match="schema must be a str"):
        parse_options({"schema": b"alkstore"})


def test_unknown_option_is_refused_naming_it() -> None:
    with pytest.raises(InvalidOptions, match="poolsize"):
        parse_options({"poolsize": 3})


@pytest.mark.parametrize(
    ("opts", "field"),
    [
        ({"migrate": "no"}, "migrate"),
        ({"pool_min_size": -1}, "pool_min_size"),
        ({"pool_max_size": 0}, "pool_max_size"),
        ({"pool_min_size": 5, "pool_max_size": 2}, "pool_min_size"),
        ({"pool_max_size": True}, "pool_max_size"),
        ({"repoll_s": 0}, "repoll_s"),
        ({"repoll_s": float("nan")}, "repoll_s"),
        ({"connect_timeout_s": "5"}, "connect_timeout_s"),
        ({"messages_keep": 0}, "messages_keep"),
        ({"messages_keep": 2**31}, "messages_keep"),
        ({"messages_keep": 1.5}, "messages_keep"),
        ({"reconnect_max_s": 0}, "reconnect_max_s"),
        ({"reconnect_max_s": 61}, "reconnect_max_s"),
        ({"reconnect_max_s": "1"}, "reconnect_max_s"),
        ({"lock_timeout_s": 0}, "lock_timeout_s"),
        ({"lock_timeout_s": 3601}, "lock_timeout_s"),
        ({"lock_timeout_s": "10"}, "lock_timeout_s"),
        ({"max_payload_bytes": 0}, "max_payload_bytes"),
        ({"max_payload_bytes": MAX_PAYLOAD_BYTES + 1}, "max_payload_bytes"),
        ({"max_payload_bytes": "1000"}, "max_payload_bytes"),
    ],
)
def test_bad_option_values_are_refused_naming_the_field(opts: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptions, match=field):
        parse_options(opts)


def test_defaults() -> None:
    assert parse_options({}) == PostgresOptions(
        schema="alkstore",
        migrate=True,
        pool_min_size=1,
        pool_max_size=10,
        repoll_s=1.0,
        connect_timeout_s=10.0,
        lock_timeout_s=10.0,
        reconnect_max_s=1.0,
        messages_keep=10_000,
        max_payload_bytes=MAX_PAYLOAD_BYTES,
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u@h:5/db", "postgresql://u@h:5/db"),
        ("postgres://u@h/db", "postgresql://u@h/db"),
        ("postgresql+psycopg://u@h/db?sslmode=disable", "postgresql://u@h/db?sslmode=disable"),
        ("POSTGRESQL://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_url_becomes_a_libpq_url(url: str, expected: str) -> None:
    assert libpq_url(url) == expected


def test_url_of_another_engine_is_refused() -> None:
    with pytest.raises(InvalidOptions, match="sqlite"):
        libpq_url("sqlite:///x.db")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://[::1", "IPv6 host"),
        ("postgresql://u@h/app%zz", "percent-encoded"),
        ("postgresql://u@h/app?bogus=1", "bogus"),
        ("postgresql://u@h:notaport/app", "notaport"),
        ("postgresql://u@h:70000/app", "70000"),
    ],
)
def test_a_malformed_url_is_refused_before_connecting(url: str, named: str) -> None:
    # The host "h" does not resolve: anything that tried to connect would fail otherwise.
    with pytest.raises(InvalidOptions, match=named) as info:
        alkstore.open(url)
    assert info.value.__cause__ is None  # no psycopg error behind it: nothing connected


def test_a_refused_url_never_shows_its_password() -> None:
    with pytest.raises(InvalidOptions) as info:
        alkstore.open("postgresql://app:s3cret%zz@h/app")
    assert "s3cret" not in str(info.value)
    assert "percent-encoded" in str(info.value)


def test_both_entry_points_load_the_one_provider() -> None:
    assert alkstore.load_engine("postgresql") is ENGINE
    assert alkstore.load_engine("postgres") is ENGINE
    assert ENGINE.name == "postgresql"
    assert ENGINE.contract_version == CONTRACT_VERSION
    assert isinstance(ENGINE, alkstore.EngineProvider)


def test_the_provider_declares_every_optional_profile() -> None:
    capabilities = ENGINE.capabilities
    profiles = (capabilities.scheduler, capabilities.streams, capabilities.pubsub, capabilities.ops)
    assert profiles == (True,) * 4


def test_postgres_alias_scheme_opens_a_store(pg_dsn: str, schema: str) -> None:
    alias_url = "postgres://" + libpq_url(pg_dsn).removeprefix("postgresql://")
    with alkstore.open(alias_url, schema=schema) as store:
        assert store.queue("q").enqueue({"via": "alias"}) >= 1


def test_wake_channel_fits_an_identifier_and_stays_unique_per_schema() -> None:
    long_a, long_b = "a" * 63, "a" * 62 + "b"
    assert wake_channel("alkstore") == "alkstore.wake"
    assert len(wake_channel(long_a).encode()) <= 63
    assert wake_channel(long_a) != wake_channel(long_b)


def test_message_channel_fits_an_identifier_and_differs_from_the_wake_channel() -> None:
    long_a, long_b = "a" * 63, "a" * 62 + "b"
    assert message_channel("alkstore") == "alkstore.message"
    assert len(message_channel(long_a).encode()) <= 63
    assert message_channel(long_a) != message_channel(long_b)
    assert message_channel(long_a) != wake_channel(long_a)


def test_a_lowered_payload_bound_is_applied(pg_dsn: str, schema: str) -> None:
    with alkstore.open(pg_dsn, schema=schema, max_payload_bytes=10) as store:
        queue = store.queue("q")
        queue.enqueue("x" * 8)  # 10 bytes of JSON text
        with pytest.raises(PayloadError, match="11 bytes"):
            queue.enqueue("x" * 9)
        assert [h.payload for h in queue.claim_batch("worker", 10)] == ["x" * 8]
