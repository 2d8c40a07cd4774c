"""The pressure scenarios at small sizes, on a private server of their own: backends
terminated under the workers, every connection slot taken by someone else. The full
runs, with their figures, are ``nox -s faults``; these assert the guarantees only."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from fault_pressure import PressureConfig, run_backend_kills, run_pool_exhaustion
from fault_snapshots import SnapshotsConfig, run_snapshots
from fault_storm import StormConfig

from alkstore import EngineSpec
from alkstore_postgres.testing.server import LocalPostgres

SMALL = PressureConfig(
    storm=StormConfig(
        jobs=400, workers=2, work_s=0.02, sigkill_workers=False, storm_s=60.0, drain_s=30.0
    ),
    kill_for_s=3.0,
    exhaust_for_s=3.0,
)
MAX_CONNECTIONS = 60


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPostgres]:
    with LocalPostgres(fsync=False, max_connections=MAX_CONNECTIONS) as pg:
        yield pg


def _spec(server: LocalPostgres) -> EngineSpec:
    schema = "alkstore_pressure_" + secrets.token_hex(4)
    return EngineSpec(server.dsn, {"schema": schema, "connect_timeout_s": 2})


def test_backends_terminated_under_the_workers_lose_nothing_and_leak_no_driver_error(
    server: LocalPostgres,
) -> None:
    result = run_backend_kills(server.dsn, "postgresql", _spec(server), SMALL)

    assert result.notes == ()
    assert not result.failed
    assert int(result.value("backends terminated")) > 0
    assert result.value("lost") == 0
    assert result.value("errors: unexpected") == 0
    assert (
        result.value("completed (acked True)") + result.value("acked, record cut by the kill")
        == SMALL.storm.jobs
    )


def test_every_slot_taken_makes_calls_end_in_their_budget_and_nothing_is_lost(
    server: LocalPostgres,
) -> None:
    result = run_pool_exhaustion(server.dsn, "postgresql", _spec(server), SMALL)

    assert not result.failed
    assert int(result.value("idle connections held by another party")) > 0
    assert int(result.value("probe calls: EngineUnavailable")) > 0
    assert result.value("probe calls not EngineUnavailable") == 0
    assert result.value("probe calls hung") == 0
    assert result.value("lost") == 0
    assert any("too many clients" in note for note in result.notes)


@pytest.mark.parametrize("pressure", ["xmin-pin", "rr-readers"])
def test_old_snapshots_under_steady_load_lose_nothing_and_hold_back_vacuum(
    server: LocalPostgres, pressure: str
) -> None:
    config = SnapshotsConfig(
        pressure=pressure, rate=100, baseline_s=3, pressure_s=6, after_s=3, plot=False
    )
    result = run_snapshots(server.dsn, _spec(server), config)

    assert result.notes == ()
    assert not result.failed
    assert int(result.value("jobs enqueued")) > 0
    assert result.value("lost or stranded") == 0
    # The pressure held an old snapshot: the oldest one aged while it lasted.
    assert int(result.value("pressure: oldest snapshot age (xids, max)")) > 0
