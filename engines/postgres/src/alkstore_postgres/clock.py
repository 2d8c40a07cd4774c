"""The default clock: this host's clock corrected to the database server's.

Every worker host computes "now" locally (no round trip per call), shifted by
an offset measured against the server, so hosts with skewed clocks still agree
on due times and deadlines. The offset is measured when the store connects and
re-measured lazily -- at most once per ``REFRESH_S``, piggybacking on a call that
already holds a connection -- so there is no background timer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from alkstore.clock import OffsetClock

if TYPE_CHECKING:
    from .handle import SqlConnection

REFRESH_S: Final = 60.0

SERVER_TIME: Final = b"SELECT extract(epoch FROM clock_timestamp())::float8"
"""The server's wall clock right now (not the transaction start, unlike ``now()``)."""


class ServerClock(OffsetClock):
    """An ``OffsetClock`` whose offset follows the PostgreSQL server's clock."""

    def __init__(
        self,
        *,
        local_time: Callable[[], float] = time.time,
        refresh_s: float = REFRESH_S,
    ) -> None:
        super().__init__(0.0)
        self._local_time = local_time
        self._refresh_s = refresh_s
        self._measured_at: float | None = None  # time.monotonic() of the last measurement
        self._measuring = threading.Lock()

    def now(self) -> float:
        return self._local_time() + self.offset

    @property
    def measured(self) -> bool:
        return self._measured_at is not None

    def due(self) -> bool:
        """Whether the offset should be re-measured (cheap: no I/O)."""
        at = self._measured_at
        return at is None or time.monotonic() - at >= self._refresh_s

    def measure(self, conn: SqlConnection) -> float:
        """Measure the offset on ``conn`` (autocommit, idle) and adopt it.

        The server's reading is taken to be at the midpoint of the round trip.
        """
        before = self._local_time()
        [(server_time,)] = conn.execute(SERVER_TIME).fetchall()
        after = self._local_time()
        self.offset = float(server_time) - (before + after) / 2
        self._measured_at = time.monotonic()
        return self.offset

    def refresh(self, conn: SqlConnection) -> None:
        """Re-measure on ``conn`` if due; concurrent callers leave it to one thread."""
        if not self.due() or not self._measuring.acquire(blocking=False):
            return
        try:
            if self.due():
                self.measure(conn)
        finally:
            self._measuring.release()

    def __repr__(self) -> str:
        return f"ServerClock(offset={self.offset!r})"
