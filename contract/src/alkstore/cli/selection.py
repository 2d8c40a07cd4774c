"""Which dead jobs a redrive takes, and carrying it out (stdlib only).

The command line picks the dead jobs itself, then hands their ids to
``Queue.redrive``: ``--dry-run`` shows exactly the jobs a real run would take,
and ``--all`` means the dead jobs there are when the command starts -- never
the jobs that die again while it runs, so a handler that keeps failing cannot
keep it going.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..api import QueueConsumer, Store
from ..constants import MAX_JOBS_PAGE, MAX_REDRIVE
from ..names import outbox_of_queue
from ..values import Job, JobState

LOOKUP_QUEUE = "alkstore-cli"
"""The queue handle ``job ID`` reads through: ``get_job`` is id-global, any name does."""


def queue_handle(store: Store, name: str) -> QueueConsumer:
    """A handle on the queue ``name`` as ``store.stats()`` lists it.

    An outbox's backing queue (``__alkstore_outbox:<outbox>``) is reserved, so it is
    reached through ``store.outbox``; any other reserved name is refused as usual.
    """
    outbox = outbox_of_queue(name)
    return store.queue(name) if outbox is None else store.outbox(outbox)


@dataclass(frozen=True, slots=True)
class RedrivePlan:
    """The dead jobs to redrive, in order, and the named ids that are not dead jobs
    of the queue (skipped, as ``Queue.redrive`` skips them)."""

    jobs: tuple[Job, ...]
    skipped: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RedriveResult:
    """``moves``: ``(dead id, new id)`` in plan order. ``raced``: planned ids another
    process redrove or purged between the plan and the redrive."""

    moves: tuple[tuple[int | None, int], ...]
    raced: tuple[int, ...]


def dead_jobs(queue: QueueConsumer) -> Iterator[Job]:
    """Every dead job of ``queue`` now, in id order (keyset pages)."""
    after = 0
    while True:
        page = queue.jobs(JobState.DEAD, after_id=after, limit=MAX_JOBS_PAGE)
        yield from page
        if len(page) < MAX_JOBS_PAGE:
            return
        after = page[-1].id


def plan_all(queue: QueueConsumer) -> RedrivePlan:
    return RedrivePlan(jobs=tuple(dead_jobs(queue)))


def error_matches(job: Job, text: str) -> bool:
    """Whether ``text`` occurs, ignoring case, in why ``job`` died or in any of its
    attempts' errors (an operator pastes a fragment of a traceback)."""
    needle = text.casefold()
    texts = (job.last_error or "", *(failure.error for failure in job.errors))
    return any(needle in haystack.casefold() for haystack in texts)


def plan_matching(queue: QueueConsumer, text: str) -> RedrivePlan:
    """The dead jobs of ``queue`` now whose errors contain ``text`` (``error_matches``)."""
    return RedrivePlan(jobs=tuple(job for job in dead_jobs(queue) if error_matches(job, text)))


def plan_named(queue: QueueConsumer, ids: Sequence[int]) -> RedrivePlan:
    """The named jobs that are dead jobs of ``queue``, in the order named (once each)."""
    jobs: list[Job] = []
    skipped: list[int] = []
    for job_id in dict.fromkeys(ids):  # a repeated id names one job
        job = queue.get_job(job_id)  # id-global: the queue is checked here
        if job is not None and job.queue == queue.name and job.state is JobState.DEAD:
            jobs.append(job)
        else:
            skipped.append(job_id)
    return RedrivePlan(jobs=tuple(jobs), skipped=tuple(skipped))


def carry_out(queue: QueueConsumer, plan: RedrivePlan) -> RedriveResult:
    """Redrive the planned jobs, ``MAX_REDRIVE`` per transaction."""
    ids = [job.id for job in plan.jobs]
    moves: list[tuple[int | None, int]] = []
    raced: list[int] = []
    for start in range(0, len(ids), MAX_REDRIVE):
        chunk = ids[start : start + MAX_REDRIVE]
        new_ids = queue.redrive(chunk, limit=MAX_REDRIVE)
        if len(new_ids) == len(chunk):
            moves.extend(zip(chunk, new_ids, strict=True))
            continue
        # Another process redrove or purged some of these meanwhile: the new jobs
        # name their origin (a new job already finished and gone names none).
        origins = {new: _origin(queue, new) for new in new_ids}
        taken = set(origins.values())
        raced.extend(job_id for job_id in chunk if job_id not in taken)
        moves.extend((origin, new) for new, origin in origins.items())
    return RedriveResult(moves=tuple(moves), raced=tuple(raced))


def _origin(queue: QueueConsumer, new_id: int) -> int | None:
    job = queue.get_job(new_id)
    return None if job is None else job.redriven_from
