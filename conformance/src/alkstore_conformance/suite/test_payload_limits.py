"""§0: a payload's size is bounded, and every payload enqueue accepts can be
claimed, even from a deep stack.

A payload's JSON text is at most the store's bound in UTF-8 bytes: the
contract's ``MAX_PAYLOAD_BYTES``, or the lower ``max_payload_bytes`` the store
was opened with (PAYLOAD-SIZE-BOUND, PAYLOAD-SIZE-OPTION).

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

from alkstore import InvalidOptions, JobState, PayloadError, Store
from alkstore.constants import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH
from alkstore_conformance.helpers.fixtures import StoreFactory

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


# -- PAYLOAD-SIZE-BOUND / PAYLOAD-SIZE-OPTION ------------------------------------------

LOWERED_BOUND = 1000
"""The ``max_payload_bytes`` a store is opened with to show the option is honoured."""


def payload_of(size: int) -> str:
    """A payload whose JSON text is ``size`` bytes in UTF-8: a string and its quotes."""
    return "x" * (size - 2)


def refused(call: Callable[[], object]) -> PayloadError | None:
    """The ``PayloadError`` ``call`` raised, or ``None`` if it took the payload (an
    assertion of the caller's then fails, as a broken bound should)."""
    try:
        call()
    except PayloadError as exc:
        return exc
    return None


def _nothing_written(store: Store) -> bool:
    queued = store.queue("q").claim_batch("worker", 10) + store.outbox("o").claim_batch(
        "worker", 10
    )
    return queued == []


def _tx_enqueue(store: Store, payload: Any) -> object:
    with store.transaction() as tx:
        return tx.enqueue("q", payload)


def _tx_enqueue_handle(store: Store, payload: Any) -> object:
    with store.transaction() as tx:
        return tx.enqueue(store.queue("q"), payload)


def _tx_outbox_enqueue(store: Store, payload: Any) -> object:
    with store.transaction() as tx:
        return tx.outbox_enqueue("o", payload)


SizeSurface = Callable[[Store, Any], object]

SIZE_SURFACES: dict[str, tuple[SizeSurface, str | None]] = {
    "enqueue": (lambda s, p: s.queue("q").enqueue(p), None),
    "enqueue_many": (lambda s, p: s.queue("q").enqueue_many([{"ok": 1}, p, {"ok": 2}]), None),
    "outbox.enqueue": (lambda s, p: s.outbox("o").enqueue(p), None),
    "tx.enqueue": (_tx_enqueue, "transactions"),
    "tx.enqueue(queue)": (_tx_enqueue_handle, "transactions"),
    "tx.outbox_enqueue": (_tx_outbox_enqueue, "transactions"),
}
"""Every surface that writes a job's payload (``None``: the queue core)."""


@pytest.mark.property("PAYLOAD-SIZE-BOUND")
@pytest.mark.parametrize("surface", list(SIZE_SURFACES))
def test_a_payload_over_the_bound_is_refused_naming_its_size_with_nothing_written(
    store: Store, requires: Callable[[str], None], surface: str
) -> None:
    call, profile = SIZE_SURFACES[surface]
    if profile is not None:
        requires(profile)
    with pytest.raises(PayloadError) as raised:
        call(store, payload_of(MAX_PAYLOAD_BYTES + 1))
    assert f"{MAX_PAYLOAD_BYTES + 1} bytes" in str(raised.value)
    assert f"{MAX_PAYLOAD_BYTES} bytes" in str(raised.value)
    assert _nothing_written(store)


@pytest.mark.property("PAYLOAD-SIZE-BOUND")
def test_a_payload_of_exactly_the_bound_is_claimed_whole(store: Store) -> None:
    payload = payload_of(MAX_PAYLOAD_BYTES)
    queue = store.queue("q")
    job_id = queue.enqueue(payload)
    handle = queue.claim("worker")
    assert handle is not None
    assert (handle.id, handle.payload) == (job_id, payload)


@pytest.mark.property("PAYLOAD-SIZE-BOUND")
def test_the_bound_counts_utf8_bytes_not_characters(store: Store) -> None:
    payload = "é" * (MAX_PAYLOAD_BYTES // 2)  # half the bound in characters, over it in bytes
    with pytest.raises(PayloadError):
        store.queue("q").enqueue(payload)
    assert _nothing_written(store)


@pytest.mark.property("PAYLOAD-SIZE-BOUND")
def test_a_schedule_over_the_bound_is_refused_with_nothing_written(
    store: Store, requires: Callable[[str], None]
) -> None:
    requires("scheduler")
    with pytest.raises(PayloadError):
        store.schedule("big", "@every 1m", "q", payload_of(MAX_PAYLOAD_BYTES + 1))
    assert store.schedules() == []


@pytest.mark.property("PAYLOAD-SIZE-BOUND")
def test_a_stream_append_over_the_bound_is_refused_with_nothing_written(
    store: Store, requires: Callable[[str], None]
) -> None:
    requires("streams")
    stream = store.stream("s")
    with pytest.raises(PayloadError):
        stream.append(payload_of(MAX_PAYLOAD_BYTES + 1))
    assert stream.read() == []


@pytest.mark.property("PAYLOAD-SIZE-BOUND")
def test_a_notify_over_the_bound_is_refused(store: Store, requires: Callable[[str], None]) -> None:
    requires("pubsub")
    with pytest.raises(PayloadError):
        store.notify("c", payload_of(MAX_PAYLOAD_BYTES + 1))


@pytest.mark.property("PAYLOAD-SIZE-OPTION")
@pytest.mark.parametrize("surface", list(SIZE_SURFACES))
def test_a_store_opened_with_a_lower_bound_refuses_a_payload_over_it(
    open_store: StoreFactory, requires: Callable[[str], None], surface: str
) -> None:
    call, profile = SIZE_SURFACES[surface]
    if profile is not None:
        requires(profile)
    store = open_store(max_payload_bytes=LOWERED_BOUND)
    refusal = refused(lambda: call(store, payload_of(LOWERED_BOUND + 1)))
    assert refusal is not None, "a payload over the store's max_payload_bytes was taken"
    assert f"{LOWERED_BOUND + 1} bytes" in str(refusal)
    assert f"{LOWERED_BOUND} bytes" in str(refusal)
    assert _nothing_written(store)


@pytest.mark.property("PAYLOAD-SIZE-OPTION")
def test_a_store_opened_with_a_lower_bound_takes_a_payload_of_that_size(
    open_store: StoreFactory,
) -> None:
    store = open_store(max_payload_bytes=LOWERED_BOUND)
    queue = store.queue("q")
    job_id = queue.enqueue(payload_of(LOWERED_BOUND))
    job = queue.get_job(job_id)
    assert job is not None
    assert job.payload == payload_of(LOWERED_BOUND)


@pytest.mark.property("PAYLOAD-SIZE-OPTION")
@pytest.mark.parametrize(
    "value",
    [MAX_PAYLOAD_BYTES + 1, 0, -1, 1.5, "1000", True],
    ids=["over-the-contract-bound", "zero", "negative", "float", "str", "bool"],
)
def test_a_bound_above_the_contracts_or_not_a_positive_int_is_refused(
    open_store: StoreFactory, value: object
) -> None:
    with pytest.raises(InvalidOptions, match="max_payload_bytes"):
        open_store(max_payload_bytes=value)
