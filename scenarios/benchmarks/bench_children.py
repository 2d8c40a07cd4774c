"""Entry points of the benchmark's child processes (started with ``spawn``).

Each child reopens the provisioned store from its picklable ``EngineSpec``
through the public API, like any worker process of an application would.
Cross-process instants use ``time.time()``: every process runs on one machine,
so their wall clocks are the same clock.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from bench_sides import Side, SideSpec, open_side

import alkstore

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier

    from alkstore.worker import Worker

MAX_CONSECUTIVE_ERRORS = 100
"""A worker that keeps failing gives up instead of spinning until its budget ends."""


@dataclass
class DrainReport:
    worker: str
    acked: int = 0
    lost_acks: int = 0
    """Claims whose ack/ack_batch did not count (the claim was no longer valid)."""
    errors: int = 0
    first_error: str | None = None
    started_at: float | None = None
    """Wall time right after the barrier released this worker."""
    last_ack_at: float | None = None
    capped: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def record_error(self, exc: BaseException) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = f"{type(exc).__name__}: {exc}"


def drain_worker(
    index: int,
    side_spec: SideSpec,
    queue_name: str,
    batch: int,
    barrier: Barrier,
    reports: Queue[DrainReport],
    budget_s: float,
    barrier_timeout_s: float,
) -> None:
    """Drain ``queue_name`` until a claim comes back empty; report through ``reports``.

    ``batch == 1``: ``claim`` + ``ack``; otherwise ``claim_batch(batch)`` + ``ack_batch``.
    """
    worker = f"drain-{index}"
    report = DrainReport(worker=worker)
    try:
        side = open_side(side_spec)
        try:
            barrier.wait(timeout=barrier_timeout_s)
            report.started_at = time.time()
            _drain(side, queue_name, worker, batch, report, time.monotonic() + budget_s)
        finally:
            side.close()
    except Exception as exc:  # any exception in a worker counts (and is reported)
        report.record_error(exc)
        if report.started_at is None:
            barrier.abort()  # release the others now rather than at their barrier timeout
    finally:
        reports.put(report)


def _drain(
    side: Side, queue: str, worker: str, batch: int, report: DrainReport, deadline: float
) -> None:
    consecutive_errors = 0
    while True:
        if time.monotonic() > deadline:
            report.capped = True
            return
        try:
            if batch == 1:
                outcome = side.claim_ack(queue, worker)
                if outcome is None:
                    return
                acked = 1 if outcome else 0
                claimed = 1
            else:
                claimed, acked = side.claim_ack_batch(queue, worker, batch)
                if not claimed:
                    return
        except Exception as exc:
            report.record_error(exc)
            consecutive_errors += 1
            if consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
                return
            continue
        consecutive_errors = 0
        report.acked += acked
        report.lost_acks += claimed - acked
        report.last_ack_at = time.time()


def wake_consumer(
    engine: str,
    spec: alkstore.EngineSpec,
    queue_name: str,
    rounds: int,
    conn: Connection,
    wait_timeout_s: float,
) -> None:
    """Block in ``claim_wait`` ``rounds`` times, announcing each wait through ``conn``.

    Messages sent: ``("ready",)`` just before each ``claim_wait``;
    ``("claimed", job_id, claim_returned_at)`` after each claim;
    ``("timeout",)`` if a wait ends empty (the consumer then stops);
    ``("error", text)`` on any exception (the consumer then stops).
    """
    try:
        provider = alkstore.load_engine(engine)
        with provider.open(spec.url, **spec.opts) as store:
            queue = store.queue(queue_name)
            for _ in range(rounds):
                conn.send(("ready",))
                handle = queue.claim_wait("wake-consumer", timeout=wait_timeout_s)
                returned_at = time.time()
                if handle is None:
                    conn.send(("timeout",))
                    return
                handle.ack()
                conn.send(("claimed", handle.id, returned_at))
    except Exception as exc:
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass  # the parent already gave up on us
    finally:
        conn.close()


def pubsub_subscriber(
    engine: str,
    spec: alkstore.EngineSpec,
    channel: str,
    rounds: int,
    conn: Connection,
    wait_timeout_s: float,
) -> None:
    """Subscribe to ``channel`` and receive ``rounds`` messages, one at a time.

    The subscription is open before the first ``("ready",)`` is sent, so every
    message published after it arrives. Messages sent: ``("ready",)`` just
    before each ``get``; ``("received", seq, get_returned_at)`` after each
    message (``seq`` from its payload); ``("timeout",)`` if a ``get`` ends
    empty and ``("error", text)`` on any exception (the subscriber then stops).
    """
    try:
        provider = alkstore.load_engine(engine)
        with provider.open(spec.url, **spec.opts) as store, store.subscribe(channel) as sub:
            for _ in range(rounds):
                conn.send(("ready",))
                message = sub.get(timeout=wait_timeout_s)
                returned_at = time.time()
                if message is None:
                    conn.send(("timeout",))
                    return
                seq = message.get("seq") if isinstance(message, dict) else None
                conn.send(("received", seq, returned_at))
    except Exception as exc:
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass  # the parent already gave up on us
    finally:
        conn.close()


def run_children(
    target: Callable[..., None],
    args: tuple[Any, ...],
    processes: int,
    body: Callable[[], None],
    timeout_s: float,
) -> list[Any]:
    """Start ``processes`` spawned children ``target(*args, ready, stop, results)``, call
    ``body()`` once every one has released ``ready``, then set ``stop``: the items of the
    list each child puts on ``results`` before it exits, all children's together."""
    context = mp.get_context("spawn")
    ready = context.Semaphore(0)
    stop = context.Event()
    results = context.Queue()
    children = [
        context.Process(target=target, args=(*args, ready, stop, results)) for _ in range(processes)
    ]
    for child in children:
        child.start()
    try:
        for _ in children:
            if not ready.acquire(timeout=timeout_s):
                raise RuntimeError("a child process did not start")
        body()
    finally:
        stop.set()
    items: list[Any] = []
    for _ in children:
        items.extend(results.get(timeout=timeout_s))
    for child in children:
        child.join(30)
    return items


def serve_until_stopped(
    worker: Worker, ready: Any, stop: Any, timeout_s: float, grace_s: float
) -> None:
    """A child of ``run_children``: run ``worker`` on a thread of its own, say it is up
    (``ready``), and stop it when ``stop`` is set (or after ``timeout_s``)."""
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    ready.release()
    stop.wait(timeout_s)
    worker.stop()
    runner.join(grace_s + 30)
