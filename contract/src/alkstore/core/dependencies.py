"""Enqueues that wait for other jobs (contract 1.2 §18, the dependencies profile).

The rule lives here; the engine's ``DependenciesDriver.insert_after_jobs`` only
looks the ids up and writes (or, finding a dead or absent one, writes nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..driver import DependenciesDriver
from ..errors import InvalidOptions
from ..options import EnqueueOpts, JobStamps
from ..params import InsertAfter, RedriveDependents
from ..values import JobState


def waits(opts: EnqueueOpts) -> bool:
    """Whether ``opts`` makes its jobs wait for others (``after`` or ``after_finished``)."""
    return opts.after is not None or opts.after_finished is not None


def check_after(opts: EnqueueOpts) -> tuple[tuple[int, ...], bool]:
    """The ids ``opts`` waits for and whether it waits for them to finish whatever
    their outcome (``after_finished``), refusing what §18.2 refuses before anything is
    looked up: dependencies together with a unique key."""
    finished = opts.after is None
    after = opts.after_finished if finished else opts.after
    assert after is not None
    if opts.unique is not None:
        raise InvalidOptions(
            "after and unique cannot be combined: a unique enqueue may return another "
            "job, which would not wait for the jobs named in after"
        )
    return after, finished


def insert_after(
    driver: DependenciesDriver[Any],
    c: Any,
    stamps: JobStamps,
    texts: Sequence[str],
    after: Sequence[int],
    finished: bool = False,
) -> list[int]:
    """Inside a write: insert ``texts`` waiting for ``after`` (to finish, whatever their
    outcome, when ``finished``); ``InvalidOptions`` naming each dead (unless
    ``finished``) or absent dependency, with nothing written, when one is."""
    params = InsertAfter(stamps, texts, after, finished)
    ids, blocked = driver.insert_after_jobs(c, params)
    if blocked:
        raise InvalidOptions(_refusal(blocked))
    return ids


def _refusal(blocked: dict[int, JobState | None]) -> str:
    dead = sorted(i for i, state in blocked.items() if state is JobState.DEAD)
    absent = sorted(i for i, state in blocked.items() if state is not JobState.DEAD)
    parts = []
    if absent:
        parts.append(
            f"no job {', '.join(map(str, absent))} (after names jobs that exist: an id "
            "not issued yet, a cancelled or purged job, or one acked without a completed "
            "retention, cannot be waited for)"
        )
    if dead:
        parts.append(
            f"job {', '.join(map(str, dead))} is dead (it will never complete: redrive "
            "it, then wait for the new job)"
        )
    return "after: " + "; ".join(parts)


def revive_dependents(
    driver: DependenciesDriver[Any], c: Any, redriven: Sequence[int], now: int
) -> None:
    """Inside a redrive's write (§18.4): the jobs that died waiting for the dead jobs
    just redriven as ``redriven`` come back waiting for their new lives, and theirs
    after them, level by level, in the redrive's own commit. A dependent that still
    waits for a job that is dead (or gone) stays dead, its edge moved to the new job."""
    level = list(redriven)
    while level:
        level = driver.redrive_dependents(c, RedriveDependents(tuple(level), now))
