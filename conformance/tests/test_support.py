"""The suite's SQL helpers speak each DB-API driver's parameter style."""

from __future__ import annotations

import sqlite3
import sys
import types
from collections.abc import Iterator

import pytest

from alkstore_conformance.helpers.common import native_sql, paramstyle, quoted_table

SQL = "INSERT INTO t (a, b) VALUES (?, ?)"


@pytest.fixture
def fake_driver() -> Iterator[types.ModuleType]:
    """A stand-in DB-API module whose connections report its paramstyle."""
    module = types.ModuleType("kit_fake_dbapi")
    connection_type = type("Connection", (), {"__module__": "kit_fake_dbapi.connection"})
    module.Connection = connection_type  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_qmark_sql_is_unchanged() -> None:
    connection = sqlite3.connect(":memory:")
    try:
        assert paramstyle(connection) == "qmark"
        assert native_sql(connection, SQL) == SQL
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("pyformat", "INSERT INTO t (a, b) VALUES (%s, %s)"),
        ("format", "INSERT INTO t (a, b) VALUES (%s, %s)"),
        ("numeric", "INSERT INTO t (a, b) VALUES (:1, :2)"),
    ],
)
def test_positional_styles_are_rewritten(
    fake_driver: types.ModuleType, style: str, expected: str
) -> None:
    fake_driver.paramstyle = style  # type: ignore[attr-defined]
    assert native_sql(fake_driver.Connection(), SQL) == expected


def test_a_connection_subclassed_outside_the_driver_speaks_the_drivers_style(
    fake_driver: types.ModuleType,
) -> None:
    fake_driver.paramstyle = "pyformat"  # type: ignore[attr-defined]
    wrapper = type("Wrapped", (fake_driver.Connection,), {"__module__": "kit_app.db"})
    assert paramstyle(wrapper()) == "pyformat"


def test_a_connection_of_no_dbapi_driver_is_refused() -> None:
    with pytest.raises(TypeError, match="no DB-API paramstyle"):
        paramstyle(object())


def test_named_style_is_refused(fake_driver: types.ModuleType) -> None:
    fake_driver.paramstyle = "named"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="not positional"):
        native_sql(fake_driver.Connection(), SQL)


@pytest.mark.parametrize("name", ['kit_x"; DROP TABLE y; --', "orders", "kit_", "KIT_ORDERS"])
def test_only_kit_table_names_are_quoted(name: str) -> None:
    with pytest.raises(ValueError, match="not a kit table name"):
        quoted_table(name)
    assert quoted_table("kit_orders_ab12") == '"kit_orders_ab12"'


def test_a_refused_connection_names_where_the_guide_states_the_style_rule(
    fake_driver: types.ModuleType,
) -> None:
    with pytest.raises(TypeError) as no_style:
        paramstyle(object())
    fake_driver.paramstyle = "named"  # type: ignore[attr-defined]
    with pytest.raises(TypeError) as named:
        native_sql(fake_driver.Connection(), SQL)
    for refused in (no_style, named):
        assert str(refused.value).endswith(
            'see docs/certify-your-engine.md, "The sql profile\'s connection"'
        )
    assert "module attribute paramstyle (PEP 249)" in str(no_style.value)
