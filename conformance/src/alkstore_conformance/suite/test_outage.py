"""Outages (§8.4): the database cannot be used, then comes back.

The engine's ``outage_switch`` hook (``alkstore_conformance.hooks``) yields a
spec of the test's store that it can cut off, and how long a call that does
not wait takes to give up then (``give_up_s``, the engine's own limit under the
spec's options). While cut off, every call completes (a read the engine can
still serve) or raises ``EngineUnavailable`` within that limit plus
``SLACK_S``; a write that raised wrote nothing; waiting calls return at their
deadline. Once the database is back, the store works again by itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from alkstore import EngineProvider, EngineSpec, EngineUnavailable, Store
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.contention import (
    GENEROUS_S,
    HOLD_S,
    SLACK_S,
    WAIT_S,
    Running,
    check_raised_unavailable_or_returned,
    check_waits_bounded,
    require_outage_switch,
    samples,
    writes_of,
)
from alkstore_conformance.helpers.profiles import drain, in_thread, payload_key
from alkstore_conformance.hooks import OutageSwitch

IN_THE_OUTAGE_S = 0.3
"""How long a waiter is left inside the outage before anything else happens."""


@pytest.fixture
def switch(engine: EngineProvider, engine_spec: EngineSpec) -> Iterator[OutageSwitch]:
    provider = require_outage_switch(engine)
    with provider.outage_switch(engine_spec) as outage:
        yield outage


@pytest.fixture
def cut_off_store(engine: EngineProvider, switch: OutageSwitch) -> Iterator[Store]:
    """A store on the switch's spec (opened here: the switch's spec is the engine's)."""
    spec = switch.spec
    with engine.open(spec.url, **spec.opts) as store:
        yield store


# -- OUTAGE-CALLS-UNAVAILABLE -----------------------------------------------------------


@pytest.mark.property("OUTAGE-CALLS-UNAVAILABLE")
def test_calls_raise_engine_unavailable_within_the_engines_limit_during_an_outage(
    engine: EngineProvider, switch: OutageSwitch, cut_off_store: Store
) -> None:
    store = cut_off_store
    queue = store.queue(unique_name("outage"))
    claimed_id = queue.enqueue({"n": "claimed"})
    handle = queue.claim("before-the-outage")
    assert handle is not None
    writes = writes_of(engine, store, queue, handle)
    with switch.unavailable(HOLD_S):
        outcomes = Running({**writes, "get_job": lambda: queue.get_job(claimed_id)}).join()
    limit = switch.give_up_s + SLACK_S
    for timed in outcomes:
        check_raised_unavailable_or_returned(timed)
        assert timed.elapsed <= limit, (
            f"{timed.describe()}: the engine gives up after {switch.give_up_s:g} s "
            f"(allowed {limit:g} s)"
        )
        if timed.name in writes:
            assert isinstance(timed.error, EngineUnavailable), (
                f"{timed.describe()}: a write during the outage must raise EngineUnavailable"
            )
    # Nothing the refused writes were given was written, in part or whole.
    assert [payload_key(h.payload) for h in drain(queue)] == []
    job = queue.get_job(claimed_id)
    assert job is not None, "the refused ack removed the job"


# -- OUTAGE-WAITS-OUTLIVE ---------------------------------------------------------------


@pytest.mark.property("OUTAGE-WAITS-OUTLIVE")
def test_claim_wait_returns_none_at_its_timeout_during_an_outage(
    switch: OutageSwitch, cut_off_store: Store
) -> None:
    queue = cut_off_store.queue(unique_name("outage"))
    queue.enqueue({"waiting": True})
    with switch.unavailable(HOLD_S):
        waits = Running(samples(lambda n: queue.claim_wait(f"waiter-{n}", timeout=WAIT_S))).join()
    check_waits_bounded(waits, WAIT_S, "claim_wait during an outage")
    assert all(w.value is None for w in waits), "; ".join(w.describe() for w in waits)


@pytest.mark.property("OUTAGE-WAITS-OUTLIVE")
def test_claim_wait_any_returns_none_at_its_timeout_during_an_outage(
    switch: OutageSwitch, cut_off_store: Store
) -> None:
    store = cut_off_store
    empty, full = store.queue(unique_name("empty")), store.queue(unique_name("full"))
    full.enqueue({"waiting": True})
    with switch.unavailable(HOLD_S):
        waits = Running(
            samples(lambda n: store.claim_wait_any([empty, full], f"waiter-{n}", timeout=WAIT_S))
        ).join()
    check_waits_bounded(waits, WAIT_S, "claim_wait_any during an outage")
    assert all(w.value is None for w in waits), "; ".join(w.describe() for w in waits)


@pytest.mark.property("OUTAGE-WAITS-OUTLIVE")
@pytest.mark.requires("streams")
def test_stream_wait_returns_false_at_its_timeout_during_an_outage(
    switch: OutageSwitch, cut_off_store: Store
) -> None:
    stream = cut_off_store.stream(unique_name("outage"))
    last = stream.append({"n": 0})
    with switch.unavailable(HOLD_S):
        waits = Running(samples(lambda _: stream.wait(last, timeout=WAIT_S))).join()
    check_waits_bounded(waits, WAIT_S, "stream.wait during an outage")
    assert all(w.value is False for w in waits), "; ".join(w.describe() for w in waits)


# -- OUTAGE-RECOVERS --------------------------------------------------------------------


@pytest.mark.property("OUTAGE-RECOVERS")
def test_the_store_works_again_once_the_database_is_back(
    switch: OutageSwitch, cut_off_store: Store
) -> None:
    queue = cut_off_store.queue(unique_name("recovering"))
    with switch.unavailable(HOLD_S):
        waiting = in_thread(lambda: queue.claim_wait("across-the-outage", timeout=GENEROUS_S))
        time.sleep(IN_THE_OUTAGE_S)
        started = time.monotonic()
        with pytest.raises(EngineUnavailable):
            queue.enqueue({"n": "during"})
        assert time.monotonic() - started <= switch.give_up_s + SLACK_S
        assert not waiting.done(), "claim_wait returned during the outage, before its timeout"
    try:
        job_id = queue.enqueue({"n": "after"})
    except Exception as exc:
        raise AssertionError(
            f"the first enqueue after the outage raised {type(exc).__name__}: {exc}; "
            "the store must recover by itself once the database is back"
        ) from exc
    handle = waiting.join(GENEROUS_S)
    assert handle is not None, "a claim_wait waiting across the outage never got the new job"
    assert handle.id == job_id
    assert handle.ack() is True
