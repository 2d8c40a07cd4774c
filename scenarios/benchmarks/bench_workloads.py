"""The benchmark workloads (queues, streams, pub/sub), each on a freshly provisioned store.

Every loop is bounded by the workload's time budget: when the budget runs out
the workload stops, reports the rate over the work it did, and is marked
time-capped. Child processes are always joined, and terminated if they hang.
"""

from __future__ import annotations

import cProfile
import io
import json
import multiprocessing
import multiprocessing.queues
import pstats
import queue as queue_module
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any, TypeVar

from bench_children import DrainReport, drain_worker, pubsub_subscriber, wake_consumer
from bench_report import Measurement, percentile
from bench_sides import Side, SideSpec

import alkstore

T = TypeVar("T")

QUEUE = "bench"
STREAM = "bench"
CHANNEL = "bench"
PAYLOAD_BYTES = 100
ENQUEUE_MANY_BATCH = 1_000
CLAIM_BATCH = 100
STREAM_PAGE = 100
STREAM_PREFILL_TX = 1_000
"""Events appended per transaction when filling the stream for the read workload."""
DRAIN_PROCESSES = 4
DRAIN_BATCH = {"sqlite": 1, "postgresql": 10}
"""Per engine, what each of the four drain workers claims at a time (1 = claim + ack)."""
WAKE_WARMUP_ROUNDS = 10
"""Leading wake rounds that are measured but not reported (connections, watchers warm up)."""
WAKE_SETTLE_S = 0.005
"""Pause between the consumer saying it is about to wait and the enqueue."""
CHILD_START_TIMEOUT_S = 120.0
"""Spawning a child, importing alkstore and opening the store; generous on a busy box."""
JOIN_TIMEOUT_S = 10.0
BUDGET_EXHAUSTED = "budget exhausted"


@dataclass
class Bench:
    """Everything one workload run needs, on one side (an engine or its plain baseline)."""

    engine: str
    side: Side
    side_spec: SideSpec
    store: alkstore.Store | None
    """The engine's store (``None`` on a plain side: latency workloads run on engines only)."""
    jobs: int
    wake_rounds: int
    budget_s: float
    quick: bool = False
    profile_dir: Path | None = None

    @property
    def spec(self) -> alkstore.EngineSpec:
        return self.side_spec.spec

    def queue(self) -> alkstore.Queue:
        if self.store is None:
            raise RuntimeError("this workload runs on engines only")
        return self.store.queue(QUEUE)

    def deadline(self) -> float:
        return time.perf_counter() + self.budget_s


Workload = Callable[[Bench], Measurement]


def payload(seq: int, size: int = PAYLOAD_BYTES, **fields: Any) -> dict[str, Any]:
    """A JSON payload of about ``size`` bytes once encoded."""
    body: dict[str, Any] = {"seq": seq, "kind": "bench", **fields, "pad": ""}
    used = len(json.dumps(body, separators=(",", ":")))
    body["pad"] = "x" * max(0, size - used)
    return body


def payloads(count: int, size: int = PAYLOAD_BYTES) -> list[dict[str, Any]]:
    return [payload(i, size) for i in range(count)]


def prefill(bench: Bench, count: int, queue: str = QUEUE, batch: int = ENQUEUE_MANY_BATCH) -> None:
    """Put ``count`` jobs in ``queue`` (untimed): the backlog a drain workload starts from."""
    for start in range(0, count, batch):
        bench.side.enqueue_many(queue, payloads(min(batch, count - start)))


def timed(bench: Bench, key: str, body: Callable[[], T]) -> tuple[T, float]:
    """Run ``body`` and time it (under cProfile when profiling is on)."""
    if bench.profile_dir is None:
        started = time.perf_counter()
        result = body()
        return result, time.perf_counter() - started
    profiler = cProfile.Profile()
    started = time.perf_counter()
    result = profiler.runcall(body)
    seconds = time.perf_counter() - started
    _dump_profile(profiler, bench.profile_dir / f"{bench.side_spec.column}-{key}.txt")
    return result, seconds


def _dump_profile(profiler: cProfile.Profile, path: Path) -> None:
    out = io.StringIO()
    for order in ("tottime", "cumulative"):
        out.write(f"==== sorted by {order} ====\n")
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(30)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(out.getvalue(), encoding="utf-8")


# --------------------------------------------------------------------------- in-process


def enqueue_single(bench: Bench) -> Measurement:
    """1. One ``enqueue`` per transaction."""
    side, items, deadline = bench.side, payloads(bench.jobs), bench.deadline()

    def body() -> int:
        done = 0
        for item in items:
            if time.perf_counter() > deadline:
                break
            side.enqueue(QUEUE, item)
            done += 1
        return done

    done, seconds = timed(bench, "enqueue", body)
    return Measurement(jobs=done, seconds=seconds, capped=done < bench.jobs)


def enqueue_many(bench: Bench) -> Measurement:
    """2. ``enqueue_many`` in batches of 1,000."""
    side, items, deadline = bench.side, payloads(bench.jobs), bench.deadline()
    batches = [items[i : i + ENQUEUE_MANY_BATCH] for i in range(0, len(items), ENQUEUE_MANY_BATCH)]

    def body() -> int:
        done = 0
        for batch in batches:
            if time.perf_counter() > deadline:
                break
            done += side.enqueue_many(QUEUE, batch)
        return done

    done, seconds = timed(bench, "enqueue_many", body)
    return Measurement(jobs=done, seconds=seconds, capped=done < bench.jobs)


def drain_one_at_a_time(
    bench: Bench,
    key: str,
    jobs: int,
    queues: Sequence[str] = (QUEUE,),
    *,
    through_wait: bool = False,
) -> Measurement:
    """``claim`` + ``ack`` one job at a time, ``jobs`` times, cycling over ``queues``
    (``through_wait``: each claim through ``claim_wait(timeout=0)``)."""
    side, deadline = bench.side, bench.deadline()
    claim_ack = side.claim_wait_ack if through_wait else side.claim_ack
    lost = 0
    dry = False

    def body() -> int:
        nonlocal lost, dry
        done = 0
        turn = 0
        while done + lost < jobs and time.perf_counter() <= deadline:
            outcome = claim_ack(queues[turn % len(queues)], "bench-worker")
            turn += 1
            if outcome is None:
                dry = True
                break
            if outcome:
                done += 1
            else:
                lost += 1
        return done

    done, seconds = timed(bench, key, body)
    m = Measurement(jobs=done, seconds=seconds, capped=done + lost < jobs and not dry)
    _note_shortfall(m, jobs, lost)
    return m


def claim_ack(bench: Bench) -> Measurement:
    """3. ``claim`` + ``ack`` one at a time, starting from a backlog of N jobs."""
    prefill(bench, bench.jobs)
    return drain_one_at_a_time(bench, "claim_ack", bench.jobs)


def claim_wait_ack(bench: Bench) -> Measurement:
    """3b. A worker loop over a full queue: ``claim_wait(timeout=0)`` + ``ack``."""
    prefill(bench, bench.jobs)
    return drain_one_at_a_time(bench, "claim_wait_ack", bench.jobs, through_wait=True)


def claim_batch(bench: Bench) -> Measurement:
    """4. ``claim_batch(100)`` + ``ack_batch``, starting from a backlog of N jobs."""
    prefill(bench, bench.jobs)
    side, deadline = bench.side, bench.deadline()
    lost = 0

    def body() -> int:
        nonlocal lost
        done = 0
        while done < bench.jobs and time.perf_counter() <= deadline:
            claimed, acked = side.claim_ack_batch(QUEUE, "bench-worker", CLAIM_BATCH)
            if not claimed:
                break
            done += acked
            lost += claimed - acked
        return done

    done, seconds = timed(bench, "claim_batch", body)
    m = Measurement(jobs=done, seconds=seconds, capped=done + lost < bench.jobs)
    _note_shortfall(m, bench.jobs, lost)
    return m


def _note_shortfall(m: Measurement, expected: int, lost: int) -> None:
    if lost:
        m.notes.append(f"{lost} acks did not count (claim no longer valid)")
    if m.jobs + lost < expected and not m.capped:
        m.notes.append(f"queue ran dry after {m.jobs} of {expected} jobs")


def stream_append(bench: Bench) -> Measurement:
    """7. ``stream.append``, one event per call (each its own transaction)."""
    side, items, deadline = bench.side, payloads(bench.jobs), bench.deadline()
    out_of_order = 0

    def body() -> int:
        nonlocal out_of_order
        done, last = 0, 0
        for item in items:
            if time.perf_counter() > deadline:
                break
            offset = side.stream_append(STREAM, item)
            if offset <= last:
                out_of_order += 1
            last = offset
            done += 1
        return done

    done, seconds = timed(bench, "stream_append", body)
    m = Measurement(jobs=done, seconds=seconds, capped=done < bench.jobs, errors=out_of_order)
    if out_of_order:
        m.notes.append(f"{out_of_order} offsets did not increase")
    return m


def stream_read(bench: Bench) -> Measurement:
    """8. ``stream.read`` in pages of 100 over N events (appended untimed beforehand)."""
    side = bench.side
    items = payloads(bench.jobs)
    for start in range(0, len(items), STREAM_PREFILL_TX):
        side.stream_append_many(STREAM, items[start : start + STREAM_PREFILL_TX])
    deadline = bench.deadline()
    out_of_order = 0
    ran_dry = False

    def body() -> int:
        nonlocal out_of_order, ran_dry
        done, after = 0, 0
        while done < bench.jobs and time.perf_counter() <= deadline:
            offsets = side.stream_read(STREAM, after, STREAM_PAGE)
            if not offsets:
                ran_dry = True
                break
            for offset in offsets:
                if offset <= after:
                    out_of_order += 1
                after = offset
            done += len(offsets)
        return done

    done, seconds = timed(bench, "stream_read", body)
    capped = done < bench.jobs and not ran_dry
    m = Measurement(jobs=done, seconds=seconds, capped=capped, errors=out_of_order)
    if out_of_order:
        m.notes.append(f"{out_of_order} events came back out of offset order")
    if ran_dry and done < bench.jobs:
        m.notes.append(f"stream ran dry after {done} of {bench.jobs} events")
    return m


# --------------------------------------------------------------------------- multi-process


def four_processes(bench: Bench) -> Measurement:
    """5. Four spawned processes drain one queue at once, released by one barrier.

    Measured from the barrier's release (the earliest worker's post-barrier
    wall time) to the last ack of any worker.
    """
    prefill(bench, bench.jobs)
    batch = DRAIN_BATCH.get(bench.engine, 1)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(DRAIN_PROCESSES)
    reports: multiprocessing.queues.Queue[DrainReport] = ctx.Queue()
    procs = [
        ctx.Process(
            target=drain_worker,
            args=(
                i,
                bench.side_spec,
                QUEUE,
                batch,
                barrier,
                reports,
                bench.budget_s,
                CHILD_START_TIMEOUT_S,
            ),
            name=f"bench-drain-{i}",
        )
        for i in range(DRAIN_PROCESSES)
    ]
    collected: list[DrainReport] = []
    try:
        for proc in procs:
            proc.start()
        wait_until = time.monotonic() + CHILD_START_TIMEOUT_S + bench.budget_s + JOIN_TIMEOUT_S
        while len(collected) < DRAIN_PROCESSES:
            remaining = wait_until - time.monotonic()
            if remaining <= 0:
                break
            try:
                collected.append(reports.get(timeout=min(remaining, 1.0)))
            except queue_module.Empty:  # check whether the workers died silently
                if not any(p.is_alive() for p in procs) and reports.empty():
                    break
    finally:
        _reap(procs)
        reports.close()
        reports.join_thread()
    return _drain_measurement(collected, bench.jobs, batch)


def _drain_measurement(reports: Sequence[DrainReport], expected: int, batch: int) -> Measurement:
    missing = DRAIN_PROCESSES - len(reports)
    acked = sum(r.acked for r in reports)
    starts = [r.started_at for r in reports if r.started_at is not None]
    ends = [r.last_ack_at for r in reports if r.last_ack_at is not None]
    seconds = max(ends) - min(starts) if starts and ends else 0.0
    m = Measurement(
        jobs=acked,
        seconds=seconds,
        capped=any(r.capped for r in reports),
        errors=sum(r.errors for r in reports) + missing,
    )
    per_worker = ", ".join(f"{r.worker}={r.acked}" for r in sorted(reports, key=lambda r: r.worker))
    how = "claim+ack" if batch == 1 else f"claim_batch({batch})+ack_batch"
    m.notes.append(f"{DRAIN_PROCESSES} processes, {how}; acked per worker: {per_worker}")
    if missing:
        m.notes.append(f"{missing} worker(s) never reported (crashed or hung)")
    first_errors = sorted({r.first_error for r in reports if r.first_error})
    m.notes += [f"error: {text}" for text in first_errors]
    lost = sum(r.lost_acks for r in reports)
    _note_shortfall(m, expected, lost)
    return m


def wake_latency(bench: Bench) -> Measurement:
    """6. Cross-process wake: a consumer blocked in ``claim_wait``, the parent enqueues.

    Latency = the consumer's wall time when ``claim_wait`` returned minus the
    parent's wall time when ``enqueue`` returned (its commit is done by then).
    """
    queue = bench.queue()

    def enqueue(seq: int, called_at: float) -> tuple[Any, ...]:
        job_id = queue.enqueue(payload(seq, t=called_at))
        return ("claimed", job_id)

    return _latency_rounds(bench, wake_consumer, QUEUE, "bench-wake-consumer", "enqueue", enqueue)


def pubsub_latency(bench: Bench) -> Measurement:
    """9. Cross-process pub/sub: a subscriber process waits in ``get``, the parent notifies.

    Latency = the subscriber's wall time when ``get`` returned minus the
    parent's wall time when ``notify`` returned (its commit is done by then).
    """
    store = bench.store
    assert store is not None, "latency workloads run on engines only"

    def publish(seq: int, called_at: float) -> tuple[Any, ...]:
        store.notify(CHANNEL, payload(seq, t=called_at))
        return ("received", seq)

    return _latency_rounds(
        bench, pubsub_subscriber, CHANNEL, "bench-pubsub-subscriber", "notify", publish
    )


def _latency_rounds(
    bench: Bench,
    child: Callable[..., None],
    name: str,
    process_name: str,
    call: str,
    fire: Callable[[int, float], tuple[Any, ...]],
) -> Measurement:
    """Ping-pong with one spawned child, one round at a time.

    Each round the parent waits for the child's ``("ready",)``, pauses briefly,
    calls ``fire(seq, called_at)`` (the ``call`` under test; it returns the
    reply it expects, minus the child's timestamp) and waits for that reply. The first
    ``WAKE_WARMUP_ROUNDS`` rounds are measured but not reported.
    """
    rounds = WAKE_WARMUP_ROUNDS + bench.wake_rounds
    ctx = multiprocessing.get_context("spawn")
    parent_end, child_end = ctx.Pipe()
    proc = ctx.Process(
        target=child,
        args=(bench.engine, bench.spec, name, rounds, child_end, JOIN_TIMEOUT_S),
        name=process_name,
    )
    latencies: list[float] = []
    from_call: list[float] = []
    m = Measurement(latencies_ms=latencies)
    deadline = time.monotonic() + CHILD_START_TIMEOUT_S + bench.budget_s
    try:
        proc.start()
        child_end.close()  # ours is closed; the child holds its own copy
        started = time.perf_counter()
        for seq in range(rounds):
            message = _receive(parent_end, deadline)
            if message[0] != "ready":
                m.notes.append(f"{process_name} stopped early: {message}")
                if message[0] != BUDGET_EXHAUSTED:
                    m.errors += 1
                break
            time.sleep(WAKE_SETTLE_S)
            called_at = time.time()
            expected = fire(seq, called_at)
            returned_at = time.time()
            message = _receive(parent_end, deadline)
            if message[: len(expected)] != expected or len(message) != len(expected) + 1:
                m.notes.append(f"round {seq}: expected {expected}, got {message}")
                m.errors += 1
                break
            if seq >= WAKE_WARMUP_ROUNDS:
                latencies.append((message[-1] - returned_at) * 1000.0)
                from_call.append((message[-1] - called_at) * 1000.0)
        m.seconds = time.perf_counter() - started
    finally:
        parent_end.close()
        _reap([proc])
    m.jobs = len(latencies)
    m.capped = m.jobs < bench.wake_rounds and not m.errors
    if from_call:
        m.notes.append(
            f"from {call} call (includes the {call} itself): "
            f"p50 {_pct(from_call, 0.5):.2f} ms, p99 {_pct(from_call, 0.99):.2f} ms"
        )
    return m


def _pct(values: list[float], q: float) -> float:
    value = percentile(values, q)
    return float("nan") if value is None else value


def _receive(conn: Connection, deadline: float) -> tuple[Any, ...]:
    """Next message from the consumer, or a synthetic one if it went quiet or away."""
    remaining = deadline - time.monotonic()
    try:
        if remaining <= 0 or not conn.poll(min(remaining, CHILD_START_TIMEOUT_S)):
            return (BUDGET_EXHAUSTED,)
        message: tuple[Any, ...] = conn.recv()
    except (EOFError, OSError):
        return ("consumer exited",)
    return message


def _reap(procs: Sequence[SpawnProcess]) -> None:
    """Join every child; terminate (then kill) any that does not finish in time."""
    for proc in procs:
        if proc.pid is None:
            continue  # never started
        proc.join(JOIN_TIMEOUT_S)
        if proc.is_alive():
            proc.terminate()
            proc.join(JOIN_TIMEOUT_S)
        if proc.is_alive():
            proc.kill()
            proc.join()
        proc.close()
