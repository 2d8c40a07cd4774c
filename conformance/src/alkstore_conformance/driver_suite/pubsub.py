"""``PubSubDriver``: a message reaches every watching sink once, on commit only."""

from __future__ import annotations

import pytest

from alkstore.params import Publish

from .base import SeamTests
from .support import T0, SeamDriver, watching


class Boom(Exception):
    pass


def _publish(driver: SeamDriver, channel: str, payload: str) -> None:
    driver.write(lambda c: driver.publish(c, Publish(channel, payload, T0)))


class PubSubStatements(SeamTests):
    requires = frozenset({"pubsub"})

    def test_publish_delivers_the_message_to_a_watching_sink_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        _publish(driver, "c", '{"n": 1}')
        assert sink.wait_for(lambda s: len(s.messages) >= 1)
        assert sink.messages == [("c", '{"n": 1}')]

    def test_publish_delivers_in_commit_order_across_channels(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        sent = [("a", "1"), ("b", "2"), ("a", "3"), ("a", "3")]
        for channel, payload in sent:
            _publish(driver, channel, payload)
        assert sink.wait_for(lambda s: len(s.messages) >= len(sent))
        assert sink.messages == sent

    def test_publish_reaches_every_watching_driver(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sinks = [watching(driver), watching(other)]
        _publish(driver, "c", '"to all"')
        for sink in sinks:
            assert sink.wait_for(lambda s: len(s.messages) >= 1)
            assert sink.messages == [("c", '"to all"')]


class PubSubInTransactions(SeamTests):
    """Delivery happens at the commit of the transaction that published."""

    requires = frozenset({"pubsub", "transactions"})

    def test_publish_delivers_nothing_before_its_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        with driver.transaction() as c:
            driver.publish(c, Publish("c", '"held"', T0))
            seen_before_commit = list(sink.messages)
        assert seen_before_commit == []
        assert sink.wait_for(lambda s: len(s.messages) >= 1)

    def test_a_rolled_back_publish_delivers_nothing(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)

        def publish_then_fail() -> None:
            with driver.transaction() as c:
                driver.publish(c, Publish("c", '"rolled back"', T0))
                raise Boom

        with pytest.raises(Boom):
            publish_then_fail()
        _publish(driver, "c", '"committed"')
        # Messages arrive in commit order: had the rollback sent one, it came first.
        assert sink.wait_for(lambda s: len(s.messages) >= 1)
        assert sink.messages[0] == ("c", '"committed"')

    def test_equal_messages_of_one_transaction_each_arrive(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        with driver.transaction() as c:
            for _ in range(3):
                driver.publish(c, Publish("c", '"same"', T0))
        assert sink.wait_for(lambda s: len(s.messages) >= 3)
        assert sink.messages == [("c", '"same"')] * 3
