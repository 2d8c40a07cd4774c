"""Payloads round-trip through JSON; anything else is refused before a write
(contract §0)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

from alkstore.errors import AlkstoreError, PayloadError
from alkstore.payload import decode_payload, encode_payload


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        -1.5,
        "",
        {"to": "a@b", "tags": ["x", "y"], "n": {"deep": [1, 2.5, None, True, {"k": "v"}]}},
        {"ünïcødé": "日本語 🎉", "emoji": ["🙂", "ß"]},
        [[], {}, [[[]]]],
        2**70,
    ],
    ids=repr,
)
def test_json_values_round_trip(value: Any) -> None:
    assert decode_payload(encode_payload(value)) == value


def test_tuples_come_back_as_lists() -> None:
    assert decode_payload(encode_payload(("a", 1))) == ["a", 1]


def test_encoded_payload_is_json_text() -> None:
    assert isinstance(encode_payload({"a": 1}), str)


@pytest.mark.parametrize(
    "value",
    [object(), {1, 2}, b"bytes", datetime(2024, 1, 1, tzinfo=UTC), {"k": object()}],
    ids=["object", "set", "bytes", "datetime", "nested-object"],
)
def test_a_non_serializable_payload_is_refused(value: Any) -> None:
    with pytest.raises(PayloadError):
        encode_payload(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"x": [math.nan]}], ids=repr)
def test_a_non_finite_float_is_refused(value: Any) -> None:
    with pytest.raises(PayloadError):
        encode_payload(value)


def test_a_circular_payload_is_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(PayloadError):
        encode_payload(loop)


def test_a_deeply_nested_payload_is_refused() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(PayloadError):
        encode_payload(deep)


@pytest.mark.parametrize("value", ["\ud800", {"\udfff": 1}, ["ok", "bad \ud83d"]], ids=repr)
def test_a_lone_surrogate_is_refused(value: Any) -> None:
    with pytest.raises(PayloadError):
        encode_payload(value)


def test_payload_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        encode_payload(object())
    assert issubclass(PayloadError, AlkstoreError)
