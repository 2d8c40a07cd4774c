"""The results profile's statements (``alkstore.driver.ResultsDriver``), one test per
docstring rule, and what the other statements then do with completed rows."""

from __future__ import annotations

from alkstore.params import AckBatch, Cancel, ClaimRef, Complete, ListJobs, QueueStatsAt, Sweep
from alkstore.values import JobState

from .base import SeamTests
from .support import T0, SeamDriver, claim_one, enqueue_one, get_job

KEEP_S = 60


def _completed(driver: SeamDriver, result: str | None = '{"r":1}', now: int = T0) -> int:
    job_id = enqueue_one(driver, completed_retention_s=KEEP_S)
    job = claim_one(driver, now)
    assert job.id == job_id
    done = Complete(job.id, job.attempts, now, result)
    assert driver.write(lambda c: driver.complete(c, done))
    return job_id


class ResultsStatements(SeamTests):
    requires = frozenset({"results", "ops"})

    def test_a_row_keeps_its_completed_retention_stamp(self, driver: SeamDriver) -> None:
        job = get_job(driver, enqueue_one(driver, completed_retention_s=KEEP_S))
        assert job is not None
        assert (job.completed_retention_s, job.completed_at, job.result) == (KEEP_S, None, None)

    def test_complete_moves_a_valid_claim_to_the_completed_rows_with_its_result(
        self, driver: SeamDriver
    ) -> None:
        job_id = _completed(driver, '{"r":1}', now=T0 + 5)
        job = get_job(driver, job_id)
        assert job is not None
        assert (job.state, job.completed_at, job.result) == (JobState.COMPLETED, T0 + 5, {"r": 1})
        assert (job.attempts, job.worker_id, job.last_error) == (1, "w", None)

    def test_complete_of_a_lapsed_claim_changes_nothing(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver, completed_retention_s=KEEP_S, visibility_timeout_s=10)
        job = claim_one(driver)
        late = Complete(job.id, job.attempts, T0 + 10, None)
        assert not driver.write(lambda c: driver.complete(c, late))
        kept = get_job(driver, job_id)
        assert kept is not None
        assert kept.state is JobState.PROCESSING

    def test_a_completed_row_is_never_claimed_nor_cancelled(self, driver: SeamDriver) -> None:
        job_id = _completed(driver)
        assert driver.write(lambda c: driver.cancel(c, Cancel("q", job_id))) is False
        assert driver.write(lambda c: driver.ack(c, ClaimRef(job_id, 1, T0))) is False
        again = get_job(driver, job_id)
        assert again is not None
        assert again.state is JobState.COMPLETED

    def test_purge_completed_deletes_rows_past_their_retention_only(
        self, driver: SeamDriver
    ) -> None:
        job_id = _completed(driver)
        at_end = Sweep("q", T0 + KEEP_S)
        assert driver.write(lambda c: driver.purge_completed(c, at_end)) == 0
        past = Sweep("q", T0 + KEEP_S + 1)
        assert driver.write(lambda c: driver.purge_completed(c, past)) == 1
        assert get_job(driver, job_id) is None

    def test_ack_batch_moves_the_rows_stamped_with_a_retention(self, driver: SeamDriver) -> None:
        kept = enqueue_one(driver, completed_retention_s=KEEP_S)
        gone = enqueue_one(driver)
        claim_one(driver)
        claim_one(driver)
        batch = AckBatch("q", [kept, gone], "w", T0)
        assert driver.write(lambda c: driver.ack_batch(c, batch)) == 2
        job = get_job(driver, kept)
        assert job is not None
        assert (job.state, job.result) == (JobState.COMPLETED, None)
        assert get_job(driver, gone) is None

    def test_stats_count_and_pages_list_completed_rows(self, driver: SeamDriver) -> None:
        job_id = _completed(driver)
        (stats,) = driver.read(lambda c: driver.queue_stats(c, QueueStatsAt(None, T0)))
        assert (stats.queue, stats.completed) == ("q", 1)
        page = ListJobs("q", JobState.COMPLETED, 0, 10)
        assert [j.id for j in driver.read(lambda c: driver.list_jobs(c, page))] == [job_id]
        every = ListJobs("q", None, 0, 10, before_id=job_id + 1)
        assert [j.id for j in driver.read(lambda c: driver.list_jobs(c, every))] == [job_id]
