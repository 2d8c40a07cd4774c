"""The dependencies profile's statement (``alkstore.driver.DependenciesDriver``), one test
per docstring rule, and what the statements that finish a job then do with the rows
waiting for it."""

from __future__ import annotations

from alkstore.driver import ERROR_DEPENDENCY_CANCELLED, ERROR_DEPENDENCY_DEAD, queue_topic
from alkstore.params import Bury, Cancel, ClaimRef, InsertAfter, ListJobs, QueueStatsAt
from alkstore.values import JobState

from .base import SeamTests
from .support import T0, SeamDriver, claim_one, enqueue_one, get_job, stamps, watching


def _after(
    driver: SeamDriver, *after: int, queue: str = "q"
) -> tuple[list[int], dict[int, JobState | None]]:
    params = InsertAfter(stamps(queue=queue), ["1"], list(after))
    return driver.write(lambda c: driver.insert_after_jobs(c, params))


def _state(driver: SeamDriver, job_id: int) -> JobState | None:
    job = get_job(driver, job_id)
    return None if job is None else job.state


class DependencyStatements(SeamTests):
    requires = frozenset({"dependencies", "ops"})

    def test_insert_after_jobs_makes_a_row_waiting_for_the_live_jobs(
        self, driver: SeamDriver
    ) -> None:
        dependency = enqueue_one(driver)
        (waiting,), blocked = _after(driver, dependency)
        assert blocked == {}
        assert _state(driver, waiting) is JobState.WAITING
        assert claim_one(driver).id == dependency  # the waiting row is never claimed
        (stats,) = driver.read(lambda c: driver.queue_stats(c, QueueStatsAt(["q"], T0)))
        assert (stats.waiting, stats.processing) == (1, 1)
        page = ListJobs("q", JobState.WAITING, 0, 10)
        assert [j.id for j in driver.read(lambda c: driver.list_jobs(c, page))] == [waiting]

    def test_insert_after_jobs_writes_nothing_for_a_dead_or_absent_job(
        self, driver: SeamDriver
    ) -> None:
        live = enqueue_one(driver)
        dead = enqueue_one(driver)
        claim_one(driver)
        job = claim_one(driver)
        assert job.id == dead
        assert driver.write(lambda c: driver.bury(c, Bury(dead, 1, T0, "x", None)))
        ids, blocked = _after(driver, live, dead, dead + 100)
        assert (ids, blocked) == ([], {dead: JobState.DEAD, dead + 100: None})
        page = ListJobs("q", None, 0, 10)
        assert [j.id for j in driver.read(lambda c: driver.list_jobs(c, page))] == [live, dead]

    def test_insert_after_jobs_announces_its_queue_when_it_inserted_a_pending_row(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        (job_id,), _ = _after(driver, queue="mail")  # no live dependency: pending
        assert _state(driver, job_id) is JobState.PENDING
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("mail")))

    def test_the_last_ack_makes_the_waiting_row_pending(self, driver: SeamDriver) -> None:
        first, second = enqueue_one(driver), enqueue_one(driver)
        (waiting,), _ = _after(driver, first, second)
        one, two = claim_one(driver), claim_one(driver)
        assert driver.write(lambda c: driver.ack(c, ClaimRef(one.id, one.attempts, T0)))
        assert _state(driver, waiting) is JobState.WAITING
        assert driver.write(lambda c: driver.ack(c, ClaimRef(two.id, two.attempts, T0)))
        assert _state(driver, waiting) is JobState.PENDING
        assert claim_one(driver).id == waiting

    def test_a_move_to_dead_buries_the_waiting_rows_transitively(self, driver: SeamDriver) -> None:
        root = enqueue_one(driver)
        (child,), _ = _after(driver, root)
        (grandchild,), _ = _after(driver, child)
        job = claim_one(driver)
        assert driver.write(lambda c: driver.bury(c, Bury(root, job.attempts, T0, "x", None)))
        for job_id, dependency in ((child, root), (grandchild, child)):
            dead = get_job(driver, job_id)
            assert dead is not None
            assert (dead.state, dead.last_error) == (
                JobState.DEAD,
                ERROR_DEPENDENCY_DEAD.format(id=dependency),
            )

    def test_a_cancel_buries_the_waiting_rows(self, driver: SeamDriver) -> None:
        root = enqueue_one(driver)
        (child,), _ = _after(driver, root)
        assert driver.write(lambda c: driver.cancel(c, Cancel("q", root, T0)))
        dead = get_job(driver, child)
        assert dead is not None
        assert dead.last_error == ERROR_DEPENDENCY_CANCELLED.format(id=root)

    def test_cancel_deletes_a_waiting_row(self, driver: SeamDriver) -> None:
        root = enqueue_one(driver)
        (child,), _ = _after(driver, root)
        assert driver.write(lambda c: driver.cancel(c, Cancel("q", child, T0)))
        assert get_job(driver, child) is None
        job = claim_one(driver)
        assert driver.write(lambda c: driver.ack(c, ClaimRef(job.id, job.attempts, T0)))
