"""The queue statements of ``alkstore.driver.Driver``, one test per docstring rule."""

from __future__ import annotations

import pytest

from alkstore.driver import ERROR_EXHAUSTED, ERROR_EXPIRED
from alkstore.params import AckBatch, Bury, Cancel, ClaimRef, Heartbeat, NextWake, Reschedule, Sweep
from alkstore.values import JobState

from .base import SeamTests
from .support import (
    T0,
    VISIBILITY_S,
    SeamDriver,
    claim,
    claim_one,
    enqueue,
    enqueue_one,
    get_job,
    ids,
    insert,
    stamps,
)


class QueueStatements(SeamTests):
    # -- insert_jobs ---------------------------------------------------------------------
    def test_insert_jobs_returns_the_new_ids_in_payload_order(self, driver: SeamDriver) -> None:
        new = enqueue(driver, '"a"', '"b"', '"c"')
        assert len(set(new)) == 3
        jobs = [get_job(driver, job_id) for job_id in new]
        assert [job.payload if job else None for job in jobs] == ["a", "b", "c"]

    def test_insert_jobs_stores_pending_rows_with_every_stamp(self, driver: SeamDriver) -> None:
        given = stamps(
            queue="mail",
            priority=7,
            created_at=T0 - 1,
            run_at=T0 + 5,
            expires_at=T0 + 99,
            max_attempts=4,
            visibility_timeout_s=11,
            backoff_base_s=2,
            dead_letter_retention_s=600,
        )
        (job_id,) = driver.write(lambda c: insert(driver, c, given, ['{"k": 1}']))
        job = get_job(driver, job_id)
        assert job is not None
        assert (job.queue, job.state, job.payload, job.attempts) == (
            "mail",
            JobState.PENDING,
            {"k": 1},
            0,
        )
        assert (job.priority, job.created_at, job.run_at, job.expires_at) == (
            7,
            T0 - 1,
            T0 + 5,
            T0 + 99,
        )
        assert (job.max_attempts, job.visibility_timeout_s, job.backoff_base_s) == (4, 11, 2)
        assert job.dead_letter_retention_s == 600
        assert (job.claimed_at, job.worker_id, job.last_error, job.died_at) == (
            None,
            None,
            None,
            None,
        )

    def test_insert_jobs_never_reuses_the_id_of_a_deleted_row(self, driver: SeamDriver) -> None:
        first = enqueue_one(driver)
        assert driver.write(lambda c: driver.cancel(c, Cancel("q", first)))
        assert enqueue_one(driver) > first

    # -- claim -----------------------------------------------------------------------------
    def test_claim_takes_rows_by_priority_desc_then_run_at_then_id(
        self, driver: SeamDriver
    ) -> None:
        late = enqueue_one(driver, run_at=T0 - 1)
        early_a = enqueue_one(driver, run_at=T0 - 5)
        early_b = enqueue_one(driver, run_at=T0 - 5)
        urgent = enqueue_one(driver, priority=3)
        # The order decides which rows a limited claim takes (the core sorts what
        # one claim returns), so take them one at a time.
        taken = [claim_one(driver).id for _ in range(4)]
        assert taken == [urgent, early_a, early_b, late]

    def test_claim_sets_processing_counts_the_attempt_and_records_the_claimer(
        self, driver: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver)
        job = claim_one(driver, T0 + 2, worker="w1")
        assert (job.id, job.state, job.attempts) == (job_id, JobState.PROCESSING, 1)
        assert (job.claimed_at, job.worker_id) == (T0 + 2, "w1")
        assert get_job(driver, job_id) == job

    def test_claim_takes_a_pending_row_once_its_run_at_is_reached(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver, run_at=T0 + 10)
        assert claim(driver, T0 + 9) == []
        assert ids(claim(driver, T0 + 10)) == [job_id]

    def test_claim_sets_the_deadline_visibility_timeout_after_now(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver)
        claim_one(driver, T0)
        assert claim(driver, T0 + VISIBILITY_S - 1) == []
        again = claim_one(driver, T0 + VISIBILITY_S)
        assert (again.id, again.attempts, again.claimed_at) == (job_id, 2, T0 + VISIBILITY_S)

    def test_claim_skips_an_expired_row(self, driver: SeamDriver) -> None:
        enqueue_one(driver, expires_at=T0)
        kept = enqueue_one(driver, expires_at=T0 + 1)
        assert ids(claim(driver, T0)) == [kept]

    def test_claim_skips_a_row_that_spent_its_attempts(self, driver: SeamDriver) -> None:
        enqueue_one(driver, max_attempts=1)
        claim_one(driver, T0)
        assert claim(driver, T0 + VISIBILITY_S) == []

    @pytest.mark.parametrize("limit", [1, 100])
    def test_claim_first_moves_the_queues_lapsed_exhausted_rows_to_dead(
        self, driver: SeamDriver, limit: int
    ) -> None:
        exhausted = enqueue_one(driver, max_attempts=1, priority=9)
        live = enqueue_one(driver, max_attempts=1, priority=8, visibility_timeout_s=100)
        retryable = enqueue_one(driver, max_attempts=2, priority=7)
        elsewhere = enqueue_one(driver, queue="other", max_attempts=1)
        assert len(claim(driver, T0)) == 3
        claim(driver, T0, queue="other")
        pending = enqueue_one(driver)
        now = T0 + VISIBILITY_S
        # The exhausted row goes dead; the lapsed one with attempts left and the
        # pending one are claimable (at most ``limit`` of them are taken).
        taken = ids(claim(driver, now, limit))
        assert taken == [retryable, pending][:limit]
        job = get_job(driver, exhausted)
        assert job is not None
        assert (job.state, job.last_error, job.died_at) == (JobState.DEAD, ERROR_EXHAUSTED, now)
        states = [get_job(driver, job_id) for job_id in (live, elsewhere)]
        assert [job.state if job else None for job in states] == [JobState.PROCESSING] * 2

    def test_claim_moves_lapsed_exhausted_rows_when_nothing_is_claimable(
        self, driver: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver, max_attempts=1)
        claim_one(driver, T0)
        now = T0 + VISIBILITY_S
        assert claim(driver, now, 1) == []
        job = get_job(driver, job_id)
        assert job is not None
        assert (job.state, job.last_error, job.died_at) == (JobState.DEAD, ERROR_EXHAUSTED, now)

    def test_claim_takes_at_most_limit_rows(self, driver: SeamDriver) -> None:
        enqueue(driver, "1", "2", "3")
        assert len(claim(driver, limit=2)) == 2
        assert len(claim(driver, limit=2)) == 1

    def test_claim_takes_rows_of_its_queue_only(self, driver: SeamDriver) -> None:
        enqueue_one(driver, queue="other")
        mine = enqueue_one(driver)
        assert ids(claim(driver)) == [mine]

    # -- bury_exhausted / bury_expired / purge_dead -----------------------------------------
    def test_bury_exhausted_moves_a_lapsed_claim_at_its_budget_to_dead(
        self, driver: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver, max_attempts=1)
        claim_one(driver, T0)
        now = T0 + VISIBILITY_S
        assert driver.write(lambda c: driver.bury_exhausted(c, Sweep("q", now))) == 1
        job = get_job(driver, job_id)
        assert job is not None
        assert (job.state, job.last_error, job.died_at) == (JobState.DEAD, ERROR_EXHAUSTED, now)

    def test_bury_exhausted_leaves_live_claims_and_claims_with_attempts_left(
        self, driver: SeamDriver
    ) -> None:
        live = enqueue_one(driver, max_attempts=1, visibility_timeout_s=100)
        retryable = enqueue_one(driver, max_attempts=2)
        enqueue_one(driver, queue="other", max_attempts=1)
        claim(driver, T0)
        claim(driver, T0, queue="other")
        now = T0 + VISIBILITY_S
        assert driver.write(lambda c: driver.bury_exhausted(c, Sweep("q", now))) == 0
        jobs = [get_job(driver, job_id) for job_id in (live, retryable)]
        states = [job.state if job else None for job in jobs]
        assert states == [JobState.PROCESSING, JobState.PROCESSING]

    def test_bury_expired_moves_pending_and_processing_rows_past_expiry_to_dead(
        self, driver: SeamDriver
    ) -> None:
        claimed = enqueue_one(driver, expires_at=T0 + 5)
        claim_one(driver, T0)
        pending = enqueue_one(driver, expires_at=T0 + 5)
        assert driver.write(lambda c: driver.bury_expired(c, Sweep("q", T0 + 5))) == 2
        for job_id in (claimed, pending):
            job = get_job(driver, job_id)
            assert job is not None
            assert (job.state, job.last_error, job.died_at) == (
                JobState.DEAD,
                ERROR_EXPIRED,
                T0 + 5,
            )

    def test_bury_expired_leaves_rows_before_expiry_without_one_or_of_other_queues(
        self, driver: SeamDriver
    ) -> None:
        enqueue_one(driver, expires_at=T0 + 6)
        enqueue_one(driver)
        enqueue_one(driver, queue="other", expires_at=T0)
        assert driver.write(lambda c: driver.bury_expired(c, Sweep("q", T0 + 5))) == 0

    def test_purge_dead_deletes_dead_rows_once_their_retention_has_passed(
        self, driver: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver, expires_at=T0, dead_letter_retention_s=10)
        driver.write(lambda c: driver.bury_expired(c, Sweep("q", T0)))
        assert driver.write(lambda c: driver.purge_dead(c, Sweep("q", T0 + 10))) == 0
        assert driver.write(lambda c: driver.purge_dead(c, Sweep("q", T0 + 11))) == 1
        assert get_job(driver, job_id) is None

    def test_purge_dead_keeps_dead_rows_without_a_retention(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver, expires_at=T0, dead_letter_retention_s=None)
        driver.write(lambda c: driver.bury_expired(c, Sweep("q", T0)))
        assert driver.write(lambda c: driver.purge_dead(c, Sweep("q", T0 + 10**6))) == 0
        assert get_job(driver, job_id) is not None

    # -- handle operations' own effects -------------------------------------------------------
    def test_ack_deletes_the_row(self, driver: SeamDriver) -> None:
        enqueue_one(driver)
        job = claim_one(driver)
        assert driver.write(lambda c: driver.ack(c, ClaimRef(job.id, job.attempts, T0 + 1)))
        assert get_job(driver, job.id) is None

    def test_heartbeat_moves_the_deadline(self, driver: SeamDriver) -> None:
        enqueue_one(driver)
        job = claim_one(driver)
        later = T0 + VISIBILITY_S + 50
        assert driver.write(
            lambda c: driver.heartbeat(c, Heartbeat(job.id, job.attempts, T0 + 1, later))
        )
        assert claim(driver, later - 1) == []
        assert ids(claim(driver, later)) == [job.id]

    def test_reschedule_returns_the_row_to_pending_at_run_at_without_a_claimer(
        self, driver: SeamDriver
    ) -> None:
        enqueue_one(driver)
        job = claim_one(driver)
        assert driver.write(
            lambda c: driver.reschedule(c, Reschedule(job.id, job.attempts, T0 + 1, T0 + 60, "e"))
        )
        after = get_job(driver, job.id)
        assert after is not None
        assert (after.state, after.run_at, after.attempts) == (JobState.PENDING, T0 + 60, 1)
        assert (after.worker_id, after.claimed_at) == (None, None)

    def test_release_claim_returns_the_row_to_pending_with_its_attempt_refunded(
        self, driver: SeamDriver
    ) -> None:
        before = enqueue_one(driver)
        job = claim_one(driver)
        assert driver.write(
            lambda c: driver.release_claim(c, ClaimRef(job.id, job.attempts, T0 + 1))
        )
        after = get_job(driver, job.id)
        assert after is not None
        assert (after.state, after.run_at, after.attempts) == (JobState.PENDING, T0, 1)
        assert after.max_attempts == job.max_attempts + 1
        assert (after.worker_id, after.claimed_at, after.errors) == (None, None, ())
        (again,) = claim(driver, T0 + 1)
        assert (again.id, again.attempts) == (before, 2)

    def test_bury_moves_the_row_to_dead_with_its_error_keeping_its_id(
        self, driver: SeamDriver
    ) -> None:
        enqueue_one(driver)
        job = claim_one(driver)
        assert driver.write(
            lambda c: driver.bury(c, Bury(job.id, job.attempts, T0 + 3, "boom", "boom"))
        )
        dead = get_job(driver, job.id)
        assert dead is not None
        assert (dead.state, dead.last_error, dead.died_at) == (JobState.DEAD, "boom", T0 + 3)
        assert claim(driver, T0 + 10**6) == []

    # -- ack_batch ---------------------------------------------------------------------------
    def test_ack_batch_deletes_the_workers_live_claims_of_the_queue_only(
        self, driver: SeamDriver
    ) -> None:
        mine = enqueue(driver, "1", "2")
        claim(driver, worker="w1")
        theirs = enqueue_one(driver)
        claim(driver, worker="w2")
        pending = enqueue_one(driver)
        elsewhere = enqueue_one(driver, queue="other")
        claim(driver, queue="other", worker="w1")
        every = [*mine, theirs, pending, elsewhere]
        assert driver.write(lambda c: driver.ack_batch(c, AckBatch("q", every, "w1", T0 + 1))) == 2
        assert [get_job(driver, i) is None for i in every] == [True, True, False, False, False]

    @pytest.mark.parametrize("count", [3, 100, 300])
    def test_ack_batch_counts_each_row_once_however_many_ids_and_repeats(
        self, driver: SeamDriver, count: int
    ) -> None:
        held = enqueue(driver, *["1"] * count)
        assert len(claim(driver, limit=count, worker="w1")) == count
        ids = [*held, held[0], held[-1], *held[:2]]  # repeats, at both ends
        assert (
            driver.write(lambda c: driver.ack_batch(c, AckBatch("q", ids, "w1", T0 + 1))) == count
        )
        assert [get_job(driver, i) for i in (held[0], held[-1])] == [None, None]

    def test_ack_batch_skips_lapsed_claims(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver)
        claim(driver, worker="w1")
        now = T0 + VISIBILITY_S
        assert driver.write(lambda c: driver.ack_batch(c, AckBatch("q", [job_id], "w1", now))) == 0
        assert get_job(driver, job_id) is not None

    # -- cancel ------------------------------------------------------------------------------
    def test_cancel_deletes_pending_and_processing_rows(self, driver: SeamDriver) -> None:
        claimed = enqueue_one(driver)
        claim_one(driver)
        pending = enqueue_one(driver)
        cancelled = driver.write(
            lambda c: [driver.cancel(c, Cancel("q", i)) for i in (claimed, pending)]
        )
        assert cancelled == [True, True]
        assert [get_job(driver, i) for i in (claimed, pending)] == [None, None]

    def test_cancel_leaves_dead_rows(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver, expires_at=T0)
        driver.write(lambda c: driver.bury_expired(c, Sweep("q", T0)))
        assert not driver.write(lambda c: driver.cancel(c, Cancel("q", job_id)))
        dead = get_job(driver, job_id)
        assert dead is not None
        assert dead.state == JobState.DEAD

    def test_cancel_leaves_rows_of_other_queues(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver, queue="other")
        assert not driver.write(lambda c: driver.cancel(c, Cancel("q", job_id)))
        assert get_job(driver, job_id) is not None

    # -- get_job -----------------------------------------------------------------------------
    def test_get_job_finds_live_and_dead_rows(self, driver: SeamDriver) -> None:
        live = enqueue_one(driver)
        dead = enqueue_one(driver, expires_at=T0)
        driver.write(lambda c: driver.bury_expired(c, Sweep("q", T0)))
        found = [get_job(driver, job_id) for job_id in (live, dead)]
        assert [job.state if job else None for job in found] == [JobState.PENDING, JobState.DEAD]

    def test_get_job_of_another_queue_is_none(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver)
        assert get_job(driver, job_id, "other") is None
        assert get_job(driver, job_id, "q") is not None

    def test_get_job_of_an_unknown_id_is_none(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver)
        assert get_job(driver, job_id + 1000) is None

    # -- next_wake_at ------------------------------------------------------------------------
    def test_next_wake_at_is_the_earliest_future_run_at_or_deadline(
        self, driver: SeamDriver
    ) -> None:
        enqueue_one(driver)
        claim_one(driver, T0)  # deadline T0 + VISIBILITY_S
        enqueue_one(driver, run_at=T0 + VISIBILITY_S + 5)
        assert driver.read(lambda c: driver.next_wake_at(c, NextWake("q", T0))) == T0 + VISIBILITY_S
        enqueue_one(driver, run_at=T0 + 7)
        assert driver.read(lambda c: driver.next_wake_at(c, NextWake("q", T0))) == T0 + 7

    def test_next_wake_at_is_none_when_nothing_of_the_queue_becomes_due_later(
        self, driver: SeamDriver
    ) -> None:
        enqueue_one(driver, run_at=T0)
        enqueue_one(driver, queue="other", run_at=T0 + 5)
        assert driver.read(lambda c: driver.next_wake_at(c, NextWake("q", T0))) is None


HANDLE_OPS = ("ack", "heartbeat", "reschedule", "release_claim", "bury")


def _handle_op(driver: SeamDriver, op: str, job_id: int, attempt: int, now: int) -> bool:
    """Run one handle operation on the claim ``(job_id, attempt)`` at ``now``."""

    def run(c: object) -> bool:
        if op == "ack":
            return driver.ack(c, ClaimRef(job_id, attempt, now))
        if op == "heartbeat":
            return driver.heartbeat(c, Heartbeat(job_id, attempt, now, now + 1000))
        if op == "reschedule":
            return driver.reschedule(c, Reschedule(job_id, attempt, now, now + 1000, "retried"))
        if op == "release_claim":
            return driver.release_claim(c, ClaimRef(job_id, attempt, now))
        return driver.bury(c, Bury(job_id, attempt, now, "buried", "buried"))

    return driver.write(run)


class ValidClaimRule(SeamTests):
    """ack, heartbeat, reschedule, release_claim and bury act only on a valid claim: the row is
    processing, ``attempts = attempt`` and its deadline ``> now``."""

    @pytest.mark.parametrize("op", HANDLE_OPS)
    def test_a_handle_op_on_a_valid_claim_matches_its_row(
        self, driver: SeamDriver, op: str
    ) -> None:
        enqueue_one(driver)
        job = claim_one(driver)
        assert _handle_op(driver, op, job.id, job.attempts, T0 + VISIBILITY_S - 1) is True

    @pytest.mark.parametrize("op", HANDLE_OPS)
    def test_a_handle_op_of_an_earlier_claim_matches_nothing(
        self, driver: SeamDriver, op: str
    ) -> None:
        enqueue_one(driver)
        first = claim_one(driver, T0)
        second = claim_one(driver, T0 + VISIBILITY_S)
        assert _handle_op(driver, op, first.id, first.attempts, T0 + VISIBILITY_S) is False
        assert get_job(driver, second.id) == second

    @pytest.mark.parametrize("op", HANDLE_OPS)
    def test_a_handle_op_at_the_deadline_matches_nothing(self, driver: SeamDriver, op: str) -> None:
        enqueue_one(driver)
        job = claim_one(driver, T0)
        assert _handle_op(driver, op, job.id, job.attempts, T0 + VISIBILITY_S) is False
        assert get_job(driver, job.id) == job

    @pytest.mark.parametrize("op", HANDLE_OPS)
    def test_a_handle_op_on_a_row_no_longer_processing_matches_nothing(
        self, driver: SeamDriver, op: str
    ) -> None:
        enqueue_one(driver)
        job = claim_one(driver, T0)
        assert driver.write(
            lambda c: driver.reschedule(c, Reschedule(job.id, job.attempts, T0, T0 + 500, "e"))
        )
        before = get_job(driver, job.id)
        assert _handle_op(driver, op, job.id, job.attempts, T0 + 1) is False
        assert get_job(driver, job.id) == before
