"""The snooze profile's statement (``alkstore.driver.SnoozeDriver``), one test per
docstring rule, and the ``snoozes`` column every job row then keeps."""

from __future__ import annotations

from alkstore.driver import queue_topic
from alkstore.params import Bury, Reschedule, Snooze
from alkstore.values import JobState

from .base import SeamTests
from .support import T0, VISIBILITY_S, SeamDriver, claim, claim_one, enqueue_one, get_job, watching


def _snooze(driver: SeamDriver, job_id: int, attempt: int, now: int, run_at: int) -> bool:
    return driver.write(lambda c: driver.snooze(c, Snooze(job_id, attempt, now, run_at)))


class SnoozeStatements(SeamTests):
    requires = frozenset({"snooze"})

    def test_a_new_row_has_no_snoozes(self, driver: SeamDriver) -> None:
        job = get_job(driver, enqueue_one(driver))
        assert job is not None
        assert job.snoozes == 0

    def test_snooze_returns_the_row_to_pending_at_run_at_counted_with_its_attempt_refunded(
        self, driver: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver)
        job = claim_one(driver)
        assert _snooze(driver, job.id, job.attempts, T0 + 1, T0 + 60)
        after = get_job(driver, job_id)
        assert after is not None
        assert (after.state, after.run_at, after.attempts) == (JobState.PENDING, T0 + 60, 1)
        assert (after.snoozes, after.max_attempts) == (1, job.max_attempts + 1)
        assert (after.worker_id, after.claimed_at, after.errors) == (None, None, ())
        assert claim(driver, T0 + 59) == []
        (again,) = claim(driver, T0 + 60)
        assert (again.id, again.attempts, again.snoozes) == (job_id, 2, 1)

    def test_snooze_leaves_the_error_history_as_it_was(self, driver: SeamDriver) -> None:
        enqueue_one(driver)
        job = claim_one(driver)
        entry = "boom"
        assert driver.write(
            lambda c: driver.reschedule(c, Reschedule(job.id, job.attempts, T0, T0, entry))
        )
        before = get_job(driver, job.id)
        again = claim_one(driver, T0)
        assert _snooze(driver, again.id, again.attempts, T0, T0 + 5)
        after = get_job(driver, job.id)
        assert before is not None
        assert after is not None
        assert after.errors == before.errors

    def test_a_row_moved_to_dead_keeps_its_snoozes(self, driver: SeamDriver) -> None:
        enqueue_one(driver)
        job = claim_one(driver)
        assert _snooze(driver, job.id, job.attempts, T0, T0)
        again = claim_one(driver, T0)
        assert driver.write(
            lambda c: driver.bury(c, Bury(again.id, again.attempts, T0, "broken", None))
        )
        dead = get_job(driver, job.id)
        assert dead is not None
        assert (dead.state, dead.snoozes) == (JobState.DEAD, 1)

    def test_snooze_of_an_earlier_claim_matches_nothing(self, driver: SeamDriver) -> None:
        enqueue_one(driver)
        first = claim_one(driver, T0)
        second = claim_one(driver, T0 + VISIBILITY_S)
        assert not _snooze(driver, first.id, first.attempts, T0 + VISIBILITY_S, T0 + 999)
        assert get_job(driver, second.id) == second

    def test_snooze_at_the_deadline_matches_nothing(self, driver: SeamDriver) -> None:
        enqueue_one(driver)
        job = claim_one(driver, T0)
        assert not _snooze(driver, job.id, job.attempts, T0 + VISIBILITY_S, T0 + 999)
        assert get_job(driver, job.id) == job

    def test_snooze_of_a_row_no_longer_processing_matches_nothing(self, driver: SeamDriver) -> None:
        enqueue_one(driver)
        job = claim_one(driver, T0)
        assert _snooze(driver, job.id, job.attempts, T0, T0 + 500)
        before = get_job(driver, job.id)
        assert not _snooze(driver, job.id, job.attempts, T0 + 1, T0 + 999)
        assert get_job(driver, job.id) == before

    def test_snooze_announces_its_queue_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        enqueue_one(driver, queue="mail")
        job = claim_one(driver, queue="mail")
        sink = watching(other)
        sink.clear()
        assert _snooze(driver, job.id, job.attempts, T0, T0 + 5)
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("mail")))
