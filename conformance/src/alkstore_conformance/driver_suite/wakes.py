"""Cross-process wakes: ``announce``, and the statements that announce their own topic.

A sink may be told of a topic by name or by a wake-everyone (an engine that cannot
tell topics apart wakes everyone); either counts as woken. Another driver on the
same store plays the other process.
"""

from __future__ import annotations

from alkstore.driver import queue_topic
from alkstore.params import ClaimRef, Reschedule

from .base import SeamTests
from .support import T0, SeamDriver, claim_one, enqueue_one, watching


class QueueWakes(SeamTests):
    def test_announce_wakes_other_drivers_for_its_topics_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        driver.write(lambda c: driver.announce(c, ["custom:topic"]))
        assert sink.wait_for(lambda s: s.woken_for("custom:topic"))

    def test_insert_jobs_announces_its_queue_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        enqueue_one(driver, queue="mail")
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("mail")))

    def test_reschedule_announces_its_queue_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        enqueue_one(driver, queue="mail")
        job = claim_one(driver, queue="mail")
        sink = watching(other)
        sink.clear()
        assert driver.write(
            lambda c: driver.reschedule(c, Reschedule(job.id, job.attempts, T0, T0 + 5, "e"))
        )
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("mail")))

    def test_release_claim_announces_its_queue_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        enqueue_one(driver, queue="mail")
        job = claim_one(driver, queue="mail")
        sink = watching(other)
        sink.clear()
        assert driver.write(lambda c: driver.release_claim(c, ClaimRef(job.id, job.attempts, T0)))
        assert sink.wait_for(lambda s: s.woken_for(queue_topic("mail")))
