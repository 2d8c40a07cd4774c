"""A claim's outcomes as units of work (contract §2.8-§2.11, §3.8-§3.11).

Each outcome is planned first, its arguments checked before anything is written,
and written later under the claim ``(id, attempts)`` at the time it runs: one
claim at a time (a handle's call, ``tx.ack``, ``tx.retry``, ``tx.fail``), or many
in one statement where the engine has one (``tx.ack_all``, ``tx.retry_all``,
``tx.fail_all``), each claim still under its own guard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..backoff import retry_delay
from ..driver import (
    ERROR_EXHAUSTED,
    Driver,
    ack_claims_of,
    bury_claims_of,
    reschedule_claims_of,
)
from ..params import (
    AckClaims,
    Bury,
    BuryClaims,
    ClaimRef,
    Complete,
    Reschedule,
    RescheduleClaims,
)
from ..payload import encode_result
from ..timeconv import Duration, duration_seconds
from ..values import Job
from .checks import check_error, history_error
from .context import StoreContext

Unit = Callable[[Any, int], bool]
"""An outcome under one claim: given the connection and ``now``, whether it held."""


@dataclass(frozen=True, slots=True)
class Putback:
    """A retry's reschedule: ``job`` pending again ``delay_s`` after it is written."""

    job: Job
    delay_s: int
    error: str
    """The error as the history keeps it."""

    def params(self, now: int) -> Reschedule:
        job = self.job
        return Reschedule(job.id, job.attempts, now, now + self.delay_s, self.error)


@dataclass(frozen=True, slots=True)
class Burial:
    """``job`` dead-lettered with ``last_error``, ``error`` (if any) in its history."""

    job: Job
    last_error: str
    error: str | None

    def params(self, now: int) -> Bury:
        job = self.job
        return Bury(job.id, job.attempts, now, self.last_error, self.error)


def acking(ctx: StoreContext, job: Job, result: Any) -> Unit:
    """The ack of ``job``'s claim as a unit of work, its result checked first: for a
    job stamped with a completed retention, the results profile's ``complete`` (it
    keeps the job and ``result``); for any other, the plain ``ack`` (a result, once
    checked, is not kept: the job is gone). ``ResultError`` for a result that cannot
    be stored, ``ProfileUnavailable`` for one on an engine without the profile, both
    before anything is written."""
    text = None
    if result is not None:
        ctx.results()
        text = encode_result(result)
    if job.completed_retention_s is None:
        driver = ctx.driver
        return lambda c, now: driver.ack(c, ClaimRef(job.id, job.attempts, now))
    results = ctx.results()
    return lambda c, now: results.complete(c, Complete(job.id, job.attempts, now, text))


def retry_planned(
    ctx: StoreContext, job: Job, error: str, delay: Duration | None
) -> Putback | Burial:
    """The retry of ``job``'s claim, its arguments checked first (``InvalidOptions``,
    the delay even when the budget is spent): the reschedule after ``delay`` or the
    backoff curve, or, at the attempt budget, the bury with ``"max attempts
    exceeded"``."""
    error = check_error(error)
    explicit = None if delay is None else duration_seconds(delay, "delay")
    if job.attempts >= job.max_attempts:
        return Burial(job, ERROR_EXHAUSTED, history_error(error))
    if explicit is not None:
        seconds = explicit
    else:
        seconds = retry_delay(job.backoff_base_s, job.attempts, ctx.rng)
    return Putback(job, seconds, history_error(error))


def fail_planned(job: Job, error: str) -> Burial:
    """The fail of ``job``'s claim, ``error`` checked first."""
    error = check_error(error)
    return Burial(job, error, history_error(error))


def retrying(ctx: StoreContext, job: Job, error: str, delay: Duration | None) -> tuple[Unit, bool]:
    """``retry_planned`` as a unit of work, and whether the unit announces the queue
    (a reschedule does: its waiters are woken once it is written)."""
    plan = retry_planned(ctx, job, error, delay)
    return written_alone(ctx.driver, plan), isinstance(plan, Putback)


def failing(ctx: StoreContext, job: Job, error: str) -> Unit:
    """``fail_planned`` as a unit of work."""
    return written_alone(ctx.driver, fail_planned(job, error))


def burying(ctx: StoreContext, job: Job, last_error: str, error: str | None) -> Unit:
    """``job``'s claim dead-lettered with ``last_error`` (``error``, if any, kept in
    its history), as a unit of work: the driver's ``bury`` under the claim."""
    entry = None if error is None else history_error(error)
    return written_alone(ctx.driver, Burial(job, last_error, entry))


def written_alone(driver: Driver[Any], plan: Putback | Burial) -> Unit:
    """``plan`` as a unit of work: the driver's ``reschedule`` or ``bury``."""
    if isinstance(plan, Putback):
        return lambda c, now: driver.reschedule(c, plan.params(now))
    return lambda c, now: driver.bury(c, plan.params(now))


def acked_all(driver: Driver[Any], c: Any, jobs: Sequence[Job], now: int) -> set[int]:
    """The ids of ``jobs`` (each job named once) whose claims were valid, each acked:
    by the engine's one statement (``AckClaimsDriver``) or an ``ack`` each."""

    def one(at: int) -> bool:
        return driver.ack(c, ClaimRef(jobs[at].id, jobs[at].attempts, now))

    def many() -> AckClaims:
        return AckClaims([j.id for j in jobs], [j.attempts for j in jobs], now)

    return _each_or_all(jobs, ack_claims_of(driver), c, one, many)


def put_back_all(driver: Driver[Any], c: Any, plans: Sequence[Putback], now: int) -> set[int]:
    """The ids of the ``plans``' jobs (each named once) rescheduled: by the engine's
    one statement (``RescheduleClaimsDriver``) or a ``reschedule`` each."""

    def one(at: int) -> bool:
        return driver.reschedule(c, plans[at].params(now))

    def many() -> RescheduleClaims:
        return RescheduleClaims(
            [p.job.id for p in plans],
            [p.job.attempts for p in plans],
            now,
            [now + p.delay_s for p in plans],
            [p.error for p in plans],
        )

    jobs = [plan.job for plan in plans]
    return _each_or_all(jobs, reschedule_claims_of(driver), c, one, many)


def buried_all(driver: Driver[Any], c: Any, plans: Sequence[Burial], now: int) -> set[int]:
    """The ids of the ``plans``' jobs (each named once) dead-lettered: by the engine's
    one statement (``BuryClaimsDriver``) or a ``bury`` each."""

    def one(at: int) -> bool:
        return driver.bury(c, plans[at].params(now))

    def many() -> BuryClaims:
        return BuryClaims(
            [p.job.id for p in plans],
            [p.job.attempts for p in plans],
            now,
            [p.last_error for p in plans],
            [p.error for p in plans],
        )

    jobs = [plan.job for plan in plans]
    return _each_or_all(jobs, bury_claims_of(driver), c, one, many)


Q = TypeVar("Q")


def _each_or_all(
    jobs: Sequence[Job],
    statement: Callable[[Any, Q], Sequence[int]] | None,
    c: Any,
    one: Callable[[int], bool],
    many: Callable[[], Q],
) -> set[int]:
    """The ids of ``jobs`` (each named once) written: by the engine's ``statement``
    over ``many()`` when it has one, else ``one(at)`` for each job's place."""
    if not jobs:
        return set()
    if statement is None:
        return {job.id for at, job in enumerate(jobs) if one(at)}
    return {int(job_id) for job_id in statement(c, many())}
