"""§7: streams under concurrency -- gap-safe offsets under concurrent appenders (threads
and processes), and wait woken by another process's append.

Gap safety: a reader that polls ``read(after=last)`` and moves ``last`` to the
newest offset it saw must never pass an offset that becomes visible later
(an append that took a smaller offset but committed after a larger one) --
it would never see that event. So the reader's log, followed while the
appenders run, must equal the stream's final contents.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

import pytest

from alkstore import EngineSpec, Store, StreamEvent
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.processes import ThreadCounter
from alkstore_conformance.helpers.profile_processes import (
    append_events,
    stream_appender_on_signal,
    stream_appender_process,
)
from alkstore_conformance.helpers.profiles import Children, in_thread

pytestmark = pytest.mark.requires("streams")

TIME_LIMIT_S = 90.0
GENEROUS_S = 60.0
SETTLE_S = 0.2
APPENDERS = 3
EVENTS_EACH = 60
READ_LIMIT = 7
STREAM = "concurrent"
"""Small, so the reader takes many steps while the appenders run."""


def _follow(store: Store, name: str, all_appended: Callable[[], bool]) -> list[StreamEvent]:
    """Poll ``read(after=last)`` while the appenders run, until a read after every
    append committed finds nothing after ``last`` (or ``TIME_LIMIT_S`` passed)."""
    stream = store.stream(name)
    seen: list[StreamEvent] = []
    last = 0
    give_up_at = time.monotonic() + TIME_LIMIT_S
    while time.monotonic() < give_up_at:
        done = all_appended()  # before the read: then an empty read means caught up
        batch = stream.read(after=last, limit=READ_LIMIT)
        offsets = [event.offset for event in batch]
        assert offsets == sorted(set(offsets)), f"one read is not strictly increasing: {offsets}"
        assert all(offset > last for offset in offsets), f"read(after={last}) gave {offsets}"
        if batch:
            seen.extend(batch)
            last = batch[-1].offset
        elif done:
            break
        else:
            time.sleep(0.001)
    return seen


def _check_reader_saw_everything(
    store: Store, seen: list[StreamEvent], returned: dict[str, list[int]]
) -> None:
    total = APPENDERS * EVENTS_EACH
    everything = store.stream(STREAM).read(limit=total + 1)
    assert [(e.offset, e.payload) for e in seen] == [(e.offset, e.payload) for e in everything], (
        "the polling reader skipped or repeated events"
    )
    assert len(everything) == total
    all_offsets = [offset for offsets in returned.values() for offset in offsets]
    assert len(set(all_offsets)) == total, "offsets are unique"
    assert sorted(all_offsets) == [e.offset for e in everything]
    assert min(all_offsets) == 1
    by_offset = {e.offset: e.payload for e in everything}
    for writer, offsets in returned.items():
        assert offsets == sorted(offsets), f"{writer}'s own appends got increasing offsets"
        assert [by_offset[o] for o in offsets] == [
            {"writer": writer, "seq": seq} for seq in range(EVENTS_EACH)
        ]


VIA = pytest.mark.parametrize("via", ["append", "transaction"])


@pytest.mark.property("STREAM-OFFSETS-MONOTONIC-GAP-SAFE")
@VIA
@pytest.mark.usefixtures("trial")  # a race: repeated as the mode demands
def test_a_polling_reader_sees_every_event_of_appenders_in_threads(
    open_store: StoreFactory, store: Store, requires: Callable[[str], None], via: str
) -> None:
    if via == "transaction":
        requires("transactions")
    barrier = threading.Barrier(APPENDERS + 1)
    finished = ThreadCounter()
    appenders = {
        f"writer-{index}": in_thread(
            functools.partial(
                append_events,
                open_store(),  # each appender its own store, like a process
                STREAM,
                f"writer-{index}",
                EVENTS_EACH,
                via == "transaction",
                barrier,
                finished,
                TIME_LIMIT_S,
            ),
            name=f"writer-{index}",
        )
        for index in range(APPENDERS)
    }
    barrier.wait(timeout=TIME_LIMIT_S)
    seen = _follow(store, STREAM, lambda: finished.value == APPENDERS)
    returned = {writer: appender.join(TIME_LIMIT_S) for writer, appender in appenders.items()}
    _check_reader_saw_everything(store, seen, returned)


@pytest.mark.property("STREAM-OFFSETS-MONOTONIC-GAP-SAFE")
@pytest.mark.requires("multi_process")
@VIA
@pytest.mark.usefixtures("trial")  # a race: repeated as the mode demands
def test_a_polling_reader_sees_every_event_of_appenders_in_processes(
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    store: Store,
    requires: Callable[[str], None],
    via: str,
) -> None:
    if via == "transaction":
        requires("transactions")
    with Children(TIME_LIMIT_S) as children:
        barrier = children.context.Barrier(APPENDERS + 1)
        finished = children.context.Value("i", 0)
        for index in range(APPENDERS):
            children.start(
                stream_appender_process,
                engine_name,
                engine_group,
                engine_spec,
                STREAM,
                f"writer-{index}",
                EVENTS_EACH,
                via == "transaction",
                barrier,
                finished,
                children.results,
                TIME_LIMIT_S,
            )
        barrier.wait(timeout=TIME_LIMIT_S)
        seen = _follow(store, STREAM, lambda: finished.value == APPENDERS)
        returned = dict(children.expect("offsets") for _ in range(APPENDERS))
    _check_reader_saw_everything(store, seen, returned)


@pytest.mark.property("STREAM-WAIT")
@pytest.mark.requires("multi_process")
def test_wait_returns_true_when_another_process_appends(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store
) -> None:
    stream = store.stream("orders")
    with Children(TIME_LIMIT_S) as children:
        go = children.context.Event()
        children.start(
            stream_appender_on_signal,
            engine_name,
            engine_group,
            engine_spec,
            "orders",
            go,
            children.results,
            TIME_LIMIT_S,
        )
        children.expect("ready")
        waiting = in_thread(lambda: stream.wait(after=0, timeout=GENEROUS_S))
        time.sleep(SETTLE_S)
        go.set()
        offset = children.expect("appended")
        assert waiting.join(GENEROUS_S * 2) is True
    assert [e.offset for e in stream.read()] == [offset]
