"""``--via aio``: the suite's stores as sync facades over ``alkstore.aio`` AsyncStores."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit_runs import RunIn, output

from alkstore import (
    Capabilities,
    EngineProvider,
    JobHandle,
    Lock,
    Outbox,
    Queue,
    Store,
    Stream,
    Subscription,
    Transaction,
    load_engine,
)
from alkstore.aio import AsyncStore
from alkstore_conformance.certify.cli import RunOptions, parse, pytest_args
from alkstore_conformance.certify.manifest import load_manifest
from alkstore_conformance.helpers.via_aio import (
    ATTACH_THREAD_BOUND,
    SQL_ON_ASYNC_NATIVE,
    AioJobHandle,
    AioLock,
    AioOutbox,
    AioQueue,
    AioStore,
    AioStream,
    AioSubscription,
    AioTransaction,
    LoopThread,
    attachable_via_aio,
    not_applicable_via_aio,
    open_async,
    reaches_aio,
)

MEMORY = "memory"


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture
def memory() -> EngineProvider:
    return load_engine(MEMORY)


@pytest.fixture
def store(loop: LoopThread, memory: EngineProvider) -> Iterator[AioStore]:
    with memory.provision() as spec:
        opened = AioStore.open(loop, memory, spec.url, None, **spec.opts)
        yield opened
        # A test may have closed it (a second AsyncStore.close is STORE-CLOSED's business).
        if not opened.closed:
            opened.close()


def public_members(protocol: type) -> set[str]:
    return {
        name
        for klass in protocol.__mro__
        if klass.__module__.startswith("alkstore")
        for name in vars(klass)
        if not name.startswith("_") or name in ("__enter__", "__exit__", "__iter__")
    }


# -- the loop thread ------------------------------------------------------------------


def test_run_gives_a_coroutines_result_computed_on_the_loop_thread(loop: LoopThread) -> None:
    async def where() -> str:
        return threading.current_thread().name

    assert loop.run(where()) == "alkstore-kit-aio-loop"


def test_run_on_the_loop_thread_itself_is_refused_rather_than_hanging(loop: LoopThread) -> None:
    async def nested() -> None:
        async def inner() -> None:
            return None

        loop.run(inner())

    with pytest.raises(RuntimeError, match="its own loop thread"):
        loop.run(nested())


def test_close_stops_the_loop_and_is_idempotent() -> None:
    thread = LoopThread()
    thread.close()
    thread.close()
    assert thread.loop.is_closed()


# -- the facade -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facade", "protocol"),
    [
        (AioStore, Store),
        (AioQueue, Queue),
        (AioOutbox, Outbox),
        (AioJobHandle, JobHandle),
        (AioLock, Lock),
        (AioStream, Stream),
        (AioSubscription, Subscription),
        (AioTransaction, Transaction),
    ],
)
def test_every_facade_has_every_member_of_its_sync_protocol(facade: type, protocol: type) -> None:
    missing = {name for name in public_members(protocol) if not hasattr(facade, name)}
    assert missing == set()


def test_the_facade_is_backed_by_an_async_store_over_the_engine(store: AioStore) -> None:
    assert isinstance(store.aio, AsyncStore)
    assert store.aio.sync.closed is False


def test_queue_calls_through_the_facade_reach_the_store(store: AioStore) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    assert (handle.id, handle.payload, handle.attempts) == (job_id, {"n": 1}, 1)
    assert handle.ack() is True
    assert store.aio.sync.queue("jobs").get_job(job_id) is None


def test_each_facade_call_runs_through_the_async_surface(
    store: AioStore, loop: LoopThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    awaited: list[str] = []
    queue = store.queue("jobs")
    real = type(queue.aio).enqueue

    async def spy(self: Any, payload: Any, opts: Any = None) -> int:
        awaited.append(threading.current_thread().name)
        return await real(self, payload, opts)

    monkeypatch.setattr(type(queue.aio), "enqueue", spy)
    queue.enqueue({"n": 1})
    assert awaited == ["alkstore-kit-aio-loop"]


def test_a_transaction_block_commits_at_its_end(store: AioStore) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue(store.queue("jobs"), {"n": 1})
    assert store.queue("jobs").get_job(job_id) is not None


def test_an_exception_in_a_transaction_block_rolls_it_back_and_propagates(
    store: AioStore,
) -> None:
    job_ids: list[int] = []

    def enqueue_then_fail() -> None:
        with store.transaction() as tx:
            job_ids.append(tx.enqueue("jobs", {"n": 1}))
            raise KeyError("business failure")

    with pytest.raises(KeyError):
        enqueue_then_fail()
    assert store.queue("jobs").get_job(job_ids[0]) is None


def test_claim_wait_any_maps_the_facades_queues_to_their_async_handles(store: AioStore) -> None:
    first, second = store.queue("first"), store.queue("second")
    job_id = second.enqueue({"n": 1})
    handle = store.claim_wait_any([first, second], "worker", timeout=5)
    assert handle is not None
    assert handle.id == job_id


def test_closing_through_the_facade_closes_the_sync_store(store: AioStore) -> None:
    store.close()
    assert store.closed is True
    assert store.aio.sync.closed is True


# -- opening ----------------------------------------------------------------------------


class _Recorder:
    """A provider standing in for an engine: records which door opened it."""

    def __init__(self, memory: EngineProvider, *, native: bool) -> None:
        self._memory = memory
        self.name = "recorder"
        self.version = memory.version
        self.contract_version = memory.contract_version
        self.capabilities = Capabilities(async_native=native)
        self.doors: list[str] = []

    def open(self, url: str, **opts: Any) -> Store:
        self.doors.append("open")
        return self._memory.open(url, **opts)

    def open_on_loop(self, url: str, loop: asyncio.AbstractEventLoop, **opts: Any) -> Store:
        # The loop it is given is the one awaiting the open: the running loop.
        assert loop.is_running()
        self.doors.append("open_on_loop")
        return self._memory.open(url, **opts)

    def provision(self) -> Any:
        return self._memory.provision()


@pytest.mark.parametrize(("native", "door"), [(True, "open_on_loop"), (False, "open")])
def test_open_async_asks_the_provider_through_the_door_its_capabilities_name(
    memory: EngineProvider, native: bool, door: str
) -> None:
    recorder = _Recorder(memory, native=native)

    async def main() -> None:
        with memory.provision() as spec:
            store = await open_async(recorder, spec.url, **spec.opts)  # type: ignore[arg-type]
            await store.close()

    asyncio.run(main())
    assert recorder.doors == [door]


# -- what cannot run via aio --------------------------------------------------------------


def test_sql_needing_tests_are_not_applicable_via_aio_on_an_async_native_engine(
    memory: EngineProvider,
) -> None:
    native = _Recorder(memory, native=True)
    plain = _Recorder(memory, native=False)
    assert not_applicable_via_aio(["queues", "sql"], native) == SQL_ON_ASYNC_NATIVE  # type: ignore[arg-type]
    assert not_applicable_via_aio(["queues", "sql"], plain) is None  # type: ignore[arg-type]
    assert not_applicable_via_aio(["queues"], native) is None  # type: ignore[arg-type]


def test_a_connection_only_its_opening_thread_may_use_makes_attach_not_applicable(
    tmp_path: Path, memory: EngineProvider
) -> None:
    path = tmp_path / "app.db"
    connect = attachable_via_aio(memory, lambda: sqlite3.connect(path))
    with pytest.raises(pytest.skip.Exception, match="not_applicable: via aio") as skipped:
        connect()
    assert str(skipped.value.msg) == ATTACH_THREAD_BOUND


def test_a_connection_any_thread_may_use_is_handed_to_the_test(
    tmp_path: Path, memory: EngineProvider
) -> None:
    path = tmp_path / "app.db"
    connect = attachable_via_aio(memory, lambda: sqlite3.connect(path, check_same_thread=False))
    connection = connect()
    try:
        assert isinstance(connection, sqlite3.Connection)
    finally:
        connection.close()


def test_only_tests_that_open_stores_through_the_fixtures_run_via_aio() -> None:
    assert reaches_aio(["request", "store"]) is True
    assert reaches_aio(["open_store"]) is True
    assert reaches_aio(["clocked_store", "clock"]) is True
    assert reaches_aio(["engine", "engine_spec"]) is False


# -- the CLI and the plugin ------------------------------------------------------------------


def test_parse_reads_via_and_profiles() -> None:
    options, extra = parse(
        ["run", "--engine", MEMORY, "--via", "aio", "--profile", "queues", "--profile", "attach"]
    )
    assert options == RunOptions(engine=MEMORY, via="aio", profiles=("queues", "attach"))
    assert extra == []


def test_pytest_args_pass_via_and_profiles_to_the_plugin() -> None:
    args = pytest_args(RunOptions(engine=MEMORY, via="aio", profiles=("queues",)))
    assert args[args.index("--alkstore-via") + 1] == "aio"
    assert args[args.index("--alkstore-profile") + 1] == "queues"


def test_via_sync_adds_no_plugin_option() -> None:
    assert "--alkstore-via" not in pytest_args(RunOptions(engine=MEMORY))


def test_parse_refuses_an_unknown_via() -> None:
    with pytest.raises(SystemExit):
        parse(["run", "--engine", MEMORY, "--via", "trio"])


def test_a_run_via_aio_says_so_and_passes_on_the_memory_engine(run_in: RunIn) -> None:
    result = run_in.cli(
        "run", "--engine", MEMORY, "--via", "aio", "-n", "0", "--property", "QUEUE-CLAIM-ORDER"
    )
    text = output(result)
    assert result.returncode == 0, text
    assert "via aio" in text
    assert "QUEUE-CLAIM-ORDER" in text


def test_a_profile_selection_runs_only_that_profiles_properties(run_in: RunIn) -> None:
    result = run_in.cli(
        "run", "--engine", MEMORY, "-n", "0", "--profile", "attach", "--report", "report.json"
    )
    assert result.returncode == 0, output(result)
    ran = {p["id"] for p in run_in.report()["properties"]}
    attach = {prop.id for prop in load_manifest().values() if prop.profile == "attach"}
    assert "TX-ATTACH" in attach
    assert ran == attach


def test_an_unknown_profile_is_a_usage_error(run_in: RunIn) -> None:
    result = run_in.cli("run", "--engine", MEMORY, "-n", "0", "--profile", "nope")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--profile names no profile: nope" in output(result)


def test_the_facades_signatures_match_the_sync_protocol() -> None:
    # The suite calls the facade exactly as the sync store: same parameter names.
    for facade, protocol in ((AioStore, Store), (AioQueue, Queue), (AioJobHandle, JobHandle)):
        for name in public_members(protocol):
            member = getattr(protocol, name)
            if name.startswith("_") or not callable(member) or isinstance(member, property):
                continue
            expected = list(inspect.signature(member).parameters)
            assert list(inspect.signature(getattr(facade, name)).parameters) == expected, name
