"""Time limits under contention (§8.5): another party holds what the store's writes need.

The engine's ``hold_write_path`` hook (``alkstore_conformance.hooks``) has
another connection, session, thread or process hold the store's write path
for at most ``HOLD_S``. Calls with a timeout must be back within it plus
``SLACK_S``; calls without one wait for the holder or raise
``EngineUnavailable``, and are back soon after the hold ends. A job waiting
in the queue makes every claim meet the hold (a claim writes); once the hold
ends it is still there to claim.
"""

from __future__ import annotations

import time

import pytest

from alkstore import EngineProvider, EngineSpec, Store
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.contention import (
    GENEROUS_S,
    HOLD_S,
    SLACK_S,
    WAIT_S,
    Running,
    Timed,
    check_raised_unavailable_or_returned,
    check_waits_bounded,
    require_hold_write_path,
    samples,
    writes_of,
)
from alkstore_conformance.helpers.profiles import drain, payload_key

HELD_FOR_S = 1.5
"""How long calls without a timeout are kept waiting before the hold ends."""


def _claimed_after_the_hold(store: Store, queue_name: str, waits: list[Timed]) -> None:
    """The job the claims met is claimed now if none of them got it: nothing was lost."""
    if any(w.value is not None for w in waits):
        return
    handle = store.queue(queue_name).claim_wait("after-the-hold", timeout=GENEROUS_S)
    assert handle is not None, "the queue's job was gone after the hold"


# -- CONTENTION-WAITS-BOUNDED ------------------------------------------------------------


@pytest.mark.property("CONTENTION-WAITS-BOUNDED")
def test_claim_wait_returns_within_its_timeout_while_the_write_path_is_held(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store
) -> None:
    holder = require_hold_write_path(engine)
    queue = store.queue(unique_name("held"))
    queue.enqueue({"waiting": True})
    with holder.hold_write_path(engine_spec, HOLD_S):
        waits = Running(samples(lambda n: queue.claim_wait(f"waiter-{n}", timeout=WAIT_S))).join()
    check_waits_bounded(waits, WAIT_S, "claim_wait while the write path was held")
    _claimed_after_the_hold(store, queue.name, waits)


@pytest.mark.property("CONTENTION-WAITS-BOUNDED")
def test_claim_wait_any_returns_within_its_timeout_while_the_write_path_is_held(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store
) -> None:
    holder = require_hold_write_path(engine)
    empty, full = store.queue(unique_name("empty")), store.queue(unique_name("full"))
    full.enqueue({"waiting": True})
    with holder.hold_write_path(engine_spec, HOLD_S):
        waits = Running(
            samples(lambda n: store.claim_wait_any([empty, full], f"waiter-{n}", timeout=WAIT_S))
        ).join()
    check_waits_bounded(waits, WAIT_S, "claim_wait_any while the write path was held")
    _claimed_after_the_hold(store, full.name, waits)


@pytest.mark.property("CONTENTION-WAITS-BOUNDED")
@pytest.mark.requires("streams")
def test_stream_wait_returns_within_its_timeout_while_the_write_path_is_held(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store
) -> None:
    holder = require_hold_write_path(engine)
    stream = store.stream(unique_name("held"))
    last = stream.append({"n": 0})
    with holder.hold_write_path(engine_spec, HOLD_S):
        waits = Running(samples(lambda _: stream.wait(last, timeout=WAIT_S))).join()
    check_waits_bounded(waits, WAIT_S, "stream.wait while the write path was held")
    assert all(w.value is False for w in waits), "; ".join(w.describe() for w in waits)


# -- CONTENTION-CALLS-BOUNDED ------------------------------------------------------------


@pytest.mark.property("CONTENTION-CALLS-BOUNDED")
def test_calls_without_a_timeout_wait_for_the_holder_or_raise_engine_unavailable(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store
) -> None:
    holder = require_hold_write_path(engine)
    queue = store.queue(unique_name("blocked"))
    claimed_id = queue.enqueue({"n": "claimed"})
    handle = queue.claim("before-the-hold")
    assert handle is not None
    writes = writes_of(engine, store, queue, handle)
    with holder.hold_write_path(engine_spec, HOLD_S):
        running = Running({**writes, "get_job": lambda: queue.get_job(claimed_id)})
        time.sleep(HELD_FOR_S)  # the writes wait (or give up) meanwhile
        released_at = time.monotonic()
    outcomes = running.join()
    for timed in outcomes:
        check_raised_unavailable_or_returned(timed)
        assert timed.finished <= released_at + SLACK_S, (
            f"{timed.describe()}: still waiting {SLACK_S:g} s after the hold ended"
        )
        if timed.name in writes and timed.error is None:
            assert timed.finished >= released_at, (
                f"{timed.describe()}: a write completed while the write path was held "
                "(the engine's hold_write_path hook held nothing)"
            )
    done = {timed.name for timed in outcomes if timed.error is None}
    expected = {payload_key({"n": "enqueued"})} if "enqueue" in done else set()
    if "enqueue_many" in done:
        expected |= {payload_key({"n": "batch-0"}), payload_key({"n": "batch-1"})}
    if "transaction" in done:
        expected |= {payload_key({"n": "tx-0"}), payload_key({"n": "tx-1"})}
    left = {payload_key(h.payload) for h in drain(queue)}
    assert left == expected, (
        f"after the hold the queue holds {sorted(left)}, not what the calls that completed "
        f"wrote ({sorted(expected)}): a call that raised wrote something, or one that "
        "completed lost its write"
    )
    acked = queue.get_job(claimed_id) is None
    assert acked == ("ack" in done), (
        f"the ack {'completed' if 'ack' in done else 'raised'}, yet the job is "
        f"{'gone' if acked else 'still there'}"
    )
