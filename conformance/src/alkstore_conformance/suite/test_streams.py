"""§7 (decision 015 §5): streams -- an append-only log per name with durable consumer offsets."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alkstore import (
    PayloadError,
    StopToken,
    Store,
    StreamEvent,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import Rollback, raise_inside, unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profiles import in_thread

pytestmark = pytest.mark.requires("streams")

GENEROUS_S = 60.0
SETTLE_S = 0.2

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


# -- STREAM-APPEND-READ --------------------------------------------------------------


@pytest.mark.property("STREAM-APPEND-READ")
def test_offsets_start_at_one_and_increase(clocked_store: Store) -> None:
    stream = clocked_store.stream("orders")
    offsets = [stream.append({"n": n}) for n in range(5)]
    assert offsets[0] == 1
    assert offsets == sorted(set(offsets))


@pytest.mark.property("STREAM-APPEND-READ")
def test_read_returns_every_event_with_its_payload_and_created_at(
    clocked_store: Store, clock: FakeClock
) -> None:
    stream = clocked_store.stream("orders")
    first = stream.append({"n": 1})
    clock.advance(5)
    second = stream.append(["two", 2])
    assert stream.read() == [
        StreamEvent(offset=first, payload={"n": 1}, created_at=int(clock.now()) - 5),
        StreamEvent(offset=second, payload=["two", 2], created_at=int(clock.now())),
    ]


@pytest.mark.property("STREAM-APPEND-READ")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    payloads=st.lists(json_values, min_size=0, max_size=12),
    after_index=st.integers(0, 12),
    limit=st.integers(1, 15),
)
def test_read_after_returns_the_later_events_oldest_first_up_to_limit(
    clocked_store: Store, payloads: list[Any], after_index: int, limit: int
) -> None:
    stream = clocked_store.stream(unique_name("read"))
    offsets = [stream.append(payload) for payload in payloads]
    after = offsets[after_index - 1] if 0 < after_index <= len(offsets) else 0
    expected = [(o, p) for o, p in zip(offsets, payloads, strict=True) if o > after][:limit]
    assert [(e.offset, e.payload) for e in stream.read(after, limit)] == expected


@pytest.mark.property("STREAM-APPEND-READ")
def test_read_past_the_last_event_is_empty(clocked_store: Store) -> None:
    stream = clocked_store.stream("orders")
    assert stream.read() == []
    last = stream.append({"n": 1})
    assert stream.read(after=last) == []
    assert stream.read(after=last + 1000) == []


@pytest.mark.property("STREAM-APPEND-READ")
def test_streams_are_independent(clocked_store: Store) -> None:
    a = clocked_store.stream("a")
    b = clocked_store.stream("b")
    assert [a.append("a1"), a.append("a2")][0] == 1
    assert b.append("b1") == 1
    assert [e.payload for e in a.read()] == ["a1", "a2"]
    assert [e.payload for e in b.read()] == ["b1"]


@pytest.mark.property("STREAM-APPEND-READ")
def test_events_are_visible_to_every_store(open_store: StoreFactory) -> None:
    writer = open_store().stream("shared")
    offset = writer.append({"n": 1})
    assert [(e.offset, e.payload) for e in open_store().stream("shared").read()] == [
        (offset, {"n": 1})
    ]


@pytest.mark.property("PAYLOAD-INVALID-REFUSED")
@pytest.mark.parametrize(
    "payload", [{1, 2}, object(), {"x": b"bytes"}], ids=["set", "object", "bytes"]
)
def test_an_append_that_does_not_serialize_is_refused_with_nothing_written(
    store: Store, payload: Any
) -> None:
    stream = store.stream("orders")
    with pytest.raises(PayloadError):
        stream.append(payload)
    assert stream.read() == []
    assert stream.append({"ok": True}) == 1


# -- STREAM-CONSUMER-OFFSETS-DURABLE -------------------------------------------------


@pytest.mark.property("STREAM-CONSUMER-OFFSETS-DURABLE")
def test_an_unknown_consumer_is_at_offset_zero(store: Store) -> None:
    stream = store.stream("orders")
    stream.append({"n": 1})
    assert stream.offset("never-committed") == 0


@pytest.mark.property("STREAM-CONSUMER-OFFSETS-DURABLE")
def test_commit_sets_the_consumers_offset(store: Store) -> None:
    stream = store.stream("orders")
    offsets = [stream.append({"n": n}) for n in range(3)]
    stream.commit("billing", offsets[0])
    assert stream.offset("billing") == offsets[0]
    stream.commit("billing", offsets[2])
    assert stream.offset("billing") == offsets[2]


@pytest.mark.property("STREAM-CONSUMER-OFFSETS-DURABLE")
def test_offsets_are_per_stream_and_consumer(store: Store) -> None:
    orders = store.stream("orders")
    refunds = store.stream("refunds")
    for _ in range(3):
        orders.append({})
        refunds.append({})
    orders.commit("billing", 2)
    orders.commit("audit", 3)
    refunds.commit("billing", 1)
    assert (orders.offset("billing"), orders.offset("audit")) == (2, 3)
    assert (refunds.offset("billing"), refunds.offset("audit")) == (1, 0)


@pytest.mark.property("STREAM-CONSUMER-OFFSETS-DURABLE")
def test_offsets_survive_closing_and_reopening_the_store(open_store: StoreFactory) -> None:
    first = open_store()
    stream = first.stream("orders")
    last = [stream.append({"n": n}) for n in range(4)][-1]
    stream.commit("billing", last)
    first.close()
    reopened = open_store().stream("orders")
    assert reopened.offset("billing") == last
    assert reopened.read(after=reopened.offset("billing")) == []


@pytest.mark.property("STREAM-CONSUMER-OFFSETS-DURABLE")
def test_offsets_are_shared_by_every_store(open_store: StoreFactory) -> None:
    one = open_store().stream("orders")
    one.commit("billing", one.append({}))
    assert open_store().stream("orders").offset("billing") == 1


# -- STREAM-TRIM-EXACT ---------------------------------------------------------------


@dataclass(frozen=True)
class Append:
    count: int


@dataclass(frozen=True)
class Trim:
    back: int
    """Trim to the offset ``back`` events before the next one (0: everything)."""


steps = st.lists(
    st.builds(Append, st.integers(1, 5)) | st.builds(Trim, st.integers(0, 8)),
    min_size=1,
    max_size=10,
)


@pytest.mark.property("STREAM-TRIM-EXACT")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_trim_to_deletes_exactly_the_earlier_events_and_returns_how_many(
    store: Store, steps: list[Append | Trim]
) -> None:
    stream = store.stream(unique_name("trim"))
    kept: list[tuple[int, int]] = []  # (offset, payload) still in the stream
    issued: list[int] = []
    for step in steps:
        if isinstance(step, Append):
            for _ in range(step.count):
                n = len(issued)
                offset = stream.append(n)
                assert all(offset > earlier for earlier in issued), "offsets are never reused"
                issued.append(offset)
                kept.append((offset, n))
        else:
            upto = (issued[-1] + 1 if issued else 1) - step.back
            upto = max(upto, 0)
            gone = [event for event in kept if event[0] < upto]
            assert stream.trim_to(upto) == len(gone)
            kept = [event for event in kept if event[0] >= upto]
        assert [(e.offset, e.payload) for e in stream.read(limit=100)] == kept


@pytest.mark.property("STREAM-TRIM-EXACT")
def test_trimming_an_empty_stream_deletes_nothing(store: Store) -> None:
    assert store.stream("never").trim_to(100) == 0


@pytest.mark.property("STREAM-TRIM-EXACT")
def test_offsets_are_not_reused_after_trimming_everything(open_store: StoreFactory) -> None:
    first = open_store()
    stream = first.stream("orders")
    last = [stream.append({"n": n}) for n in range(3)][-1]
    assert stream.trim_to(last + 1) == 3
    assert stream.read() == []
    after_trim = stream.append({"n": 3})
    assert after_trim > last
    assert stream.trim_to(after_trim + 1) == 1
    first.close()
    reopened = open_store().stream("orders")
    assert reopened.append({"n": 4}) > after_trim


@pytest.mark.property("STREAM-TRIM-EXACT")
def test_trim_leaves_other_streams_and_consumer_offsets_alone(store: Store) -> None:
    orders = store.stream("orders")
    refunds = store.stream("refunds")
    for n in range(3):
        orders.append(n)
        refunds.append(n)
    orders.commit("billing", 3)
    assert orders.trim_to(4) == 3
    assert orders.offset("billing") == 3
    assert [e.payload for e in refunds.read()] == [0, 1, 2]


# -- STREAM-WAIT ---------------------------------------------------------------------


@pytest.mark.property("STREAM-WAIT")
@pytest.mark.parametrize("timeout", [0, GENEROUS_S])
def test_wait_is_true_at_once_when_a_later_event_exists(store: Store, timeout: float) -> None:
    stream = store.stream("orders")
    first = stream.append({"n": 1})
    stream.append({"n": 2})
    assert stream.wait(after=first, timeout=timeout) is True
    assert stream.wait(after=0, timeout=timeout) is True


@pytest.mark.property("STREAM-WAIT")
@pytest.mark.parametrize("timeout", [0, 0.3])
def test_wait_times_out_false_when_no_later_event_exists(store: Store, timeout: float) -> None:
    stream = store.stream("orders")
    last = stream.append({"n": 1})
    assert stream.wait(after=last, timeout=timeout) is False
    assert store.stream("empty").wait(after=0, timeout=timeout) is False


@pytest.mark.property("STREAM-WAIT")
def test_wait_with_stop_already_set_is_false(store: Store) -> None:
    stop = StopToken()
    stop.stop()
    assert store.stream("orders").wait(after=0, timeout=GENEROUS_S, stop=stop) is False


@pytest.mark.property("STREAM-WAIT")
def test_wait_returns_false_when_stopped(store: Store) -> None:
    stop = StopToken()
    waiting = in_thread(lambda: store.stream("orders").wait(after=0, timeout=None, stop=stop))
    time.sleep(SETTLE_S)
    stop.stop()
    assert waiting.join(GENEROUS_S) is False


@pytest.mark.property("STREAM-WAIT")
def test_wait_returns_true_when_another_store_appends(
    store: Store, open_store: StoreFactory
) -> None:
    stream = store.stream("orders")
    last = stream.append({"n": 1})
    waiting = in_thread(lambda: stream.wait(after=last, timeout=GENEROUS_S))
    time.sleep(SETTLE_S)
    open_store().stream("orders").append({"n": 2})
    assert waiting.join(GENEROUS_S * 2) is True


@pytest.mark.property("STREAM-WAIT")
def test_wait_ignores_appends_to_other_streams(store: Store) -> None:
    waiting = in_thread(lambda: store.stream("watched").wait(after=0, timeout=1.0))
    time.sleep(SETTLE_S)
    store.stream("elsewhere").append({"n": 1})
    assert waiting.join(GENEROUS_S) is False


# -- STREAM-TX -----------------------------------------------------------------------


@pytest.mark.property("STREAM-TX")
@pytest.mark.requires("transactions")
def test_tx_stream_append_is_visible_once_committed(store: Store, open_store: StoreFactory) -> None:
    observer = open_store().stream("orders")
    with store.transaction() as tx:
        first = tx.stream_append("orders", {"n": 1})
        second = tx.stream_append("orders", {"n": 2})
        assert first < second
        assert observer.read() == [], "nothing is visible before the commit"
    assert [(e.offset, e.payload) for e in observer.read()] == [
        (first, {"n": 1}),
        (second, {"n": 2}),
    ]


@pytest.mark.property("STREAM-TX")
@pytest.mark.requires("transactions")
def test_a_rolled_back_tx_stream_append_leaves_no_event(store: Store) -> None:
    stream = store.stream("orders")
    committed = stream.append({"n": 1})
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.stream_append("orders", {"n": 2}))
    assert [(e.offset, e.payload) for e in stream.read()] == [(committed, {"n": 1})]
    assert stream.append({"n": 3}) > committed


@pytest.mark.property("STREAM-TX")
@pytest.mark.requires("transactions")
def test_a_rolled_back_append_wakes_no_waiter_and_a_committed_one_does(store: Store) -> None:
    stream = store.stream("orders")
    waiting = in_thread(lambda: stream.wait(after=0, timeout=1.0))
    time.sleep(SETTLE_S)
    with pytest.raises(Rollback):
        raise_inside(store.transaction(), lambda tx: tx.stream_append("orders", {"n": 1}))
    assert waiting.join(GENEROUS_S) is False
    waiting = in_thread(lambda: stream.wait(after=0, timeout=GENEROUS_S))
    time.sleep(SETTLE_S)
    with store.transaction() as tx:
        tx.stream_append("orders", {"n": 2})
    assert waiting.join(GENEROUS_S * 2) is True
