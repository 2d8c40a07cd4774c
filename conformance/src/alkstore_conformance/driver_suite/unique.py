"""The unique profile's statement (``alkstore.driver.UniqueDriver``), one test per
docstring rule, and the ``unique_key`` every job row then keeps."""

from __future__ import annotations

from alkstore.driver import queue_topic
from alkstore.params import Bury, InsertUnique, Redrive
from alkstore.values import JobState

from .base import SeamTests
from .support import (
    DEFAULT_STAMPS,
    T0,
    SeamDriver,
    claim_one,
    enqueue_one,
    get_job,
    stamps,
    watching,
)


def _insert(
    driver: SeamDriver,
    *keys: str,
    now: int = T0,
    hold_until: int | None = None,
    hold_dead: bool = False,
) -> list[tuple[int, bool]]:
    params = InsertUnique(
        stamps(created_at=now, run_at=now),
        [f'"{key}"' for key in keys],
        list(keys),
        hold_until,
        hold_dead,
    )
    return driver.write(lambda c: driver.insert_unique_jobs(c, params))


def _fail(driver: SeamDriver, job_id: int, now: int = T0) -> None:
    job = claim_one(driver, now)
    assert job.id == job_id
    assert driver.write(
        lambda c: driver.bury(c, Bury(job.id, job.attempts, now, "broken", "broken"))
    )


class UniqueStatements(SeamTests):
    requires = frozenset({"unique"})

    def test_a_plain_row_has_no_unique_key(self, driver: SeamDriver) -> None:
        job = get_job(driver, enqueue_one(driver))
        assert job is not None
        assert job.unique_key is None

    def test_a_free_key_is_inserted_holding_it_and_a_held_one_gives_its_holder(
        self, driver: SeamDriver
    ) -> None:
        ((first, made),) = _insert(driver, "k")
        assert made is False
        held, other = _insert(driver, "k", "other")
        assert held == (first, True)
        assert (other[1], other[0] > first) == (False, True)
        job = get_job(driver, first)
        assert job is not None
        assert (job.state, job.unique_key, job.payload) == (JobState.PENDING, "k", "k")

    def test_insert_unique_jobs_announces_its_queue_when_it_inserted_a_row(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        sink.clear()
        ((_, duplicate),) = _insert(driver, "k")
        assert duplicate is False
        assert sink.wait_for(lambda s: s.woken_for(queue_topic(DEFAULT_STAMPS.queue)))

    def test_new_rows_ids_increase_in_payload_order(self, driver: SeamDriver) -> None:
        outcomes = _insert(driver, "a", "b", "c")
        assert [duplicate for _, duplicate in outcomes] == [False, False, False]
        made = [job_id for job_id, _ in outcomes]
        assert made == sorted(made)

    def test_new_rows_ids_increase_in_payload_order_when_an_earlier_key_had_a_passed_hold(
        self, driver: SeamDriver
    ) -> None:
        ((first, _),) = _insert(driver, "k", hold_until=T0 + 10)
        outcomes = _insert(driver, "k", "free", now=T0 + 10)
        assert [duplicate for _, duplicate in outcomes] == [False, False]
        made = [job_id for job_id, _ in outcomes]
        assert first < made[0] < made[1]

    def test_a_passed_hold_gives_the_key_up_and_the_old_row_keeps_its_key(
        self, driver: SeamDriver
    ) -> None:
        ((first, _),) = _insert(driver, "k", hold_until=T0 + 10)
        assert _insert(driver, "k", now=T0 + 9) == [(first, True)]
        ((second, duplicate),) = _insert(driver, "k", now=T0 + 10)
        assert (duplicate, second != first) == (False, True)
        old = get_job(driver, first)
        assert old is not None
        assert (old.state, old.unique_key) == (JobState.PENDING, "k")

    def test_a_move_to_dead_frees_the_key_unless_it_holds_it_while_dead(
        self, driver: SeamDriver
    ) -> None:
        ((freed, _),) = _insert(driver, "freed")
        _fail(driver, freed)
        assert _insert(driver, "freed")[0][1] is False
        ((kept, _),) = _insert(driver, "kept", hold_dead=True)
        claim_one(driver)  # the new "freed" row, first in claim order
        _fail(driver, kept)
        assert _insert(driver, "kept") == [(kept, True)]
        dead = get_job(driver, kept)
        assert dead is not None
        assert (dead.state, dead.unique_key) == (JobState.DEAD, "kept")

    def test_redrive_skips_a_dead_row_whose_key_another_job_holds(self, driver: SeamDriver) -> None:
        ((dead, _),) = _insert(driver, "k")
        _fail(driver, dead)
        ((holder, _),) = _insert(driver, "k")
        redrive = Redrive("q", [dead], 10, T0)
        assert driver.write(lambda c: driver.redrive(c, redrive)) == []
        still = get_job(driver, dead)
        assert still is not None
        assert still.state is JobState.DEAD
        assert _insert(driver, "k") == [(holder, True)]

    def test_redrive_of_a_row_keeping_its_key_hands_the_key_to_its_new_row(
        self, driver: SeamDriver
    ) -> None:
        ((dead, _),) = _insert(driver, "k", hold_dead=True)
        _fail(driver, dead)
        redrive = Redrive("q", [dead], 10, T0)
        (new,) = driver.write(lambda c: driver.redrive(c, redrive))
        assert get_job(driver, dead) is None
        assert _insert(driver, "k") == [(new, True)]
