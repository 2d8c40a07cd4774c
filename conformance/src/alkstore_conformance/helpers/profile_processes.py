"""Child processes of the scheduler, streams, pub/sub, lock, race, crash and unique
properties.

Each has the kit's one child-process shape (``processes.child_process``): it runs
in a spawned process, reopens the test's store with ``open_in_child``, may say
``("ready", None)`` on its ``results`` queue and returns its final ``(kind,
value)`` report; a failure is reported as ``("error", "Type: message")`` rather
than lost. A child on a fake clock gets its own ``FakeClock``; every wait is
bounded by ``time_limit_s``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from alkstore import EngineSpec, EnqueueOpts, Store, load_engine
from alkstore.constants import MAX_BATCH
from alkstore.testing import FakeClock

from ..hooks import open_with_driver_wrapper
from .faults import CrashPoint, StatementCounter
from .processes import Report, child_process, open_in_child


def tick_at_instants(
    store: Store,
    clock: FakeClock,
    worker_id: str,
    instants: list[int],
    barrier: Any,
    time_limit_s: float,
) -> list[tuple[int, int]]:
    """Tick once at each instant, meeting the other tickers at the barrier first so
    the ticks of one instant collide. Returns ``[(fired, skipped), ...]``."""
    ticks: list[tuple[int, int]] = []
    for instant in instants:
        clock.set(instant)
        barrier.wait(timeout=time_limit_s)
        result = store.tick_schedules(worker_id)
        ticks.append((result.fired, result.skipped))
    return ticks


@child_process
def ticker_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    worker_id: str,
    instants: list[int],
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """``tick_at_instants`` in a child process on its own ``FakeClock``; reports
    ``("ticks", [(fired, skipped), ...])``."""
    clock = FakeClock(instants[0])
    with open_in_child(engine_name, engine_group, spec, clock) as store:
        ticks = tick_at_instants(store, clock, worker_id, instants, barrier, time_limit_s)
    return ("ticks", ticks)


@child_process
def doomed_ticker_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    worker_id: str,
    instant: int,
    go: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Open the store at ``instant``, say ``ready``, tick once when told to: the
    parent kills this process (SIGKILL) while the tick fires."""
    with open_in_child(engine_name, engine_group, spec, FakeClock(instant)) as store:
        results.put(("ready", None))
        if not go.wait(timeout=time_limit_s):
            raise TimeoutError("never told to tick")
        result = store.tick_schedules(worker_id)
    return ("ticked", (result.fired, result.skipped))


def append_events(
    store: Store,
    stream: str,
    writer: str,
    count: int,
    in_transaction: bool,
    barrier: Any,
    finished: Any,
    time_limit_s: float,
) -> list[int]:
    """Append ``count`` events ``{"writer", "seq"}`` (each in its own transaction when
    ``in_transaction``), starting together with the others; count itself in the shared
    ``finished`` value once all are committed. Returns the offsets."""
    handle = store.stream(stream)
    barrier.wait(timeout=time_limit_s)
    offsets: list[int] = []
    for seq in range(count):
        payload = {"writer": writer, "seq": seq}
        if in_transaction:
            with store.transaction() as tx:
                offsets.append(tx.stream_append(stream, payload))
        else:
            offsets.append(handle.append(payload))
    with finished.get_lock():
        finished.value += 1
    return offsets


@child_process
def stream_appender_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    stream: str,
    writer: str,
    count: int,
    in_transaction: bool,
    barrier: Any,
    finished: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """``append_events`` in a child process; reports ``("offsets", (writer, offsets))``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        offsets = append_events(
            store, stream, writer, count, in_transaction, barrier, finished, time_limit_s
        )
    return ("offsets", (writer, offsets))


@child_process
def stream_appender_on_signal(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    stream: str,
    go: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Say ``ready``; once told to, append one event and report its offset."""
    with open_in_child(engine_name, engine_group, spec) as store:
        handle = store.stream(stream)
        results.put(("ready", None))
        if not go.wait(timeout=time_limit_s):
            raise TimeoutError("never told to append")
        return ("appended", handle.append({"from": "another process"}))


@child_process
def subscriber_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    channel: str,
    expected: int,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Subscribe, say ``subscribed``, then report the first ``expected`` messages
    (fewer if ``time_limit_s`` passes first)."""
    with (
        open_in_child(engine_name, engine_group, spec) as store,
        store.subscribe(channel) as subscription,
    ):
        results.put(("subscribed", None))
        received: list[Any] = []
        for _ in range(expected):
            message = subscription.get(timeout=time_limit_s)
            if message is None:
                break
            received.append(message)
    return ("received", received)


@child_process
def notifier_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    channel: str,
    payload: Any,
    go: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Say ``ready``; once told to, notify ``payload`` on ``channel``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        results.put(("ready", None))
        if not go.wait(timeout=time_limit_s):
            raise TimeoutError("never told to notify")
        store.notify(channel, payload)
    return ("notified", None)


# -- crash points (alkstore_conformance.helpers.faults) ----------------------------------


@child_process
def crashing_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    operation: Callable[[Store, Callable[[], None], Any], None],
    argument: Any,
    clock_at: int | None,
    crash: CrashPoint | None,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Open the store over the kit's counting driver (the engine's
    ``open_with_driver_wrapper`` hook) and run ``operation(store, arm, argument)``.
    With ``crash`` the process SIGKILLs itself at that statement and reports nothing;
    without, it reports ``("statements", [names of the armed statements])``."""
    provider = load_engine(engine_name, engine_group)
    counter = StatementCounter(crash)
    clock = None if clock_at is None else FakeClock(clock_at)
    with open_with_driver_wrapper(provider, spec, counter.wrap, clock) as store:
        operation(store, counter.arm, argument)
    return ("statements", counter.calls)


# -- prompt wakes -------------------------------------------------------------------------


@child_process
def writer_on_signals(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    kind: str,
    name: str,
    commands: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Say ``ready``; on every command enqueue a job (``kind`` "queue") or append an
    event ("stream") to ``name`` and report ``("wrote", (id or offset, time.time()))``
    right after it committed; a ``None`` command ends the loop."""
    with open_in_child(engine_name, engine_group, spec) as store:
        results.put(("ready", None))
        while commands.get(timeout=time_limit_s) is not None:
            written: int
            if kind == "queue":
                written = store.queue(name).enqueue({"from": "another process"})
            else:
                written = store.stream(name).append({"from": "another process"})
            results.put(("wrote", (written, time.time())))
    return ("done", None)


@child_process
def claim_waiter_on_commands(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    commands: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Say ``ready``; on every command ``claim_wait`` on ``queue_name`` and report
    ``("claimed", (the job's id or None, time.time()))`` the moment it returned, then
    ack the job (so a claim that lapses cannot come back); ``None`` ends the loop."""
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        results.put(("ready", None))
        while commands.get(timeout=time_limit_s) is not None:
            handle = queue.claim_wait("waiter", timeout=time_limit_s)
            returned = time.time()
            results.put(("claimed", (None if handle is None else handle.id, returned)))
            if handle is not None:
                handle.ack()
    return ("done", None)


# -- races ----------------------------------------------------------------------------------


@child_process
def batch_reader_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    total: int,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Say ``ready``, then claim everything of ``queue_name`` as it becomes visible,
    until ``total`` jobs were claimed; report ``("claims", [{batch: jobs, ...}, ...])``,
    one entry per non-empty claim, counting each claim's jobs by ``payload["batch"]``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        results.put(("ready", None))
        claims: list[dict[int, int]] = []
        claimed = 0
        give_up_at = time.monotonic() + time_limit_s
        while claimed < total and time.monotonic() < give_up_at:
            handles = queue.claim_batch("batch-reader", MAX_BATCH)
            if handles:
                seen = Counter(int(handle.payload["batch"]) for handle in handles)
                claims.append(dict(seen))
                claimed += len(handles)
    return ("claims", claims)


LockAction = tuple[str, str, str]
"""``(lock name, "acquire" | "renew" | "release", owner)``."""


@child_process
def lock_racer_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    actions: list[LockAction],
    ttl_s: int,
    clock_at: int | None,
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Run each lock action after meeting the other racers at the barrier, so the
    actions of one round collide; report ``("locked", (actions, [True/False, ...]))``."""
    clock = None if clock_at is None else FakeClock(clock_at)
    with open_in_child(engine_name, engine_group, spec, clock) as store:
        outcomes = race_lock_actions(store, actions, ttl_s, barrier, time_limit_s)
    return ("locked", (actions, outcomes))


def race_lock_actions(
    store: Store, actions: list[LockAction], ttl_s: int, barrier: Any, time_limit_s: float
) -> list[bool]:
    outcomes: list[bool] = []
    for name, action, owner in actions:
        lock = store.lock(name)
        barrier.wait(timeout=time_limit_s)
        if action == "acquire":
            outcomes.append(lock.acquire(owner, ttl_s))
        elif action == "renew":
            outcomes.append(lock.renew(owner, ttl_s))
        else:
            outcomes.append(lock.release(owner))
    return outcomes


@child_process
def offset_committer_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    stream: str,
    commits: list[tuple[str, int]],
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Commit each ``(consumer, offset)`` after meeting the other committers at the
    barrier; report ``("committed", None)``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        race_offset_commits(store, stream, commits, barrier, time_limit_s)
    return ("committed", None)


def race_offset_commits(
    store: Store, stream: str, commits: list[tuple[str, int]], barrier: Any, time_limit_s: float
) -> None:
    handle = store.stream(stream)
    for consumer, offset in commits:
        barrier.wait(timeout=time_limit_s)
        handle.commit(consumer, offset)


# -- operations (contract §11) ----------------------------------------------------------------


@child_process
def redriver_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    rounds: list[tuple[str, list[int] | None]],
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """For each round ``(queue name, ids)``, redrive ``ids`` (all dead jobs when
    ``None``) of that queue right after meeting the other operators at the barrier;
    report ``("redriven", the new ids of each round)``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        made: list[list[int]] = []
        for queue_name, ids in rounds:
            barrier.wait(timeout=time_limit_s)
            made.append(store.queue(queue_name).redrive(ids))
        return ("redriven", made)


@child_process
def pause_prober_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Report what this process sees of ``queue_name``: ``("seen", (paused(), the id a
    claim got or None))``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        paused = queue.paused()
        handle = queue.claim("prober")
        return ("seen", (paused, None if handle is None else handle.id))


@child_process
def claim_waiter_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Say ``ready`` once the store is open, then ``claim_wait`` on ``queue_name``;
    report ``("claimed", the job's id or None)``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        results.put(("ready", None))
        handle = queue.claim_wait("waiter", timeout=time_limit_s)
        return ("claimed", None if handle is None else handle.id)


# -- unique jobs (contract §15) ------------------------------------------------------------


@child_process
def unique_enqueuer_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    name: str,
    keys: list[str],
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """For each of ``keys`` in turn: meet the other enqueuers at the barrier, then
    enqueue a job holding that key at once; report ``("enqueued", [(key, id,
    duplicate), ...])``."""
    outcomes: list[tuple[str, int, bool]] = []
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        for key in keys:
            barrier.wait(timeout=time_limit_s)
            got = queue.enqueue({"by": name, "key": key}, EnqueueOpts(unique=key))
            outcomes.append((key, int(got), got.duplicate))
    return ("enqueued", outcomes)


def declare_at(
    store: Store,
    declarations: list[tuple[str, str, str, Any]],
    barrier: Any,
    time_limit_s: float,
) -> list[int]:
    """Meet the other declarers at the barrier, then declare every ``(name, spec, queue,
    payload)`` as a starting worker does (``declare_schedule``). Returns the boundary
    each declaration answered with."""
    barrier.wait(timeout=time_limit_s)
    return [
        store.declare_schedule(name, spec, queue, payload).next_fire_at
        for name, spec, queue, payload in declarations
    ]


@child_process
def declarer_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    instant: int,
    declarations: list[tuple[str, str, str, Any]],
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """``declare_at`` in a child process on its own ``FakeClock`` at ``instant``;
    reports ``("declared", [next_fire_at, ...])``."""
    with open_in_child(engine_name, engine_group, spec, FakeClock(instant)) as store:
        boundaries = declare_at(store, declarations, barrier, time_limit_s)
    return ("declared", boundaries)


# -- queue limits (contract 1.2 §16) -----------------------------------------------------


@child_process
def limited_worker_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    name: str,
    seed: int,
    hold_s: tuple[float, float],
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Meet the other workers at the barrier, then take jobs of ``queue_name`` until
    none is left, by every claim path in turn (``claim_wait``, ``claim_batch`` of 2,
    ``ack_and_claim``), holding each claim a random time within ``hold_s`` before the
    ack; report ``("intervals", [(claimed, settled, limit_key), ...])``: ``time.time()``
    right after the claim returned and right before its ack was sent, and the job's
    limit key (contract 1.2 §16.9; ``None`` without one). Each recorded
    interval lies inside the claim's true one, so overlaps of the recorded intervals
    never exceed the true ones."""
    import random

    rng = random.Random(seed)
    intervals: list[tuple[float, float, str | None]] = []
    deadline = time.monotonic() + time_limit_s
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        barrier.wait(timeout=time_limit_s)
        path = 0
        held: list[Any] = []
        while time.monotonic() < deadline:
            if not held:
                path += 1
                if path % 2:
                    handle = queue.claim_wait(name, timeout=0.5)
                    held = [] if handle is None else [handle]
                else:
                    held = queue.claim_batch(name, 2)
                claimed = time.time()
                if not held:
                    if queue.stats().ready == 0 and queue.stats().processing == 0:
                        break
                    continue
            time.sleep(rng.uniform(*hold_s))
            settled = time.time()
            intervals.extend((claimed, settled, handle.job.limit_key) for handle in held)
            last, rest = held[-1], held[:-1]
            for handle in rest:
                handle.ack()
            if path % 3 == 0:
                outcome = last.ack_and_claim(name)
                claimed = time.time()
                held = list(outcome.claimed)
            else:
                last.ack()
                held = []
    return ("intervals", intervals)


# -- job dependencies (contract 1.2 §18) ----------------------------------------------


@child_process
def dependency_acker_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_names: list[str],
    worker_id: str,
    barrier: Any,
    results: Any,
    time_limit_s: float,
    fail: bool = False,
) -> Report:
    """For each of ``queue_names`` in turn: claim one of its jobs, meet the other ackers
    at the barrier, then ack it (or, ``fail``, fail it) at once; report ``("acked",
    [job_id, ...])``."""
    acked: list[int] = []
    with open_in_child(engine_name, engine_group, spec) as store:
        for name in queue_names:
            queue = store.queue(name)
            acked.append(ack_at_the_barrier(queue, worker_id, barrier, time_limit_s, fail))
    return ("acked", acked)


def ack_at_the_barrier(
    queue: Any, worker_id: str, barrier: Any, time_limit_s: float, fail: bool = False
) -> int:
    """Claim one job of ``queue``, wait for the others at ``barrier``, ack it (or fail
    it); its id."""
    handle = queue.claim_wait(worker_id, timeout=time_limit_s)
    if handle is None:
        raise TimeoutError(f"no dependency of {queue.name} to claim within {time_limit_s} s")
    barrier.wait(timeout=time_limit_s)
    if not (handle.fail("failed at the barrier") if fail else handle.ack()):
        raise AssertionError(f"the end of dependency {handle.id}'s claim was refused")
    return int(handle.id)
