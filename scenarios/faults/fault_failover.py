"""Failover to a standby: the primary stopped hard mid-run, its standby promoted.

A primary and a streaming standby (``alkstore_postgres.testing.replication``,
synchronous or asynchronous) on loopback; the store's URL names both hosts
(``postgresql://h:p1,h:p2/db?target_session_attrs=read-write``). Producer
processes enqueue ``{"n": n}`` one job at a time and log every id whose enqueue
returned; 4 worker processes (``spawn``; half ``claim_wait``, half
``claim_batch``) log each claim as it returns and each ack's outcome. Once the
workers are at work the primary is stopped with ``pg_ctl stop -m immediate``
and the standby promoted (``pg_ctl promote``); producers go on for a while,
stop, and the workers drain. Then the logs are compared with ``get_job`` of
every id on the promoted server. Judged per job (its unique ``n``, since a
promoted server may hand out an id again whose first issue was lost):

* lost -- an enqueue that returned, no ack ``True`` and none whose outcome is
  unknown, and the job is gone from the store: 0 with synchronous replication;
  with asynchronous, at most the commits of the un-replicated tail: every lost
  enqueue returned before the primary stopped (and, when the run cuts the
  standby off first -- ``tail_s`` -- after the cut);
* acked True twice -- two claims of one job acked ``True``: 0 with synchronous
  replication (with asynchronous, an ack in the lost tail is run and acked again);
* ran again after a confirmed ack -- a claim of a job some earlier claim had acked
  ``True``: 0 with synchronous replication;
* ran again, ack not confirmed -- at-least-once at work: the earlier claim's ack
  raised (its outcome unknown), returned ``False`` or was never made;
* claimed twice by one server -- one ``(job, attempt)`` claimed twice by the same
  server (before the stop, or after the promotion): 0 (a claim the tail lost may be
  claimed again as the same attempt by the promoted server: counted apart);
* stranded -- a surviving job still pending or processing after the drain: 0;
* writes refused by the standby -- statements its log shows refused as read-only
  while it was a standby: 0 (libpq never connected the store to it);
* unexpected errors -- anything but ``EngineUnavailable``: 0;
* promotion to first claim -- from ``pg_ctl promote`` returning to the first claim
  that returned a job, and to the first enqueue that returned: printed, with the
  target ``reconnect_max_s`` + 1 s.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import secrets
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.context import SpawnProcess
from pathlib import Path
from typing import Any

from fault_report import Figure, ScenarioResult, count, must_be_zero
from fault_storm import NEVER_EXHAUSTED, WorkerLogs, _error, _retrying, stop_processes

import alkstore
from alkstore import EngineSpec, JobState, QueueOpts
from alkstore_postgres.options import DEFAULT_RECONNECT_MAX_S
from alkstore_postgres.testing.replication import ReplicatedPostgres

SCENARIO = "failover"
QUEUE = "fault_failover"
ENGINE = "postgresql"
SCHEMA_PREFIX = "alkstore_failover_"
CONNECT_TIMEOUT_S = 2
CLAIM_WAIT_S = 0.5
ERROR_PAUSE_S = 0.1
PRODUCER_SPAN = 10_000_000
"""Producer ``p`` enqueues ``n`` from ``p * PRODUCER_SPAN`` on: unique across producers."""
STOP_PRODUCERS = "stop-producers"
STOP_WORKERS = "stop-workers"
REFUSED_WRITE = "read-only transaction"
"""What a standby's log says of a write it refused."""


@dataclass(frozen=True, slots=True)
class FailoverConfig:
    synchronous: bool
    producers: int = 2
    workers: int = 4
    before_s: float = 10.0
    """How long the run goes on, workers at work, before the primary is stopped."""
    after_s: float = 10.0
    """How long the producers go on after the promotion."""
    drain_s: float = 60.0
    visibility_timeout_s: int = 3
    """A claim the failover cut off comes back after this long."""
    work_s: float = 0.02
    """Long enough that jobs are in flight when the primary stops."""
    batch: int = 8
    produce_pause_s: float = 0.02
    """Producers pause between enqueues, so workers keep up (no backlog to drain)."""
    reconnect_max_s: float = DEFAULT_RECONNECT_MAX_S
    tail_s: float = 0.0
    """Asynchronous only: the standby is cut off its primary this long before the
    stop, so the primary commits a tail the standby never receives (a lagging standby)."""


def _queue_opts(config: FailoverConfig) -> QueueOpts:
    return QueueOpts(
        visibility_timeout_s=config.visibility_timeout_s,
        max_attempts=NEVER_EXHAUSTED,
        backoff_base_s=0,
    )


# --------------------------------------------------------------------------- processes


def _logger(log_dir: str, name: str) -> tuple[Callable[..., None], Callable[[], None]]:
    """A line-buffered JSON-lines log of this process: ``(record, close)``."""
    log = open(Path(log_dir) / f"{name}.log", "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def record(event: str, **fields: Any) -> None:
        log.write(json.dumps({"event": event, "proc": name, "t": time.time(), **fields}) + "\n")

    return record, log.close


def producer(spec: EngineSpec, log_dir: str, index: int, config: FailoverConfig) -> None:
    """Enqueue one job at a time until told to stop; log each id that returned."""
    logging.disable(logging.WARNING)  # every error is logged below and judged instead
    record, close = _logger(log_dir, f"p{index}")
    stop = Path(log_dir) / STOP_PRODUCERS
    store: alkstore.Store | None = None
    n = index * PRODUCER_SPAN
    try:
        while not stop.exists():
            try:
                if store is None:
                    store = alkstore.open(spec.url, **spec.opts)
                job_id = store.queue(QUEUE, _queue_opts(config)).enqueue({"n": n})
            except Exception as exc:
                # The enqueue may have committed all the same: its outcome is unknown.
                record("error", during="enqueue" if store else "open", n=n, **_error(exc))
                time.sleep(ERROR_PAUSE_S)
            else:
                record("enqueued", id=job_id, n=n)
            n += 1
            time.sleep(config.produce_pause_s)
    finally:
        if store is not None:
            store.close()
        close()


def worker(spec: EngineSpec, log_dir: str, name: str, batch: int, work_s: float) -> None:
    """Claim (``claim_wait`` for ``batch == 1``, else ``claim_batch``), log the claim as it
    returns, "work", ack, log the ack's outcome; until told to stop."""
    logging.disable(logging.WARNING)
    record, close = _logger(log_dir, name)
    stop = Path(log_dir) / STOP_WORKERS
    store: alkstore.Store | None = None
    try:
        while not stop.exists():
            try:
                if store is None:
                    store = alkstore.open(spec.url, **spec.opts)
                queue = store.queue(QUEUE)
                if batch == 1:
                    one = queue.claim_wait(name, timeout=CLAIM_WAIT_S)
                    handles = [one] if one is not None else []
                else:
                    handles = queue.claim_batch(name, batch)
                    if not handles:
                        time.sleep(CLAIM_WAIT_S / 10)
            except Exception as exc:
                record("error", during="claim" if store else "open", **_error(exc))
                time.sleep(ERROR_PAUSE_S)
                continue
            for handle in handles:
                claim = {"id": handle.id, "n": handle.payload["n"], "attempt": handle.attempts}
                record("claim", **claim)
                time.sleep(work_s)
                try:
                    acked: bool | None = handle.ack()
                except Exception as exc:
                    record("error", during="ack", **_error(exc))
                    acked = None  # it may have committed: the outcome is unknown
                record("ack", ack=acked, **claim)
    finally:
        if store is not None:
            store.close()
        close()


@dataclass
class _Processes:
    context: multiprocessing.context.SpawnContext
    spec: EngineSpec
    log_dir: Path
    config: FailoverConfig
    producers: list[SpawnProcess] = field(default_factory=list)
    workers: list[SpawnProcess] = field(default_factory=list)

    def start(self) -> None:
        log_dir, config = str(self.log_dir), self.config
        for index in range(config.workers):
            batch = 1 if index % 2 == 0 else config.batch  # even workers use claim_wait
            args = (self.spec, log_dir, f"w{index}", batch, config.work_s)
            self.workers.append(self._spawn(worker, args, f"failover-w{index}"))
        for index in range(config.producers):
            args2 = (self.spec, log_dir, index, config)
            self.producers.append(self._spawn(producer, args2, f"failover-p{index}"))

    def _spawn(self, target: Callable[..., None], args: tuple[Any, ...], name: str) -> SpawnProcess:
        process = self.context.Process(target=target, args=args, name=name, daemon=True)
        process.start()
        return process

    def died(self) -> int:
        return sum(1 for p in [*self.producers, *self.workers] if p.exitcode not in (None, 0))

    def stop_producers(self) -> None:
        stop_processes(self.log_dir / STOP_PRODUCERS, self.producers)

    def stop_workers(self) -> None:
        stop_processes(self.log_dir / STOP_WORKERS, self.workers)

    def stop_all(self) -> None:
        self.stop_producers()
        self.stop_workers()


# --------------------------------------------------------------------------- the run


def run_failover(
    config: FailoverConfig, progress: Callable[[str], None] = lambda _: None
) -> ScenarioResult:
    started = time.monotonic()
    mode = run_label(config)
    with (
        ReplicatedPostgres(
            synchronous=config.synchronous, cuttable=bool(config.tail_s), fsync=False
        ) as pair,
        tempfile.TemporaryDirectory(prefix="alkstore-failover-") as tmp,
    ):
        opts = {
            "schema": SCHEMA_PREFIX + secrets.token_hex(6),
            "connect_timeout_s": CONNECT_TIMEOUT_S,
            "reconnect_max_s": config.reconnect_max_s,
        }
        spec = EngineSpec(pair.url, opts)
        progress(f"failover ({mode}): primary :{pair.primary.port}, standby :{pair.standby.port}")
        log_dir = Path(tmp)
        logs = WorkerLogs(log_dir)
        with alkstore.open(spec.url, **spec.opts) as store:  # creates the schema
            queue = store.queue(QUEUE, _queue_opts(config))
            processes = _Processes(multiprocessing.get_context("spawn"), spec, log_dir, config)
            try:
                processes.start()
                _wait_at_work(logs, config)
                lag = pair.replay_lag_bytes()
                tail_from = None
                if config.tail_s and not config.synchronous:
                    pair.cut_replication()
                    tail_from = time.time()
                    time.sleep(config.tail_s)
                pair.fail_over()
                assert pair.stopped_at is not None
                assert pair.promoted_at is not None
                progress(
                    f"failover ({mode}): primary stopped, standby promoted in "
                    f"{pair.promoted_at - pair.stopped_at:.2f} s"
                )
                time.sleep(config.after_s)
                processes.stop_producers()
                drained = _drain(queue, logs, config)
            finally:
                processes.stop_all()
            logs.final_scan()
            finals = {
                job_id: _retrying(partial(queue.get_job, job_id)) for job_id in _ids(logs.records)
            }
        refused = pair.standby.log_file.read_text(errors="replace").count(REFUSED_WRITE)
        return judge(
            config,
            logs.records,
            finals,
            stopped_at=pair.stopped_at,
            promoted_at=pair.promoted_at,
            tail_from=tail_from,
            lag_bytes=lag,
            refused_writes=refused,
            drained=drained,
            died=processes.died(),
            seconds=time.monotonic() - started,
        )


def _wait_at_work(logs: WorkerLogs, config: FailoverConfig) -> None:
    """``before_s`` after the first ack: the failover lands mid-run."""
    deadline = time.monotonic() + 120.0  # spawned processes boot slowly on a loaded host
    while time.monotonic() < deadline:
        logs.scan()
        if any(r["event"] == "ack" and r["ack"] for r in logs.records):
            break
        time.sleep(0.1)
    time.sleep(config.before_s)


def _ids(records: list[dict[str, Any]]) -> set[int]:
    return {r["id"] for r in records if r["event"] in ("enqueued", "claim")}


def _drain(queue: alkstore.Queue, logs: WorkerLogs, config: FailoverConfig) -> bool:
    """Until every job the logs know of is acked ``True`` or gone from the store."""
    deadline = time.monotonic() + config.drain_s
    while time.monotonic() < deadline:
        logs.scan()
        done = {r["n"] for r in logs.records if r["event"] == "ack" and r["ack"] is True}
        open_jobs = {
            r["id"]: r["n"]
            for r in logs.records
            if r["event"] in ("enqueued", "claim") and r["n"] not in done
        }
        if all(
            _survivor(_retrying(partial(queue.get_job, job_id)), n) is None
            for job_id, n in open_jobs.items()
        ):
            return True
        time.sleep(0.25)
    return False


def _survivor(job: alkstore.Job | None, n: int) -> alkstore.Job | None:
    """``job`` if it is the job ``n`` (a promoted server may reuse a lost job's id)."""
    if job is None or not isinstance(job.payload, dict) or job.payload.get("n") != n:
        return None
    return job


# --------------------------------------------------------------------------- the judge


@dataclass(frozen=True, slots=True)
class FailoverTally:
    enqueued: int
    enqueue_unknown: int
    """Enqueues that raised: they may have committed (and then ran) or not."""
    lost: frozenset[int]
    in_tail: int
    """Enqueues that returned between the standby's cut and the stop."""
    lost_outside_tail: int
    """Lost enqueues that returned after the stop (or, the standby cut off first, before
    the cut): must be 0 in either mode."""
    acked_twice: frozenset[int]
    reran_after_confirmed_ack: int
    reran_unconfirmed: int
    claimed_twice_by_one_server: int
    reclaimed_after_lost_claim: int
    stranded: int
    errors: Counter[str]
    first_error: dict[str, str]
    first_claim_after_s: float | None
    first_enqueue_after_s: float | None


def tally(
    records: list[dict[str, Any]],
    finals: dict[int, alkstore.Job | None],
    *,
    stopped_at: float,
    promoted_at: float,
    tail_from: float | None = None,
) -> FailoverTally:
    enqueued: dict[int, tuple[int, float]] = {}  # n -> (id, when it returned)
    claims: dict[int, list[dict[str, Any]]] = defaultdict(list)
    acks: dict[tuple[int, int, str], list[bool | None]] = defaultdict(list)
    errors: Counter[str] = Counter()
    first_error: dict[str, str] = {}
    unknown_enqueues = 0
    for r in records:
        event = r["event"]
        if event == "enqueued":
            enqueued[r["n"]] = (r["id"], r["t"])
        elif event == "claim":
            claims[r["n"]].append(r)
        elif event == "ack":
            acks[(r["n"], r["attempt"], r["proc"])].append(r["ack"])
        elif event == "error":
            errors[r["type"]] += 1
            first_error.setdefault(r["type"], f"during {r['during']}: {r['message']}")
            unknown_enqueues += r["during"] == "enqueue"

    def outcomes(claim: dict[str, Any]) -> list[bool | None]:
        return acks.get((claim["n"], claim["attempt"], claim["proc"]), [])

    acked_true = {n for n, cs in claims.items() if any(True in outcomes(c) for c in cs)}
    unknown_ack = {n for n, cs in claims.items() if any(None in outcomes(c) for c in cs)}
    present: dict[int, alkstore.Job] = {}
    for n, cs in claims.items():
        for c in cs:
            if (job := _survivor(finals.get(c["id"]), n)) is not None:
                present[n] = job
    for n, (job_id, _) in enqueued.items():
        if (job := _survivor(finals.get(job_id), n)) is not None:
            present[n] = job

    lost = {
        n
        for n in enqueued
        if n not in acked_true
        and n not in unknown_ack
        and (n not in present or present[n].state is JobState.DEAD)
    }
    reran_confirmed = reran_unconfirmed = 0
    acked_twice: set[int] = set()
    one_server = reclaimed = 0
    for n, cs in claims.items():
        ordered = sorted(cs, key=lambda c: c["t"])
        if sum(outcomes(c).count(True) for c in ordered) > 1:
            acked_twice.add(n)
        for i in range(1, len(ordered)):
            if any(True in outcomes(c) for c in ordered[:i]):
                reran_confirmed += 1
            else:
                reran_unconfirmed += 1
        by_attempt: dict[int, list[float]] = defaultdict(list)
        for c in ordered:
            by_attempt[c["attempt"]].append(c["t"])
        for times in by_attempt.values():
            before = sum(1 for t in times if t < stopped_at)
            after = len(times) - before
            one_server += max(before - 1, 0) + max(after - 1, 0)
            reclaimed += min(before, after)
    stranded = sum(
        1 for job in present.values() if job.state in (JobState.PENDING, JobState.PROCESSING)
    )
    claim_times = sorted(c["t"] for cs in claims.values() for c in cs if c["t"] >= promoted_at)
    enqueue_times = sorted(t for _, t in enqueued.values() if t >= promoted_at)
    return FailoverTally(
        enqueued=len(enqueued),
        enqueue_unknown=unknown_enqueues,
        lost=frozenset(lost),
        in_tail=sum(1 for _, t in enqueued.values() if _in_tail(t, tail_from, stopped_at)),
        lost_outside_tail=sum(
            1 for n in lost if not _in_tail(enqueued[n][1], tail_from, stopped_at)
        ),
        acked_twice=frozenset(acked_twice),
        reran_after_confirmed_ack=reran_confirmed,
        reran_unconfirmed=reran_unconfirmed,
        claimed_twice_by_one_server=one_server,
        reclaimed_after_lost_claim=reclaimed,
        stranded=stranded,
        errors=errors,
        first_error=first_error,
        first_claim_after_s=claim_times[0] - promoted_at if claim_times else None,
        first_enqueue_after_s=enqueue_times[0] - promoted_at if enqueue_times else None,
    )


def _in_tail(t: float, tail_from: float | None, stopped_at: float) -> bool:
    """Whether an enqueue that returned at ``t`` is one the un-replicated tail may lose:
    before the stop, and after the standby was cut off when it was."""
    return t < stopped_at and (tail_from is None or t >= tail_from)


def judge(
    config: FailoverConfig,
    records: list[dict[str, Any]],
    finals: dict[int, alkstore.Job | None],
    *,
    stopped_at: float | None,
    promoted_at: float | None,
    tail_from: float | None,
    lag_bytes: int,
    refused_writes: int,
    drained: bool,
    died: int,
    seconds: float,
) -> ScenarioResult:
    assert stopped_at is not None
    assert promoted_at is not None
    t = tally(records, finals, stopped_at=stopped_at, promoted_at=promoted_at, tail_from=tail_from)
    sync = config.synchronous
    # With synchronous replication nothing that returned may be lost or acked twice;
    # with asynchronous, what the tail lost is measured (and lies before the stop).
    strict: Callable[[str, int], Figure] = must_be_zero if sync else count
    unexpected = {k: v for k, v in t.errors.items() if k != "EngineUnavailable"}
    target = config.reconnect_max_s + 1.0
    figures = [
        count("producers / worker processes", f"{config.producers} / {config.workers}"),
        count("enqueues returned", t.enqueued),
        count("enqueues that raised (outcome unknown)", t.enqueue_unknown),
        count("replay lag before the stop (bytes)", lag_bytes),
        count("standby cut off before the stop (s)", config.tail_s if not sync else 0),
        count("enqueues returned while it was cut off", t.in_tail if tail_from else 0),
        count("primary stop -> standby promoted (s)", promoted_at - stopped_at),
        strict("lost (enqueue returned, job gone, never acked)", len(t.lost)),
        must_be_zero("lost outside the un-replicated tail", t.lost_outside_tail),
        strict("acked True twice", len(t.acked_twice)),
        strict("ran again after a confirmed ack", t.reran_after_confirmed_ack),
        count("ran again, earlier ack not confirmed", t.reran_unconfirmed),
        must_be_zero("one attempt claimed twice by one server", t.claimed_twice_by_one_server),
        strict("claim lost in the tail, claimed again", t.reclaimed_after_lost_claim),
        must_be_zero("stranded (pending/processing)", t.stranded),
        must_be_zero("writes refused by the standby", refused_writes),
        count("errors: EngineUnavailable", t.errors.get("EngineUnavailable", 0)),
        must_be_zero("errors: unexpected", sum(unexpected.values())),
        must_be_zero("processes that died", died),
        count("promotion -> first claim (s)", _seconds(t.first_claim_after_s)),
        count("promotion -> first enqueue (s)", _seconds(t.first_enqueue_after_s)),
        count(
            f"first claim within reconnect_max_s + 1 = {target:g} s",
            _verdict(t.first_claim_after_s, target),
        ),
    ]
    if t.first_claim_after_s is None:
        figures.append(must_be_zero("no claim after the promotion", 1))
    if not drained:
        figures.append(must_be_zero("drain timed out", 1))
    notes = [
        f"unexpected error {name} x{k}, first {t.first_error[name]}"
        for name, k in sorted(unexpected.items())
    ]
    notes.extend(f"lost n={n}" for n in sorted(t.lost)[:10])
    return ScenarioResult(SCENARIO, run_label(config), tuple(figures), seconds, tuple(notes))


def run_label(config: FailoverConfig) -> str:
    """The run's column in the table: the engine and the replication."""
    if config.synchronous:
        return f"{ENGINE} sync"
    return f"{ENGINE} async" + (f", {config.tail_s:g} s tail" if config.tail_s else "")


def _seconds(value: float | None) -> float | str:
    return "-" if value is None else value


def _verdict(value: float | None, target: float) -> str:
    return "-" if value is None else ("yes" if value <= target else "no")
