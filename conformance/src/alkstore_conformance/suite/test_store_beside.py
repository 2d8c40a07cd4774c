"""Stores side by side on one server share nothing (contract §1.6).

Two stores of one engine on one server -- two PostgreSQL schemas of a database,
two SQLite files of a directory, two memory databases of a process -- come from
the engine's ``provision_beside`` hook (``alkstore_conformance.hooks``; without
it, from a second ``provision()``). Each test lets one store (the writer) do
things under the names the other (the reader, fresh and empty) uses too, and
checks that the reader sees none of it and that what the reader does under those
names leaves the writer's untouched; ``writer`` runs it both ways round.

``STORE-BESIDE-NO-CROSS-WAKES`` watches what travels through the server rather
than what is stored: the reader is opened over a ``WakeCounter``
(``helpers.wakes``, through the ``open_with_driver_wrapper`` hook), which counts
every wake and message the engine hands the reader's store -- whatever its
watcher, listener or registry heard. A spurious wake does not change what a
waiter returns (it claims nothing and waits again), so the count, not the
waiter, is the observable; the waiters are there so that an engine that watches
only while someone waits is watching.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

import pytest

from alkstore import (
    Capabilities,
    EngineProvider,
    EngineSpec,
    EnqueueOpts,
    JobHandle,
    JobState,
    StopToken,
    Store,
)
from alkstore_conformance.helpers.profiles import in_thread
from alkstore_conformance.helpers.wakes import WakeCounter
from alkstore_conformance.hooks import (
    DRIVER_WRAPPER_HOOK,
    has_driver_wrapper,
    open_with_driver_wrapper,
    provision_beside,
)

SIDE = "side-by-side"
"""The one name both stores use for everything."""
BIG_MESSAGE_CHARS = 10_000
"""Past PostgreSQL's 8000-byte NOTIFY payload: such a message travels another way."""
SHORT_S = 0.3
"""How long a reader waits for something that must not come (after the writer's own
subscription got it, so it would have come by then)."""
GENEROUS_S = 30.0
WRITERS = ["provisioned", "beside"]


@contextmanager
def _side_by_side(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, writer: str
) -> Iterator[tuple[Store, Store]]:
    """``(writer, reader)``: the test's store and a fresh one beside it, either way round."""
    with (
        provision_beside(engine, engine_spec) as spec,
        engine.open(spec.url, **spec.opts) as beside,
    ):
        yield (store, beside) if writer == "provisioned" else (beside, store)


# -- STORE-BESIDE-SHARES-NOTHING ---------------------------------------------------------


@pytest.mark.property("STORE-BESIDE-SHARES-NOTHING")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_store_beside_another_sees_none_of_its_jobs(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, writer: str
) -> None:
    with _side_by_side(engine, engine_spec, store, writer) as (writes, reads):
        queue = writes.queue(SIDE)
        ready = queue.enqueue({"ready": True})
        later = queue.enqueue({"later": True}, EnqueueOpts(delay=3600))
        dead = queue.enqueue({"dead": True}, EnqueueOpts(priority=9))
        failing = queue.claim("writer")
        assert failing is not None
        assert failing.id == dead
        assert failing.fail("dead here") is True
        ids = [ready, later, dead]

        seen = reads.queue(SIDE)
        assert seen.claim_batch("reader", 10) == []
        assert [seen.get_job(job_id) for job_id in ids] == [None, None, None]
        assert [seen.cancel(job_id) for job_id in ids] == [False, False, False]
        assert seen.claim_wait("reader", timeout=SHORT_S) is None
        if engine.capabilities.ops:
            assert reads.stats() == []
            assert seen.jobs() == []
            assert seen.redrive() == []
            assert seen.purge_dead() == 0
        swept = seen.sweep_expired()
        assert (swept.expired, swept.exhausted, swept.purged) == (0, 0, 0)

        states = [queue.get_job(job_id) for job_id in ids]
        assert [job.state if job else None for job in states] == [
            JobState.PENDING,
            JobState.PENDING,
            JobState.DEAD,
        ], "the reader's calls changed the writer's jobs"


@pytest.mark.property("STORE-BESIDE-SHARES-NOTHING")
@pytest.mark.requires("ops")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_store_beside_another_sees_none_of_its_pauses(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, writer: str
) -> None:
    with _side_by_side(engine, engine_spec, store, writer) as (writes, reads):
        paused = writes.queue(SIDE)
        assert paused.pause() is True
        seen = reads.queue(SIDE)
        own = seen.enqueue({"own": True})
        assert seen.paused() is False
        handle = seen.claim("reader")
        assert handle is not None
        assert handle.id == own
        assert seen.resume() is False
        assert paused.paused() is True, "the reader's resume lifted the writer's pause"


@pytest.mark.property("STORE-BESIDE-SHARES-NOTHING")
@pytest.mark.requires("locks")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_store_beside_another_sees_none_of_its_locks(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, writer: str
) -> None:
    with _side_by_side(engine, engine_spec, store, writer) as (writes, reads):
        held = writes.lock(SIDE)
        assert held.acquire("writer", 3600) is True
        seen = reads.lock(SIDE)
        assert seen.holder() is None
        assert seen.release("writer") is False
        assert seen.renew("writer", 3600) is False
        assert seen.acquire("reader", 3600) is True
        holder = held.holder()
        assert holder is not None
        assert holder.owner == "writer", "the reader's calls moved the writer's lock"


@pytest.mark.property("STORE-BESIDE-SHARES-NOTHING")
@pytest.mark.requires("scheduler")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_store_beside_another_sees_none_of_its_schedules(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, writer: str
) -> None:
    with _side_by_side(engine, engine_spec, store, writer) as (writes, reads):
        writes.schedule(SIDE, "@every 1h", SIDE, {"fired": "by the writer"})
        assert reads.get_schedule(SIDE) is None
        assert reads.schedules() == []
        assert reads.unschedule(SIDE) is False
        assert reads.tick_schedules("reader").fired == 0
        assert writes.get_schedule(SIDE) is not None, "the reader unscheduled the writer's"


@pytest.mark.property("STORE-BESIDE-SHARES-NOTHING")
@pytest.mark.requires("streams")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_store_beside_another_sees_none_of_its_stream_events(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, writer: str
) -> None:
    with _side_by_side(engine, engine_spec, store, writer) as (writes, reads):
        stream = writes.stream(SIDE)
        offsets = [stream.append({"n": n}) for n in range(3)]
        stream.commit("consumer", offsets[-1])
        seen = reads.stream(SIDE)
        assert seen.read() == []
        assert seen.offset("consumer") == 0
        assert seen.wait(0, timeout=SHORT_S) is False
        assert seen.trim_to(offsets[-1] + 1) == 0
        assert seen.append({"own": True}) == 1, "the reader's offsets follow the writer's"
        assert [event.offset for event in stream.read()] == offsets
        assert stream.offset("consumer") == offsets[-1]


@pytest.mark.property("STORE-BESIDE-SHARES-NOTHING")
@pytest.mark.requires("pubsub")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_store_beside_another_receives_none_of_its_messages(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, writer: str
) -> None:
    small = {"size": "small"}
    big = {"size": "big", "text": "x" * BIG_MESSAGE_CHARS}
    with (
        _side_by_side(engine, engine_spec, store, writer) as (writes, reads),
        writes.subscribe(SIDE) as own,
        reads.subscribe(SIDE) as beside,
    ):
        writes.notify(SIDE, small)
        writes.notify(SIDE, big)
        # The writer's own subscription got both: anything on its way elsewhere has
        # had as long to arrive.
        assert [own.get(timeout=GENEROUS_S) for _ in range(2)] == [small, big]
        assert beside.get(timeout=SHORT_S) is None


# -- STORE-BESIDE-NO-CROSS-WAKES ---------------------------------------------------------

SETTLE_S = 0.5
"""Before the count starts: a watcher or listener that has just started may wake
its store once (a first look, LISTEN in place)."""
GRACE_S = 0.5
"""After the writer's last commit: what travels through the server has arrived."""
PACE_S = 0.01
"""Between the writer's commits: an engine that wakes another store on a commit
wakes it once per commit, not once per burst."""
TOLERATED = 1
"""A listener that reconnects wakes everyone once (its commits meanwhile were not
heard); more than that is the writer's commits reaching the reader."""


Write = Callable[[Store], object]


def _claimed(writes: Store) -> JobHandle:
    handle = writes.queue(SIDE).claim("writer")
    assert handle is not None
    return handle


def _redrive_one(writes: Store) -> None:
    assert _claimed(writes).fail("dead") is True
    assert len(writes.queue(SIDE).redrive()) == 1


def _in_a_transaction(capabilities: Capabilities) -> Write:
    def write(writes: Store) -> None:
        with writes.transaction() as tx:
            tx.enqueue(SIDE, {"in": "a transaction"})
            if capabilities.streams:
                tx.stream_append(SIDE, {"in": "a transaction"})
            if capabilities.pubsub:
                tx.notify(SIDE, {"in": "a transaction"})

    return write


def _every_kind_of_write(capabilities: Capabilities) -> list[Write]:
    """One commit of each kind the engine has, under ``SIDE``, in an order that works."""
    writes: list[Write] = [
        lambda w: w.queue(SIDE).enqueue({"n": 1}),
        lambda w: w.queue(SIDE).enqueue_many([{"n": 2}, {"n": 3}]),
        lambda w: w.queue(SIDE).enqueue({"later": True}, EnqueueOpts(delay=3600)),
        lambda w: _claimed(w).release(),
        lambda w: _claimed(w).retry("again", delay=0),
        lambda w: w.outbox(SIDE).enqueue({"outbox": True}),
    ]
    if capabilities.snooze:
        writes.append(lambda w: _claimed(w).snooze(0))
    if capabilities.ops:
        writes.append(_redrive_one)
        writes.append(lambda w: w.queue(SIDE).pause())
        writes.append(lambda w: w.queue(SIDE).resume())
    if capabilities.transactions:
        writes.append(_in_a_transaction(capabilities))
    if capabilities.streams:
        writes.append(lambda w: w.stream(SIDE).append({"n": 1}))
        writes.append(lambda w: w.stream(SIDE).commit("consumer", 1))
    if capabilities.pubsub:
        writes.append(lambda w: w.notify(SIDE, {"size": "small"}))
        writes.append(lambda w: w.notify(SIDE, {"size": "big", "text": "x" * BIG_MESSAGE_CHARS}))
    if capabilities.locks:
        writes.append(lambda w: w.lock(SIDE).acquire("writer", 60))
        writes.append(lambda w: w.lock(SIDE).release("writer"))
    if capabilities.scheduler:
        writes.append(lambda w: w.schedule(SIDE, "@every 1h", SIDE, {"fired": True}))
        writes.append(lambda w: w.unschedule(SIDE))
    return writes


@pytest.mark.property("STORE-BESIDE-NO-CROSS-WAKES")
@pytest.mark.parametrize("writer", WRITERS)
def test_no_wake_or_message_reaches_a_store_beside_the_one_written(
    engine: EngineProvider, engine_spec: EngineSpec, writer: str
) -> None:
    if not has_driver_wrapper(engine):
        pytest.skip(
            f"not_applicable: engine provides no {DRIVER_WRAPPER_HOOK} hook, so the kit "
            "cannot count the wakes it reports to a store"
        )
    capabilities = engine.capabilities
    counter = WakeCounter()
    stop = StopToken()
    with provision_beside(engine, engine_spec) as beside_spec:
        writer_spec, reader_spec = (
            (engine_spec, beside_spec) if writer == "provisioned" else (beside_spec, engine_spec)
        )
        with (
            engine.open(writer_spec.url, **writer_spec.opts) as writes,
            open_with_driver_wrapper(engine, reader_spec, counter.wrap) as reads,
            reads.subscribe(SIDE) if capabilities.pubsub else nullcontext() as beside,
        ):
            # Waiters of every kind, so that an engine that watches only while someone
            # waits is watching; stopped once the count is taken.
            claiming = in_thread(
                functools.partial(reads.queue(SIDE).claim_wait, "reader", stop=stop)
            )
            streaming = in_thread(
                functools.partial(reads.stream(SIDE).wait, 0, stop=stop)
                if capabilities.streams
                else lambda: False
            )
            time.sleep(SETTLE_S)
            before = counter.count
            for write in _every_kind_of_write(capabilities):
                assert write(writes) is not False
                time.sleep(PACE_S)  # one commit at a time, however a watcher polls
            time.sleep(GRACE_S)
            crossed = counter.count - before
            stop.stop()
            # Nothing was there to find: each waiter returns empty-handed once stopped.
            assert claiming.join(GENEROUS_S) is None
            assert streaming.join(GENEROUS_S) is False
            leaked = None if beside is None else beside.get(timeout=0)
    assert crossed <= TOLERATED, (
        f"{crossed} wakes or messages reached a store from the commits to the one beside it"
    )
    assert leaked is None, f"a message crossed to the store beside: {leaked!r}"
