"""Child processes of the scheduler, streams and pub/sub properties.

Each runs in a spawned process, reopens the test's store from its picklable
``EngineSpec`` through ``alkstore.load_engine(name, group)`` and reports on a
``multiprocessing`` queue as ``(kind, value)``; a failure is reported as
``("error", "Type: message")`` rather than lost. A child on a fake clock gets
its own ``FakeClock`` (a clock cannot be shared across processes); every wait
is bounded by ``time_limit_s``.
"""

from __future__ import annotations

from typing import Any

from alkstore import EngineSpec, Store, load_engine
from alkstore.testing import FakeClock


def open_in_child(
    engine_name: str, engine_group: str, spec: EngineSpec, clock: FakeClock | None = None
) -> Store:
    return load_engine(engine_name, engine_group).open(spec.url, clock=clock, **spec.opts)


def _error(exc: BaseException) -> tuple[str, str]:
    return ("error", f"{type(exc).__name__}: {exc}")


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


def ticker_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    worker_id: str,
    instants: list[int],
    barrier: Any,
    results: Any,
    time_limit_s: float,
) -> None:
    """``tick_at_instants`` in a child process on its own ``FakeClock``; reports
    ``("ticks", [(fired, skipped), ...])``."""
    try:
        clock = FakeClock(instants[0])
        with open_in_child(engine_name, engine_group, spec, clock) as store:
            ticks = tick_at_instants(store, clock, worker_id, instants, barrier, time_limit_s)
        results.put(("ticks", ticks))
    except BaseException as exc:
        results.put(_error(exc))


def doomed_ticker_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    worker_id: str,
    instant: int,
    go: Any,
    results: Any,
    time_limit_s: float,
) -> None:
    """Open the store at ``instant``, say ``ready``, tick once when told to: the
    parent kills this process (SIGKILL) while the tick fires."""
    try:
        with open_in_child(engine_name, engine_group, spec, FakeClock(instant)) as store:
            results.put(("ready", None))
            if not go.wait(timeout=time_limit_s):
                raise TimeoutError("never told to tick")
            result = store.tick_schedules(worker_id)
        results.put(("ticked", (result.fired, result.skipped)))
    except BaseException as exc:
        results.put(_error(exc))


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
) -> None:
    """``append_events`` in a child process; reports ``("offsets", (writer, offsets))``."""
    try:
        with open_in_child(engine_name, engine_group, spec) as store:
            offsets = append_events(
                store, stream, writer, count, in_transaction, barrier, finished, time_limit_s
            )
        results.put(("offsets", (writer, offsets)))
    except BaseException as exc:
        results.put(_error(exc))


def stream_appender_on_signal(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    stream: str,
    go: Any,
    results: Any,
    time_limit_s: float,
) -> None:
    """Say ``ready``; once told to, append one event and report its offset."""
    try:
        with open_in_child(engine_name, engine_group, spec) as store:
            handle = store.stream(stream)
            results.put(("ready", None))
            if not go.wait(timeout=time_limit_s):
                raise TimeoutError("never told to append")
            results.put(("appended", handle.append({"from": "another process"})))
    except BaseException as exc:
        results.put(_error(exc))


def subscriber_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    channel: str,
    expected: int,
    results: Any,
    time_limit_s: float,
) -> None:
    """Subscribe, say ``subscribed``, then report the first ``expected`` messages
    (fewer if ``time_limit_s`` passes first)."""
    try:
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
        results.put(("received", received))
    except BaseException as exc:
        results.put(_error(exc))


def notifier_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    channel: str,
    payload: Any,
    go: Any,
    results: Any,
    time_limit_s: float,
) -> None:
    """Say ``ready``; once told to, notify ``payload`` on ``channel``."""
    try:
        with open_in_child(engine_name, engine_group, spec) as store:
            results.put(("ready", None))
            if not go.wait(timeout=time_limit_s):
                raise TimeoutError("never told to notify")
            store.notify(channel, payload)
        results.put(("notified", None))
    except BaseException as exc:
        results.put(_error(exc))
