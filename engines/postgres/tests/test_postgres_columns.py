"""The job tables' column lists derive from the contract's: one list per table, no
hand-kept copy (``alkstore_postgres.columns``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from alkstore.options import JOB_STAMP_FIELDS
from alkstore.rows import CLAIMED_COLUMNS, JOB_COLUMNS
from alkstore_postgres import columns


def _names(listed: str) -> list[str]:
    """The names a list of ``columns`` gives its items: each item ends with its quoted
    name (the column, or ``expression AS "name"``)."""
    return re.findall(r'"(\w+)"\s*(?:,|$)', listed)


def test_a_live_row_is_selected_as_the_contracts_job_columns() -> None:
    assert _names(columns.LIVE_JOB) == list(JOB_COLUMNS)


def test_a_dead_row_is_selected_as_the_contracts_job_columns() -> None:
    assert _names(columns.DEAD_JOB) == list(JOB_COLUMNS)


def test_a_claim_returns_the_contracts_claimed_columns() -> None:
    assert _names(columns.CLAIMED_JOB) == list(CLAIMED_COLUMNS)


def test_an_insert_stamps_the_contracts_stamp_fields() -> None:
    assert _names(columns.STAMP_COLUMNS) == list(JOB_STAMP_FIELDS)


def test_a_move_to_the_dead_table_keeps_every_column_both_tables_store() -> None:
    computed = set(columns.LIVE_COMPUTED) | set(columns.DEAD_COMPUTED)
    assert _names(columns.MOVED) == [name for name in JOB_COLUMNS if name not in computed]


def test_a_column_name_that_is_not_a_plain_identifier_is_refused() -> None:
    with pytest.raises(ValueError, match="not a plain column name"):
        columns.column('id"; DROP TABLE jobs; --')


def test_a_computed_column_that_is_not_selected_is_refused() -> None:
    with pytest.raises(ValueError, match="not selected"):
        columns.select_list(("id",), {"died_at": "NULL::bigint"})


def test_a_fresh_stamp_that_is_not_a_stamp_is_refused() -> None:
    with pytest.raises(ValueError, match="not stamps"):
        columns.restamped("removed", {"deadline": "0"})


@dataclass(frozen=True)
class _Record:
    name: str
    limit: int | None


def test_a_parameter_that_may_be_null_is_sent_with_its_type() -> None:
    assert columns.parameters(_Record) == "%(name)s, %(limit)s::bigint"
