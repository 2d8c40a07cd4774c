"""Long jobs under SIGKILL: ``alkstore.worker`` processes killed mid-job, nothing lost.

The crash storm kills hand-written claim loops between millisecond jobs; here
the killed processes run the worker runtime itself (heartbeats at a third of
the visibility timeout, several handlers per process) and every job takes 1-5 s,
longer than its visibility timeout, so only heartbeats keep a claim alive. A
supervisor SIGKILLs a worker while it has handlers running and starts a
replacement; the killed runs' claims lapse and other workers take them. Each
handler logs its start and end, and a ``WorkerObserver`` logs each run's
outcome, line-buffered, so a kill loses at most the line being written. Then:

* lost -- a job gone from the store whose handler never ended: must be 0;
* dead -- a job dead-lettered by the kills: must be 0;
* stranded -- a job still pending or processing at the end: must be 0;
* acked twice -- one job acked by two runs: must be 0;
* overlapping runs -- two runs of one job on different workers at the same
  time (a heartbeat that failed to hold a claim): must be 0;
* killed runs never re-run -- a run cut by a kill whose job no later run
  took: must be 0;
* re-run after a kill (p50, max) -- seconds from the kill to the job's next
  start: the claim's lapse, at most one visibility timeout and its second.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import random
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

from fault_report import ScenarioResult, count, must_be_zero
from fault_storm import NEVER_EXHAUSTED, WorkerLogs, line_log, sigkill, stop_processes

import alkstore
from alkstore import EngineSpec, JobState, QueueOpts
from alkstore.values import Job
from alkstore.worker import Worker

SCENARIO = "long jobs killed"
QUEUE = "fault_long_jobs"
STOP_FILE = "stop"
STOP_POLL_S = 0.1
JOIN_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class LongJobsConfig:
    jobs: int = 60
    workers: int = 4
    concurrency: int = 4
    """Handlers per worker process."""
    work_min_s: float = 1.0
    work_max_s: float = 5.0
    visibility_timeout_s: int = 2
    """Shorter than most jobs: a claim outlives its job only by heartbeats."""
    kills: int = 8
    kill_every_s: float = 1.5
    drain_s: float = 120.0
    seed: int = 0


# --------------------------------------------------------------------------- worker


class _OutcomeRecorder:
    """A ``WorkerObserver`` logging each run's outcome (and refused heartbeats)."""

    def __init__(self, record: Callable[..., None]) -> None:
        self._record = record

    def run_started(self, job: Job) -> None:
        pass  # the handler logs its own start, on its own thread

    def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
        self._record("finished", id=job.id, attempt=job.attempts, outcome=outcome)

    def heartbeat_lost(self, job: Job) -> None:
        self._record("heartbeat_lost", id=job.id, attempt=job.attempts)


def long_jobs_worker(
    engine: str, spec: EngineSpec, log_dir: str, worker_id: str, concurrency: int
) -> None:
    """One worker process: ``alkstore.worker`` with one task, until the stop file appears."""
    logging.disable(logging.WARNING)  # the figures judge what went wrong
    with line_log(Path(log_dir), worker_id) as record:
        store = alkstore.load_engine(engine).open(spec.url, **spec.opts)
        worker = Worker(store, name=worker_id, observers=[_OutcomeRecorder(record)])

        @worker.task(QUEUE, concurrency=concurrency)
        def work(job: Job) -> None:
            record("start", id=job.id, attempt=job.attempts)
            time.sleep(job.payload["work_s"])
            record("end", id=job.id, attempt=job.attempts)

        def stop_when_told() -> None:
            while not (Path(log_dir) / STOP_FILE).exists():
                time.sleep(STOP_POLL_S)
            worker.stop()

        threading.Thread(target=stop_when_told, daemon=True).start()
        try:
            worker.run()
        finally:
            store.close()


# --------------------------------------------------------------------------- supervisor


@dataclass
class _Fleet:
    context: multiprocessing.context.SpawnContext
    engine: str
    spec: EngineSpec
    log_dir: Path
    config: LongJobsConfig
    slots: list[tuple[str, SpawnProcess]] = field(default_factory=list)
    started: int = 0
    kills: list[tuple[str, float]] = field(default_factory=list)
    """(worker id, time.time() of its SIGKILL)."""

    def start_all(self) -> None:
        self.slots = [self._spawn(slot) for slot in range(self.config.workers)]

    def _spawn(self, slot: int) -> tuple[str, SpawnProcess]:
        worker_id = f"w{slot}-{self.started}"
        process = self.context.Process(
            target=long_jobs_worker,
            args=(self.engine, self.spec, str(self.log_dir), worker_id, self.config.concurrency),
            name=f"long-jobs-{worker_id}",
            daemon=True,
        )
        process.start()
        self.started += 1
        return worker_id, process

    def kill_one_at_work(self, logs: WorkerLogs, rng: random.Random) -> bool:
        """SIGKILL a worker with a handler running now, and replace it; False if none is."""
        running = _running_workers(logs.records)
        candidates = [slot for slot, (wid, _) in enumerate(self.slots) if wid in running]
        if not candidates:
            return False
        slot = rng.choice(candidates)
        worker_id, process = self.slots[slot]
        killed_at = time.time()
        sigkill(process)
        self.kills.append((worker_id, killed_at))
        self.slots[slot] = self._spawn(slot)
        return True

    def stop(self) -> None:
        stop_processes(self.log_dir / STOP_FILE, [p for _, p in self.slots], JOIN_TIMEOUT_S)


def _running_workers(records: Sequence[dict[str, Any]]) -> set[str]:
    """Workers with a handler started and not yet ended, per their logs."""
    open_runs: dict[tuple[str, int, int], int] = defaultdict(int)
    for r in records:
        if r["event"] in ("start", "end"):
            open_runs[(r["worker"], r["id"], r["attempt"])] += 1 if r["event"] == "start" else -1
    return {worker for (worker, _, _), n in open_runs.items() if n > 0}


def run_long_jobs(
    engine: str,
    spec: EngineSpec,
    config: LongJobsConfig,
    progress: Callable[[str], None] = lambda _: None,
) -> ScenarioResult:
    started = time.monotonic()
    rng = random.Random(config.seed)
    with (
        tempfile.TemporaryDirectory(prefix="alkstore-long-jobs-") as tmp,
        alkstore.load_engine(engine).open(spec.url, **spec.opts) as store,
    ):
        opts = QueueOpts(
            visibility_timeout_s=config.visibility_timeout_s,
            max_attempts=NEVER_EXHAUSTED,
            backoff_base_s=0,
        )
        queue = store.queue(QUEUE, opts)
        payloads = [
            {"n": n, "work_s": rng.uniform(config.work_min_s, config.work_max_s)}
            for n in range(config.jobs)
        ]
        ids = [int(job_id) for job_id in queue.enqueue_many(payloads)]
        log_dir = Path(tmp)
        logs = WorkerLogs(log_dir)
        fleet = _Fleet(multiprocessing.get_context("spawn"), engine, spec, log_dir, config)
        progress(f"{engine}: {len(ids)} jobs of 1-5 s, {config.workers} worker processes")
        try:
            fleet.start_all()
            while len(fleet.kills) < config.kills and not _all_gone(queue, ids):
                time.sleep(config.kill_every_s)
                logs.scan()
                fleet.kill_one_at_work(logs, rng)
            progress(f"{engine}: {len(fleet.kills)} kills; draining")
            deadline = time.monotonic() + config.drain_s
            while not _all_gone(queue, ids) and time.monotonic() < deadline:
                time.sleep(0.25)
        finally:
            fleet.stop()
        logs.final_scan()
        finals = {job_id: queue.get_job(job_id) for job_id in ids}
    return judge(engine, ids, finals, logs.records, fleet.kills, started)


def _all_gone(queue: alkstore.Queue, ids: Sequence[int]) -> bool:
    stats = queue.stats()
    return stats.ready + stats.scheduled + stats.processing + stats.lapsed + stats.dead == 0


@dataclass(frozen=True, slots=True)
class _Run:
    worker: str
    start: float
    end: float | None
    """When the handler ended; ``None`` if a kill cut it (or its line)."""


def judge(
    engine: str,
    ids: Sequence[int],
    finals: dict[int, Job | None],
    records: Sequence[dict[str, Any]],
    kills: Sequence[tuple[str, float]],
    started: float,
) -> ScenarioResult:
    killed_at = dict(kills)
    runs: dict[int, list[_Run]] = defaultdict(list)
    ends: dict[tuple[int, int, str], float] = {}
    acked: dict[int, int] = defaultdict(int)
    lost_heartbeats = 0
    for r in records:
        if r["event"] == "end":
            ends[(r["id"], r["attempt"], r["worker"])] = r["t"]
        elif r["event"] == "finished" and r["outcome"] == "acked":
            acked[r["id"]] += 1
        elif r["event"] == "heartbeat_lost":
            lost_heartbeats += 1
    for r in records:
        if r["event"] == "start":
            end = ends.get((r["id"], r["attempt"], r["worker"]))
            runs[r["id"]].append(_Run(r["worker"], r["t"], end))

    overlapping = 0
    killed_runs = 0
    never_rerun = 0
    rerun_delays: list[float] = []
    for job_runs in runs.values():
        job_runs.sort(key=lambda run: run.start)
        for earlier, later in itertools.pairwise(job_runs):
            stop = earlier.end if earlier.end is not None else killed_at.get(earlier.worker)
            if stop is None or later.start < stop:
                overlapping += 1  # a run neither ended nor killed, or one overlapping the next
        for position, run in enumerate(job_runs):
            if run.end is None and run.worker in killed_at:
                killed_runs += 1
                following = job_runs[position + 1 :]
                if following:
                    rerun_delays.append(following[0].start - killed_at[run.worker])
                else:
                    never_rerun += 1

    gone = [job_id for job_id in ids if finals[job_id] is None]
    ended = {
        job_id for job_id, job_runs in runs.items() if any(r.end is not None for r in job_runs)
    }
    states = [job.state for job in finals.values() if job is not None]
    figures = (
        count("jobs", len(ids)),
        count("workers SIGKILLed", len(kills)),
        count("runs cut by a kill", killed_runs),
        must_be_zero("lost", sum(1 for job_id in gone if job_id not in ended)),
        must_be_zero("dead", states.count(JobState.DEAD)),
        must_be_zero("stranded", sum(1 for s in states if s is not JobState.DEAD)),
        must_be_zero("acked twice", sum(1 for n in acked.values() if n > 1)),
        must_be_zero("overlapping runs", overlapping),
        must_be_zero("killed runs never re-run", never_rerun),
        count("heartbeats refused", lost_heartbeats),
        count("re-run after a kill p50 (s)", _median(rerun_delays)),
        count("re-run after a kill max (s)", max(rerun_delays, default=0.0)),
    )
    return ScenarioResult(SCENARIO, engine, figures, time.monotonic() - started)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0
