"""Durable append-only streams with consumer offsets (contract §7, ADR-015 §5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..constants import MAX_BATCH
from ..driver import stream_topic
from ..errors import EngineUnavailable, InvalidOptions
from ..names import validate_identifier
from ..options import check_type
from ..payload import encode_payload
from ..stop import StopToken
from ..timeconv import Duration
from ..values import StreamEvent
from .waiting import Deadline, wait_budget

if TYPE_CHECKING:
    from .store import CoreStore


MAX_OFFSET = 2**63 - 1
"""Offsets are int64 on every engine: a larger one names no event and cannot be stored."""


def check_offset(value: object, field: str) -> int:
    """Refuse a ``field`` that is not an int within ``0..MAX_OFFSET`` (``InvalidOptions``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
        raise InvalidOptions(f"{field} must be an int within 0..{MAX_OFFSET}, got {value!r}")
    return value


class CoreStream:
    """An append-only log with durable consumer offsets; from ``store.stream(name)``.

    Full contract: ``alkstore.api.Stream`` (contract §7).
    """

    def __init__(self, store: CoreStore, name: str) -> None:
        self._store = store
        self._name = name
        self._topic = stream_topic(name)

    @property
    def name(self) -> str:
        """The stream's name."""
        return self._name

    def append(self, payload: Any) -> int:
        """Append one event; return its offset (strictly increasing, from 1).

        Raises:
            PayloadError: ``payload`` is not JSON-serializable (nothing written).
            StoreClosed: the store was closed.
        """
        text = encode_payload(payload)
        store = self._store
        now = store._now()
        driver = store._streams()
        topics = [self._topic]

        def work(c: Any) -> int:
            (offset,) = driver.stream_append(c, self._name, [text], now)
            store._driver.announce(c, topics)
            return offset

        offset = store._write(work)
        store._hub.notify(self._topic)
        return offset

    def read(self, after: int = 0, limit: int = 100) -> list[StreamEvent]:
        """Up to ``limit`` (1..10,000) events with offsets greater than ``after``, in order.

        Raises:
            InvalidOptions: ``after`` or ``limit`` is out of range.
            StoreClosed: the store was closed.
        """
        check_offset(after, "after")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:
            raise InvalidOptions(f"limit must be an int within 1..{MAX_BATCH}, got {limit!r}")
        store = self._store
        driver = store._streams()
        return store._read(lambda c: driver.stream_read(c, self._name, after, limit))

    def commit(self, consumer: str, offset: int) -> None:
        """Record durably that ``consumer`` has processed events up to ``offset``.

        Raises:
            InvalidName: ``consumer`` is malformed.
            InvalidOptions: ``offset`` is not a non-negative int.
            StoreClosed: the store was closed.
        """
        validate_identifier(consumer, "consumer")
        check_offset(offset, "offset")
        store = self._store
        driver = store._streams()
        store._write(lambda c: driver.stream_commit(c, self._name, consumer, offset))

    def offset(self, consumer: str) -> int:
        """The offset ``consumer`` last committed, 0 when none.

        Raises:
            InvalidName: ``consumer`` is malformed.
            StoreClosed: the store was closed.
        """
        validate_identifier(consumer, "consumer")
        store = self._store
        driver = store._streams()
        return store._read(lambda c: driver.stream_offset(c, self._name, consumer))

    def trim_to(self, offset: int) -> int:
        """Delete the events with offsets smaller than ``offset``; return how many.

        Raises:
            InvalidOptions: ``offset`` is not a non-negative int.
            StoreClosed: the store was closed.
        """
        check_offset(offset, "offset")
        store = self._store
        driver = store._streams()
        return store._write(lambda c: driver.stream_trim(c, self._name, offset))

    def wait(
        self, after: int, timeout: Duration | None = None, stop: StopToken | None = None
    ) -> bool:
        """``True`` as soon as an event with an offset greater than ``after`` exists.

        ``False`` on ``timeout`` or ``stop``; wake-driven like ``claim_wait``.

        Raises:
            InvalidOptions: ``after``, ``timeout`` or ``stop`` is malformed.
            StoreClosed: the store was (or gets) closed.
        """
        check_offset(after, "after")
        if stop is not None:
            check_type(stop, StopToken, "stop")
        store = self._store
        deadline = Deadline(timeout)
        with store._hub.waiter(self._topic) as waiter:
            store._driver.start_watching(store._hub)
            if stop is not None:
                stop.add_callback(waiter.wake)
            try:
                while True:
                    waiter.clear()
                    try:
                        if self._has_event_after(after, deadline.wait_s()):
                            return True
                    except EngineUnavailable:
                        # Like claim_wait: an outage is waited out until the deadline.
                        if deadline.expired():
                            return False
                    if (stop is not None and stop.is_set()) or deadline.expired():
                        return False
                    waiter.wait(wait_budget(store.clock, deadline, None, store._repoll_s))
                    store._check_open()
            finally:
                if stop is not None:
                    stop.remove_callback(waiter.wake)

    def _has_event_after(self, after: int, wait_s: float | None) -> bool:
        store = self._store
        driver = store._streams()
        return bool(store._read(lambda c: driver.stream_read(c, self._name, after, 1), wait_s))

    def __repr__(self) -> str:
        return f"<Stream {self._name!r}>"
