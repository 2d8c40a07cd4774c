"""Streams in the model (contract §7): offsets, reads, consumer offsets, trim."""

from __future__ import annotations

from typing import Any

from alkstore import StreamEvent

from .state import ModelState
from .values import json_round_trip


class StreamsModel(ModelState):
    """Appending to, reading, committing and trimming a stream."""

    def stream_append(self, stream: str, payload: Any, offset: int) -> None:
        """Record an append the engine reported at ``offset`` (checked, then committed)."""
        model_stream = self._stream(stream)
        model_stream.hand_out(offset, model_stream.next_offsets(), stream)
        model_stream.commit_events([StreamEvent(offset, json_round_trip(payload), self.now)])

    def stream_read(self, stream: str, after: int = 0, limit: int = 100) -> list[StreamEvent]:
        """Events with an offset greater than ``after``, in offset order, at most ``limit``."""
        events = self._stream(stream).events
        return [events[offset] for offset in sorted(events) if offset > after][:limit]

    def stream_events(self, stream: str) -> list[StreamEvent]:
        """Every event of the stream, in offset order."""
        events = self._stream(stream).events
        return [events[offset] for offset in sorted(events)]

    def stream_commit(self, stream: str, consumer: str, offset: int) -> None:
        """A consumer's offset is the one it last committed: the contract names no
        monotonic rule, so committing a smaller offset rewinds it."""
        self._stream(stream).consumers[consumer] = offset

    def stream_offset(self, stream: str, consumer: str) -> int:
        return self._stream(stream).consumers.get(consumer, 0)

    def stream_trim(self, stream: str, offset: int) -> int:
        """Deletes the events with an offset smaller than ``offset``; returns how many."""
        events = self._stream(stream).events
        doomed = [o for o in events if o < offset]
        for o in doomed:
            del events[o]
        return len(doomed)

    def stream_top(self, stream: str) -> int:
        """The largest offset handed out so far (for drawing offsets near the events)."""
        return self._stream(stream).issued_top
