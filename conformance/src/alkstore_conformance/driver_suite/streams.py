"""``StreamDriver``: offsets from 1 per stream, never reused; consumer offsets."""

from __future__ import annotations

from collections.abc import Sequence

from alkstore.driver import stream_topic
from alkstore.params import StreamAppend, StreamCommit, StreamOffset, StreamRead, StreamTrim

from .base import SeamTests
from .support import T0, SeamDriver, watching


def _append(driver: SeamDriver, stream: str, *payloads: str, now: int = T0) -> list[int]:
    return driver.write(lambda c: driver.stream_append(c, StreamAppend(stream, payloads, now)))


def _offsets(driver: SeamDriver, stream: str = "s", after: int = 0) -> list[int]:
    return [
        e.offset
        for e in driver.read(lambda c: driver.stream_read(c, StreamRead(stream, after, 1000)))
    ]


def _offset(driver: SeamDriver, stream: str, consumer: str) -> int:
    return driver.read(lambda c: driver.stream_offset(c, StreamOffset(stream, consumer)))


def _commit(driver: SeamDriver, stream: str, consumer: str, offset: int) -> None:
    driver.write(lambda c: driver.stream_commit(c, StreamCommit(stream, consumer, offset)))


def _numbered(count: int) -> Sequence[str]:
    return [str(n) for n in range(count)]


class StreamStatements(SeamTests):
    requires = frozenset({"streams"})

    def test_stream_append_takes_consecutive_offsets_from_one_in_order(
        self, driver: SeamDriver
    ) -> None:
        assert _append(driver, "s", '"a"', '"b"') == [1, 2]
        assert _append(driver, "s", '"c"', now=T0 + 7) == [3]
        events = driver.read(lambda c: driver.stream_read(c, StreamRead("s", 0, 10)))
        assert [(e.offset, e.payload, e.created_at) for e in events] == [
            (1, "a", T0),
            (2, "b", T0),
            (3, "c", T0 + 7),
        ]

    def test_stream_offsets_are_counted_per_stream(self, driver: SeamDriver) -> None:
        _append(driver, "a", "1", "2")
        assert _append(driver, "b", "1") == [1]

    def test_stream_offsets_are_never_reused_after_a_trim_of_every_event(
        self, driver: SeamDriver
    ) -> None:
        _append(driver, "s", *_numbered(3))
        assert driver.write(lambda c: driver.stream_trim(c, StreamTrim("s", 10))) == 3
        assert _append(driver, "s", '"next"') == [4]

    def test_stream_offsets_continue_on_another_driver_of_the_store(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        _append(driver, "s", "1")
        assert _append(other, "s", "2") == [2]

    def test_stream_read_returns_events_after_an_offset_up_to_a_limit(
        self, driver: SeamDriver
    ) -> None:
        _append(driver, "s", *_numbered(5))
        events = driver.read(lambda c: driver.stream_read(c, StreamRead("s", 1, 2)))
        assert [e.offset for e in events] == [2, 3]

    def test_stream_read_of_one_stream_leaves_out_the_others(self, driver: SeamDriver) -> None:
        _append(driver, "a", "1")
        _append(driver, "b", "1", "2")
        assert _offsets(driver, "a") == [1]

    def test_stream_trim_deletes_events_before_an_offset_and_counts_them(
        self, driver: SeamDriver
    ) -> None:
        _append(driver, "s", *_numbered(5))
        _append(driver, "other", "1")
        assert driver.write(lambda c: driver.stream_trim(c, StreamTrim("s", 3))) == 2
        assert _offsets(driver) == [3, 4, 5]
        assert _offsets(driver, "other") == [1]

    def test_stream_offset_of_a_consumer_that_never_committed_is_zero(
        self, driver: SeamDriver
    ) -> None:
        assert _offset(driver, "s", "c") == 0

    def test_stream_commit_sets_the_offset_of_one_consumer_of_one_stream(
        self, driver: SeamDriver
    ) -> None:
        _commit(driver, "a", "c1", 5)
        _commit(driver, "a", "c2", 7)
        _commit(driver, "b", "c1", 9)
        assert [_offset(driver, "a", "c1"), _offset(driver, "a", "c2")] == [5, 7]
        assert [_offset(driver, "b", "c1"), _offset(driver, "b", "c2")] == [9, 0]

    def test_stream_commit_may_move_an_offset_back(self, driver: SeamDriver) -> None:
        _commit(driver, "s", "c", 5)
        _commit(driver, "s", "c", 3)
        assert _offset(driver, "s", "c") == 3

    def test_stream_append_announces_its_stream_on_commit(
        self, driver: SeamDriver, other: SeamDriver
    ) -> None:
        sink = watching(other)
        _append(driver, "s", "1")
        assert sink.wait_for(lambda s: s.woken_for(stream_topic("s")))
