"""The dashboard's server time at 1,000,000 jobs, and what its open pages cost an idle store.

A store of each engine is filled (untimed, ``enqueue_many`` in chunks of 10,000) with
1,000,000 jobs over four queues: mostly ready, some scheduled a day ahead, some
processing and a few thousand dead with error texts. Then each page is requested
through Starlette's ``TestClient`` (in process: the time is the app's, with no
network): ``REQUESTS`` requests per round, p50 and p95 per round, the median of
``ROUNDS`` rounds reported. Last, ``SSE_STREAMS`` event streams are held open on a
uvicorn server in this process for ``SSE_SECONDS`` while nothing happens, and the
process's CPU time over that window is reported as a share of one core (on
PostgreSQL the CPU of the store's server backends beside it).
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from bench_report import percentile
from bench_workloads import payload

import alkstore
from alkstore import EnqueueOpts

JOBS = 1_000_000
QUICK_JOBS = 4_000
QUEUES = 4
FILL_CHUNK = 10_000
SCHEDULED_SHARE = 20
"""One job in ``SCHEDULED_SHARE`` is scheduled a day ahead."""
DEAD_PER_QUEUE = 1_000
QUICK_DEAD_PER_QUEUE = 40
PROCESSING_PER_QUEUE = 2_500
QUICK_PROCESSING_PER_QUEUE = 40
CLAIM_CHUNK = 100
NEEDLE_EVERY = 1_000
"""One payload in ``NEEDLE_EVERY`` carries the word the payload search looks for."""
NEEDLE = "refund"
ERRORS = (
    "TimeoutError: upstream payments-api timed out after 30 s",
    "ValueError: invoice total does not match its lines",
    "ConnectionResetError: peer closed the connection",
)
ERROR_NEEDLE = "timed out"

REQUESTS = 20
QUICK_REQUESTS = 3
ROUNDS = 3
QUICK_ROUNDS = 1
SSE_STREAMS = 10
SSE_SECONDS = 30.0
QUICK_SSE_SECONDS = 1.0
SSE_POLL_S = 2.0
"""The dashboard's default ``poll_s``: what an idle store's open pages re-read at."""
OPEN_TIMEOUT_S = 30.0


@dataclass
class PageTiming:
    """One page's server time: per round its p50 and p95 (ms), and their medians."""

    page: str
    path: str
    rounds_p50_ms: list[float] = field(default_factory=list)
    rounds_p95_ms: list[float] = field(default_factory=list)
    status: int = 0
    failure: str | None = None

    @property
    def p50_ms(self) -> float | None:
        return statistics.median(self.rounds_p50_ms) if self.rounds_p50_ms else None

    @property
    def p95_ms(self) -> float | None:
        return statistics.median(self.rounds_p95_ms) if self.rounds_p95_ms else None

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "p50_ms": self.p50_ms, "p95_ms": self.p95_ms}


@dataclass
class SseCost:
    """What ``streams`` open event streams cost over ``seconds`` of an idle store."""

    streams: int
    seconds: float
    process_cpu_s: float
    server_cpu_s: float | None
    """The store's database server backends' CPU (PostgreSQL), ``None`` elsewhere."""
    reads: int
    """The dashboard's store reads over the window (its watcher's wakes and polls)."""
    failure: str | None = None

    @property
    def process_share(self) -> float:
        return self.process_cpu_s / self.seconds if self.seconds > 0 else 0.0

    @property
    def server_share(self) -> float | None:
        if self.server_cpu_s is None or self.seconds <= 0:
            return None
        return self.server_cpu_s / self.seconds

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "process_share_of_core": self.process_share,
            "server_share_of_core": self.server_share,
        }


@dataclass
class BusyPages:
    """Pages' server time while a worker process drains the queue at full speed."""

    pages: list[PageTiming] = field(default_factory=list)
    drained: int = 0
    """Jobs the worker acked over the timed window."""
    seconds: float = 0.0
    failure: str | None = None

    @property
    def drained_per_s(self) -> float:
        return self.drained / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "pages": [p.as_json() for p in self.pages],
            "drained": self.drained,
            "seconds": self.seconds,
            "drained_per_s": self.drained_per_s,
            "failure": self.failure,
        }


@dataclass
class DashboardRun:
    engine: str
    jobs: int
    filled_s: float = 0.0
    pages: list[PageTiming] = field(default_factory=list)
    sse: SseCost | None = None
    busy: BusyPages | None = None
    failure: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "jobs": self.jobs,
            "filled_s": self.filled_s,
            "pages": [p.as_json() for p in self.pages],
            "sse": self.sse.as_json() if self.sse is not None else None,
            "busy": self.busy.as_json() if self.busy is not None else None,
            "failure": self.failure,
        }


@dataclass(frozen=True)
class Filled:
    """What the pages are asked about: a queue, a job deep in it, a job id to look up."""

    queue: str
    middle_id: int
    lookup_id: int


def queue_names() -> list[str]:
    return [f"dash-{n}" for n in range(QUEUES)]


def fill(store: alkstore.Store, jobs: int, quick: bool) -> Filled:
    """``jobs`` jobs over ``QUEUES`` queues: per queue first the dead and the processing
    ones (claimed from a queue holding only them), then ready and scheduled ones."""
    dead = QUICK_DEAD_PER_QUEUE if quick else DEAD_PER_QUEUE
    processing = QUICK_PROCESSING_PER_QUEUE if quick else PROCESSING_PER_QUEUE
    per_queue = jobs // QUEUES
    later = EnqueueOpts(delay=86_400)
    ids: list[int] = []
    seq = 0

    def batch(count: int) -> list[dict[str, Any]]:
        nonlocal seq
        items = []
        for _ in range(count):
            extra = {"note": f"{NEEDLE} requested"} if seq % NEEDLE_EVERY == 0 else {}
            items.append(payload(seq, order=f"order-{seq}", **extra))
            seq += 1
        return items

    for name in queue_names():
        queue = store.queue(name)
        queue.enqueue_many(batch(dead), EnqueueOpts(max_attempts=1))
        failed = 0
        while failed < dead:
            handles = queue.claim_batch("bench-dashboard", min(CLAIM_CHUNK, dead - failed))
            if not handles:
                break
            for handle in handles:
                handle.fail(ERRORS[failed % len(ERRORS)])
                failed += 1
        queue.enqueue_many(batch(processing))
        claimed = 0
        while claimed < processing:
            got = queue.claim_batch("bench-dashboard", min(CLAIM_CHUNK, processing - claimed))
            if not got:
                break
            claimed += len(got)
        left = max(0, per_queue - dead - processing)
        while left > 0:
            count = min(FILL_CHUNK, left)
            scheduled = count // SCHEDULED_SHARE
            queue.enqueue_many(batch(scheduled), later)
            made = queue.enqueue_many(batch(count - scheduled))
            if name == queue_names()[0]:
                ids += [made[0].id, made[-1].id]
            left -= count
    ordered = sorted(ids)
    return Filled(
        queue=queue_names()[0], middle_id=ordered[len(ordered) // 2], lookup_id=ordered[-1]
    )


def page_paths(filled: Filled) -> list[tuple[str, str]]:
    q = filled.queue
    return [
        ("overview", "/"),
        ("queue, first page", f"/queue?name={q}&state=pending"),
        ("queue, deep keyset page", f"/queue?name={q}&state=pending&before={filled.middle_id}"),
        ("queue, first page (processing)", f"/queue?name={q}&state=processing"),
        ("queue, first page (all states)", f"/queue?name={q}&state=all"),
        ("queue, search by id", f"/queue?name={q}&state=all&q={filled.lookup_id}"),
        ("queue, search payload text", f"/queue?name={q}&state=all&q={NEEDLE}"),
        ("queue, search error text (dead)", f"/queue?name={q}&state=dead&q=timed+out"),
        ("dead letters, error filter", f"/dead?queue={q}&error=timed+out"),
    ]


def time_pages(app: Any, filled: Filled, quick: bool) -> list[PageTiming]:
    from starlette.testclient import TestClient

    requests = QUICK_REQUESTS if quick else REQUESTS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    timings = [PageTiming(page, path) for page, path in page_paths(filled)]
    with TestClient(app) as client:
        for timing in timings:
            client.get(timing.path)  # warm: templates compiled, statements prepared
        for _ in range(rounds):
            for timing in timings:  # interleaved, so a burst of load spreads over pages
                samples = []
                for _ in range(requests):
                    started = time.perf_counter()
                    response = client.get(timing.path)
                    samples.append((time.perf_counter() - started) * 1000)
                    timing.status = response.status_code
                if timing.status != 200:
                    timing.failure = f"HTTP {timing.status}"
                timing.rounds_p50_ms.append(percentile(samples, 0.50) or 0.0)
                timing.rounds_p95_ms.append(percentile(samples, 0.95) or 0.0)
    return timings


@contextmanager
def served(app: Any) -> Iterator[int]:
    """``app`` on a uvicorn server in a thread of this process; yields its port."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + OPEN_TIMEOUT_S
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        server.force_exit = True
        thread.join(OPEN_TIMEOUT_S)
        sock.close()


def open_stream(port: int) -> socket.socket:
    """One page's event stream, its first event read (the stream is live)."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=OPEN_TIMEOUT_S)
    conn.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    received = b""
    while b"retry:" not in received:
        chunk = conn.recv(4096)
        if not chunk:
            raise RuntimeError(f"the event stream closed: {received!r}")
        received += chunk
    if not received.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"the event stream was refused: {received[:60]!r}")
    return conn


def server_backends(store: alkstore.Store) -> Callable[[], float] | None:
    """On PostgreSQL, a reader of the CPU seconds (user + system) of the server backends
    of the store's database, from ``/proc`` (the bench runs beside its own cluster)."""
    dsn = os.environ.get("ALKSTORE_PG_DSN")
    if not dsn or not os.path.isdir("/proc"):
        return None
    import psycopg

    ticks = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        total = 0
        for (pid,) in rows:
            try:
                with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile, or not ours to read
            total += int(fields[11]) + int(fields[12])
        return total / ticks

    return cpu


def sse_cost(engine: str, app: Any, store: alkstore.Store, quick: bool) -> SseCost:
    seconds = QUICK_SSE_SECONDS if quick else SSE_SECONDS
    pulse = app.state.dashboard.pulse
    backend_cpu = server_backends(store) if engine == "postgresql" else None
    with served(app) as port:
        streams = [open_stream(port) for _ in range(SSE_STREAMS)]
        try:
            time.sleep(min(seconds, SSE_POLL_S))  # the watcher's first read done, settled
            reads = pulse.wakes
            server_before = backend_cpu() if backend_cpu is not None else None
            cpu_before, started = time.process_time(), time.perf_counter()
            time.sleep(seconds)
            cpu_s, elapsed = time.process_time() - cpu_before, time.perf_counter() - started
            server_s = None
            if backend_cpu is not None and server_before is not None:
                server_s = backend_cpu() - server_before
            reads = pulse.wakes - reads
        finally:
            for conn in streams:
                conn.close()
    return SseCost(
        streams=len(streams),
        seconds=elapsed,
        process_cpu_s=cpu_s,
        server_cpu_s=server_s,
        reads=reads,
    )


BUSY_CONCURRENCY = 8
"""The draining worker's slots."""
BUSY_START_S = 60.0
"""How long the draining worker may take to start acking: a bound, not a figure."""

_DRAINING_WORKER = (
    "import json, sys, alkstore\n"
    "from alkstore.worker import Worker\n"
    "spec = json.loads(sys.argv[1])\n"
    "with alkstore.open(spec['url'], **spec['opts']) as store:\n"
    "    worker = Worker(store, name='bench-drainer', shutdown_grace_s=5)\n"
    "    @worker.task(spec['queue'], concurrency=spec['concurrency'])\n"
    "    def done(job):\n"
    "        return None\n"
    "    worker.run()\n"
)
"""A worker process that acks every job of one queue as fast as it can claim them."""


def busy_pages(
    spec: alkstore.EngineSpec, app: Any, store: alkstore.Store, filled: Filled, quick: bool
) -> BusyPages:
    """The overview and the queue's first page timed while another process's worker
    drains that queue: the pages read a store whose rows change under them, and the
    dashboard's watcher is woken by every ack."""
    import json
    import subprocess
    import sys

    from starlette.testclient import TestClient

    busy = BusyPages()
    paths = [
        ("overview, workers draining", "/"),
        ("queue first page, workers draining", f"/queue?name={filled.queue}&state=pending"),
    ]
    queue = store.queue(filled.queue)
    plan = {
        "url": spec.url,
        "opts": dict(spec.opts),
        "queue": filled.queue,
        "concurrency": BUSY_CONCURRENCY,
    }
    child = subprocess.Popen([sys.executable, "-c", _DRAINING_WORKER, json.dumps(plan)])
    try:
        first = queue.stats().ready
        give_up = time.monotonic() + BUSY_START_S
        while queue.stats().ready == first:
            if time.monotonic() > give_up or child.poll() is not None:
                busy.failure = "the draining worker never acked a job"
                return busy
            time.sleep(0.1)
        requests = QUICK_REQUESTS if quick else REQUESTS
        rounds = QUICK_ROUNDS if quick else ROUNDS
        timings = [PageTiming(page, path) for page, path in paths]
        before = queue.stats().ready
        started = time.perf_counter()
        with TestClient(app) as client:
            for _ in range(rounds):
                for timing in timings:
                    samples = []
                    for _ in range(requests):
                        begun = time.perf_counter()
                        response = client.get(timing.path)
                        samples.append((time.perf_counter() - begun) * 1000)
                        timing.status = response.status_code
                    if timing.status != 200:
                        timing.failure = f"HTTP {timing.status}"
                    timing.rounds_p50_ms.append(percentile(samples, 0.50) or 0.0)
                    timing.rounds_p95_ms.append(percentile(samples, 0.95) or 0.0)
        busy.seconds = time.perf_counter() - started
        busy.drained = before - queue.stats().ready
        busy.pages = timings
    finally:
        child.terminate()
        child.wait(OPEN_TIMEOUT_S)
    return busy


def dashboard_run(
    engine: str, provider: alkstore.EngineProvider, quick: bool, jobs: int | None = None
) -> DashboardRun:
    """The page timings and the event streams' cost on one freshly provisioned store
    of ``jobs`` jobs (default ``JOBS``, ``QUICK_JOBS`` when quick)."""
    from alkstore.dashboard import create_app

    if jobs is None:
        jobs = QUICK_JOBS if quick else JOBS
    run = DashboardRun(engine=engine, jobs=jobs)
    with provider.provision() as spec:
        store = provider.open(spec.url, **spec.opts)
        try:
            started = time.perf_counter()
            filled = fill(store, jobs, quick)
            run.filled_s = time.perf_counter() - started
            app = create_app(store, authorize=lambda request: "read", poll_s=SSE_POLL_S)
            run.pages = time_pages(app, filled, quick)
            run.sse = sse_cost(engine, app, store, quick)
            if provider.capabilities.multi_process:
                run.busy = busy_pages(spec, app, store, filled, quick)
        finally:
            store.close()
    return run


def render_dashboard(runs: Sequence[DashboardRun]) -> str:
    if not runs:
        return ""
    jobs = max(run.jobs for run in runs)
    lines = [
        f"Dashboard server time at {jobs:,} jobs (TestClient, in process; medians of the "
        "rounds' p50 / p95), and the CPU of 10 open event streams on the idle store:"
    ]
    for run in runs:
        if run.failure is not None:
            lines.append(f"  {run.engine:<12} FAILED ({run.failure})")
            continue
        lines.append(f"  {run.engine} (filled in {run.filled_s:.1f} s, untimed):")
        for page in run.pages:
            if page.failure is not None or page.p50_ms is None or page.p95_ms is None:
                text = f"FAILED ({page.failure})"
            else:
                text = f"p50 {page.p50_ms:8.2f} / p95 {page.p95_ms:8.2f} ms"
            lines.append(f"    {page.page:<34} {text}")
        sse = run.sse
        if sse is not None:
            text = (
                f"{sse.streams} streams, {sse.seconds:.0f} s: process {sse.process_share:.1%} "
                f"of a core, {sse.reads} store reads"
            )
            if sse.server_share is not None:
                text += f"; server backends {sse.server_share:.1%}"
            lines.append(f"    {'event streams, idle store':<34} {text}")
        busy = run.busy
        if busy is not None:
            if busy.failure is not None:
                lines.append(f"    {'busy store':<34} FAILED ({busy.failure})")
            for page in busy.pages:
                if page.p50_ms is None or page.p95_ms is None:
                    continue
                text = f"p50 {page.p50_ms:8.2f} / p95 {page.p95_ms:8.2f} ms"
                lines.append(f"    {page.page:<34} {text}")
            if busy.pages:
                lines.append(
                    f"    {'(the worker drained meanwhile)':<34} "
                    f"{busy.drained_per_s:,.0f} jobs/s ({busy.drained:,} in {busy.seconds:.1f} s)"
                )
    return "\n".join(lines)
