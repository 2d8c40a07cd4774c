"""A statement's parameters are its params value's fields by name
(``alkstore_postgres.binding``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from alkstore.params import ClaimRef
from alkstore_postgres.binding import by_name, id_array


def test_every_field_of_a_params_value_is_bound_by_its_name() -> None:
    assert by_name(ClaimRef(job_id=7, attempt=2, now=100)) == {
        "job_id": 7,
        "attempt": 2,
        "now": 100,
    }


def test_a_value_the_statement_takes_differently_replaces_the_field() -> None:
    bound = by_name(ClaimRef(job_id=7, attempt=2, now=100), job_id=8, wake_channel="c")
    assert bound == {"job_id": 8, "attempt": 2, "now": 100, "wake_channel": "c"}


@dataclass(frozen=True)
class _One:
    name: str


def test_a_params_value_of_one_field_is_bound_too() -> None:
    assert by_name(_One("s")) == {"name": "s"}


def test_a_value_that_is_not_a_dataclass_is_refused() -> None:
    with pytest.raises(TypeError):
        by_name(("q", 1))


def test_ids_go_as_the_text_of_one_bigint_array() -> None:
    assert id_array([3, 10, 2**63 - 1]) == "{3,10,9223372036854775807}"


def test_no_ids_are_the_text_of_an_empty_array() -> None:
    assert id_array([]) == "{}"
