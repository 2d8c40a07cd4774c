"""Prepared plans that follow the jobs table's size.

psycopg prepares a statement after a few runs, and PostgreSQL then keeps a
generic plan made for the tables as they were at that moment. For a batch claim
(the chosen rows' ``ctid``s, an array of unknown length) a plan made while the
jobs table was nearly empty scans the whole table for every batch once it has
grown: for a table it believes tiny, the planner prices one pass over it below
ten lookups. ``ack_batch`` (an array of ids) is exposed the same way.
PostgreSQL makes the plan again only when the table's statistics change
(autovacuum, a minute or more later), and planning every run instead costs a
fifth of a batch's time.

So before a batch statement the driver lets go of the connection's plans when
they are ``PLAN_REFRESH_S`` old (``DISCARD PLANS``, one round trip): the next run
of each statement is planned for the table as it is then and kept again; every
other run is a prepared one. A session this driver has not timed yet (a new
connection, or one forgotten when too many were timed) starts its clock at its
first batch, so its plans may live up to twice that long once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from .handle import PgHandle, execute

PLAN_REFRESH_S = 0.25
"""The most time a connection's kept plans stay in use before they are made again."""

DISCARD_PLANS: Final = b"DISCARD PLANS"

_MOST_SESSIONS = 4096
"""Forget every session's time beyond this many (closed connections' pids pile up)."""


class PlanAges:
    """When each server session (by backend pid) last let its plans go."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, kept: bool = True) -> None:
        self._clock = clock
        self._kept = kept
        """False behind a transaction pooler: nothing is prepared, so no plan is kept."""
        self._since: dict[int, float] = {}

    def keep_fresh(self, c: PgHandle) -> None:
        """Before a statement whose plan depends on the table's size: ``DISCARD PLANS``
        on ``c``'s connection when its plans are ``PLAN_REFRESH_S`` old."""
        if not self._kept:
            return
        pid = c.conn.info.backend_pid
        now = self._clock()
        since = self._since.get(pid)
        if since is None:
            if len(self._since) >= _MOST_SESSIONS:
                self._since.clear()
            self._since[pid] = now  # timed from here on
        elif now - since >= PLAN_REFRESH_S:
            # It has no plan of its own to keep: never prepare it.
            execute(c, DISCARD_PLANS, prepare=False)
            self._since[pid] = now
