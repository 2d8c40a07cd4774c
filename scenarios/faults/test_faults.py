"""Smoke runs of the fault scenarios (small sizes), and the checks that judge them.

The full runs are ``nox -s faults``; these prove, quickly, that the scenarios
run and that their judges would notice a loss, a double ack or a write that a
refusal should have prevented.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fault_atomicity import AtomicityConfig, run_atomicity
from fault_hostile import PROBE, Context, Row, run_hostile, try_row
from fault_long_jobs import LongJobsConfig, run_long_jobs
from fault_long_jobs import judge as long_jobs_judge
from fault_storm import StormConfig, run_storm, tally
from fault_targets import open_target

import alkstore
from alkstore import EngineSpec, InvalidOptions

SMOKE_STORM = StormConfig(jobs=200, workers=3, work_s=0.02, storm_s=20.0, drain_s=20.0)
"""Slow enough "work" that workers are killed at work, not only while idle."""
SMOKE_ATOMICITY = AtomicityConfig(kills=4)
SMOKE_LONG_JOBS = LongJobsConfig(jobs=16, workers=3, concurrency=2, kills=3)


@pytest.fixture
def sqlite_spec() -> Iterator[EngineSpec]:
    with alkstore.load_engine("sqlite").provision() as spec:
        yield spec


# --------------------------------------------------------------------------- smoke runs


def test_crash_storm_on_sqlite_loses_nothing(sqlite_spec: EngineSpec) -> None:
    result = run_storm("sqlite", sqlite_spec, SMOKE_STORM)

    assert result.notes == ()
    assert not result.failed
    assert int(result.value("workers SIGKILLed")) > 0  # the storm really happened
    done = result.value("completed (acked True)"), result.value("acked, record cut by the kill")
    assert sum(int(v) for v in done) == SMOKE_STORM.jobs


def test_transactions_killed_mid_flight_leave_all_or_nothing_on_sqlite(
    sqlite_spec: EngineSpec,
) -> None:
    result = run_atomicity("sqlite", sqlite_spec, SMOKE_ATOMICITY)

    assert not result.failed
    assert int(result.value("orders committed")) > 0


def test_worker_processes_killed_mid_job_lose_nothing_and_ack_nothing_twice(
    engine_spec: tuple[str, EngineSpec],
) -> None:
    engine, spec = engine_spec
    result = run_long_jobs(engine, spec, SMOKE_LONG_JOBS)

    assert result.notes == ()
    assert not result.failed, result.figures
    assert int(result.value("workers SIGKILLed")) == SMOKE_LONG_JOBS.kills
    assert int(result.value("runs cut by a kill")) >= SMOKE_LONG_JOBS.kills  # killed at work


def test_hostile_inputs_are_refused_exactly_and_write_nothing(
    engine_spec: tuple[str, EngineSpec],
) -> None:
    engine, spec = engine_spec
    result = run_hostile(engine, spec)

    assert result.notes == ()  # each failing row, named
    assert not result.failed


# --------------------------------------------------------------------------- the storm's judge


def _work(job_id: int, n: int, attempt: int, worker: str = "w0-0") -> dict[str, Any]:
    return {"event": "work", "id": job_id, "n": n, "attempt": attempt, "worker": worker}


def _ack(job_id: int, n: int, attempt: int, ack: bool | None) -> dict[str, Any]:
    return {"event": "ack", "id": job_id, "n": n, "attempt": attempt, "ack": ack}


def test_a_job_gone_without_a_true_ack_counts_as_lost() -> None:
    records = [_work(10, 0, 1), _ack(10, 0, 1, False)]

    result = tally([10], {10: None}, records)

    assert result.lost == {0}


def test_a_job_never_worked_but_gone_counts_as_lost() -> None:
    result = tally([10, 11], {10: None, 11: None}, [_work(10, 0, 1), _ack(10, 0, 1, True)])

    assert result.lost == {1}


def test_a_job_gone_after_its_ack_record_was_cut_counts_as_completed_not_lost() -> None:
    records = [_work(10, 0, 1)]  # killed between the committed ack and its log line

    result = tally([10], {10: None}, records)

    assert result.cut == {0}
    assert not result.lost


def test_two_claims_acked_true_count_as_acked_twice() -> None:
    records = [_work(10, 0, 1), _ack(10, 0, 1, True), _work(10, 0, 2), _ack(10, 0, 2, True)]

    result = tally([10], {10: None}, records)

    assert result.acked_twice == {0}


def test_one_claim_worked_by_two_processes_counts_as_a_duplicate_claim() -> None:
    records = [_work(10, 0, 1, "w0-0"), _work(10, 0, 1, "w1-0"), _ack(10, 0, 1, True)]

    result = tally([10], {10: None}, records)

    assert result.duplicate_claims == 1


def test_a_job_still_in_the_store_counts_as_stranded(sqlite_spec: EngineSpec) -> None:
    with alkstore.open(sqlite_spec.url) as store:
        job_id = store.queue("q").enqueue({"n": 0})
        pending = store.queue("q").get_job(job_id)

    result = tally([job_id], {job_id: pending}, [])

    assert result.stranded == 1
    assert not result.lost


# --------------------------------------------------------------------------- the long jobs' judge


def _run(event: str, job_id: int, attempt: int, worker: str, t: float) -> dict[str, Any]:
    return {"event": event, "id": job_id, "attempt": attempt, "worker": worker, "t": t}


def _acked(job_id: int, attempt: int, worker: str) -> dict[str, Any]:
    return {
        "event": "finished",
        "id": job_id,
        "attempt": attempt,
        "worker": worker,
        "outcome": "acked",
    }


def _judged(records: list[dict[str, Any]], kills: list[tuple[str, float]]) -> Any:
    return long_jobs_judge("sqlite", [10], {10: None}, records, kills, 0.0)


def test_a_killed_run_re_run_after_the_kill_counts_as_cut_and_re_run() -> None:
    records = [
        _run("start", 10, 1, "w0-0", 1.0),
        _run("start", 10, 2, "w1-0", 5.0),
        _run("end", 10, 2, "w1-0", 7.0),
        _acked(10, 2, "w1-0"),
    ]

    result = _judged(records, [("w0-0", 2.0)])

    assert not result.failed
    assert result.value("runs cut by a kill") == 1
    assert result.value("re-run after a kill max (s)") == 3.0


def test_a_second_run_starting_before_the_first_ended_counts_as_overlapping() -> None:
    records = [
        _run("start", 10, 1, "w0-0", 1.0),
        _run("start", 10, 2, "w1-0", 2.0),  # the first run's heartbeats failed to hold it
        _run("end", 10, 1, "w0-0", 4.0),
        _run("end", 10, 2, "w1-0", 5.0),
        _acked(10, 2, "w1-0"),
    ]

    assert _judged(records, []).value("overlapping runs") == 1


def test_two_acked_runs_of_one_job_count_as_acked_twice() -> None:
    records = [
        _run("start", 10, 1, "w0-0", 1.0),
        _run("end", 10, 1, "w0-0", 2.0),
        _acked(10, 1, "w0-0"),
        _run("start", 10, 2, "w1-0", 3.0),
        _run("end", 10, 2, "w1-0", 4.0),
        _acked(10, 2, "w1-0"),
    ]

    assert _judged(records, []).value("acked twice") == 1


def test_a_killed_run_no_later_run_took_counts_as_never_re_run_and_lost() -> None:
    result = _judged([_run("start", 10, 1, "w0-0", 1.0)], [("w0-0", 2.0)])

    assert result.value("killed runs never re-run") == 1
    assert result.value("lost") == 1


# --------------------------------------------------------------------------- the hostile judge


def test_a_refusal_after_a_write_counts_as_wrote_something(sqlite_spec: EngineSpec) -> None:
    def writes_then_refuses(ctx: Context) -> None:
        ctx.store.queue(PROBE).enqueue({"leaked": True})
        raise InvalidOptions("refused, too late")

    row = Row("test surface", "leaky call", (InvalidOptions,), writes_then_refuses)
    with alkstore.open(sqlite_spec.url) as store, open_target(sqlite_spec) as target:
        result = try_row(row, Context(store, target), frozenset())

    assert result.matched
    assert result.wrote == ["1 job(s)"]
    assert not result.ok
