"""A connection's kept plans are let go once they are PLAN_REFRESH_S old, and not before."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from alkstore.testing import FakeClock
from alkstore_postgres import plans
from alkstore_postgres.handle import PgHandle
from alkstore_postgres.plans import DISCARD_PLANS, PLAN_REFRESH_S, PlanAges


@dataclass
class _Info:
    backend_pid: int


@dataclass
class _Connection:
    """Records what runs on it; ``info.backend_pid`` names its server session."""

    pid: int
    ran: list[bytes] = field(default_factory=list)

    @property
    def info(self) -> _Info:
        return _Info(self.pid)

    def execute(self, query: bytes, params: Any = None, **_: Any) -> None:
        self.ran.append(query)


def _handle(conn: _Connection) -> PgHandle:
    return PgHandle(conn, standalone=True)  # type: ignore[arg-type]


def test_a_new_session_has_no_plans_to_let_go() -> None:
    conn = _Connection(pid=1)
    PlanAges(FakeClock().now).keep_fresh(_handle(conn))
    assert conn.ran == []


def test_plans_younger_than_the_refresh_age_are_kept() -> None:
    clock, conn = FakeClock(), _Connection(pid=1)
    ages = PlanAges(clock.now)
    ages.keep_fresh(_handle(conn))
    clock.advance(PLAN_REFRESH_S * 0.9)
    ages.keep_fresh(_handle(conn))
    assert conn.ran == []


def test_plans_of_the_refresh_age_are_let_go_once() -> None:
    clock, conn = FakeClock(), _Connection(pid=1)
    ages = PlanAges(clock.now)
    ages.keep_fresh(_handle(conn))
    clock.advance(PLAN_REFRESH_S)
    ages.keep_fresh(_handle(conn))
    ages.keep_fresh(_handle(conn))
    assert conn.ran == [DISCARD_PLANS]
    clock.advance(PLAN_REFRESH_S)
    ages.keep_fresh(_handle(conn))
    assert conn.ran == [DISCARD_PLANS, DISCARD_PLANS]


def test_each_session_keeps_its_own_age() -> None:
    clock, old, new = FakeClock(), _Connection(pid=1), _Connection(pid=2)
    ages = PlanAges(clock.now)
    ages.keep_fresh(_handle(old))
    clock.advance(PLAN_REFRESH_S)
    ages.keep_fresh(_handle(new))
    ages.keep_fresh(_handle(old))
    assert (old.ran, new.ran) == ([DISCARD_PLANS], [])


def test_the_ages_of_many_sessions_are_forgotten_rather_than_kept_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plans, "_MOST_SESSIONS", 3)
    clock = FakeClock()
    ages = PlanAges(clock.now)
    old = _Connection(pid=1)
    for pid in (1, 2, 3, 4):  # the fourth session forgets the first three
        ages.keep_fresh(_handle(_Connection(pid=pid)))
    clock.advance(PLAN_REFRESH_S)
    ages.keep_fresh(_handle(old))  # a session it has forgotten: new to it again
    assert old.ran == []
