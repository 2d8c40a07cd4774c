"""``write``, ``read`` and ``transaction()``: commit on success, nothing on failure."""

from __future__ import annotations

import pytest

from alkstore.driver import one_commit_hint, queue_topic
from alkstore.params import Claim, GetJob

from .base import SeamTests
from .support import T0, SeamDriver, claim, enqueue_one, get_job, insert, stamps, watching


class Boom(Exception):
    """The failure a test raises inside a unit of work."""


class WriteRules(SeamTests):
    """``write`` commits; it need not roll back (an engine may run a queue unit
    statement by statement in autocommit), so rollbacks are ``TransactionRules``'."""

    def test_write_commits_its_work(self, driver: SeamDriver, other: SeamDriver) -> None:
        job_id = enqueue_one(driver)
        assert get_job(other, job_id) is not None

    def test_write_returns_what_its_work_returns(self, driver: SeamDriver) -> None:
        assert driver.write(lambda c: "result") == "result"

    def test_a_write_that_prefers_one_commit_commits_every_statement(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        def work(c: object) -> list[int]:
            one_commit_hint(driver)(c)
            first = insert(driver, c, stamps(), ["1"])
            return first + insert(driver, c, stamps(), ["2"])

        job_ids = driver.write(work)
        assert [get_job(other, job_id) is not None for job_id in job_ids] == [True, True]

    def test_read_sees_what_was_committed(self, driver: SeamDriver, other: SeamDriver) -> None:
        job_id = enqueue_one(other)
        job = driver.read(lambda c: driver.get_job(c, GetJob(job_id, None)))
        assert job is not None
        assert job.id == job_id


class TransactionRules(SeamTests):
    requires = frozenset({"transactions"})

    def test_transaction_commits_on_normal_exit(self, driver: SeamDriver) -> None:
        with driver.transaction() as c:
            (job_id,) = insert(driver, c, stamps(), ["1"])
        assert get_job(driver, job_id) is not None

    def test_transaction_rolls_back_on_an_exception_leaving_nothing(
        self, driver: SeamDriver
    ) -> None:
        inserted: list[int] = []

        def insert_then_fail() -> None:
            with driver.transaction() as c:
                inserted.extend(insert(driver, c, stamps(), ["1", "2"]))
                raise Boom

        with pytest.raises(Boom):
            insert_then_fail()
        assert [get_job(driver, job_id) for job_id in inserted] == [None, None]
        assert claim(driver) == []

    def test_prefer_one_commit_inside_a_transaction_changes_nothing_of_it(
        self, driver: SeamDriver
    ) -> None:
        inserted: list[int] = []

        def insert_then_fail() -> None:
            with driver.transaction() as c:
                inserted.extend(insert(driver, c, stamps(), ["1"]))
                one_commit_hint(driver)(c)
                inserted.extend(insert(driver, c, stamps(), ["2"]))
                raise Boom

        with pytest.raises(Boom):
            insert_then_fail()
        assert len(inserted) == 2
        assert [get_job(driver, job_id) for job_id in inserted] == [None, None]

    def test_a_transaction_sees_its_own_uncommitted_rows(self, driver: SeamDriver) -> None:
        with driver.transaction() as c:
            (job_id,) = insert(driver, c, stamps(), ["1"])
            assert [job.id for job in driver.claim(c, Claim("q", "w", T0, 10))] == [job_id]

    def test_a_rolled_back_transaction_announces_nothing(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)

        def insert_then_fail() -> None:
            with driver.transaction() as c:
                insert(driver, c, stamps(queue="mail"), ["1"])
                raise Boom

        with pytest.raises(Boom):
            insert_then_fail()
        # Wakes arrive in commit order: once a later commit's wake is here, a wake of
        # the rolled-back insert would have been too.
        driver.write(lambda c: driver.announce(c, ["marker"]))
        assert sink.wait_for(lambda s: s.woken_for("marker"))
        assert queue_topic("mail") not in sink.topics
