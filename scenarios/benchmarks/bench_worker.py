"""The worker rows: jobs/s through ``alkstore.worker`` beside a hand-written loop.

Each row starts its processes on an empty queue and waits until every one is
ready and has drained a few warm-up jobs; then one transaction commits the
whole backlog (N jobs on SQLite, N/2 on PostgreSQL), and a round times from
that commit to the first ``stats()`` that sees the queue empty (polled every
10 ms). The same processes drain ``DRAIN_ROUNDS`` such backlogs one after
another and the row shows the median round (a shared machine moves a single
drain by tens of percent). The processes are then sent SIGTERM and must exit
cleanly.

- **worker**: ``alkstore worker bench_worker_app:worker --concurrency 1`` (the
  real CLI, at its default ``--log-level info``: one line per job on stderr,
  here into a file), or, where that command does not exist, ``python -m
  bench_worker_app worker`` (the same ``Worker`` object, ``worker.run()``).
- **worker, quiet** (one process): the same command with ``--log-level
  warning``, so the row above minus its line per job. Nothing then says the
  process is ready, so its warm-up is its start: the backlog is committed
  once the warm-up jobs are acked (by the only process there is).
- **hand loop**: ``python -m bench_worker_app hand``: ``claim_batch(1)``,
  ``claim_wait`` only when that is empty, the same no-op, ``ack``.

Both sides spawn the same way, claim the same way and run the same handler,
so the worker's overhead per job is what its rate loses against the loop's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any, NamedTuple

from bench_report import Measurement
from bench_worker_app import QUEUE, READY_LINE
from bench_workloads import CHILD_START_TIMEOUT_S, Bench, Workload, payloads

import alkstore

HERE = Path(__file__).resolve().parent
APP = "bench_worker_app:worker"
CONCURRENCY = 1
"""Jobs each worker process runs at once (the hand loop claims as many per call)."""
POSTGRES_SHARE = 2
"""PostgreSQL drains N / 2 jobs: one process acks ~1k/s there, so N would take half a minute."""
WARMUP_JOBS_PER_PROCESS = 20
DRAIN_ROUNDS = 3
"""Backlogs each row's processes drain one after another; the row shows the median."""
SETTLE_S = 0.5
"""Pause after every child is ready, so each is blocked in its wait before the warm-up."""
POLL_S = 0.01
STOP_TIMEOUT_S = 15.0
"""A graceful stop of an idle worker takes milliseconds; after this the child is killed."""
OVERHEAD_TARGET = 0.15
"""The worker may take at most 15% longer per job than the hand loop."""


QUIET_LOG_LEVEL = "warning"
"""The quiet row's ``--log-level``: the worker logs no line per job."""


@dataclass(frozen=True)
class Pair:
    """A worker row and the hand-loop row it is read against."""

    processes: int
    hand_key: str
    worker_key: str
    how: str = ""
    """What sets the worker row apart, when two pairs have the same process count."""


PAIRS: Sequence[Pair] = (
    Pair(1, "worker_hand_1p", "worker_1p"),
    Pair(1, "worker_hand_1p", "worker_quiet_1p", f"--log-level {QUIET_LOG_LEVEL}"),
    Pair(4, "worker_hand_4p", "worker_4p"),
)


class Command(NamedTuple):
    """How one child process starts."""

    argv: list[str]
    how: str
    """How the row's notes describe it."""
    announces: bool = True
    """The child says when it is ready (``Child.ready``); else its warm-up is the sign."""


# --------------------------------------------------------------------------- how children start


@cache
def cli_has_worker_command() -> bool:
    """Whether this install's ``alkstore`` CLI has the ``worker`` command."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "alkstore.cli", "worker", "--help"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def worker_command(spec: alkstore.EngineSpec, log_level: str | None = None) -> Command:
    """One worker process: the CLI (at ``log_level``, else its default), else the app."""
    if cli_has_worker_command():
        # The store travels in ALKSTORE_URL / ALKSTORE_OPTS (see child_env).
        args = ["--concurrency", str(CONCURRENCY)]
        if log_level is not None:
            args += ["--log-level", log_level]
        argv = [sys.executable, "-m", "alkstore.cli", "worker", APP, *args]
        how = f"`alkstore worker {APP} {' '.join(args)}`"
        # Its "started" line is an info record: below info nothing announces it.
        return Command(argv, how, announces=log_level in (None, "debug", "info"))
    # The in-process app configures no logging: it logs no line per job at any level.
    return Command(
        _app_command("worker", spec), "`python -m bench_worker_app worker` (no CLI command)"
    )


def hand_command(spec: alkstore.EngineSpec) -> Command:
    return Command(_app_command("hand", spec), f"hand loop: claim_batch({CONCURRENCY}) + ack")


def _app_command(mode: str, spec: alkstore.EngineSpec) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench_worker_app",
        mode,
        "--url",
        spec.url,
        "--opts",
        json.dumps(dict(spec.opts)),
        "--concurrency",
        str(CONCURRENCY),
    ]


def child_env(spec: alkstore.EngineSpec) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env["ALKSTORE_URL"] = spec.url
    env["ALKSTORE_OPTS"] = " ".join(f"{name}={value}" for name, value in spec.opts.items())
    return env


# --------------------------------------------------------------------------- the children


@dataclass
class Child:
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def ready(self) -> bool:
        """The child said it is ready: our line, or the worker's own log line
        ``worker NAME started: QUEUE xN`` (the CLI logs at info by default)."""
        return READY_LINE in _read(self.out) or " started: " in _read(self.err)

    def tail(self) -> str:
        lines = (_read(self.err) or _read(self.out)).strip().splitlines()
        return lines[-1][:160] if lines else f"exit code {self.proc.returncode}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


@contextmanager
def children(
    command: list[str], env: Mapping[str, str], count: int, directory: Path
) -> Iterator[list[Child]]:
    """Start ``count`` copies of ``command`` (output to files, so no pipe ever fills);
    SIGTERM them on the way out, and kill any that does not exit in time."""
    started: list[Child] = []
    files: list[IO[bytes]] = []
    try:
        for n in range(count):
            out, err = directory / f"child-{n}.out", directory / f"child-{n}.err"
            stdout, stderr = out.open("wb"), err.open("wb")
            files += [stdout, stderr]
            proc = subprocess.Popen(command, env=dict(env), stdout=stdout, stderr=stderr)
            started.append(Child(proc, out, err))
        yield started
    finally:
        for child in started:
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        for child in started:
            try:
                child.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()
        for file in files:
            file.close()


def _wait_ready(kids: Sequence[Child], deadline: float) -> str | None:
    """``None`` once every child is ready, else why not."""
    while time.monotonic() < deadline:
        dead = [kid for kid in kids if kid.proc.poll() is not None]
        if dead:
            return f"a child exited before it was ready: {dead[0].tail()}"
        if all(kid.ready() for kid in kids):
            return None
        time.sleep(0.05)
    return "children not ready in time"


def _remaining(queue: alkstore.Queue) -> tuple[int, int]:
    """(jobs not yet acked, dead jobs)."""
    s = queue.stats()
    return s.ready + s.scheduled + s.processing + s.lapsed, s.dead


def _wait_empty(queue: alkstore.Queue, deadline: float) -> tuple[float, int]:
    """Poll until the queue holds no live job or ``deadline`` passes: (when, jobs left)."""
    while True:
        left, _ = _remaining(queue)
        now = time.perf_counter()
        if left == 0 or now >= deadline:
            return now, left
        time.sleep(POLL_S)


# --------------------------------------------------------------------------- the rows


def drain_through(bench: Bench, processes: int, command: Command) -> Measurement:
    """Start ``processes`` children, warm them up, commit the backlog in one
    transaction and time it until the queue is empty; then stop the children."""
    if bench.store is None:
        raise RuntimeError("the worker rows run on engines only")
    if not command.announces and processes != 1:
        # With several silent children, one could drain the warm-up while another starts.
        raise ValueError("a command that does not announce readiness runs in one process only")
    jobs = bench.jobs if bench.engine != "postgresql" else max(1, bench.jobs // POSTGRES_SHARE)
    queue = bench.queue()
    argv, how = command.argv, command.how
    backlog = payloads(jobs)
    m = Measurement()
    with tempfile.TemporaryDirectory(prefix="alkstore-bench-worker-") as scratch:
        with children(argv, child_env(bench.spec), processes, Path(scratch)) as kids:
            if command.announces:
                why = _wait_ready(kids, time.monotonic() + CHILD_START_TIMEOUT_S)
                if why is not None:
                    return Measurement(failure=why)
                time.sleep(SETTLE_S)
            queue.enqueue_many(payloads(WARMUP_JOBS_PER_PROCESS * processes))
            _, left = _wait_empty(queue, time.perf_counter() + CHILD_START_TIMEOUT_S)
            if left:
                exited = [kid.tail() for kid in kids if kid.proc.poll() is not None]
                return Measurement(
                    failure=f"warm-up jobs not drained ({left} left)"
                    + (f": {exited[0]}" if exited else "")
                )
            rates: list[tuple[float, int, float]] = []  # (jobs/s, jobs, seconds) per round
            for _ in range(1 if bench.quick else DRAIN_ROUNDS):
                with bench.store.transaction() as tx:
                    for item in backlog:
                        tx.enqueue(QUEUE, item)
                started = time.perf_counter()
                ended, left = _wait_empty(queue, started + bench.budget_s)
                seconds = ended - started
                rates.append(((jobs - left) / seconds, jobs - left, seconds))
                if left:
                    m.capped = True
                    break
            _, m.jobs, m.seconds = sorted(rates)[len(rates) // 2]  # the median round
            if len(rates) > 1:
                m.notes.append(
                    "rounds: "
                    + ", ".join(f"{rate:,.0f}/s" for rate, _, _ in rates)
                    + " (median shown)"
                )
            _, dead = _remaining(queue)
            m.errors += dead
            if dead:
                m.notes.append(f"{dead} job(s) went dead")
        unclean = [kid for kid in kids if kid.proc.returncode not in (0, -signal.SIGTERM)]
    m.errors += len(unclean)
    m.notes.insert(0, f"{processes} process(es), {how}; {jobs:,} jobs")
    m.notes += [f"exit {kid.proc.returncode}: {kid.tail()}" for kid in unclean]
    return m


def _hand(processes: int) -> Workload:
    def workload(bench: Bench) -> Measurement:
        return drain_through(bench, processes, hand_command(bench.spec))

    workload.__doc__ = f"The hand-written claim + ack loop in {processes} process(es)."
    return workload


def _worker(processes: int, log_level: str | None = None) -> Workload:
    def workload(bench: Bench) -> Measurement:
        return drain_through(bench, processes, worker_command(bench.spec, log_level))

    workload.__doc__ = f"The worker (no-op handler) in {processes} process(es)." + (
        f" At --log-level {log_level}." if log_level else ""
    )
    return workload


hand_one, worker_one = _hand(1), _worker(1)
worker_quiet_one = _worker(1, QUIET_LOG_LEVEL)
hand_four, worker_four = _hand(4), _worker(4)


# --------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Overhead:
    processes: int
    hand_rate: float
    worker_rate: float
    how: str = ""

    @property
    def per_job_us(self) -> float:
        """Wall-clock time the worker adds per job (over all processes together)."""
        return (1 / self.worker_rate - 1 / self.hand_rate) * 1e6

    @property
    def slower(self) -> float:
        """How much longer the worker takes per job than the hand loop (0.10 = 10%)."""
        return self.hand_rate / self.worker_rate - 1

    def as_json(self) -> dict[str, Any]:
        return {
            "processes": self.processes,
            "worker": self.how or "default",
            "hand_rate_per_s": self.hand_rate,
            "worker_rate_per_s": self.worker_rate,
            "overhead_per_job_us": self.per_job_us,
            "slower": self.slower,
            "within_target": self.slower <= OVERHEAD_TARGET,
        }


def overheads(results: Mapping[str, Measurement]) -> list[Overhead]:
    """The worker against the hand loop, per process count, where both rows ran."""
    found = []
    for pair in PAIRS:
        hand, worker = results.get(pair.hand_key), results.get(pair.worker_key)
        if hand is None or worker is None or hand.rate is None or worker.rate is None:
            continue
        found.append(Overhead(pair.processes, hand.rate, worker.rate, pair.how))
    return found


def worker_overhead_json(
    columns: Sequence[str], results: Mapping[str, Mapping[str, Measurement]]
) -> dict[str, list[dict[str, Any]]]:
    return {column: [o.as_json() for o in overheads(results.get(column, {}))] for column in columns}


def render_worker_overhead(
    columns: Sequence[str], results: Mapping[str, Mapping[str, Measurement]]
) -> str:
    lines = [
        f"Worker overhead per job against the hand loop, same engine "
        f"(target: at most {OVERHEAD_TARGET:.0%} slower):"
    ]
    for column in columns:
        for o in overheads(results.get(column, {})):
            verdict = "ok" if o.slower <= OVERHEAD_TARGET else "ABOVE"
            how = f" ({o.how})" if o.how else ""
            lines.append(
                f"  {column:<18} {o.processes} process(es): worker{how} {o.worker_rate:,.0f}/s, "
                f"hand loop {o.hand_rate:,.0f}/s: {o.per_job_us:+.1f} us/job "
                f"({o.slower:+.0%})  {verdict}"
            )
    return "\n".join(lines) if len(lines) > 1 else ""
