"""Helpers for the suite's worker properties (contract §12).

The worker (``alkstore.worker``) is driven through its public surface only:

- ``RunningWorker``: ``worker.run()`` on a thread of the test, for the
  properties where signals are not the point; the test stops it.
- ``WorkerChild``: a worker in a process of its own (``sys.executable -c``),
  for the properties about signals: the parent sends SIGTERM or SIGKILL and
  then reads the child's exit code, its stderr and what it reported. The child
  reopens the test's store from its ``EngineSpec`` (``WorkerPlan``), may
  enqueue jobs first (so the property holds on an engine one process owns,
  too), and runs the worker on its main thread, where the signals land.
  Its handlers report ``started``/``finished`` lines on stdout and the
  worker's log lines go there too: a pipe keeps what was written before a
  SIGKILL, so the parent learns exactly what the dead worker did.
- ``enqueuer_on_commands``: a child process (the kit's ``child_process``
  shape) that enqueues to the queue each command names, for the wake property.
"""

from __future__ import annotations

import json
import logging
import pickle
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any, TypeVar

from alkstore import EngineSpec, Job, QueueOpts
from alkstore.worker import Worker

from .processes import Report, child_process, open_in_child

T = TypeVar("T")

POLL_S = 0.02
"""How often ``eventually`` looks again."""

REPORT_PREFIX = "alkstore-kit-worker: "
"""Marks the child's report lines on stdout (anything else printed there is ignored)."""

_CHILD_ENTRY = (
    "import json, sys; "
    "sys.path[:] = json.loads(sys.stdin.buffer.readline()); "
    "from alkstore_conformance.helpers.workers import worker_child_main; "
    "worker_child_main()"
)
"""The child's program: the parent's ``sys.path`` first (so an engine given as
``module:object`` imports as it did in the parent), then the plan, pickled."""

_ACK_LINE = re.compile(r"job ack: queue=\S+ id=(\d+) attempt=(\d+)")
"""The worker's log line for an applied ack (contract §12.3: one line per outcome)."""


def eventually(probe: Callable[[], T | None], what: str, timeout_s: float) -> T:
    """Poll ``probe`` until it returns something true (a job, ``True``, a non-empty
    list) and return that; fail the test with ``what`` if ``timeout_s`` passes first."""
    give_up_at = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > give_up_at:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(POLL_S)


# -- a worker on a thread of the test -------------------------------------------------------


class RunningWorker:
    """``worker.run()`` on a daemon thread; ``stop`` stops and joins it.

    A context manager: on exit a worker still running is stopped at once, so no
    test leaves one behind; ``run`` raising fails the test."""

    def __init__(self, worker: Worker, time_limit_s: float) -> None:
        self.worker = worker
        self.time_limit_s = time_limit_s
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name=f"kit-{worker.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:
            self._error.append(exc)

    def stop(self, *, force: bool = False) -> None:
        """``worker.stop(force=...)``, then wait (bounded) until ``run`` returned."""
        self.worker.stop(force=force)
        self.join()

    def join(self) -> None:
        self._thread.join(self.time_limit_s)
        assert not self._thread.is_alive(), f"{self.worker.name}: run() did not return"
        if self._error:
            raise self._error[0]

    def __enter__(self) -> RunningWorker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread.is_alive():
            self.worker.stop(force=True)
        if exc is None:
            self.join()
        else:
            self._thread.join(self.time_limit_s)  # the test's own failure comes first


# -- a worker in a child process -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What a worker child does (picklable): reopen the store, enqueue ``payloads``
    (if any) to ``queue``, then run a worker named ``worker_name`` serving ``queue``
    with ``concurrency`` slots and ``shutdown_grace_s``. Each handler reports
    ``started``, sleeps its payload's ``sleep_s`` and reports ``finished``.
    Once ``run`` returns the child reports ``stopped`` with the state of each job it
    enqueued, and exits (0, unless something raised)."""

    engine_name: str
    engine_group: str
    spec: EngineSpec
    queue: str
    worker_name: str
    concurrency: int
    shutdown_grace_s: float
    visibility_timeout_s: int
    payloads: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Run:
    """One handler call in a worker child, as it reported it."""

    job_id: int
    attempt: int


@dataclass
class ChildHistory:
    """Everything a worker child reported, in order."""

    started: list[Run] = field(default_factory=list)
    finished: list[Run] = field(default_factory=list)
    acked: list[Run] = field(default_factory=list)
    """Acks the worker logged as applied."""
    log: list[str] = field(default_factory=list)

    def in_flight(self) -> set[int]:
        """Jobs whose handler started and has not finished (per attempt)."""
        return {run.job_id for run in set(self.started) - set(self.finished)}

    def started_ids(self) -> set[int]:
        return {run.job_id for run in self.started}

    def finished_ids(self) -> set[int]:
        return {run.job_id for run in self.finished}


JobStates = dict[int, tuple[str, int] | None]
"""``{job id: (state, attempts), or None once the job is gone}`` as the child saw them."""


class WorkerChild:
    """The parent side of a worker child: start it, follow its reports, signal it.

    A context manager: on exit a child still running is killed and reaped, and
    its pipes are drained, so no test leaves a process behind."""

    def __init__(self, plan: WorkerPlan, time_limit_s: float) -> None:
        self.time_limit_s = time_limit_s
        self.history = ChildHistory()
        self._reports: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._changed = threading.Condition()
        self._stderr: list[bytes] = []
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CHILD_ENTRY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        assert self._process.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_reports, args=(self._process.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self._process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        with self._process.stdin as stdin:
            stdin.write(json.dumps(sys.path).encode() + b"\n")
            pickle.dump(plan, stdin)

    # -- reading ---------------------------------------------------------------------------
    def _read_reports(self, stdout: IO[bytes]) -> None:
        for raw in stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if not line.startswith(REPORT_PREFIX):
                continue
            kind, value = json.loads(line[len(REPORT_PREFIX) :])
            with self._changed:
                self._record(kind, value)
                self._changed.notify_all()
            if kind not in ("started", "finished", "log"):
                self._reports.put((kind, value))
        self._reports.put(("eof", None))

    def _record(self, kind: str, value: Any) -> None:
        if kind == "started":
            self.history.started.append(Run(*value))
        elif kind == "finished":
            self.history.finished.append(Run(*value))
        elif kind == "log":
            self.history.log.append(value)
            ack = _ACK_LINE.search(value)
            if ack is not None:
                self.history.acked.append(Run(int(ack[1]), int(ack[2])))

    def _read_stderr(self, stderr: IO[bytes]) -> None:
        for raw in stderr:
            self._stderr.append(raw)

    def expect(self, kind: str) -> Any:
        """The next report other than ``started``/``finished``/``log``: it must be ``kind``."""
        try:
            got, value = self._reports.get(timeout=self.time_limit_s)
        except queue.Empty:
            raise AssertionError(f"the worker child reported no {kind!r} in time") from None
        assert got == kind, f"the worker child reported {got!r}, expected {kind!r}: {self.stderr}"
        return value

    def wait_until(self, what: str, predicate: Callable[[ChildHistory], bool]) -> None:
        """Block until the reports so far satisfy ``predicate`` (bounded)."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self.history), self.time_limit_s):
                raise AssertionError(f"the worker child never reported {what}: {self.history}")

    # -- the process -------------------------------------------------------------------------
    def send_signal(self, signum: int) -> None:
        self._process.send_signal(signum)

    def wait(self, timeout_s: float) -> int:
        """The exit code (negative: killed by that signal); fails if it takes longer."""
        try:
            code = self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker child did not exit within {timeout_s} s") from None
        for reader in self._readers:
            reader.join(self.time_limit_s)  # every report written before the exit is read
        return code

    def running_after(self, seconds: float) -> bool:
        """Whether the child is still running ``seconds`` from now."""
        try:
            self._process.wait(seconds)
        except subprocess.TimeoutExpired:
            return True
        return False

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def __enter__(self) -> WorkerChild:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait(self.time_limit_s)
        for reader in self._readers:
            reader.join(self.time_limit_s)
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()


class _Reporter:
    """The child's side: one JSON line per report on stdout, whole lines from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def put(self, kind: str, value: Any) -> None:
        line = REPORT_PREFIX + json.dumps([kind, value]) + "\n"
        with self._lock:
            sys.stdout.write(line)
            sys.stdout.flush()  # in the pipe now: a SIGKILL later cannot take it back


class _ReportingLogHandler(logging.Handler):
    def __init__(self, reporter: _Reporter) -> None:
        super().__init__(logging.INFO)
        self._reporter = reporter

    def emit(self, record: logging.LogRecord) -> None:
        self._reporter.put("log", record.getMessage())


def worker_child_main() -> None:
    """The worker child's body (see ``WorkerPlan``); its exit code is the property's."""
    plan: WorkerPlan = pickle.load(sys.stdin.buffer)
    reporter = _Reporter()
    worker_log = logging.getLogger("alkstore.worker")
    worker_log.setLevel(logging.INFO)
    worker_log.addHandler(_ReportingLogHandler(reporter))
    worker_log.propagate = False  # stderr stays for what nobody expected
    with open_in_child(plan.engine_name, plan.engine_group, plan.spec) as store:
        served = store.queue(plan.queue, QueueOpts(visibility_timeout_s=plan.visibility_timeout_s))
        ids = served.enqueue_many(plan.payloads) if plan.payloads else []
        worker = Worker(store, name=plan.worker_name, shutdown_grace_s=plan.shutdown_grace_s)

        @worker.task(plan.queue, concurrency=plan.concurrency)
        def handle(job: Job) -> None:
            reporter.put("started", [job.id, job.attempts])
            time.sleep(float(job.payload["sleep_s"]))
            reporter.put("finished", [job.id, job.attempts])

        reporter.put("ready", ids)
        worker.run()
        states: list[tuple[int, str | None, int | None]] = []
        for job_id in ids:
            job = served.get_job(job_id)
            states.append(
                (job_id, None, None) if job is None else (job_id, job.state, job.attempts)
            )
        reporter.put("stopped", states)


def job_states(reported: list[list[Any]]) -> JobStates:
    """The child's ``stopped`` report as ``JobStates``."""
    return {
        int(job_id): None if state is None else (str(state), int(attempts))
        for job_id, state, attempts in reported
    }


# -- another process that enqueues ------------------------------------------------------------


@child_process
def enqueuer_on_commands(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    commands: Any,
    results: Any,
    time_limit_s: float,
) -> Report:
    """Say ``ready``; on every command (a queue name) enqueue one job there and report
    ``("enqueued", (queue, id, time.time()))`` right after it committed; a ``None``
    command ends the loop."""
    with open_in_child(engine_name, engine_group, spec) as store:
        results.put(("ready", None))
        while (name := commands.get(timeout=time_limit_s)) is not None:
            job_id = store.queue(name).enqueue({"from": "another process"})
            results.put(("enqueued", (name, job_id, time.time())))
    return ("done", None)
