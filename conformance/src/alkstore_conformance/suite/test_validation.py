"""§0: names, options and payloads are refused before anything is written."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

import alkstore
from alkstore import (
    EngineProvider,
    EngineSpec,
    EnqueueOpts,
    InvalidName,
    InvalidOptions,
    JobHandle,
    JobState,
    PayloadError,
    Queue,
    QueueOpts,
    ReservedName,
    Store,
)
from alkstore.constants import MAX_PAYLOAD_DEPTH
from alkstore_conformance.helpers.common import MALFORMED_IDS, MALFORMED_NAMES, RESERVED_NAMES

# -- names -------------------------------------------------------------------------

NameSurface = Callable[[Store, Any], object]


def _tx_enqueue(store: Store, name: Any) -> object:
    with store.transaction() as tx:
        return tx.enqueue(name, {"n": 1})


def _tx_outbox_enqueue(store: Store, name: Any) -> object:
    with store.transaction() as tx:
        return tx.outbox_enqueue(name, {"n": 1})


def _tx_get_job(store: Store, name: Any) -> object:
    with store.transaction() as tx:
        return tx.get_job_tx(name, 1)


def _tx_stream_append(store: Store, name: Any) -> object:
    with store.transaction() as tx:
        return tx.stream_append(name, {"n": 1})


def _tx_notify(store: Store, name: Any) -> object:
    with store.transaction() as tx:
        tx.notify(name, {"n": 1})
    return None


NAME_SURFACES: dict[str, tuple[NameSurface, tuple[str, ...]]] = {
    "queue": (lambda s, n: s.queue(n), ()),
    "outbox": (lambda s, n: s.outbox(n), ()),
    "lock": (lambda s, n: s.lock(n), ("locks",)),
    "tx.enqueue": (_tx_enqueue, ("transactions",)),
    "tx.outbox_enqueue": (_tx_outbox_enqueue, ("transactions",)),
    "tx.get_job_tx": (_tx_get_job, ("transactions",)),
    "stream": (lambda s, n: s.stream(n), ("streams",)),
    "tx.stream_append": (_tx_stream_append, ("streams", "transactions")),
    "notify": (lambda s, n: s.notify(n, {"n": 1}), ("pubsub",)),
    "subscribe": (lambda s, n: s.subscribe(n).close(), ("pubsub",)),
    "tx.notify": (_tx_notify, ("pubsub", "transactions")),
}
surfaces = pytest.mark.parametrize("surface", list(NAME_SURFACES))

ACCEPTED = ["_alkstore", "x__alkstore", "__alkstor", "ALKSTORE", "x" * 200, "é" * 200, "日本"]


def _on(surface: str, requires: Callable[[str], None]) -> NameSurface:
    call, profiles = NAME_SURFACES[surface]
    for profile in profiles:
        requires(profile)
    return call


@pytest.mark.property("NAMES-RESERVED-REFUSED")
@surfaces
@pytest.mark.parametrize("name", RESERVED_NAMES)
def test_reserved_names_are_refused(
    store: Store, requires: Callable[[str], None], surface: str, name: str
) -> None:
    call = _on(surface, requires)
    with pytest.raises(ReservedName) as raised:
        call(store, name)
    assert isinstance(raised.value, InvalidName)
    assert isinstance(raised.value, ValueError)


@pytest.mark.property("NAMES-RESERVED-REFUSED")
@pytest.mark.parametrize("name", ["_alkstore", "x__alkstore", "__alkstor"])
def test_names_merely_resembling_the_prefix_are_accepted(store: Store, name: str) -> None:
    queue = store.queue(name)
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert (handle.id, handle.job.queue) == (job_id, name)


@pytest.mark.property("NAMES-MALFORMED-REFUSED")
@surfaces
@pytest.mark.parametrize("name", MALFORMED_NAMES, ids=MALFORMED_IDS)
def test_malformed_names_are_refused(
    store: Store, requires: Callable[[str], None], surface: str, name: Any
) -> None:
    call = _on(surface, requires)
    with pytest.raises(InvalidName) as raised:
        call(store, name)
    assert isinstance(raised.value, ValueError)
    assert not isinstance(raised.value, ReservedName)


@pytest.mark.property("NAMES-MALFORMED-REFUSED")
@pytest.mark.parametrize("name", ACCEPTED, ids=lambda n: f"{n[:3]}x{len(n)}")
def test_names_up_to_200_characters_are_accepted(store: Store, name: str) -> None:
    queue = store.queue(name)
    job_id = queue.enqueue({"n": 1})
    job = queue.get_job(job_id)
    assert job is not None
    assert job.queue == name
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == job_id


# -- options -----------------------------------------------------------------------

BAD_OPTION_VALUES: dict[str, tuple[Callable[[], object], str]] = {
    "delay-negative": (lambda: EnqueueOpts(delay=-1), "delay"),
    "delay-str": (lambda: EnqueueOpts(delay="soon"), "delay"),  # type: ignore[arg-type]
    "delay-nan": (lambda: EnqueueOpts(delay=math.nan), "delay"),
    "priority-float": (lambda: EnqueueOpts(priority=1.5), "priority"),  # type: ignore[arg-type]
    "priority-bool": (lambda: EnqueueOpts(priority=True), "priority"),
    "max-attempts-zero": (lambda: EnqueueOpts(max_attempts=0), "max_attempts"),
    "expires-negative": (lambda: EnqueueOpts(expires=-5), "expires"),
    "run-at-naive": (lambda: EnqueueOpts(run_at=datetime(2030, 1, 1)), "run_at"),
    "run-at-inf": (lambda: EnqueueOpts(run_at=math.inf), "run_at"),
    "visibility-zero": (lambda: QueueOpts(visibility_timeout_s=0), "visibility_timeout_s"),
    "queue-max-attempts-negative": (lambda: QueueOpts(max_attempts=-1), "max_attempts"),
    "backoff-negative": (lambda: QueueOpts(backoff_base_s=-5), "backoff_base_s"),
    "retention-negative": (
        lambda: QueueOpts(dead_letter_retention_s=-1),
        "dead_letter_retention_s",
    ),
}


@pytest.mark.property("OPTIONS-INVALID-REFUSED")
@pytest.mark.parametrize("case", list(BAD_OPTION_VALUES))
def test_bad_option_values_are_refused_naming_the_field(case: str) -> None:
    build, field = BAD_OPTION_VALUES[case]
    with pytest.raises(InvalidOptions, match=field):
        build()


BadCall = Callable[[Store, Queue, JobHandle], object]
BAD_CALLS: dict[str, tuple[BadCall, str]] = {
    "queue-opts-dict": (lambda s, q, h: s.queue("q", {"max_attempts": 2}), "opts"),  # type: ignore[arg-type]
    "enqueue-opts-dict": (lambda s, q, h: q.enqueue(1, {"priority": 1}), "opts"),  # type: ignore[arg-type]
    "enqueue-many-str": (lambda s, q, h: q.enqueue_many("abc"), "payloads"),
    "claim-batch-zero": (lambda s, q, h: q.claim_batch("w", 0), "limit"),
    "claim-batch-str": (lambda s, q, h: q.claim_batch("w", "5"), "limit"),  # type: ignore[arg-type]
    "claim-wait-negative": (lambda s, q, h: q.claim_wait("w", timeout=-1), "timeout"),
    "cancel-str": (lambda s, q, h: q.cancel("1"), "job_id"),  # type: ignore[arg-type]
    "get-job-str": (lambda s, q, h: q.get_job("1"), "job_id"),  # type: ignore[arg-type]
    "ack-batch-str": (lambda s, q, h: q.ack_batch(["1"], "w"), "job_id"),  # type: ignore[list-item]
    "heartbeat-negative": (lambda s, q, h: h.heartbeat(-1), "extend"),
    "retry-delay-negative": (lambda s, q, h: h.retry("x", delay=-1), "delay"),
    "retry-error-none": (lambda s, q, h: h.retry(None), "error"),  # type: ignore[arg-type]
    "fail-error-int": (lambda s, q, h: h.fail(404), "error"),  # type: ignore[arg-type]
}


@pytest.mark.property("OPTIONS-INVALID-REFUSED")
@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_arguments_are_refused_naming_the_field_with_nothing_written(
    store: Store, case: str
) -> None:
    queue = store.queue("q", QueueOpts(max_attempts=5))
    queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    before = queue.get_job(handle.id)
    call, field = BAD_CALLS[case]
    with pytest.raises(InvalidOptions, match=field):
        call(store, queue, handle)
    assert queue.get_job(handle.id) == before
    assert queue.claim("worker") is None, "nothing new was enqueued"


@pytest.mark.property("OPTIONS-INVALID-REFUSED")
@pytest.mark.requires("locks")
@pytest.mark.parametrize("ttl", [-1, "10", math.nan])
def test_bad_lock_ttl_is_refused_naming_the_field(store: Store, ttl: Any) -> None:
    lock = store.lock("guard")
    with pytest.raises(InvalidOptions, match="ttl"):
        lock.acquire("owner", ttl)
    assert lock.holder() is None


@pytest.mark.property("OPTIONS-INVALID-REFUSED")
@pytest.mark.parametrize("clock", ["x", 1_700_000_000, object()], ids=["str", "int", "object"])
def test_a_clock_that_is_not_a_clock_is_refused_at_open(
    engine: EngineProvider, engine_spec: EngineSpec, clock: Any
) -> None:
    with pytest.raises(InvalidOptions, match="clock"):
        engine.open(engine_spec.url, clock=clock, **engine_spec.opts)


@pytest.mark.property("OPTIONS-INVALID-REFUSED")
@pytest.mark.parametrize("url", [None, 123, b"bytes"], ids=["none", "int", "bytes"])
def test_a_url_that_is_not_a_str_is_refused_at_open(url: Any) -> None:
    with pytest.raises(InvalidOptions, match="url"):
        alkstore.open(url)


# -- payloads ----------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


BAD_PAYLOADS: dict[str, Callable[[], Any]] = {
    "object": object,
    "set": lambda: {1, 2},
    "nan": lambda: math.nan,
    "infinity": lambda: {"x": math.inf},
    "bytes": lambda: b"raw",
    "nested-object": lambda: {"ok": [1, {"bad": object()}]},
    "tuple-key": lambda: {(1, 2): "x"},
    "lone-surrogate": lambda: "\ud800",
    "circular": _circular,
    "nested-too-deep": lambda: _nested(MAX_PAYLOAD_DEPTH + 1),
}
bad_payloads = pytest.mark.parametrize("payload", list(BAD_PAYLOADS))

PayloadSurface = Callable[[Store, Any], object]


def _tx_enqueue_payload(store: Store, payload: Any) -> object:
    with store.transaction() as tx:
        try:
            return tx.enqueue("q", payload)
        finally:
            tx.enqueue("q", {"marker": "the transaction went on"})


def _tx_outbox_payload(store: Store, payload: Any) -> object:
    with store.transaction() as tx:
        try:
            return tx.outbox_enqueue("q", payload)
        finally:
            tx.enqueue("q", {"marker": "the transaction went on"})


PAYLOAD_SURFACES: dict[str, tuple[PayloadSurface, str | None]] = {
    "enqueue": (lambda s, p: s.queue("q").enqueue(p), None),
    "enqueue_many": (lambda s, p: s.queue("q").enqueue_many([{"ok": 1}, p, {"ok": 2}]), None),
    "outbox.enqueue": (lambda s, p: s.outbox("q").enqueue(p), None),
    "tx.enqueue": (_tx_enqueue_payload, "transactions"),
    "tx.outbox_enqueue": (_tx_outbox_payload, "transactions"),
}


@pytest.mark.property("PAYLOAD-INVALID-REFUSED")
@pytest.mark.parametrize("surface", list(PAYLOAD_SURFACES))
@bad_payloads
def test_bad_payloads_are_refused_with_nothing_written(
    store: Store, requires: Callable[[str], None], surface: str, payload: str
) -> None:
    call, profile = PAYLOAD_SURFACES[surface]
    if profile is not None:
        requires(profile)
    with pytest.raises(PayloadError) as raised:
        call(store, BAD_PAYLOADS[payload]())
    assert isinstance(raised.value, TypeError)
    written = [h.payload for h in store.queue("q").claim_batch("worker", 10)]
    written += [h.payload for h in store.outbox("q").claim_batch("worker", 10)]
    assert [p for p in written if p != {"marker": "the transaction went on"}] == []


@pytest.mark.property("PAYLOAD-INVALID-REFUSED")
def test_a_refused_payload_leaves_the_queue_working(store: Store) -> None:
    queue = store.queue("q")
    with pytest.raises(PayloadError):
        queue.enqueue(object())
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.id == job_id
    job = queue.get_job(job_id)
    assert job is not None
    assert job.state is JobState.PROCESSING
