"""Many claims' retries and fails at once: the optional ``RescheduleClaimsDriver`` and
``BuryClaimsDriver`` (contract 1.2 §3.11).

A driver without the method is checked on what the core runs in its place (a
``reschedule`` or ``bury`` per claim), so every rule below holds for every engine
and no test is left out: where the engine has the statement, these test it.
"""

from __future__ import annotations

from typing import Any

from alkstore.constants import MAX_ERROR_HISTORY
from alkstore.driver import bury_claims_of, queue_topic, reschedule_claims_of
from alkstore.params import Bury, BuryClaims, Reschedule, RescheduleClaims
from alkstore.values import JobError, JobState

from .base import SeamTests
from .support import T0, VISIBILITY_S, SeamDriver, claim, enqueue_one, get_job, watching


def reschedule_claims(driver: SeamDriver, c: Any, params: RescheduleClaims) -> list[int]:
    """The driver's ``reschedule_claims``, or a ``reschedule`` per claim without it."""
    statement = reschedule_claims_of(driver)
    if statement is not None:
        return list(statement(c, params))
    claims = zip(params.job_ids, params.attempts, params.run_ats, params.errors, strict=True)
    return [
        job_id
        for job_id, attempt, run_at, error in claims
        if driver.reschedule(c, Reschedule(job_id, attempt, params.now, run_at, error))
    ]


def bury_claims(driver: SeamDriver, c: Any, params: BuryClaims) -> list[int]:
    """The driver's ``bury_claims``, or a ``bury`` per claim without it."""
    statement = bury_claims_of(driver)
    if statement is not None:
        return list(statement(c, params))
    claims = zip(params.job_ids, params.attempts, params.last_errors, params.errors, strict=True)
    return [
        job_id
        for job_id, attempt, last_error, error in claims
        if driver.bury(c, Bury(job_id, attempt, params.now, last_error, error))
    ]


def _rescheduled(driver: SeamDriver, params: RescheduleClaims) -> list[int]:
    return driver.write(lambda c: reschedule_claims(driver, c, params))


def _claimed(driver: SeamDriver, queue: str, count: int, now: int = T0) -> list[tuple[int, int]]:
    """``count`` claims ``(id, attempts)`` of ``queue``, made at ``now``."""
    for _ in range(count):
        enqueue_one(driver, queue=queue)
    return [(job.id, job.attempts) for job in claim(driver, now, count, queue)]


class ManyOutcomeStatements(SeamTests):
    def test_reschedule_claims_puts_each_valid_claim_back_at_its_own_run_at(
        self, driver: SeamDriver
    ) -> None:
        first, second = _claimed(driver, "q", 1), _claimed(driver, "other", 1)
        claims = first + second
        now = T0 + 1
        params = RescheduleClaims(
            [i for i, _ in claims], [a for _, a in claims], now, [T0 + 60, T0 + 5], ["e1", "e2"]
        )
        written = driver.write(lambda c: reschedule_claims(driver, c, params))
        assert sorted(written) == sorted(i for i, _ in claims)
        for (job_id, _), run_at in zip(claims, (T0 + 60, T0 + 5), strict=True):
            job = get_job(driver, job_id)
            assert job is not None
            assert (job.state, job.run_at, job.worker_id, job.claimed_at) == (
                JobState.PENDING,
                run_at,
                None,
                None,
            )

    def test_reschedule_claims_leaves_a_lapsed_or_superseded_claim_and_writes_the_others(
        self, driver: SeamDriver
    ) -> None:
        lapsed = _claimed(driver, "q", 1)
        superseded = _claimed(driver, "other", 1)
        later = T0 + VISIBILITY_S
        (newer,) = claim(driver, later, 1, "other")
        live = _claimed(driver, "third", 1, later)
        claims = lapsed + superseded + live
        params = RescheduleClaims(
            [i for i, _ in claims], [a for _, a in claims], later, [later] * 3, ["e"] * 3
        )
        written = driver.write(lambda c: reschedule_claims(driver, c, params))
        assert written == [live[0][0]]
        kept = [get_job(driver, job_id) for job_id, _ in lapsed + superseded]
        assert [(j.state, j.attempts) for j in kept if j is not None] == [
            (JobState.PROCESSING, 1),
            (JobState.PROCESSING, newer.attempts),
        ]

    def test_reschedule_claims_announces_each_rescheduled_jobs_queue_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        claims = _claimed(driver, "mail", 1) + _claimed(driver, "sms", 1)
        sink = watching(other)
        sink.clear()
        params = RescheduleClaims(
            [i for i, _ in claims], [a for _, a in claims], T0, [T0, T0], ["e", "e"]
        )
        assert len(driver.write(lambda c: reschedule_claims(driver, c, params))) == 2
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("mail")))
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("sms")))

    def test_bury_claims_moves_each_valid_claim_to_dead_with_its_own_error(
        self, driver: SeamDriver
    ) -> None:
        claims = _claimed(driver, "q", 2) + _claimed(driver, "other", 1)
        now = T0 + 3
        params = BuryClaims(
            [i for i, _ in claims],
            [a for _, a in claims],
            now,
            ["boom", "bust", "bang"],
            ["boom", None, "bang"],
        )
        written = driver.write(lambda c: bury_claims(driver, c, params))
        assert sorted(written) == sorted(i for i, _ in claims)
        dead = [get_job(driver, job_id) for job_id, _ in claims]
        assert [(j.state, j.last_error, j.died_at) for j in dead if j is not None] == [
            (JobState.DEAD, "boom", now),
            (JobState.DEAD, "bust", now),
            (JobState.DEAD, "bang", now),
        ]
        assert claim(driver, T0 + 10**6) == []

    def test_bury_claims_leaves_a_lapsed_claim_and_buries_the_others(
        self, driver: SeamDriver
    ) -> None:
        lapsed = _claimed(driver, "q", 1)
        later = T0 + VISIBILITY_S
        live = _claimed(driver, "other", 1, later)
        claims = lapsed + live
        params = BuryClaims(
            [i for i, _ in claims], [a for _, a in claims], later, ["x", "y"], [None, None]
        )
        assert driver.write(lambda c: bury_claims(driver, c, params)) == [live[0][0]]
        job = get_job(driver, lapsed[0][0])
        assert job is not None
        assert job.state is JobState.PROCESSING


class ManyOutcomeHistories(SeamTests):
    """The error history the many-claims statements write (the ops profile keeps it)."""

    requires = frozenset({"ops"})

    def test_reschedule_claims_and_bury_claims_append_each_claims_own_entry(
        self, driver: SeamDriver
    ) -> None:
        claims = _claimed(driver, "q", 3)
        ids, attempts = [i for i, _ in claims], [a for _, a in claims]
        retried = RescheduleClaims(ids[:2], attempts[:2], T0 + 1, [T0 + 1] * 2, ["r1", "r2"])
        assert sorted(driver.write(lambda c: reschedule_claims(driver, c, retried))) == ids[:2]
        again = claim(driver, T0 + 2, 2)
        buried = BuryClaims(
            [j.id for j in again] + ids[2:],
            [j.attempts for j in again] + attempts[2:],
            T0 + 2,
            ["last"] * 3,
            ["b1", None, "b3"],
        )
        assert len(driver.write(lambda c: bury_claims(driver, c, buried))) == 3
        histories = {}
        for job_id in ids:
            job = get_job(driver, job_id)
            assert job is not None
            histories[job_id] = job.errors
        by_place = {j.id: n for n, j in enumerate(again)}
        second = {ids[0]: (JobError(1, T0 + 1, "r1"),), ids[1]: (JobError(1, T0 + 1, "r2"),)}
        for job_id in ids[:2]:
            entry = ("b1", None)[by_place[job_id]]
            after = () if entry is None else (JobError(2, T0 + 2, entry),)
            assert histories[job_id] == second[job_id] + after
        assert histories[ids[2]] == (JobError(1, T0 + 2, "b3"),)

    def test_reschedule_claims_keeps_the_latest_entries_only(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver, max_attempts=MAX_ERROR_HISTORY + 10)
        retries = MAX_ERROR_HISTORY + 3
        for n in range(1, retries + 1):
            (job,) = claim(driver, T0 + n, 1)
            params = RescheduleClaims([job_id], [job.attempts], T0 + n, [T0 + n], [f"e{n}"])
            assert _rescheduled(driver, params) == [job_id]
        kept = get_job(driver, job_id)
        assert kept is not None
        assert [e.error for e in kept.errors] == [f"e{n}" for n in range(4, retries + 1)]
