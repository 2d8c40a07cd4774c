"""Whole values (§0, §2, §6, §7): what is stored comes back byte for byte, at any size.

Sizes span orders of magnitude with a bias to the boundaries engines trip on
(255/256, 4096, Postgres NOTIFY's 8000 bytes, 65535/65536, hundreds of KB),
and texts mix 1- to 4-byte UTF-8 characters, so an engine that truncates,
re-encodes or silently caps a column fails. Names (worker ids, lock owners,
queue names) cover their whole allowed range, 1..200 characters.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from alkstore import RESERVED_PREFIX, Store
from alkstore.constants import ERROR_NUL_STAND_IN, MAX_NAME_LENGTH, MAX_PAYLOAD_BYTES
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory

MAX_TEXT_BYTES = 300_000
BOUNDARY_BYTES = (0, 1, 255, 256, 4095, 4096, 4097, 7999, 8000, 8001, 65535, 65536, 65537)
WIDE_CHARACTERS = ("é", "€", "😀", "𝄞", "\x00", '"', "\\", "\n")
"""Two-, three- and four-byte UTF-8, and what JSON and SQL must escape."""

# The values of a function-scoped store fixture are reused across examples on purpose.
WHOLE = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

_motifs = st.text(
    alphabet=st.sampled_from(WIDE_CHARACTERS) | st.characters(exclude_categories=["Cs"]),
    min_size=1,
    max_size=6,
)
_sizes = st.sampled_from(BOUNDARY_BYTES) | st.integers(0, MAX_TEXT_BYTES)


@st.composite
def large_texts(draw: st.DrawFn) -> str:
    """A text of exactly ``size`` UTF-8 bytes: a repeated motif, topped up with ASCII."""
    size = draw(_sizes)
    motif = draw(_motifs)
    width = len(motif.encode("utf-8"))
    text = motif * (size // width) + "x" * (size % width)
    assert len(text.encode("utf-8")) == size
    return text


def _fits_a_payload(text: str) -> bool:
    """Whether ``{"text": text}`` is within the payload size bound (§0.7): JSON writes a
    control character as six bytes (``\\u0007``), so a text of 300 KB can encode past
    1 MiB, and such a payload is refused, not stored."""
    encoded = json.dumps({"text": text}, ensure_ascii=False, separators=(",", ":"))
    return len(encoded.encode("utf-8")) <= MAX_PAYLOAD_BYTES


def large_payload_texts() -> st.SearchStrategy[str]:
    """``large_texts`` that fit in a payload."""
    return large_texts().filter(_fits_a_payload)


_name_characters = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")


@st.composite
def long_names(draw: st.DrawFn) -> str:
    """A valid name of 1..200 characters (the limit and its neighbours likely)."""
    length = draw(st.sampled_from((1, 2, 199, MAX_NAME_LENGTH)) | st.integers(1, MAX_NAME_LENGTH))
    motif = draw(st.text(alphabet=_name_characters, min_size=1, max_size=4))
    name = (motif * length)[:length]
    assume(not name.startswith(RESERVED_PREFIX))
    return name


# -- QUEUE-PAYLOAD-WHOLE --------------------------------------------------------------


@pytest.mark.property("QUEUE-PAYLOAD-WHOLE")
@WHOLE
@given(text=large_payload_texts())
def test_a_large_payload_comes_back_whole(store: Store, text: str) -> None:
    queue = store.queue(unique_name("large"))
    payload = {"text": text, "list": [text[:100], len(text)]}
    job_id = queue.enqueue(payload)
    stored = queue.get_job(job_id)
    assert stored is not None
    assert stored.payload == payload
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.payload == payload


@pytest.mark.property("QUEUE-PAYLOAD-WHOLE")
@WHOLE
@given(text=large_payload_texts())
def test_large_payloads_of_a_batch_come_back_whole(store: Store, text: str) -> None:
    queue = store.queue(unique_name("large-batch"))
    payloads = [{"n": n, "text": text} for n in range(3)]
    ids = queue.enqueue_many(payloads)
    assert [job.payload for job in map(queue.get_job, ids) if job is not None] == payloads


# -- QUEUE-ERROR-WHOLE ------------------------------------------------------------------


@pytest.mark.property("QUEUE-ERROR-WHOLE")
@WHOLE
@given(error=large_texts())
def test_a_fail_error_of_any_size_comes_back_whole(store: Store, error: str) -> None:
    queue = store.queue(unique_name("errors"))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert handle.fail(error) is True
    dead = queue.get_job(job_id)
    assert dead is not None
    # Whole, but for NUL, which every engine keeps as the stand-in (contract §11).
    error = error.replace("\x00", ERROR_NUL_STAND_IN)
    assert dead.last_error == error, (
        f"last_error came back {len(dead.last_error or '')} characters long, stored {len(error)}"
    )


@pytest.mark.property("QUEUE-ERROR-WHOLE")
def test_a_nul_in_an_error_is_kept_as_the_stand_in_on_every_engine(store: Store) -> None:
    queue = store.queue(unique_name("errors"))
    job_id = queue.enqueue({"n": 1})
    first = queue.claim("worker")
    assert first is not None
    assert first.retry("a\x00b", delay=0) is True
    second = queue.claim("worker")
    assert second is not None
    assert second.fail("c\x00\x00d") is True
    dead = queue.get_job(job_id)
    assert dead is not None
    assert dead.last_error == f"c{ERROR_NUL_STAND_IN * 2}d"
    if dead.errors:  # the error history is the ops profile's
        assert [e.error for e in dead.errors] == [
            f"a{ERROR_NUL_STAND_IN}b",
            f"c{ERROR_NUL_STAND_IN * 2}d",
        ]


# -- NAMES-WHOLE ------------------------------------------------------------------------


@pytest.mark.property("NAMES-WHOLE")
@WHOLE
@given(worker=long_names())
def test_a_worker_id_of_any_allowed_length_comes_back_whole(store: Store, worker: str) -> None:
    queue = store.queue(unique_name("workers"))
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim(worker)
    assert handle is not None
    assert handle.job.worker_id == worker
    stored = queue.get_job(job_id)
    assert stored is not None
    assert stored.worker_id == worker


@pytest.mark.property("NAMES-WHOLE")
@WHOLE
@given(name=long_names())
def test_a_queue_name_of_any_allowed_length_comes_back_whole(store: Store, name: str) -> None:
    job_id = store.queue(name).enqueue({"n": 1})
    stored = store.queue(name).get_job(job_id)
    assert stored is not None
    assert stored.queue == name
    handle = store.queue(name).claim("worker")
    assert handle is not None
    assert handle.id == job_id
    assert handle.ack() is True


@pytest.mark.property("NAMES-WHOLE")
@pytest.mark.requires("locks")
@WHOLE
@given(owner=long_names())
def test_a_lock_owner_of_any_allowed_length_comes_back_whole(store: Store, owner: str) -> None:
    lock = store.lock(unique_name("owned"))
    assert lock.acquire(owner, 60) is True
    holder = lock.holder()
    assert holder is not None
    assert holder.owner == owner
    assert lock.renew(owner, 60) is True
    assert lock.release(owner) is True


# -- STREAM-EVENT-WHOLE -----------------------------------------------------------------


@pytest.mark.property("STREAM-EVENT-WHOLE")
@WHOLE
@given(text=large_payload_texts())
def test_a_large_stream_event_comes_back_whole(store: Store, text: str) -> None:
    stream = store.stream(unique_name("events"))
    payload = {"text": text}
    offset = stream.append(payload)
    (event,) = stream.read(offset - 1, 1)
    assert event.offset == offset
    assert event.payload == payload


# -- PUBSUB-MESSAGE-WHOLE ---------------------------------------------------------------

DELIVERY_S = 10.0


@pytest.mark.property("PUBSUB-MESSAGE-WHOLE")
@WHOLE
@given(text=large_payload_texts())
def test_a_large_message_reaches_a_subscriber_of_another_store_whole(
    store: Store, open_store: StoreFactory, text: str
) -> None:
    channel = unique_name("large")
    listener = _listener(open_store)
    with listener.subscribe(channel) as subscription:
        store.notify(channel, {"text": text})
        assert subscription.get(timeout=DELIVERY_S) == {"text": text}


_LISTENERS: dict[int, Store] = {}


def _listener(open_store: StoreFactory) -> Store:
    """One second store per test (not per example): a subscriber that is not the sender."""
    key = id(open_store)
    if key not in _LISTENERS or _LISTENERS[key].closed:
        _LISTENERS.clear()
        _LISTENERS[key] = open_store()
    return _LISTENERS[key]
