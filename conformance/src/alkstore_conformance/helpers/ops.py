"""What the ops-profile properties (contract §11) share: making dead jobs, reading
a queue's jobs whole, finding which job was redriven from which, and operators
redriving at once from processes of their own."""

from __future__ import annotations

from collections.abc import Sequence

from alkstore import EngineSpec, Job, JobState, Queue
from alkstore.constants import MAX_JOBS_PAGE

from .bounded import pages
from .profile_processes import redriver_process
from .profiles import Children


def make_dead(queue: Queue, count: int = 1, error: str = "broken") -> list[int]:
    """Enqueue ``count`` jobs and fail each: their ids, now dead rows of ``queue``.

    The queue must hold no other claimable job (each claim takes the new one)."""
    dead: list[int] = []
    for n in range(count):
        job_id = queue.enqueue({"dead": n})
        handle = queue.claim("operator-setup")
        assert handle is not None
        assert handle.id == job_id, "make_dead needs a queue with no other claimable job"
        assert handle.fail(error) is True
        dead.append(job_id)
    return dead


def every_job(queue: Queue, state: JobState | None = None) -> list[Job]:
    """Every job of ``queue`` (or of one state), page by page at the largest limit."""

    def read(after: int) -> list[Job]:
        return queue.jobs(state, after_id=after, limit=MAX_JOBS_PAGE)

    return pages(read, _job_id, what=f"{queue.name!r}.jobs()")


def _job_id(job: Job) -> int:
    return job.id


def redriven_from(queue: Queue) -> dict[int, list[int]]:
    """Dead id -> the ids of the live jobs of ``queue`` redriven from it."""
    found: dict[int, list[int]] = {}
    for job in every_job(queue):
        if job.redriven_from is not None:
            found.setdefault(job.redriven_from, []).append(job.id)
    return found


def origins(queue: Queue, new_ids: Sequence[int]) -> list[int | None]:
    """The ``redriven_from`` of each of ``new_ids`` (``None`` for a job not found)."""
    jobs = [queue.get_job(job_id) for job_id in new_ids]
    return [None if job is None else job.redriven_from for job in jobs]


def dead_ids(queue: Queue) -> list[int]:
    return [job.id for job in every_job(queue, JobState.DEAD)]


def one_life_each(queue: Queue, dead: Sequence[int]) -> dict[int, str]:
    """For each of ``dead``: ``"dead"`` (its row is still there and nothing came of it),
    ``"redriven"`` (its row is gone and exactly one job names it), or what is wrong."""
    remaining = set(dead_ids(queue))
    children = redriven_from(queue)
    lives: dict[int, str] = {}
    for job_id in dead:
        kept, made = job_id in remaining, len(children.get(job_id, []))
        if kept and made == 0:
            lives[job_id] = "dead"
        elif not kept and made == 1:
            lives[job_id] = "redriven"
        else:
            lives[job_id] = f"dead row {'kept' if kept else 'gone'}, {made} new job(s)"
    return lives


def redrive_in_processes(
    engine_ref: tuple[str, str, EngineSpec],
    plans: Sequence[list[tuple[str, list[int] | None]]],
    time_limit_s: float,
) -> list[list[list[int]]]:
    """Each plan run by an operator in a process of its own: round by round, all the
    operators let go at once by a barrier, each redrives its ``(queue name, ids)``
    (every dead job of the queue when ``ids`` is ``None``). For each operator, in the
    order the operators finished, the new ids each of its rounds' redrives returned."""
    with Children(time_limit_s) as children:
        barrier = children.context.Barrier(len(plans))
        for rounds in plans:
            children.start(
                redriver_process,
                *engine_ref,
                rounds,
                barrier,
                children.results,
                time_limit_s,
            )
        return [children.expect("redriven") for _ in plans]
