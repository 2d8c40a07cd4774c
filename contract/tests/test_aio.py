"""``alkstore.aio``: the sync core called off the loop, and what cancellation leaves.

The store is the core over the recording fake driver; every test runs its own
event loop (``asyncio.run``). Waits are safety nets; no test asserts a duration.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from fakes import FakeDriver, FakeProfilesDriver

import alkstore.aio
from alkstore.aio import AsyncStore
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions, StoreClosed
from alkstore.values import JobState

T = TypeVar("T")
SAFETY_NET_S = 10.0


@pytest.fixture
def driver() -> FakeDriver:
    return FakeProfilesDriver()  # pub/sub too


def run(test: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), SAFETY_NET_S))


def no_waiters(store: CoreStore) -> bool:
    return not store._context.hub.has_waiters()


async def until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.005)


def test_every_call_runs_off_the_loop_thread(store: CoreStore, driver: FakeDriver) -> None:
    threads: set[str] = set()
    original = driver.write

    def recording_write(work: Any, **kwargs: Any) -> Any:
        threads.add(threading.current_thread().name)
        return original(work, **kwargs)

    driver.write = recording_write  # type: ignore[method-assign]

    async def body() -> None:
        aio = AsyncStore(store)
        queue = aio.queue("q")
        await queue.enqueue({"n": 1})
        handle = await queue.claim("w")
        assert handle is not None
        assert await handle.ack() is True

    run(body)
    assert threads
    assert threading.main_thread().name not in threads
    assert all(name.startswith("alkstore-aio") for name in threads)


def test_a_transaction_runs_on_one_thread_from_begin_to_commit(
    store: CoreStore, driver: FakeDriver
) -> None:
    threads: list[str] = []
    original = driver.insert_jobs

    def recording_insert(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(*args)

    driver.insert_jobs = recording_insert

    async def body() -> None:
        aio = AsyncStore(store)
        async with aio.transaction() as tx:
            for n in range(5):
                await tx.enqueue("q", {"n": n})

    run(body)
    assert len(threads) == 5
    assert len(set(threads)) == 1
    assert threads[0].startswith("alkstore-aio-tx")
    assert len(store.queue("q").claim_batch("w", 10)) == 5


def test_an_exception_in_a_transaction_block_rolls_it_back(store: CoreStore) -> None:
    async def enqueue_then_fail(aio: AsyncStore) -> None:
        async with aio.transaction() as tx:
            await tx.enqueue("q", {"n": 1})
            raise RuntimeError("business rule")

    async def body() -> None:
        with pytest.raises(RuntimeError):
            await enqueue_then_fail(AsyncStore(store))

    run(body)
    assert store.queue("q").claim("w") is None


def test_a_cancelled_claim_wait_leaves_no_waiter_and_no_claim(store: CoreStore) -> None:
    async def body() -> None:
        aio = AsyncStore(store)
        waiting = asyncio.create_task(aio.queue("q").claim_wait("w"))
        await until(lambda: store._context.hub.has_waiters())
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert no_waiters(store)

    run(body)


def test_a_job_claimed_for_a_cancelled_caller_is_given_back(
    store: CoreStore, driver: FakeDriver
) -> None:
    # The claim commits on the thread while the caller is being cancelled.
    claimed = threading.Event()
    proceed = threading.Event()
    original = driver.claim

    def slow_claim(*args: Any) -> Any:
        jobs = original(*args)
        claimed.set()
        proceed.wait(SAFETY_NET_S)
        return jobs

    driver.claim = slow_claim
    job_id = store.queue("q").enqueue({"n": 1})

    async def body() -> None:
        aio = AsyncStore(store)
        task = asyncio.create_task(aio.queue("q").claim("w"))
        await until(claimed.is_set)
        task.cancel()
        await asyncio.sleep(0.01)
        proceed.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(body)
    job = store.queue("q").get_job(job_id)
    assert job is not None
    assert (job.state, job.worker_id) == (JobState.PENDING, None)
    assert job.max_attempts - job.attempts == 3, "the cancelled claim spent an attempt"
    assert [call.name for call in driver.calls_named("release_claim")] == ["release_claim"]


def test_a_cancelled_batch_claim_gives_back_every_job(store: CoreStore, driver: FakeDriver) -> None:
    claimed = threading.Event()
    proceed = threading.Event()
    original = driver.claim

    def slow_claim(*args: Any) -> Any:
        jobs = original(*args)
        claimed.set()
        proceed.wait(SAFETY_NET_S)
        return jobs

    driver.claim = slow_claim
    ids = store.queue("q").enqueue_many([{"n": n} for n in range(3)])

    async def body() -> None:
        task = asyncio.create_task(AsyncStore(store).queue("q").claim_batch("w", 10))
        await until(claimed.is_set)
        task.cancel()
        await asyncio.sleep(0.01)
        proceed.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(body)
    for job_id in ids:
        job = store.queue("q").get_job(job_id)
        assert job is not None
        assert job.state is JobState.PENDING
        assert job.max_attempts - job.attempts == 3


def test_claim_wait_any_wakes_for_any_queue_through_aio(store: CoreStore) -> None:
    async def body() -> None:
        aio = AsyncStore(store)
        a, b = aio.queue("a"), aio.queue("b")
        waiting = asyncio.create_task(aio.claim_wait_any([a, b], "w", timeout=SAFETY_NET_S))
        await until(lambda: store._context.hub.has_waiters())
        job_id = await b.enqueue({"n": 1})
        handle = await waiting
        assert handle is not None
        assert (handle.id, handle.job.queue) == (job_id, "b")

    run(body)


def test_claim_wait_any_refuses_sync_queue_handles(store: CoreStore) -> None:
    async def body() -> None:
        with pytest.raises(InvalidOptions, match="async queues"):
            await AsyncStore(store).claim_wait_any([store.queue("a")], "w")  # type: ignore[list-item]

    run(body)


def test_a_message_taken_for_a_cancelled_get_is_kept_for_the_next(
    store: CoreStore,
) -> None:
    async def body() -> None:
        aio = AsyncStore(store)
        subscription = await aio.subscribe("ch")
        getting = asyncio.create_task(subscription.get())
        await asyncio.sleep(0.05)
        getting.cancel()
        await aio.notify("ch", {"m": 1})
        with pytest.raises(asyncio.CancelledError):
            await getting
        assert await subscription.get(timeout=SAFETY_NET_S) == {"m": 1}
        await subscription.close()

    run(body)


def test_closing_the_async_store_closes_the_sync_store(store: CoreStore) -> None:
    async def body() -> None:
        async with AsyncStore(store) as aio:
            await aio.queue("q").enqueue({})
        assert aio.closed
        with pytest.raises(StoreClosed):
            await aio.queue("q").enqueue({})

    run(body)


def test_threads_must_be_an_int_within_1_to_64(store: CoreStore) -> None:
    for threads in (0, 65, True, 2.0):
        with pytest.raises(InvalidOptions, match="threads"):
            AsyncStore(store, threads=threads)  # type: ignore[arg-type]


def test_open_refuses_a_url_that_is_not_a_str_before_loading_an_engine() -> None:
    async def body() -> None:
        with pytest.raises(InvalidOptions, match="url must be a str"):
            await alkstore.aio.open(123)  # type: ignore[arg-type]

    run(body)


def test_an_awaited_open_is_the_store_until_it_is_closed() -> None:
    url = f"memory://aio-awaited-{uuid.uuid4().hex}"

    async def test() -> int:
        store = await alkstore.aio.open(url)  # as a FastAPI lifespan keeps it
        try:
            return await store.queue("q").enqueue({"n": 1})
        finally:
            await store.close()

    assert run(test) == 1


@pytest.mark.parametrize("name", ["attach", "queue", "transaction", "close"])
def test_an_opening_kept_as_a_value_says_to_await_it_or_use_async_with(name: str) -> None:
    opening = alkstore.aio.open("memory://never-opened")
    with pytest.raises(AttributeError) as raised:
        getattr(opening, name)
    assert "async with alkstore.aio.open(...)" in str(raised.value)
    assert "await alkstore.aio.open(...)" in str(raised.value)


def test_close_is_idempotent_and_later_calls_raise_store_closed(store: CoreStore) -> None:
    async def body() -> None:
        aio = AsyncStore(store)
        queue = aio.queue("q")
        await aio.close()
        await aio.close()
        with pytest.raises(StoreClosed):
            await queue.enqueue({})
        with pytest.raises(StoreClosed):
            await queue.claim_wait("w", timeout=1)

    run(body)
