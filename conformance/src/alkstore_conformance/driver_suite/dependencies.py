"""The dependencies profile's statement (``alkstore.driver.DependenciesDriver``), one test
per docstring rule, and what the statements that finish a job then do with the rows
waiting for it."""

from __future__ import annotations

from alkstore.driver import ERROR_DEPENDENCY_CANCELLED, ERROR_DEPENDENCY_DEAD, queue_topic
from alkstore.params import (
    Bury,
    Cancel,
    ClaimRef,
    GetJob,
    InsertAfter,
    ListJobs,
    QueueStatsAt,
    Redrive,
    RedriveDependents,
)
from alkstore.values import JobState

from .base import SeamTests
from .support import T0, SeamDriver, claim_one, enqueue_one, get_job, stamps, watching


def _after(
    driver: SeamDriver, *after: int, queue: str = "q"
) -> tuple[list[int], dict[int, JobState | None]]:
    params = InsertAfter(stamps(queue=queue), ["1"], list(after))
    return driver.write(lambda c: driver.insert_after_jobs(c, params))


def _redrive_level(driver: SeamDriver, dead: int) -> tuple[int, list[int]]:
    """Redrive ``dead`` and run one level of ``redrive_dependents`` in the same write:
    the new id and the ids that level brought back."""

    def write(c: object) -> tuple[int, list[int]]:
        (new_id,) = driver.redrive(c, Redrive("q", [dead], 10, T0))
        return new_id, driver.redrive_dependents(c, RedriveDependents([new_id], T0))

    return driver.write(write)


def _next_level(driver: SeamDriver, ids: list[int]) -> list[int]:
    return driver.write(lambda c: driver.redrive_dependents(c, RedriveDependents(ids, T0)))


def _edges(driver: SeamDriver, job_id: int) -> tuple[list[int], list[int]]:
    return driver.read(lambda c: driver.job_edges(c, GetJob(job_id)))


def _job_redriven_from(driver: SeamDriver, job_id: int) -> int | None:
    job = get_job(driver, job_id)
    assert job is not None, f"job {job_id} is gone"
    return job.redriven_from


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

    def test_redrive_dependents_brings_back_a_row_buried_for_the_redriven_job(
        self, driver: SeamDriver
    ) -> None:
        root = enqueue_one(driver)
        (child,), _ = _after(driver, root)
        job = claim_one(driver)
        assert driver.write(lambda c: driver.bury(c, Bury(root, job.attempts, T0, "x", None)))
        new_root, (revived,) = _redrive_level(driver, root)
        back = get_job(driver, revived)
        assert back is not None
        assert (back.state, back.redriven_from) == (JobState.PENDING, child)
        assert get_job(driver, child) is None
        assert _next_level(driver, [revived]) == []
        assert _state(driver, revived) is JobState.WAITING
        assert _edges(driver, revived) == ([new_root], [])

    def test_redrive_dependents_leaves_a_row_that_keeps_an_edge_to_a_dead_job(
        self, driver: SeamDriver
    ) -> None:
        first, second = enqueue_one(driver), enqueue_one(driver)
        (both,), _ = _after(driver, first, second)
        one, two = claim_one(driver), claim_one(driver)
        assert driver.write(lambda c: driver.bury(c, Bury(one.id, one.attempts, T0, "x", None)))
        assert driver.write(lambda c: driver.bury(c, Bury(two.id, two.attempts, T0, "x", None)))
        _, revived = _redrive_level(driver, first)
        assert revived == []
        assert _state(driver, both) is JobState.DEAD

    def test_a_completion_removes_the_kept_edges_to_it(self, driver: SeamDriver) -> None:
        failed, acked = enqueue_one(driver), enqueue_one(driver)
        (both,), _ = _after(driver, failed, acked)
        one, two = claim_one(driver), claim_one(driver)
        assert driver.write(lambda c: driver.bury(c, Bury(one.id, one.attempts, T0, "x", None)))
        assert driver.write(lambda c: driver.ack(c, ClaimRef(two.id, two.attempts, T0)))
        new_failed, (revived,) = _redrive_level(driver, failed)
        assert _job_redriven_from(driver, revived) == both
        assert _next_level(driver, [revived]) == []
        assert _edges(driver, revived) == ([new_failed], [])

    def test_redrive_dependents_makes_a_redriven_row_wait_for_its_live_kept_edges(
        self, driver: SeamDriver
    ) -> None:
        failed, running = enqueue_one(driver), enqueue_one(driver)
        (both,), _ = _after(driver, failed, running)
        job = claim_one(driver)
        assert driver.write(lambda c: driver.bury(c, Bury(job.id, job.attempts, T0, "x", None)))
        new_both, revived = _redrive_level(driver, both)
        assert revived == []
        assert _state(driver, new_both) is JobState.WAITING
        assert _edges(driver, new_both) == ([running], [])
