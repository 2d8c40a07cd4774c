"""Durable append-only streams with consumer offsets (contract §7, decision 015 §5)."""

from __future__ import annotations

from typing import Any

from .. import api
from .._surface import implements
from ..driver import stream_topic
from ..errors import EngineUnavailable
from ..names import validate_identifier
from ..options import check_type
from ..params import StreamAppend, StreamCommit, StreamOffset, StreamRead, StreamTrim
from ..stop import StopToken
from ..timeconv import Duration
from ..values import StreamEvent
from .checks import check_limit, check_offset
from .context import StoreContext
from .waiting import Deadline, wait_budget


@implements(api.Stream)
class CoreStream:
    """An append-only log with durable consumer offsets; from ``store.stream(name)``.

    Full contract: ``alkstore.api.Stream`` (contract §7).
    """

    def __init__(self, context: StoreContext, name: str) -> None:
        self._context = context
        self._name = name
        self._topic = stream_topic(name)

    @property
    def name(self) -> str:
        return self._name

    def append(self, payload: Any) -> int:
        text = self._context.encode(payload)
        ctx = self._context
        now = ctx.now()
        driver = ctx.streams()
        # The append announces the stream to other processes; this one is told here.
        (offset,) = ctx.write(
            lambda c: driver.stream_append(c, StreamAppend(self._name, [text], now))
        )
        ctx.hub.notify(self._topic)
        return offset

    def read(self, after: int = 0, limit: int = 100) -> list[StreamEvent]:
        check_offset(after, "after")
        check_limit(limit)
        ctx = self._context
        driver = ctx.streams()
        return ctx.read(lambda c: driver.stream_read(c, StreamRead(self._name, after, limit)))

    def commit(self, consumer: str, offset: int) -> None:
        validate_identifier(consumer, "consumer")
        check_offset(offset, "offset")
        ctx = self._context
        driver = ctx.streams()
        ctx.write(lambda c: driver.stream_commit(c, StreamCommit(self._name, consumer, offset)))

    def offset(self, consumer: str) -> int:
        validate_identifier(consumer, "consumer")
        ctx = self._context
        driver = ctx.streams()
        return ctx.read(lambda c: driver.stream_offset(c, StreamOffset(self._name, consumer)))

    def trim_to(self, offset: int) -> int:
        check_offset(offset, "offset")
        ctx = self._context
        driver = ctx.streams()
        return ctx.write(lambda c: driver.stream_trim(c, StreamTrim(self._name, offset)))

    def wait(
        self, after: int, timeout: Duration | None = None, stop: StopToken | None = None
    ) -> bool:
        check_offset(after, "after")
        if stop is not None:
            check_type(stop, StopToken, "stop")
        ctx = self._context
        deadline = Deadline(timeout)
        with ctx.hub.waiter(self._topic) as waiter:
            ctx.driver.start_watching(ctx.hub)
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
                    waiter.wait(wait_budget(ctx.clock, deadline, None, ctx.repoll_s))
                    ctx.check_open()
            finally:
                if stop is not None:
                    stop.remove_callback(waiter.wake)

    def _has_event_after(self, after: int, wait_s: float | None) -> bool:
        ctx = self._context
        driver = ctx.streams()
        return bool(
            ctx.read(lambda c: driver.stream_read(c, StreamRead(self._name, after, 1)), wait_s)
        )

    def __repr__(self) -> str:
        return f"<Stream {self._name!r}>"
