"""Payload nesting is bounded, and a stored payload that cannot be decoded never
wedges a queue nor reaches a claimer (the contract's payload rules)."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeDriver

import alkstore
from alkstore.constants import MAX_PAYLOAD_DEPTH
from alkstore.core import CoreStore
from alkstore.driver import ERROR_UNDECODABLE
from alkstore.errors import InvalidOptions, PayloadError
from alkstore.payload import UndecodablePayload, decode_payload, encode_payload, nesting_depth
from alkstore.values import JobState


def nested_lists(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def nested_objects(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {f"k{level}": value}
    return value


@pytest.mark.parametrize(
    ("text", "depth"),
    [("1", 0), ('"[[["', 0), ("[]", 1), ('[{"a":[1]}]', 3), ('["]", [["\\"["]]]', 3)],
)
def test_nesting_depth_counts_brackets_outside_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


@pytest.mark.parametrize("build", [nested_lists, nested_objects])
def test_a_payload_at_the_nesting_limit_round_trips(build: Any) -> None:
    value = build(MAX_PAYLOAD_DEPTH)
    assert decode_payload(encode_payload(value)) == value


@pytest.mark.parametrize("build", [nested_lists, nested_objects])
def test_a_payload_past_the_nesting_limit_is_refused(build: Any) -> None:
    with pytest.raises(PayloadError, match="deeper than 64"):
        encode_payload(build(MAX_PAYLOAD_DEPTH + 1))


def test_a_very_deep_payload_is_refused_not_a_recursion_error() -> None:
    with pytest.raises(PayloadError):
        encode_payload(nested_lists(900))


def test_many_shallow_containers_are_not_deep() -> None:
    wide = [{"n": i, "tags": [i]} for i in range(500)]
    assert decode_payload(encode_payload(wide)) == wide


@pytest.mark.parametrize(
    "text",
    ["[[[", "not json", '{"a": 1} trailing', "[" * 900 + "]" * 900, "[" * 65 + "]" * 65],
    ids=["truncated", "garbage", "trailing", "deep-900", "deep-65"],
)
def test_decoding_stored_text_never_raises(text: str) -> None:
    decoded = decode_payload(text)
    assert isinstance(decoded, UndecodablePayload)
    assert decoded.text == text
    assert decoded.reason


def test_stored_bytes_decode_as_utf8_text() -> None:
    assert decode_payload('{"é":1}'.encode()) == {"é": 1}


# -- the claim path never hands out, and is never blocked by, an undecodable row ----


def _corrupt(driver: FakeDriver, job_id: int, text: str) -> None:
    """What raw SQL or an older release could leave in a row."""
    driver.corrupt_payload(job_id, text)


def test_a_claim_dead_letters_an_undecodable_job_and_claims_the_one_behind_it(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    bad = queue.enqueue({"n": 1})
    good = queue.enqueue({"n": 2})
    _corrupt(driver, bad, "[" * 900 + "]" * 900)
    handle = queue.claim("w1")
    assert handle is not None
    assert handle.id == good
    dead = queue.get_job(bad)
    assert dead is not None
    assert dead.state is JobState.DEAD
    assert dead.last_error is not None
    assert dead.last_error.startswith(ERROR_UNDECODABLE)
    assert isinstance(dead.payload, UndecodablePayload)


def test_claim_batch_fills_its_limit_past_undecodable_jobs(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    ids = queue.enqueue_many([{"n": n} for n in range(6)])
    for job_id in ids[:3]:
        _corrupt(driver, job_id, "{oops")
    handles = queue.claim_batch("w1", 3)
    assert [h.id for h in handles] == ids[3:]


def test_a_queue_of_only_undecodable_jobs_claims_nothing_and_empties(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    for job_id in queue.enqueue_many([{"n": 1}, {"n": 2}]):
        _corrupt(driver, job_id, "")
    assert queue.claim("w1") is None
    assert queue.claim("w1") is None
    assert driver.live_rows("q") == []


# -- opening: wrong types are refused at once ----------------------------------------


@pytest.mark.parametrize("url", [None, 123, b"sqlite:///x.db"])
def test_open_refuses_a_url_that_is_not_a_str(url: Any) -> None:
    with pytest.raises(InvalidOptions, match="url must be a str"):
        alkstore.open(url)


def test_open_refuses_a_clock_that_is_not_a_clock() -> None:
    with pytest.raises(InvalidOptions, match="clock"):
        alkstore.open("nosuchengine:///x", clock="x")  # type: ignore[arg-type]


def test_the_core_refuses_a_clock_that_is_not_a_clock(driver: FakeDriver) -> None:
    with pytest.raises(InvalidOptions, match="clock"):
        CoreStore(driver, clock="x")  # type: ignore[arg-type]
