"""§0: every payload enqueue accepts can be claimed, even from a deep stack.

A payload nests at most ``MAX_PAYLOAD_DEPTH`` lists and objects deep (deeper ones
are refused: PAYLOAD-INVALID-REFUSED). Within the limit, decoding must not
depend on how deep the caller's stack already is: a worker framework calls
``claim`` from a hundred or more frames down, and a payload that cannot be
decoded there would fail its claim again and again (or roll it back and block
the queue behind it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alkstore import JobState, Store
from alkstore.constants import MAX_PAYLOAD_DEPTH

T = TypeVar("T")

DEEP_STACK_FRAMES = 300
"""Frames already on the stack when the kit claims: more than a worker framework's
usual hundred or so, well short of Python's default recursion limit of 1000."""

_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.text(max_size=8),
)


@st.composite
def nested_payloads(draw: st.DrawFn) -> Any:
    """A JSON value nested 1..MAX_PAYLOAD_DEPTH deep, mixing lists and objects."""
    depth = draw(st.integers(1, MAX_PAYLOAD_DEPTH))
    value: Any = draw(_leaves)
    for level in range(depth):
        if draw(st.booleans()):
            value = [*draw(st.lists(_leaves, max_size=2)), value]
        else:
            value = {
                "k": value,
                **{f"s{level}": leaf for leaf in draw(st.lists(_leaves, max_size=1))},
            }
    return value


def at_stack_depth(frames: int, call: Callable[[], T]) -> T:
    """``call()`` with ``frames`` more frames on the stack."""
    if frames <= 0:
        return call()
    return at_stack_depth(frames - 1, call)


@pytest.mark.property("PAYLOAD-CLAIMABLE-FROM-DEEP-STACK")
def test_a_payload_at_the_nesting_limit_is_claimed_whole_from_a_deep_stack(store: Store) -> None:
    payload: Any = "leaf"
    for _ in range(MAX_PAYLOAD_DEPTH):
        payload = [payload]
    queue = store.queue("deep")
    behind = queue.enqueue({"n": "behind"})
    job_id = queue.enqueue(payload)
    first = at_stack_depth(DEEP_STACK_FRAMES, lambda: queue.claim("worker"))
    second = at_stack_depth(DEEP_STACK_FRAMES, lambda: queue.claim("worker"))
    assert first is not None
    assert second is not None
    assert (first.id, second.id) == (behind, job_id)
    assert second.payload == payload
    job = at_stack_depth(DEEP_STACK_FRAMES, lambda: queue.get_job(job_id))
    assert job is not None
    assert (job.state, job.payload) == (JobState.PROCESSING, payload)


@pytest.mark.property("PAYLOAD-CLAIMABLE-FROM-DEEP-STACK")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=st.lists(nested_payloads(), min_size=1, max_size=4))
def test_every_accepted_payload_is_claimed_whole_from_a_deep_stack(
    store: Store, payloads: list[Any]
) -> None:
    queue = store.queue("deep")
    ids = at_stack_depth(DEEP_STACK_FRAMES, lambda: queue.enqueue_many(payloads))
    handles = at_stack_depth(DEEP_STACK_FRAMES, lambda: queue.claim_batch("worker", len(ids)))
    assert sorted(h.id for h in handles) == sorted(ids)
    by_id = {h.id: h.payload for h in handles}
    assert [by_id[i] for i in ids] == payloads
    assert queue.ack_batch(ids, "worker") == len(ids)


@pytest.mark.property("PAYLOAD-CLAIMABLE-FROM-DEEP-STACK")
def test_a_stream_event_at_the_nesting_limit_reads_whole_from_a_deep_stack(
    store: Store, requires: Callable[[str], None]
) -> None:
    requires("streams")
    payload: Any = 0
    for level in range(MAX_PAYLOAD_DEPTH):
        payload = {f"level{level}": payload}
    stream = store.stream("deep")
    offset = stream.append(payload)
    (event,) = at_stack_depth(DEEP_STACK_FRAMES, lambda: stream.read(offset - 1, 1))
    assert event.payload == payload
