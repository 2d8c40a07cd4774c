"""Child processes of the kit, and the work of concurrent claimers (threads or processes).

Every child process has one shape: a module-level function decorated with
``child_process`` that takes a ``results`` queue, may put progress reports
``(kind, value)`` on it (``("ready", None)``), and returns its final report;
``child_process`` puts that report on ``results``, or ``("error", "Type:
message")`` if the body raised, so a failure is reported rather than lost. The
parent side is ``helpers.profiles.Children``. Children reopen the test's store
from its picklable ``EngineSpec`` with ``open_in_child``; every loop and wait is
bounded in count and in time.
"""

from __future__ import annotations

import functools
import inspect
import multiprocessing
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any, Final, ParamSpec, Protocol

from alkstore import EngineSpec, JobHandle, QueueConsumer, Store, load_engine
from alkstore.testing import FakeClock

P = ParamSpec("P")

Report = tuple[str, Any]
"""What a child puts on its ``results`` queue: ``(kind, value)``."""


CHILD_MODULES = (
    "alkstore",
    "alkstore.testing",
    "alkstore_conformance.helpers.crashes",
    "alkstore_conformance.helpers.processes",
    "alkstore_conformance.helpers.profile_processes",
    "alkstore_conformance.helpers.workers",
)
"""The modules of the kit's child-process targets, imported once by the fork server."""

_FORKSERVER: Final = "forkserver"


def child_context() -> ForkServerContext | SpawnContext:
    """How the kit starts its children: forked from a fork server that imported their
    modules and the engine's once (``preload_for_children``), where the platform has
    one; else spawned. A spawned child imported them all again: under a PostgreSQL
    certification, 45% of the kit's busy CPU samples were children importing. The fork
    server is single-threaded, so the threads of the test process are never forked."""
    if _FORKSERVER in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context(_FORKSERVER)
    return multiprocessing.get_context("spawn")


def preload_for_children(engine_modules: Iterable[str]) -> None:
    """Name what the fork server imports when it starts (at the first child): the kit's
    child modules and ``engine_modules`` (the engine under test's). Call it before the
    first child, with the environment the children need already set (the fork server
    keeps the one it started with)."""
    context = child_context()
    if context.get_start_method() == _FORKSERVER:
        context.set_forkserver_preload([*CHILD_MODULES, *engine_modules])


def error_report(exc: BaseException) -> Report:
    return ("error", f"{type(exc).__name__}: {exc}")


def child_process(body: Callable[P, Report]) -> Callable[P, None]:
    """Make ``body`` a spawn target: its returned report, or its error, goes on the
    ``results`` argument. The target keeps ``body``'s name, so a spawned child
    imports it by name as before."""
    signature = inspect.signature(body)

    @functools.wraps(body)
    def target(*args: P.args, **kwargs: P.kwargs) -> None:
        results = signature.bind(*args, **kwargs).arguments["results"]
        try:
            report = body(*args, **kwargs)
        except BaseException as exc:
            results.put(error_report(exc))
        else:
            results.put(report)

    return target


def open_in_child(
    engine_name: str, engine_group: str, spec: EngineSpec, clock: FakeClock | None = None
) -> Store:
    """Reopen the test's store in a child (a clock cannot cross processes: a child
    on a fake clock gets its own)."""
    return load_engine(engine_name, engine_group).open(spec.url, clock=clock, **spec.opts)


class SharedCounter(Protocol):
    """What ``multiprocessing.Value`` offers (and ``ThreadCounter`` mimics)."""

    value: int

    def get_lock(self) -> Any: ...


class ThreadCounter:
    def __init__(self) -> None:
        import threading

        self.value = 0
        self._lock = threading.Lock()

    def get_lock(self) -> Any:
        return self._lock


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim as its claimer saw it."""

    job_id: int
    attempt: int
    claimed_at: int
    deadline: int
    acked: bool
    worker_id: str


def abandon_first_claim_of_every(n: int, offset: int = 0) -> Callable[[JobHandle], bool]:
    """Simulate a crashed worker: leave the first claim of every n-th job unacked.

    Jobs carry ``{"n": index}`` payloads; the choice uses the index, not the
    engine's ids (which need not be consecutive). ``offset`` (a trial's seed)
    shifts which jobs those are from one trial to the next."""
    return lambda handle: handle.attempts == 1 and (handle.payload["n"] + offset) % n == 0


HOLD_S = 0.002
"""How long a claimer holds what it claimed before acking, as a worker does its
job. While it holds, the other claimers run: without the pause, a loaded machine
can let one claimer take the whole queue in a single time slice, and claims that
never interleave cannot show that two claimers were given one job."""


def claim_until_all_acked(
    queue: QueueConsumer,
    worker_id: str,
    *,
    total: int,
    acked: SharedCounter,
    abandon: Callable[[JobHandle], bool],
    batch: int,
    time_limit_s: float,
) -> list[ClaimRecord]:
    """Claim (``claim`` and ``claim_batch`` alternately) and ack until ``total``
    acks landed across all claimers, or ``time_limit_s`` passed."""
    records: list[ClaimRecord] = []
    give_up_at = time.monotonic() + time_limit_s
    rounds = 0
    while time.monotonic() < give_up_at:
        rounds += 1
        if rounds % 2:
            one = queue.claim(worker_id)
            handles = [one] if one is not None else []
        else:
            handles = queue.claim_batch(worker_id, batch)
        if not handles:
            with acked.get_lock():
                if acked.value >= total:
                    break
            time.sleep(0.02)  # abandoned claims lapse on the store's clock
            continue
        time.sleep(HOLD_S)
        for handle in handles:
            job = handle.job
            assert job.claimed_at is not None
            done = False if abandon(handle) else handle.ack()
            if done:
                with acked.get_lock():
                    acked.value += 1
            records.append(
                ClaimRecord(
                    job_id=job.id,
                    attempt=job.attempts,
                    claimed_at=job.claimed_at,
                    deadline=job.claimed_at + job.visibility_timeout_s,
                    acked=done,
                    worker_id=worker_id,
                )
            )
    return records


@child_process
def claimer_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    worker_id: str,
    barrier: Any,
    acked: SharedCounter,
    total: int,
    abandon_every: int,
    time_limit_s: float,
    results: Any,
    abandon_offset: int = 0,
) -> Report:
    """Open the store, meet the others at the barrier, claim; reports
    ``("claims", (worker_id, [ClaimRecord, ...]))``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        barrier.wait(timeout=time_limit_s)  # so the first claims collide
        records = claim_until_all_acked(
            queue,
            worker_id,
            total=total,
            acked=acked,
            abandon=abandon_first_claim_of_every(abandon_every, abandon_offset),
            batch=3,
            time_limit_s=time_limit_s,
        )
    return ("claims", (worker_id, records))


@child_process
def opener_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    barrier: Any,
    time_limit_s: float,
    results: Any,
) -> Report:
    """Open the store at the same moment as the others, enqueue one job; reports
    ``("enqueued", job_id)``."""
    barrier.wait(timeout=time_limit_s)
    with open_in_child(engine_name, engine_group, spec) as store:
        job_id = store.queue(queue_name).enqueue({"opened_by": queue_name})
    return ("enqueued", job_id)


@child_process
def enqueuer_process(
    engine_name: str,
    engine_group: str,
    spec: EngineSpec,
    queue_name: str,
    go: Any,
    time_limit_s: float,
    results: Any,
) -> Report:
    """Say ``ready``; once told to go, enqueue one job and report ``("enqueued", id)``."""
    with open_in_child(engine_name, engine_group, spec) as store:
        queue = store.queue(queue_name)
        results.put(("ready", None))
        if not go.wait(timeout=time_limit_s):
            raise TimeoutError("never told to enqueue")
        return ("enqueued", queue.enqueue({"from": "another process"}))
