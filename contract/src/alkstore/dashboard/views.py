"""What each page shows, read through the public ``Store`` API (stdlib only).

Nothing here knows about HTTP: the app turns these values into pages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..api import QueueConsumer, Store
from ..cli.selection import dead_jobs, queue_handle
from ..constants import MAX_JOBS_PAGE, MAX_REDRIVE
from ..errors import AlkstoreError, ProfileUnavailable
from ..payload import UndecodablePayload
from ..spec import parse_spec
from ..values import Job, JobState, QueueThroughput, Schedule, WorkerInfo
from ..zones import resolve_zone

PAGE = 50
"""Jobs per page of the queue and dead-letter pages."""
SCAN_LIMIT = 10_000
"""The most jobs one search request reads before it offers the next stretch."""
NEXT_FIRES = 3
"""Upcoming fires shown per schedule."""
STATES = ("pending", "processing", "dead", "all")


def payload_text(payload: Any) -> str:
    """A job's payload as the page shows it: indented JSON, or the stored text of an
    undecodable one."""
    if isinstance(payload, UndecodablePayload):
        return payload.text
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True)


def stamp(epoch: int | None) -> str:
    """An epoch-seconds stamp as ISO 8601 UTC; an empty text for none."""
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def age(seconds: int | None) -> str:
    """A duration as the largest two units (``3h 12m``); an em dash for none."""
    if seconds is None:
        return "\u2014"
    seconds = max(0, int(seconds))
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])


def matches(job: Job, text: str) -> bool:
    """Whether ``text`` (case-folded) occurs in the job's payload, errors or unique key."""
    needle = text.casefold()
    haystacks = [payload_text(job.payload), job.last_error or "", job.unique_key or ""]
    haystacks += [error.error for error in job.errors]
    return any(needle in hay.casefold() for hay in haystacks)


def error_matches(job: Job, text: str) -> bool:
    """Whether ``text`` (case-folded) occurs in the job's last error or error history."""
    needle = text.casefold()
    return any(
        needle in hay.casefold() for hay in (job.last_error or "", *(e.error for e in job.errors))
    )


TOP = 2**63 - 1
"""The cursor of a listing's first page: above every id (ids are int64)."""


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a queue's jobs, newest first: ``next_before`` is the cursor of the
    next, older page (``None`` on the last); ``scanned`` how many jobs a search read."""

    jobs: tuple[Job, ...]
    next_before: int | None
    scanned: int = 0


def _state(state: str) -> JobState | None:
    return None if state == "all" else JobState(state)


def job_page(queue: QueueConsumer, state: str, before: int) -> JobPage:
    """A keyset page of ``queue``'s jobs in ``state`` (``"all"``) below ``before``,
    newest first."""
    page = queue.jobs(_state(state), before_id=before, limit=PAGE + 1)
    more = len(page) > PAGE
    page = page[:PAGE]
    return JobPage(jobs=tuple(page), next_before=page[-1].id if more and page else None)


FIRST_SCAN_PAGE = 2 * PAGE
"""A search's first read; each next one four times larger, up to ``MAX_JOBS_PAGE``: a
search whose matches are near the top reads a few jobs, not a thousand."""


def _scan(queue: QueueConsumer, state: JobState | None, before: int) -> Iterator[Job]:
    size = FIRST_SCAN_PAGE
    while True:
        page = queue.jobs(state, before_id=before, limit=size)
        yield from page
        if len(page) < size:
            return
        before = page[-1].id
        size = min(size * 4, MAX_JOBS_PAGE)


def search(queue: QueueConsumer, state: str, text: str, before: int) -> JobPage:
    """Jobs of ``queue`` in ``state`` whose id is ``text``, or whose payload, error
    text or unique key contains it; at most ``PAGE`` matches and ``SCAN_LIMIT`` jobs
    read per call (the cursor goes on from the last job read)."""
    if text.strip().isdigit():
        job = queue.get_job(int(text.strip()))  # id-global: the queue is checked here
        hit = job is not None and job.queue == queue.name
        hit = hit and (state == "all" or (job is not None and job.state.value == state))
        return JobPage(jobs=(job,) if hit and job is not None else (), next_before=None, scanned=1)
    found: list[Job] = []
    scanned = 0
    for job in _scan(queue, _state(state), before):
        scanned += 1
        if matches(job, text):
            found.append(job)
        if len(found) == PAGE or scanned == SCAN_LIMIT:
            return JobPage(jobs=tuple(found), next_before=job.id, scanned=scanned)
    return JobPage(jobs=tuple(found), next_before=None, scanned=scanned)


@dataclass(frozen=True, slots=True)
class Selection:
    """The dead jobs a bulk action would touch: ``jobs`` (at most ``MAX_REDRIVE``),
    out of ``total`` matching."""

    jobs: tuple[Job, ...]
    total: int

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(job.id for job in self.jobs)


def dead_selection(queue: QueueConsumer, error: str) -> Selection:
    """Every dead job of ``queue`` whose error text contains ``error`` (all with an
    empty filter), the first ``MAX_REDRIVE`` of them taken."""
    chosen: list[Job] = []
    total = 0
    for job in dead_jobs(queue):
        if not error or error_matches(job, error):
            total += 1
            if len(chosen) < MAX_REDRIVE:
                chosen.append(job)
    return Selection(jobs=tuple(chosen), total=total)


def named_dead(queue: QueueConsumer, ids: list[int]) -> Selection:
    """The named jobs that are dead jobs of ``queue`` (the others are left out)."""
    chosen = []
    for job_id in dict.fromkeys(ids):
        job = queue.get_job(job_id)
        if job is not None and job.queue == queue.name and job.state is JobState.DEAD:
            chosen.append(job)
    return Selection(jobs=tuple(chosen[:MAX_REDRIVE]), total=len(chosen))


def handle(store: Store, name: str) -> QueueConsumer:
    """The queue ``name`` as ``store.stats()`` lists it (outboxes' backing queues too)."""
    return queue_handle(store, name)


@dataclass(frozen=True, slots=True)
class Fire:
    """One upcoming fire of a schedule: in its own zone and in UTC."""

    local: str
    utc: str


def next_fires(schedule: Schedule, count: int = NEXT_FIRES) -> tuple[Fire, ...]:
    """The schedule's next ``count`` fires, in its own zone (and UTC)."""
    zone = resolve_zone(schedule.timezone)
    fires: list[Fire] = []
    at = schedule.next_fire_at
    try:
        cadence = parse_spec(schedule.spec, schedule.timezone)
    except AlkstoreError:
        cadence = None  # a spec this release no longer reads: its stored next fire only
    for _ in range(count):
        try:
            local = datetime.fromtimestamp(at, zone)
        except (OverflowError, OSError, ValueError):
            break  # past the calendar's end: no later fire
        fires.append(Fire(local=local.strftime("%Y-%m-%d %H:%M:%S %Z (UTC%z)"), utc=stamp(at)))
        if cadence is None:
            break
        at = cadence.next_after(at)
    return tuple(fires)


LOOKUP_QUEUE = "alkstore-dashboard"
"""The queue handle a job page reads through: ``get_job`` is id-global, any name does."""


def search_dead(queue: QueueConsumer, error: str, before: int) -> JobPage:
    """A page of ``queue``'s dead jobs whose error text contains ``error`` (every dead
    job with an empty filter), newest first below ``before``."""
    if not error:
        return job_page(queue, "dead", before)
    found: list[Job] = []
    scanned = 0
    for job in _scan(queue, JobState.DEAD, before):
        scanned += 1
        if error_matches(job, error):
            found.append(job)
        if len(found) == PAGE or scanned == SCAN_LIMIT:
            return JobPage(jobs=tuple(found), next_before=job.id, scanned=scanned)
    return JobPage(jobs=tuple(found), next_before=None, scanned=scanned)


@dataclass(frozen=True, slots=True)
class LiveWorker:
    """A live worker and the jobs it holds: its queues' processing jobs whose
    ``worker_id`` is its id, oldest claim first."""

    worker: WorkerInfo
    jobs: tuple[Job, ...]
    more: bool
    """Some of its queues had more processing jobs than one read returns."""


def live_workers(store: Store) -> list[LiveWorker]:
    """``store.workers()``, each with the jobs it holds (contract 1.2 §19): one read of
    each queue's processing jobs (at most ``MAX_JOBS_PAGE``, newest first), shared by
    every worker of the queue. Without the ops profile no job is read."""
    found = store.workers()
    queues = sorted({name for worker in found for name in worker.queues})
    held: dict[str, list[Job]] = {}
    cut: set[str] = set()
    try:
        for name in queues:
            page = store.queue(name).jobs(JobState.PROCESSING, before_id=TOP, limit=MAX_JOBS_PAGE)
            if len(page) == MAX_JOBS_PAGE:
                cut.add(name)
            for job in page:
                if job.worker_id is not None:
                    held.setdefault(job.worker_id, []).append(job)
    except ProfileUnavailable:  # no ops profile: the workers without their jobs
        held, cut = {}, set()
    rows = []
    for worker in found:
        jobs = [job for job in held.get(worker.id, ()) if job.queue in worker.queues]
        jobs.sort(key=lambda job: (job.claimed_at or 0, job.id))
        rows.append(
            LiveWorker(worker, tuple(jobs), more=any(name in cut for name in worker.queues))
        )
    return rows


SPARK = "▁▂▃▄▅▆▇█"
SPARK_MINUTES = 5
"""Minutes per sparkline character: twelve characters for the hour."""


def throughput_by_queue(store: Store) -> dict[str, QueueThroughput]:
    """``store.throughput()`` by queue (contract 1.2 §19.6); none without the profile."""
    try:
        return {counted.queue: counted for counted in store.throughput()}
    except ProfileUnavailable:
        return {}


def sparkline(per_minute: tuple[int, ...]) -> str:
    """The hour's counts as block characters, one per ``SPARK_MINUTES`` minutes, the
    tallest the busiest stretch; a stretch with no job is the lowest block."""
    sums = [
        sum(per_minute[start : start + SPARK_MINUTES])
        for start in range(0, len(per_minute), SPARK_MINUTES)
    ]
    top = max(sums, default=0)
    if top == 0:
        return SPARK[0] * len(sums)
    return "".join(SPARK[(len(SPARK) - 1) * value // top] for value in sums)


GRAPH_LINKS = 100
"""The most jobs of each direction a job page lists (its waits are at most
``MAX_DEPENDENCIES``; a job may have any number of dependents)."""


@dataclass(frozen=True, slots=True)
class Linked:
    """A job at the other end of an edge, as it stands now."""

    id: int
    state: str
    """Its state, or ``gone`` (finished without a trace kept, or purged)."""
    queue: str | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class Graph:
    """A job page's dependencies (contract 1.2 §18.7): what the job still waits for,
    and the waiting jobs that still wait for it, each with its state."""

    waits_for: tuple[Linked, ...]
    waited_by: tuple[Linked, ...]
    more_waited_by: int
    """How many dependents are not listed (beyond ``GRAPH_LINKS``)."""


def _linked(queue: QueueConsumer, job_id: int) -> Linked:
    job = queue.get_job(job_id)
    if job is None:
        return Linked(job_id, "gone", None, None)
    return Linked(job_id, job.state.value, job.queue, job.last_error)


def job_graph(store: Store, job: Job) -> Graph | None:
    """The dependencies of ``job`` (one read of its edges, one ``get_job`` per listed
    job); ``None`` without the dependencies profile or when it has no edge."""
    queue = handle(store, LOOKUP_QUEUE)
    try:
        found = queue.dependencies(job.id)
    except ProfileUnavailable:
        return None
    if not found.waits_for and not found.waited_by:
        return None
    waits_for = tuple(_linked(queue, i) for i in found.waits_for[:GRAPH_LINKS])
    waited_by = tuple(_linked(queue, i) for i in found.waited_by[:GRAPH_LINKS])
    return Graph(waits_for, waited_by, max(0, len(found.waited_by) - GRAPH_LINKS))
