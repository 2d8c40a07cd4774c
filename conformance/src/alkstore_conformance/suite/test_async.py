"""§13: the async surface (``alkstore.aio``) on the engine under test.

Every other property can also be run through ``alkstore.aio`` (``--via aio``);
these are the ones only the async surface has: what a cancelled task leaves
behind, a loop that is never blocked, a transaction that ``async with`` commits
or rolls back whole (a cancellation included), and a prompt wake for an
awaiting ``claim_wait``. Each test opens its own ``AsyncStore`` from the
engine's provider, on the loop ``asyncio.run`` gives it, as an app would.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from random import Random
from typing import Any

import pytest

from alkstore import DEFAULT_QUEUE_OPTS, EngineProvider, EngineSpec, JobState, Store
from alkstore.aio import AsyncJobHandle, AsyncQueue, AsyncStore
from alkstore.core.wake import WakeHub
from alkstore_conformance.helpers.common import Rollback, native_sql, quoted_table, unique_name
from alkstore_conformance.helpers.profile_processes import writer_on_signals
from alkstore_conformance.helpers.profiles import Children
from alkstore_conformance.helpers.trials import Trial
from alkstore_conformance.helpers.via_aio import open_async

GENEROUS_S = 30.0
SETTLE_S = 0.3
"""How long a leftover waiter would have to take a job (sequencing only)."""


def run_with_store(
    engine: EngineProvider, spec: EngineSpec, body: Callable[[AsyncStore], Awaitable[None]]
) -> None:
    """``body(store)`` on a fresh event loop, ``store`` an ``AsyncStore`` on the test's
    spec opened on that loop, closed before the loop ends."""

    async def main() -> None:
        store = await open_async(engine, spec.url, **spec.opts)
        try:
            await asyncio.wait_for(body(store), GENEROUS_S * 4)
        finally:
            await store.close()

    asyncio.run(main())


# -- ASYNC-CANCEL-LEAVES-NOTHING --------------------------------------------------------

ROUNDS = 40
JOBS_PER_ROUND = 3
CANCEL_WITHIN_S = 0.02
"""Tasks are cancelled at a random moment within this of their start: sometimes
before their call runs, mostly while it waits, sometimes just after it claimed."""


def visible_waiters(store: Store) -> bool | None:
    """Whether ``store`` has a waiter registered, where its wake hub is visible (a
    store of the shared core); ``None`` elsewhere. The suite otherwise never looks
    inside a store: this only adds a direct check to the behavioural one (a
    leftover waiter would take the next job enqueued)."""
    hub = getattr(getattr(store, "_context", None), "hub", None)
    return hub.has_waiters() if isinstance(hub, WakeHub) else None


def enqueue_meanwhile(
    queues: list[AsyncQueue], store: Store, rng: Random, into: list[int]
) -> threading.Thread:
    """Another thread enqueueing ``JOBS_PER_ROUND`` jobs at random moments, through
    a store of its own, while the round's tasks are started and cancelled."""
    delays = [rng.uniform(0, CANCEL_WITHIN_S) for _ in range(JOBS_PER_ROUND)]
    names = [rng.choice(queues).name for _ in range(JOBS_PER_ROUND)]

    def enqueue() -> None:
        for delay, name in zip(delays, names, strict=True):
            time.sleep(delay)
            into.append(store.queue(name).enqueue({"n": len(into)}))

    thread = threading.Thread(target=enqueue, name="kit-enqueuer", daemon=True)
    thread.start()
    return thread


async def cancel_round(
    store: AsyncStore, queues: list[AsyncQueue], rng: Random
) -> list[AsyncJobHandle]:
    """Start claims of every kind, cancel each at a random moment; the handles of
    those that returned before their cancellation (``ack_and_claim``: below)."""
    first, second = queues
    claims: list[Coroutine[Any, Any, Any]] = [
        first.claim_wait("waiter", timeout=GENEROUS_S),
        store.claim_wait_any(queues, "any-waiter", timeout=GENEROUS_S),
        second.claim_wait("waiter", timeout=GENEROUS_S),
        second.claim_batch("batcher", 2),
        first.claim_batch("batcher", 2),
    ]
    tasks = [asyncio.create_task(claim) for claim in claims]
    for task in tasks:
        await asyncio.sleep(rng.uniform(0, CANCEL_WITHIN_S / len(tasks)))
        task.cancel()
    returned: list[AsyncJobHandle] = []
    for outcome in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(outcome, asyncio.CancelledError):
            continue
        if isinstance(outcome, BaseException):
            raise outcome
        if isinstance(outcome, list):
            returned.extend(outcome)
        elif outcome is not None:
            returned.append(outcome)
    return returned


@pytest.mark.property("ASYNC-CANCEL-LEAVES-NOTHING")
def test_cancelled_claims_leave_no_claim_no_spent_attempt_and_no_waiter(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rng = trial.random()
    names = [unique_name("cancelled"), unique_name("cancelled")]
    enqueued: list[int] = []
    acked: set[int] = set()
    leftover: list[bool | None] = []

    async def body(aio: AsyncStore) -> None:
        queues = [aio.queue(name) for name in names]
        for _ in range(ROUNDS):
            enqueuer = enqueue_meanwhile(queues, store, rng, enqueued)
            for handle in await cancel_round(aio, queues, rng):
                # A call that returned before its cancellation keeps its claim: live.
                assert await handle.ack() is True
                acked.add(handle.id)
            await asyncio.to_thread(enqueuer.join, GENEROUS_S)
            assert not enqueuer.is_alive()
        leftover.append(visible_waiters(aio.sync))
        # A waiter left behind by a cancelled task would take these.
        sentinels = [await queue.enqueue({"sentinel": True}) for queue in queues]
        await asyncio.sleep(SETTLE_S)
        for queue, job_id in zip(queues, sentinels, strict=True):
            job = await queue.get_job(job_id)
            assert job is not None
            assert (job.state, job.attempts) == (JobState.PENDING, 0)
        enqueued.extend(sentinels)

    run_with_store(engine, engine_spec, body)
    assert leftover != [True], "a cancelled task left a waiter registered"
    assert len(enqueued) == ROUNDS * JOBS_PER_ROUND + len(names)
    unacked = set(enqueued) - acked
    budget = DEFAULT_QUEUE_OPTS.max_attempts
    for job_id in unacked:
        job = store.queue(names[0]).get_job(job_id)
        assert job is not None
        assert (job.state, job.worker_id) == (JobState.PENDING, None)
        # A claim given back costs no attempt of the budget (release refunds it).
        assert job.max_attempts - job.attempts == budget
    claimed = [h for name in names for h in store.queue(name).claim_batch("checker", 1000)]
    assert sorted(h.id for h in claimed) == sorted(unacked)
    assert {h.job.max_attempts - h.attempts for h in claimed} == {budget - 1}


CHAINED_TRIES = 30
CHAINED_MOST_TRIES = 400
"""Tries go on past ``CHAINED_TRIES`` until a cancellation has landed mid-call."""
CHAINED_MOST_TURNS = 60
"""A try cancels after a random number (below this) of event-loop turns: a timer's
resolution (about a millisecond) is longer than the whole call on a fast engine."""


@pytest.mark.property("ASYNC-CANCEL-LEAVES-NOTHING")
def test_a_cancelled_ack_and_claim_keeps_its_ack_and_gives_back_its_claim(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rng = trial.random()
    budget = DEFAULT_QUEUE_OPTS.max_attempts
    mid_call = 0  # cancellations that landed while the call ran

    async def one_try(aio: AsyncStore, once_acked: bool) -> None:
        nonlocal mid_call
        queue = store.queue(unique_name("chained"))
        first, second = queue.enqueue_many([{"n": 1}, {"n": 2}])
        held = await aio.queue(queue.name).claim("w")
        assert held is not None
        assert held.id == first
        task = asyncio.create_task(held.ack_and_claim("w"))
        if once_acked:
            # Where random turns never land mid-call (a loaded machine runs the loop's
            # turns before the call's thread gets the interpreter): cancel once the
            # call's write is seen, before its result reaches the task.
            while not task.done() and queue.get_job(first) is not None:
                await asyncio.sleep(0)
        else:
            for _ in range(rng.randrange(CHAINED_MOST_TURNS)):
                await asyncio.sleep(0)
        task.cancel()
        try:
            done = await task
        except asyncio.CancelledError:
            pass
        else:  # it finished first: the claim is the caller's
            assert done.acked is True
            assert [h.id for h in done.claimed] == [second]
            return
        after = queue.get_job(first)
        if after is None:
            mid_call += 1  # the ack ran: it stands, and the claim it made was given back
        else:  # cancelled before the call began: nothing happened
            assert (after.state, after.worker_id) == (JobState.PROCESSING, "w")
        job = queue.get_job(second)
        assert job is not None
        assert (job.state, job.worker_id) == (JobState.PENDING, None)
        assert job.max_attempts - job.attempts == budget

    async def body(aio: AsyncStore) -> None:
        for tries in range(1, CHAINED_MOST_TRIES + 1):
            await one_try(aio, once_acked=tries > CHAINED_TRIES and not mid_call)
            if tries >= CHAINED_TRIES and mid_call:
                return

    run_with_store(engine, engine_spec, body)
    assert mid_call, f"no cancellation landed while the call ran in {CHAINED_MOST_TRIES} tries"


# -- ASYNC-LOOP-NEVER-BLOCKED -----------------------------------------------------------
# A mechanism check: a call run on the loop's thread stops the ticker for its whole
# length (a waiting claim_wait for all of its timeout), while calls run off the loop
# leave it ticking every few milliseconds even on a busy machine. The bounds are
# an order of magnitude above a free loop's gaps and far below a blocked one's.
# A loaded machine can also stop the whole process for a while (its scheduler runs
# something else): a ticker on a thread of its own, off the loop, sees those stalls
# too, and the time of a loop's gap that the other ticker was stalled as well is not
# the loop's. A call blocking the loop leaves the other ticker running (a blocking
# wait releases the interpreter lock, Python code hands it over every few ms).

TICK_S = 0.001
MEDIAN_GAP_S = 0.020
WORST_GAP_S = 0.250
STALL_S = 0.020
"""A gap this long of the ticker off the loop: the whole process was stalled."""
OPERATIONS = 200
WAIT_S = 0.5


def _stalls(ticks: list[float]) -> list[tuple[float, float]]:
    return [(a, b) for a, b in itertools.pairwise(ticks) if b - a >= STALL_S]


def _less_stalls(start: float, end: float, stalls: list[tuple[float, float]]) -> float:
    """The length of ``(start, end)`` outside every stall."""
    stalled = sum(max(0.0, min(end, b) - max(start, a)) for a, b in stalls)
    return (end - start) - stalled


async def tick_gaps(work: Awaitable[Any]) -> list[float]:
    """The gaps between ticks of a ``TICK_S`` ticker on this loop while ``work`` runs,
    each less the time the whole process was stalled in it."""
    gaps: list[tuple[float, float]] = []
    off_loop: list[float] = []
    done = asyncio.Event()
    stop = threading.Event()

    def tick_off_loop() -> None:
        while not stop.is_set():
            off_loop.append(time.monotonic())
            time.sleep(TICK_S)
        off_loop.append(time.monotonic())

    async def tick() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            gaps.append((last, now))
            last = now

    control = threading.Thread(target=tick_off_loop, daemon=True)
    control.start()
    ticker = asyncio.create_task(tick())
    try:
        await work
    finally:
        done.set()
        await ticker
        stop.set()
        control.join()
    stalls = _stalls(off_loop)
    return [_less_stalls(start, end, stalls) for start, end in gaps]


def gaps_text(gaps: list[float]) -> str:
    if not gaps:
        return "no ticks at all"
    return (
        f"{len(gaps)} ticks: median {statistics.median(gaps) * 1000:.1f} ms, "
        f"worst {max(gaps) * 1000:.1f} ms"
    )


@pytest.mark.property("ASYNC-LOOP-NEVER-BLOCKED")
def test_the_loop_keeps_ticking_while_enqueues_claims_and_acks_run(
    engine: EngineProvider, engine_spec: EngineSpec
) -> None:
    gaps: list[float] = []
    acked: list[bool] = []

    async def work(queue: AsyncQueue) -> None:
        for n in range(OPERATIONS):
            await queue.enqueue({"n": n})
        for _ in range(OPERATIONS):
            handle = await queue.claim("worker")
            assert handle is not None
            acked.append(await handle.ack())

    async def body(aio: AsyncStore) -> None:
        gaps.extend(await tick_gaps(work(aio.queue(unique_name("ticking")))))

    run_with_store(engine, engine_spec, body)
    assert acked == [True] * OPERATIONS
    assert gaps, "the ticker never ran"
    assert statistics.median(gaps) < MEDIAN_GAP_S, gaps_text(gaps)
    assert max(gaps) < WORST_GAP_S, gaps_text(gaps)


@pytest.mark.property("ASYNC-LOOP-NEVER-BLOCKED")
def test_the_loop_keeps_ticking_while_a_claim_wait_waits(
    engine: EngineProvider, engine_spec: EngineSpec
) -> None:
    gaps: list[float] = []
    got: list[AsyncJobHandle | None] = []

    async def wait(queue: AsyncQueue) -> None:
        got.append(await queue.claim_wait("waiter", timeout=WAIT_S))

    async def body(aio: AsyncStore) -> None:
        gaps.extend(await tick_gaps(wait(aio.queue(unique_name("empty")))))

    run_with_store(engine, engine_spec, body)
    assert got == [None]
    # A blocked loop would show one gap of the whole wait, not many short ones.
    assert len(gaps) > 10, gaps_text(gaps)
    assert statistics.median(gaps) < MEDIAN_GAP_S, gaps_text(gaps)
    assert max(gaps) < WORST_GAP_S, gaps_text(gaps)


# -- ASYNC-TX-ATOMIC --------------------------------------------------------------------


async def create_table(store: AsyncStore) -> str:
    table = quoted_table(f"kit_orders_{uuid.uuid4().hex[:12]}")
    async with store.transaction() as tx:
        await tx.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY)")
    return table


async def table_ids(store: AsyncStore, table: str) -> list[int]:
    async with store.transaction() as tx:
        rows = await tx.execute(f"SELECT id FROM {table} ORDER BY id")
    return [int(row[0]) for row in rows]


async def drop_table(store: AsyncStore, table: str) -> None:
    async with store.transaction() as tx:
        await tx.execute(f"DROP TABLE {table}")


def with_business_table(
    engine: EngineProvider,
    spec: EngineSpec,
    body: Callable[[AsyncStore, str], Awaitable[None]],
) -> None:
    """``body(store, table)`` with a throwaway business table ``(id INTEGER PRIMARY KEY)``."""

    async def around(store: AsyncStore) -> None:
        table = await create_table(store)
        try:
            await body(store, table)
        finally:
            await drop_table(store, table)

    run_with_store(engine, spec, around)


@pytest.mark.property("ASYNC-TX-ATOMIC")
@pytest.mark.requires("transactions")
def test_enqueues_of_a_block_commit_together_at_its_end(
    engine: EngineProvider, engine_spec: EngineSpec
) -> None:
    async def body(store: AsyncStore) -> None:
        queue = store.queue(unique_name("orders"))
        async with store.transaction() as tx:
            first = await tx.enqueue(queue, {"order": 7})
            second = await tx.enqueue(queue, {"order": 8})
        claimed = await queue.claim_batch("worker", 10)
        assert sorted(handle.id for handle in claimed) == sorted([first, second])

    run_with_store(engine, engine_spec, body)


@pytest.mark.property("ASYNC-TX-ATOMIC")
@pytest.mark.requires("transactions")
def test_cancelling_the_task_inside_the_block_rolls_its_enqueues_back(
    engine: EngineProvider, engine_spec: EngineSpec
) -> None:
    async def body(store: AsyncStore) -> None:
        queue = store.queue(unique_name("orders"))
        job_ids: list[int] = []
        written = asyncio.Event()

        async def enqueue_then_hang() -> None:
            async with store.transaction() as tx:
                job_ids.append(await tx.enqueue(queue, {"order": 7}))
                job_ids.append(await tx.enqueue(queue, {"order": 8}))
                written.set()
                await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(enqueue_then_hang())
        await asyncio.wait_for(written.wait(), GENEROUS_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [await queue.get_job(job_id) for job_id in job_ids] == [None, None]
        assert await queue.claim("worker") is None

    run_with_store(engine, engine_spec, body)


@pytest.mark.property("ASYNC-TX-ATOMIC")
@pytest.mark.requires("transactions", "sql")
def test_business_write_and_enqueue_commit_together(
    engine: EngineProvider, engine_spec: EngineSpec
) -> None:
    async def body(store: AsyncStore, table: str) -> None:
        queue = store.queue(unique_name("orders"))
        async with store.transaction() as tx:
            await tx.execute(
                native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)"), (7,)
            )
            job_id = await tx.enqueue(queue, {"order": 7})
        assert await table_ids(store, table) == [7]
        job = await queue.get_job(job_id)
        assert job is not None
        assert job.state is JobState.PENDING

    with_business_table(engine, engine_spec, body)


@pytest.mark.property("ASYNC-TX-ATOMIC")
@pytest.mark.requires("transactions", "sql")
def test_an_exception_in_the_block_rolls_back_both(
    engine: EngineProvider, engine_spec: EngineSpec
) -> None:
    async def body(store: AsyncStore, table: str) -> None:
        queue = store.queue(unique_name("orders"))
        job_ids: list[int] = []

        async def write_then_raise() -> None:
            async with store.transaction() as tx:
                sql = native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)")
                await tx.execute(sql, (7,))
                job_ids.append(await tx.enqueue(queue, {"order": 7}))
                raise Rollback

        with pytest.raises(Rollback):
            await write_then_raise()
        assert await table_ids(store, table) == []
        assert [await queue.get_job(job_id) for job_id in job_ids] == [None]
        assert await queue.claim("worker") is None

    with_business_table(engine, engine_spec, body)


@pytest.mark.property("ASYNC-TX-ATOMIC")
@pytest.mark.requires("transactions", "sql")
def test_cancelling_the_task_inside_the_block_rolls_back_both(
    engine: EngineProvider, engine_spec: EngineSpec
) -> None:
    async def body(store: AsyncStore, table: str) -> None:
        queue = store.queue(unique_name("orders"))
        job_ids: list[int] = []
        written = asyncio.Event()

        async def write_then_hang() -> None:
            async with store.transaction() as tx:
                sql = native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)")
                await tx.execute(sql, (7,))
                job_ids.append(await tx.enqueue(queue, {"order": 7}))
                written.set()
                await asyncio.Event().wait()  # until cancelled

        task = asyncio.create_task(write_then_hang())
        await asyncio.wait_for(written.wait(), GENEROUS_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await table_ids(store, table) == []
        assert [await queue.get_job(job_id) for job_id in job_ids] == [None]
        assert await queue.claim("worker") is None

    with_business_table(engine, engine_spec, body)


# -- ASYNC-WAKE-PROMPT ------------------------------------------------------------------
# As WAKE-CROSS-PROCESS-PROMPT (test_wake_latency.py), awaited: a mechanism check on
# a noisy machine, so the median of a few samples is bounded, far below the 1 s a
# re-poll-only wait needs.

SAMPLES = 3
PROMPT_S = 0.25
WAIT_PHASE_S = (0.3, 0.7)


def lateness_text(lateness: list[float]) -> str:
    return (
        f"median {statistics.median(lateness) * 1000:.0f} ms of {[round(x, 3) for x in lateness]}"
    )


@pytest.mark.property("ASYNC-WAKE-PROMPT")
def test_an_awaited_claim_wait_returns_a_job_another_store_enqueued_promptly(
    engine: EngineProvider, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rng = trial.random()
    name = unique_name("awaited")
    lateness: list[float] = []

    async def body(aio: AsyncStore) -> None:
        queue = aio.queue(name)
        for _ in range(SAMPLES):
            waiting = asyncio.create_task(queue.claim_wait("waiter", timeout=GENEROUS_S))
            await asyncio.sleep(rng.uniform(*WAIT_PHASE_S))
            # Another store of the same spec, from a thread: not this AsyncStore's own write.
            job_id = await asyncio.to_thread(store.queue(name).enqueue, {"n": 1})
            committed_at = time.time()
            handle = await asyncio.wait_for(waiting, GENEROUS_S)
            returned = time.time()
            assert handle is not None
            assert handle.id == job_id
            lateness.append(returned - committed_at)
            assert await handle.ack() is True

    run_with_store(engine, engine_spec, body)
    assert statistics.median(lateness) < PROMPT_S, lateness_text(lateness)


@pytest.mark.property("ASYNC-WAKE-PROMPT")
@pytest.mark.requires("multi_process")
def test_an_awaited_claim_wait_returns_a_job_another_process_enqueued_promptly(
    engine: EngineProvider,
    engine_name: str,
    engine_group: str,
    engine_spec: EngineSpec,
    trial: Trial,
) -> None:
    rng = trial.random()
    name = unique_name("awaited")
    lateness: list[float] = []
    with Children(GENEROUS_S) as children:
        commands = children.context.Queue()
        children.start(
            writer_on_signals,
            engine_name,
            engine_group,
            engine_spec,
            "queue",
            name,
            commands,
            children.results,
            GENEROUS_S,
        )
        children.expect("ready")

        async def body(store: AsyncStore) -> None:
            queue = store.queue(name)
            for _ in range(SAMPLES):
                waiting = asyncio.create_task(queue.claim_wait("waiter", timeout=GENEROUS_S))
                await asyncio.sleep(rng.uniform(*WAIT_PHASE_S))
                commands.put("write")
                job_id, committed_at = await asyncio.to_thread(children.expect, "wrote")
                handle = await asyncio.wait_for(waiting, GENEROUS_S)
                returned = time.time()
                assert handle is not None
                assert handle.id == job_id
                lateness.append(returned - committed_at)
                assert await handle.ack() is True

        run_with_store(engine, engine_spec, body)
        commands.put(None)
        children.expect("done")
    assert statistics.median(lateness) < PROMPT_S, lateness_text(lateness)
