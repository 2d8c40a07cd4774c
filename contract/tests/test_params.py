"""Per-statement params values (``alkstore.params``) and binding them by name."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from alkstore.params import PARAMS, ClaimRef, Reschedule, bind_by_name


def test_every_params_value_is_frozen_and_slotted() -> None:
    for cls in PARAMS:
        assert "__slots__" in vars(cls), cls
        value = cls(*(None for _ in fields(cls)))
        with pytest.raises(FrozenInstanceError):
            value.__setattr__(fields(cls)[0].name, 1)


def test_a_statement_bound_by_name_takes_the_fields_in_placeholder_order() -> None:
    text, values = bind_by_name("WHERE attempts = :attempt AND id = :job_id", ClaimRef)
    assert text == "WHERE attempts = ? AND id = ?"
    assert values(ClaimRef(job_id=7, attempt=2, now=100)) == (2, 7)


def test_a_numbered_marker_numbers_each_name_once() -> None:
    text, values = bind_by_name("a = :now OR b = :now OR c = :job_id", ClaimRef, "?{}")
    assert text == "a = ?1 OR b = ?1 OR c = ?2"
    assert values(ClaimRef(job_id=7, attempt=2, now=100)) == (100, 7)


def test_extra_values_are_numbered_after_the_fields() -> None:
    text, values = bind_by_name(
        "SET e = :entry, r = :run_at WHERE id = :job_id", Reschedule, "?{}", extra=("entry",)
    )
    assert text == "SET e = ?3, r = ?1 WHERE id = ?2"
    assert values(Reschedule(1, 1, 100, 200, "e")) == (200, 1)


def test_a_single_placeholder_still_binds_a_tuple() -> None:
    _, values = bind_by_name("WHERE id = :job_id", ClaimRef)
    assert values(ClaimRef(7, 1, 100)) == (7,)


def test_a_double_colon_cast_is_no_placeholder() -> None:
    text, values = bind_by_name("WHERE :now::bigint > 0", ClaimRef, "%s")
    assert text == "WHERE %s::bigint > 0"
    assert values(ClaimRef(7, 1, 100)) == (100,)


def test_a_placeholder_that_is_no_field_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="deadline"):
        bind_by_name("WHERE deadline = :deadline", ClaimRef)


def test_extra_values_need_a_numbered_marker() -> None:
    with pytest.raises(ValueError, match="numbered"):
        bind_by_name("SET e = :entry", Reschedule, extra=("entry",))
