"""Worker crash storm: SIGKILLed workers, restarted, and not one job lost.

N jobs ``{"n": i}`` go into one queue with a short visibility timeout. K worker
processes (``spawn``) claim them -- half with ``claim_wait``, half with
``claim_batch`` -- and "do the work" by appending a record to their own
append-only log, flushed per record; then they ack and log the ack's result.
A supervisor SIGKILLs a random working worker every ``kill_every_s`` and
starts a replacement; abandoned claims come back when their deadline lapses.
Optional disruptions (the PostgreSQL server stopped and started, see
``run.py``) run once a set share of the jobs is acked, so they land mid-run.
Then the kills stop, the rest drains, and the logs and the store are compared:

* lost -- a job gone from the store (or dead) although no attempt of it was
  acked and no attempt's ack outcome is unknown: must be 0;
* acked True twice -- one job acked ``True`` by two claims: must be 0;
* duplicate claims -- one ``(job id, attempt)`` worked by two processes: must be 0;
* stranded -- a job still pending or processing at the end: must be 0;
* unexpected errors -- an exception a worker saw, other than ``EngineUnavailable``
  during a disruption: must be 0;
* processed more than once -- at-least-once at work: allowed, printed.

A SIGKILL between a committed ack and its log line leaves that attempt's
outcome unknown; such a job, gone from the store, counts as completed
("acked, record cut by the kill"), never as lost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import random
import signal
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

from fault_report import ScenarioResult, count, must_be_zero

import alkstore
from alkstore import EngineSpec, EngineUnavailable, JobState, QueueOpts

SCENARIO = "crash storm"
QUEUE = "fault_storm"
ENQUEUE_CHUNK = 500
NEVER_EXHAUSTED = 1_000_000
"""Every SIGKILL of a holder burns an attempt; a job must never die of the storm."""
CLAIM_WAIT_S = 0.5
ERROR_PAUSE_S = 0.1
"""A worker that hit an error pauses before trying again (the server may be down)."""
STOP_FILE = "stop"
STORE_CHECK_MAX = 200
"""The drain asks the store about at most this many jobs the logs have not settled."""
JOIN_TIMEOUT_S = 10.0
STORE_RETRY_S = 30.0
"""How long the supervisor keeps retrying its own reads through an outage."""


@dataclass(frozen=True, slots=True)
class StormConfig:
    jobs: int = 2000
    workers: int = 4
    kill_every_s: float = 0.3
    visibility_timeout_s: int = 2
    work_s: float = 0.005
    """Time each job's "work" takes, so the storm outlasts several kills."""
    batch: int = 8
    storm_s: float = 60.0
    """Cap on the kill phase (it ends earlier once every job is acked)."""
    drain_s: float = 60.0
    """Cap on the drain phase, after the last kill."""
    seed: int = 0
    sigkill_workers: bool = True
    """False: no worker is killed (the pressure scenarios press on the database instead)."""


@dataclass(frozen=True, slots=True)
class Disruption:
    """Something done to the database once ``at_fraction`` of the jobs are acked,
    so it always lands mid-run, whatever the machine's speed."""

    at_fraction: float
    label: str
    action: Callable[[], None]


Outage = tuple[str, float, float]
"""A disruption that ran: (label, began, ended), wall-clock times."""


# --------------------------------------------------------------------------- worker


def storm_worker(
    engine: str,
    spec: EngineSpec,
    log_dir: str,
    worker_id: str,
    batch: int,
    work_s: float,
) -> None:
    """One worker process: claim, log the work, ack, log the ack; until the stop file appears.

    ``batch == 1`` claims with ``claim_wait``, otherwise with ``claim_batch``.
    Every exception is logged and survived (the supervisor judges them): a
    worker gives up on nothing, like a production worker under a supervisor.
    """
    # The connection pool's own warnings during an outage would bury the figures;
    # every error that reaches this worker is logged below and judged instead.
    logging.disable(logging.WARNING)
    stop_file = Path(log_dir) / STOP_FILE
    with line_log(Path(log_dir), worker_id) as record:
        provider = alkstore.load_engine(engine)
        store: alkstore.Store | None = None
        try:
            while not stop_file.exists():
                store = _work_once(provider, store, spec, worker_id, batch, work_s, record)
        finally:
            if store is not None:
                store.close()


@contextlib.contextmanager
def line_log(log_dir: Path, worker_id: str) -> Iterator[Callable[..., None]]:
    """A worker's own log in ``log_dir``: ``record(event, **fields)`` appends one JSON
    line with the worker id and the time.

    Line buffering: each record reaches the kernel in one write as soon as it is
    made, so a SIGKILL loses at most the record being made.
    """
    with open(log_dir / f"{worker_id}.log", "a", encoding="utf-8", buffering=1) as log:

        def record(event: str, **fields: Any) -> None:
            log.write(json.dumps({"event": event, "worker": worker_id, "t": time.time(), **fields}))
            log.write("\n")

        yield record


def _work_once(
    provider: alkstore.EngineProvider,
    store: alkstore.Store | None,
    spec: EngineSpec,
    worker_id: str,
    batch: int,
    work_s: float,
    record: Callable[..., None],
) -> alkstore.Store | None:
    """One claim and its work; returns the store to use next time (``None``: reopen)."""
    try:
        if store is None:
            store = provider.open(spec.url, **spec.opts)
        queue = store.queue(QUEUE)
        if batch == 1:
            handle = queue.claim_wait(worker_id, timeout=CLAIM_WAIT_S)
            handles = [handle] if handle is not None else []
        else:
            handles = queue.claim_batch(worker_id, batch)
            if not handles:
                time.sleep(CLAIM_WAIT_S / 10)
    except Exception as exc:
        record("error", during="open" if store is None else "claim", **_error(exc))
        time.sleep(ERROR_PAUSE_S)
        return store
    for handle in handles:
        claim = {"id": handle.id, "n": handle.payload["n"], "attempt": handle.attempts}
        time.sleep(work_s)
        record("work", **claim)
        try:
            acked = handle.ack()
        except Exception as exc:
            record("error", during="ack", **_error(exc))
            record("ack", ack=None, **claim)  # outcome unknown: it may have committed
            time.sleep(ERROR_PAUSE_S)
        else:
            record("ack", ack=acked, **claim)
    return store


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)[:200]}


def sigkill(process: SpawnProcess) -> None:
    """SIGKILL ``process`` (one already gone is fine) and reap it."""
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    process.join()


def stop_processes(
    stop_file: Path, processes: Iterable[SpawnProcess], timeout_s: float = JOIN_TIMEOUT_S
) -> None:
    """Ask every process to stop (``stop_file`` appears), then SIGKILL whoever has not
    stopped within ``timeout_s`` of the asking."""
    stop_file.touch()
    deadline = time.monotonic() + timeout_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            sigkill(process)


# --------------------------------------------------------------------------- supervisor


@dataclass
class _Workers:
    """The K worker slots: start, SIGKILL and replace, stop."""

    context: multiprocessing.context.SpawnContext
    engine: str
    spec: EngineSpec
    log_dir: Path
    config: StormConfig
    slots: list[tuple[str, SpawnProcess]] = field(default_factory=list)
    started: int = 0
    kills: int = 0
    died_alone: int = 0
    """Workers that ended without being killed or told to stop: a crash to report."""

    def start_all(self) -> None:
        self.slots = [self._spawn(slot) for slot in range(self.config.workers)]

    def _spawn(self, slot: int) -> tuple[str, SpawnProcess]:
        worker_id = f"w{slot}-{self.started}"
        process = self.context.Process(
            target=storm_worker,
            args=(
                self.engine,
                self.spec,
                str(self.log_dir),
                worker_id,
                1 if slot % 2 == 0 else self.config.batch,  # even slots use claim_wait
                self.config.work_s,
            ),
            name=f"storm-{worker_id}",
            daemon=True,
        )
        process.start()
        self.started += 1
        return worker_id, process

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a random worker that is at work (has logged something) and replace it.

        Killing a worker still booting would test nothing but start-up, and on a
        loaded machine the storm would then make no progress at all.
        """
        working = [
            slot for slot, (worker_id, _) in enumerate(self.slots) if self._at_work(worker_id)
        ]
        if not working:
            return
        slot = rng.choice(working)
        sigkill(self.slots[slot][1])
        self.kills += 1
        self.slots[slot] = self._spawn(slot)

    def _at_work(self, worker_id: str) -> bool:
        log = self.log_dir / f"{worker_id}.log"
        return log.exists() and log.stat().st_size > 0

    def replace_dead(self) -> None:
        """A worker never ends on its own; if one did, count it and start another."""
        for slot, (_, process) in enumerate(self.slots):
            if not process.is_alive():
                process.join()
                self.died_alone += 1
                self.slots[slot] = self._spawn(slot)

    def stop(self) -> None:
        """Ask every worker to stop, then SIGKILL whoever has not within the timeout."""
        stop_processes(self.log_dir / STOP_FILE, [process for _, process in self.slots])


@dataclass
class WorkerLogs:
    """The workers' completion logs, read incrementally (a torn last line is skipped)."""

    log_dir: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    torn_lines: int = 0
    _offsets: dict[Path, int] = field(default_factory=dict)

    def scan(self) -> None:
        for path in sorted(self.log_dir.glob("*.log")):
            with open(path, encoding="utf-8") as log:
                log.seek(self._offsets.get(path, 0))
                for line in log:
                    if not line.endswith("\n"):
                        break  # still being written (or cut by a kill): re-read later
                    try:
                        self.records.append(json.loads(line))
                    except json.JSONDecodeError:
                        self.torn_lines += 1
                self._offsets[path] = log.tell()

    def acked_true(self) -> set[int]:
        return {r["n"] for r in self.records if r["event"] == "ack" and r["ack"] is True}

    def final_scan(self) -> None:
        """After every worker is gone: an unterminated last line is a torn record."""
        self.scan()
        for path in sorted(self.log_dir.glob("*.log")):
            if path.stat().st_size > self._offsets.get(path, 0):
                self.torn_lines += 1


def _retrying(call: Callable[[], Any]) -> Any:
    """The supervisor's own reads ride out an outage like any client would."""
    deadline = time.monotonic() + STORE_RETRY_S
    while True:
        try:
            return call()
        except EngineUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run_storm(
    engine: str,
    spec: EngineSpec,
    config: StormConfig,
    disruptions: Sequence[Disruption] = (),
    progress: Callable[[str], None] = lambda _: None,
) -> ScenarioResult:
    started = time.monotonic()
    rng = random.Random(config.seed)
    provider = alkstore.load_engine(engine)
    with (
        tempfile.TemporaryDirectory(prefix="alkstore-storm-") as tmp,
        provider.open(spec.url, **spec.opts) as store,
    ):
        opts = QueueOpts(
            visibility_timeout_s=config.visibility_timeout_s,
            max_attempts=NEVER_EXHAUSTED,
            backoff_base_s=0,
        )
        queue = store.queue(QUEUE, opts)
        ids: list[int] = []
        for first in range(0, config.jobs, ENQUEUE_CHUNK):
            chunk = range(first, min(first + ENQUEUE_CHUNK, config.jobs))
            ids.extend(queue.enqueue_many([{"n": n} for n in chunk]))
        progress(f"{engine}: {len(ids)} jobs enqueued, {config.workers} workers")

        log_dir = Path(tmp)
        logs = WorkerLogs(log_dir)
        workers = _Workers(multiprocessing.get_context("spawn"), engine, spec, log_dir, config)
        try:
            workers.start_all()
            outages = _storm(queue, ids, logs, workers, disruptions, config, rng)
            progress(f"{engine}: {workers.kills} kills, {len(outages)} restarts; draining")
            drained = _drain(queue, ids, logs, workers, config)
        finally:
            workers.stop()
        logs.final_scan()
        finals = {job_id: _retrying(partial(queue.get_job, job_id)) for job_id in ids}
    return _judge(engine, config, ids, finals, logs, workers, outages, drained, started)


def _storm(
    queue: alkstore.Queue,
    ids: Sequence[int],
    logs: WorkerLogs,
    workers: _Workers,
    disruptions: Sequence[Disruption],
    config: StormConfig,
    rng: random.Random,
) -> list[Outage]:
    """Kill a worker every ``kill_every_s`` until every job is done (or ``storm_s``),
    running each disruption once its share of the jobs is acked."""
    began = time.monotonic()
    pending = sorted(disruptions, key=lambda d: d.at_fraction)
    outages: list[Outage] = []
    while True:
        time.sleep(config.kill_every_s)
        logs.scan()
        out_of_time = time.monotonic() - began >= config.storm_s
        if pending and (out_of_time or len(logs.acked_true()) >= pending[0].at_fraction * len(ids)):
            disruption = pending.pop(0)
            down = time.time()
            disruption.action()
            outages.append((disruption.label, down, time.time()))
        workers.replace_dead()
        if config.sigkill_workers:
            workers.kill_one(rng)
        if not pending and (out_of_time or _all_done(queue, ids, logs)):
            return outages


def _drain(
    queue: alkstore.Queue,
    ids: Sequence[int],
    logs: WorkerLogs,
    workers: _Workers,
    config: StormConfig,
) -> bool:
    """Let the live workers finish everything; True if every job left the store in time."""
    deadline = time.monotonic() + config.drain_s
    while time.monotonic() < deadline:
        workers.replace_dead()
        logs.scan()
        if _all_done(queue, ids, logs):
            return True
        time.sleep(0.25)
    return False


def _all_done(queue: alkstore.Queue, ids: Sequence[int], logs: WorkerLogs) -> bool:
    """Every job acked per the logs, or -- for the few whose records a kill cut --
    gone from the store."""
    remaining = set(range(len(ids))) - logs.acked_true()
    # Only ask the store about what the logs cannot settle (a cheap handful).
    return len(remaining) <= STORE_CHECK_MAX and all(
        _retrying(partial(queue.get_job, ids[n])) is None for n in remaining
    )


@dataclass(frozen=True, slots=True)
class Tally:
    """What the logs and the store's final rows say, job by job (``n``)."""

    completed: frozenset[int]
    """Acked ``True`` at least once."""
    cut: frozenset[int]
    """Gone from the store, no ``True`` logged, but an attempt's ack outcome is
    unknown (killed before logging it, or the ack raised): completed, not lost."""
    lost: frozenset[int]
    acked_twice: frozenset[int]
    duplicate_claims: int
    """``(job id, attempt)`` pairs worked by more than one process."""
    stranded: int
    reprocessed: int
    """Jobs worked more than once (at-least-once delivery at work)."""
    acks_false: int
    errors: Counter[str]
    first_error: dict[str, str]


def tally(
    ids: Sequence[int], finals: dict[int, alkstore.Job | None], records: Sequence[dict[str, Any]]
) -> Tally:
    n_of = {job_id: n for n, job_id in enumerate(ids)}
    works: dict[int, list[tuple[int, int]]] = defaultdict(list)  # n -> [(id, attempt)]
    claim_workers: dict[tuple[int, int], set[str]] = defaultdict(set)
    ack_outcomes: dict[tuple[int, int], list[bool | None]] = defaultdict(list)
    errors: Counter[str] = Counter()
    first_error: dict[str, str] = {}
    for r in records:
        if r["event"] == "work":
            works[r["n"]].append((r["id"], r["attempt"]))
            claim_workers[(r["id"], r["attempt"])].add(r["worker"])
        elif r["event"] == "ack":
            ack_outcomes[(r["id"], r["attempt"])].append(r["ack"])
        elif r["event"] == "error":
            errors[r["type"]] += 1
            first_error.setdefault(r["type"], f"during {r['during']}: {r['message']}")

    acks_true: Counter[int] = Counter(
        n_of[job_id]
        for (job_id, _), outcomes in ack_outcomes.items()
        for outcome in outcomes
        if outcome is True
    )

    def outcome_unknown(n: int) -> bool:
        return any(not ack_outcomes.get(claim) or None in ack_outcomes[claim] for claim in works[n])

    gone = {n_of[job_id] for job_id, job in finals.items() if job is None}
    dead = {n_of[job_id] for job_id, job in finals.items() if job and job.state is JobState.DEAD}
    cut = {n for n in gone if acks_true[n] == 0 and outcome_unknown(n)}
    return Tally(
        completed=frozenset(acks_true),
        cut=frozenset(cut),
        lost=frozenset(dead | {n for n in gone if acks_true[n] == 0 and n not in cut}),
        acked_twice=frozenset(n for n, k in acks_true.items() if k > 1),
        duplicate_claims=sum(1 for w in claim_workers.values() if len(w) > 1),
        stranded=len(finals) - len(gone) - len(dead),
        reprocessed=sum(1 for w in works.values() if len(w) > 1),
        acks_false=sum(o.count(False) for o in ack_outcomes.values()),
        errors=errors,
        first_error=first_error,
    )


def _judge(
    engine: str,
    config: StormConfig,
    ids: Sequence[int],
    finals: dict[int, alkstore.Job | None],
    logs: WorkerLogs,
    workers: _Workers,
    outages: Sequence[Outage],
    drained: bool,
    started: float,
) -> ScenarioResult:
    t = tally(ids, finals, logs.records)
    # EngineUnavailable is the contract's word for "the server is down": expected
    # while it is restarted, and a bug anywhere else.
    expected = {"EngineUnavailable"} if outages else set()
    unexpected = {name: k for name, k in t.errors.items() if name not in expected}
    figures = [
        count("jobs enqueued", config.jobs),
        count("worker processes started", workers.started),
        count("workers SIGKILLed", workers.kills),
        count("database restarts", len(outages)),
        count("completed (acked True)", len(t.completed)),
        count("acked, record cut by the kill", len(t.cut)),
        must_be_zero("lost", len(t.lost)),
        must_be_zero("acked True twice", len(t.acked_twice)),
        must_be_zero("duplicate claims", t.duplicate_claims),
        must_be_zero("stranded (pending/processing)", t.stranded),
        count("processed more than once", t.reprocessed),
        count("acks returning False", t.acks_false),
        count("errors: EngineUnavailable", t.errors.get("EngineUnavailable", 0)),
        must_be_zero("errors: unexpected", sum(unexpected.values())),
        count("torn log lines", logs.torn_lines),
        must_be_zero("workers that died on their own", workers.died_alone),
    ]
    if outages:
        figures.append(count("acked True during the disruptions", _acked_during(outages, logs)))
    recovery = _recovery_s(outages, logs.records)
    if recovery is not None:
        figures.append(count("max recovery after restart (s)", recovery))
    if not drained:
        figures.append(must_be_zero("drain timed out", 1))
    notes = [
        f"unexpected error {name} x{k}, first {t.first_error[name]}"
        for name, k in sorted(unexpected.items())
    ]
    notes.extend(f"lost n={n}" for n in sorted(t.lost)[:10])
    return ScenarioResult(
        SCENARIO, engine, tuple(figures), time.monotonic() - started, tuple(notes)
    )


def _acked_during(outages: Sequence[Outage], logs: WorkerLogs) -> int:
    """Acks that returned ``True`` while a disruption ran: the work went on through it."""
    return sum(
        1
        for r in logs.records
        if r["event"] == "ack"
        and r["ack"] is True
        and any(began <= r["t"] <= ended for _, began, ended in outages)
    )


def _recovery_s(outages: Sequence[Outage], records: Sequence[dict[str, Any]]) -> float | None:
    """Longest time from a server coming back to the next ``ack() -> True`` anywhere."""
    if not outages:
        return None
    ack_times = sorted(r["t"] for r in records if r["event"] == "ack" and r["ack"] is True)
    worst = 0.0
    for _, _, ended in outages:
        after = next((t for t in ack_times if t >= ended), None)
        if after is not None:
            worst = max(worst, after - ended)
    return worst
