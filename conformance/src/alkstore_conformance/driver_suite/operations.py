"""The ops profile's statements (``alkstore.driver.OpsDriver``), one test per
docstring rule, and the error history ``reschedule`` and ``bury`` keep with it."""

from __future__ import annotations

from typing import Any

from alkstore.constants import MAX_ERROR_HISTORY
from alkstore.driver import queue_topic
from alkstore.params import (
    Bury,
    ListJobs,
    PurgeDeadJobs,
    QueueStatsAt,
    Redrive,
    Reschedule,
    SetPaused,
)
from alkstore.values import Job, JobError, JobState, QueueStats

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
    watching,
)


def bury_one(driver: SeamDriver, now: int = T0, queue: str = "q", **fields: Any) -> int:
    """A new row of ``queue``, claimed and buried at ``now``: its id."""
    job_id = enqueue_one(driver, queue=queue, run_at=min(now, T0), **fields)
    job = claim_one(driver, now, queue=queue)
    assert job.id == job_id
    assert driver.write(lambda c: driver.bury(c, Bury(job.id, job.attempts, now, "dead", "dead")))
    return job_id


def _retry(driver: SeamDriver, job_id: int, attempt: int, now: int, error: str) -> bool:
    """Reschedule the claim ``(job_id, attempt)`` to be due at ``T0`` again."""
    return driver.write(lambda c: driver.reschedule(c, Reschedule(job_id, attempt, now, T0, error)))


def origins(driver: SeamDriver, new_ids: list[int]) -> list[int | None]:
    """The ``redriven_from`` of each new row (``None`` for a row not found)."""
    jobs = [get_job(driver, job_id) for job_id in new_ids]
    return [None if job is None else job.redriven_from for job in jobs]


def stats(driver: SeamDriver, queues: list[str] | None, now: int = T0) -> list[QueueStats]:
    return driver.read(lambda c: driver.queue_stats(c, QueueStatsAt(queues, now)))


def page(
    driver: SeamDriver, state: JobState | None = None, after: int = 0, limit: int = 100
) -> list[Job]:
    return driver.read(lambda c: driver.list_jobs(c, ListJobs("q", state, after, limit)))


def redrive(
    driver: SeamDriver, ids_: list[int] | None, limit: int = 100, now: int = T0 + 100
) -> list[int]:
    return driver.write(lambda c: driver.redrive(c, Redrive("q", ids_, limit, now)))


def purge(driver: SeamDriver, ids_: list[int] | None, died_before: int | None) -> int:
    return driver.write(
        lambda c: driver.purge_dead_jobs(c, PurgeDeadJobs("q", ids_, died_before, T0 + 100))
    )


class OperationStatements(SeamTests):
    requires = frozenset({"ops"})

    # -- queue_stats ---------------------------------------------------------------------------
    def test_queue_stats_counts_each_kind_of_row_by_now(self, driver: SeamDriver) -> None:
        bury_one(driver)
        enqueue_one(driver, run_at=T0 - VISIBILITY_S)
        claim_one(driver, T0 - VISIBILITY_S)  # its deadline is T0: lapsed at T0
        enqueue_one(driver, run_at=T0 - VISIBILITY_S + 1)
        claim_one(driver, T0 - VISIBILITY_S + 1)  # processing until T0 + 1
        enqueue(driver, "1", "2", run_at=T0 - 7)
        enqueue_one(driver, run_at=T0)
        enqueue_one(driver, run_at=T0 + 1)
        assert stats(driver, ["q"]) == [QueueStats("q", 3, 1, 1, 1, 1, 7, False)]

    def test_queue_stats_of_a_named_queue_with_nothing_is_all_zeros(
        self, driver: SeamDriver
    ) -> None:
        assert stats(driver, ["empty", "none"]) == [
            QueueStats("empty", 0, 0, 0, 0, 0, None, False),
            QueueStats("none", 0, 0, 0, 0, 0, None, False),
        ]

    def test_queue_stats_of_every_queue_lists_those_with_a_row_or_a_pause_by_name(
        self, driver: SeamDriver
    ) -> None:
        enqueue_one(driver, queue="c-live")
        bury_one(driver, queue="b-dead")
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("a-paused", True)))
        listed = stats(driver, None)
        assert [s.queue for s in listed] == ["a-paused", "b-dead", "c-live"]
        assert [(s.ready, s.dead, s.paused) for s in listed] == [
            (0, 0, True),
            (0, 1, False),
            (1, 0, False),
        ]

    # -- list_jobs -----------------------------------------------------------------------------
    def test_list_jobs_gives_a_keyset_page_of_live_and_dead_rows_in_id_order(
        self, driver: SeamDriver
    ) -> None:
        dead = bury_one(driver)
        live = enqueue(driver, "1", "2", "3")
        enqueue_one(driver, queue="other")
        assert ids(page(driver)) == [dead, *live]
        assert ids(page(driver, after=dead, limit=2)) == live[:2]
        assert ids(page(driver, after=live[-1])) == []
        assert page(driver)[0] == get_job(driver, dead)

    def test_list_jobs_with_a_state_lists_only_that_state(self, driver: SeamDriver) -> None:
        dead = bury_one(driver)
        processing = enqueue_one(driver, priority=9)
        claim_one(driver)
        pending = enqueue_one(driver)
        assert ids(page(driver, JobState.DEAD)) == [dead]
        assert ids(page(driver, JobState.PROCESSING)) == [processing]
        assert ids(page(driver, JobState.PENDING)) == [pending]

    # -- redrive ---------------------------------------------------------------------------------
    def test_redrive_makes_a_new_pending_row_and_deletes_the_dead_one(
        self, driver: SeamDriver
    ) -> None:
        old_id = bury_one(
            driver, priority=3, max_attempts=2, expires_at=T0 + 50, created_at=T0 - 10
        )
        old = get_job(driver, old_id)
        assert old is not None
        (new_id,) = redrive(driver, [old_id], now=T0 + 100)
        assert new_id > old_id
        assert get_job(driver, old_id) is None
        new = get_job(driver, new_id)
        assert new is not None
        assert (new.state, new.payload, new.priority, new.attempts) == (
            JobState.PENDING,
            old.payload,
            3,
            0,
        )
        assert (new.created_at, new.run_at, new.expires_at) == (T0 + 100, T0 + 100, T0 + 160)
        assert (new.max_attempts, new.visibility_timeout_s, new.backoff_base_s) == (
            old.max_attempts,
            old.visibility_timeout_s,
            old.backoff_base_s,
        )
        assert (new.last_error, new.died_at, new.worker_id, new.claimed_at) == (None,) * 4
        assert (new.errors, new.redriven_from) == ((), old_id)

    def test_redrive_of_named_ids_follows_their_order_and_skips_the_rest(
        self, driver: SeamDriver
    ) -> None:
        first, second = bury_one(driver), bury_one(driver)
        elsewhere = bury_one(driver, queue="other")
        live = enqueue_one(driver)
        new_ids = redrive(driver, [second, live, elsewhere, first, 2**62])
        assert origins(driver, new_ids) == [second, first]
        assert get_job(driver, elsewhere) is not None
        assert get_job(driver, live) is not None

    def test_redrive_of_none_takes_the_oldest_died_at_first_up_to_limit(
        self, driver: SeamDriver
    ) -> None:
        newest_death = bury_one(driver, now=T0 + 2)
        oldest_death = bury_one(driver, now=T0)
        middle = bury_one(driver, now=T0 + 1)
        new_ids = redrive(driver, None, limit=2)
        assert origins(driver, new_ids) == [oldest_death, middle]
        assert ids(page(driver, JobState.DEAD)) == [newest_death]

    def test_redrive_announces_its_queue_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        dead = bury_one(driver)
        sink = watching(other)
        sink.clear()
        assert len(redrive(driver, [dead])) == 1
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("q")))

    # -- purge_dead_jobs -------------------------------------------------------------------------
    def test_purge_dead_jobs_without_ids_or_age_deletes_every_dead_row_of_the_queue(
        self, driver: SeamDriver
    ) -> None:
        bury_one(driver)
        bury_one(driver)
        elsewhere = bury_one(driver, queue="other")
        live = enqueue_one(driver)
        assert purge(driver, None, None) == 2
        assert ids(page(driver)) == [live]
        assert get_job(driver, elsewhere) is not None

    def test_purge_dead_jobs_deletes_named_dead_rows_of_the_queue_only(
        self, driver: SeamDriver
    ) -> None:
        first, second = bury_one(driver), bury_one(driver)
        elsewhere = bury_one(driver, queue="other")
        live = enqueue_one(driver)
        assert purge(driver, [first, live, elsewhere], None) == 1
        assert ids(page(driver)) == [second, live]

    def test_purge_dead_jobs_with_died_before_keeps_the_later_dead(
        self, driver: SeamDriver
    ) -> None:
        early = bury_one(driver, now=T0)
        late = bury_one(driver, now=T0 + 10)
        assert purge(driver, [late], T0 + 10) == 0
        assert purge(driver, None, T0 + 10) == 1
        assert ids(page(driver, JobState.DEAD)) == [late]
        assert get_job(driver, early) is None

    # -- set_paused, is_paused -------------------------------------------------------------
    def test_set_paused_says_whether_it_changed_anything(self, driver: SeamDriver) -> None:
        def set_paused(paused: bool) -> bool:
            return driver.write(lambda c: driver.set_paused(c, SetPaused("q", paused)))

        assert [set_paused(p) for p in (False, True, True, False, False)] == [
            False,
            True,
            False,
            True,
            False,
        ]

    def test_set_paused_announces_its_queue_on_a_resume(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("q", True)))
        sink = watching(other)
        sink.clear()
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("q", False)))
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("q")))

    def test_a_paused_queue_claims_nothing_and_others_see_the_pause(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver)
        enqueue_one(driver, queue="running")
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("q", True)))
        assert other.read(lambda c: other.is_paused(c, "q")) is True
        assert other.read(lambda c: other.is_paused(c, "running")) is False
        assert claim(other) == []
        assert len(claim(other, queue="running")) == 1
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("q", False)))
        assert ids(claim(other)) == [job_id]

    def test_a_claim_of_a_paused_queue_still_moves_its_lapsed_exhausted_rows_to_dead(
        self, driver: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver, max_attempts=1)
        claim_one(driver, T0)
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("q", True)))
        now = T0 + VISIBILITY_S
        assert claim(driver, now) == []
        job = get_job(driver, job_id)
        assert job is not None
        assert (job.state, job.died_at) == (JobState.DEAD, now)

    def test_a_resume_announces_the_queue_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("q", True)))
        sink = watching(other)
        sink.clear()
        assert driver.write(lambda c: driver.set_paused(c, SetPaused("q", False)))
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("q")))

    # -- the error history of reschedule and bury ------------------------------------------
    def test_reschedule_and_bury_append_attempt_now_and_error_newest_last(
        self, driver: SeamDriver
    ) -> None:
        job_id = enqueue_one(driver)
        first = claim_one(driver, T0)
        assert driver.write(
            lambda c: driver.reschedule(c, Reschedule(job_id, first.attempts, T0, T0, "e1"))
        )
        second = claim_one(driver, T0 + 1)
        assert driver.write(
            lambda c: driver.bury(c, Bury(job_id, second.attempts, T0 + 1, "last", "e2"))
        )
        dead = get_job(driver, job_id)
        assert dead is not None
        assert dead.errors == (JobError(1, T0, "e1"), JobError(2, T0 + 1, "e2"))
        assert dead.last_error == "last"

    def test_bury_without_an_error_appends_nothing(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver)
        job = claim_one(driver, T0)
        assert driver.write(
            lambda c: driver.bury(c, Bury(job_id, job.attempts, T0, "expired", None))
        )
        dead = get_job(driver, job_id)
        assert dead is not None
        assert dead.errors == ()

    def test_the_history_keeps_the_latest_entries_only(self, driver: SeamDriver) -> None:
        job_id = enqueue_one(driver, max_attempts=MAX_ERROR_HISTORY + 10)
        retries = MAX_ERROR_HISTORY + 3
        for n in range(1, retries + 1):
            attempt = claim_one(driver, T0 + n).attempts
            assert _retry(driver, job_id, attempt, T0 + n, f"e{n}")
        kept = get_job(driver, job_id)
        assert kept is not None
        assert [e.error for e in kept.errors] == [f"e{n}" for n in range(4, retries + 1)]
