"""The failover scenario at small sizes (a primary and a standby of its own per run),
and the checks of its judge. The full runs, with their timings, are ``nox -s faults``;
these assert the guarantees only, never a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fault_failover import FailoverConfig, run_failover, tally

import alkstore
from alkstore import EngineSpec

SHORT = {"producers": 1, "workers": 4, "before_s": 2.0, "after_s": 2.0, "drain_s": 45.0}
STOP, PROMOTED = 100.0, 101.0
"""The failover's times in the judge's tests."""


# --------------------------------------------------------------------------- short runs


def test_a_failover_with_synchronous_replication_loses_nothing_and_acks_nothing_twice() -> None:
    result = run_failover(FailoverConfig(synchronous=True, **SHORT))

    assert result.notes == ()
    assert not result.failed
    assert int(result.value("enqueues returned")) > 0
    assert result.value("lost (enqueue returned, job gone, never acked)") == 0
    assert result.value("acked True twice") == 0
    assert result.value("ran again after a confirmed ack") == 0
    assert result.value("writes refused by the standby") == 0
    assert result.value("promotion -> first claim (s)") != "-"  # the promoted server works


def test_a_failover_with_a_lagging_async_standby_loses_only_its_tail_and_strands_nothing() -> None:
    result = run_failover(FailoverConfig(synchronous=False, tail_s=1.0, **SHORT))

    assert not result.failed
    assert int(result.value("enqueues returned while it was cut off")) > 0
    assert result.value("lost outside the un-replicated tail") == 0
    assert result.value("stranded (pending/processing)") == 0
    assert result.value("one attempt claimed twice by one server") == 0
    assert result.value("errors: unexpected") == 0


# --------------------------------------------------------------------------- the judge


@pytest.fixture
def pending_job() -> Iterator[alkstore.Job]:
    """A job ``{"n": 5}`` still pending, as ``get_job`` shows it."""
    with alkstore.load_engine("sqlite").provision() as spec, _opened(spec) as store:
        job_id = store.queue("q").enqueue({"n": 5})
        job = store.queue("q").get_job(job_id)
        assert job is not None
        yield job


def _opened(spec: EngineSpec) -> alkstore.Store:
    return alkstore.open(spec.url, **spec.opts)


def _enqueued(job_id: int, n: int, t: float) -> dict[str, Any]:
    return {"event": "enqueued", "proc": "p0", "t": t, "id": job_id, "n": n}


def _claim(job_id: int, n: int, attempt: int, t: float, proc: str = "w0") -> dict[str, Any]:
    return {"event": "claim", "proc": proc, "t": t, "id": job_id, "n": n, "attempt": attempt}


def _ack(job_id: int, n: int, attempt: int, ack: bool | None, proc: str = "w0") -> dict[str, Any]:
    return {"event": "ack", "proc": proc, "t": 0.0, "id": job_id, "n": n, "attempt": attempt,
            "ack": ack}  # fmt: skip


def test_an_enqueue_that_returned_whose_job_is_gone_unacked_counts_as_lost() -> None:
    result = tally([_enqueued(1, 5, 50.0)], {1: None}, stopped_at=STOP, promoted_at=PROMOTED)

    assert result.lost == {5}


def test_a_lost_enqueue_that_returned_after_the_stop_lies_outside_any_tail() -> None:
    # It returned after the stop, so the promoted server had committed it.
    result = tally([_enqueued(1, 5, 102.0)], {1: None}, stopped_at=STOP, promoted_at=PROMOTED)

    assert result.lost_outside_tail == 1


def test_a_job_whose_id_the_promoted_server_gave_another_job_counts_as_lost(
    pending_job: alkstore.Job,
) -> None:
    records = [_enqueued(pending_job.id, 7, 50.0)]  # the id now holds {"n": 5}

    result = tally(records, {pending_job.id: pending_job}, stopped_at=STOP, promoted_at=PROMOTED)

    assert result.lost == {7}
    assert result.stranded == 0


def test_a_lost_enqueue_inside_the_tail_is_not_lost_outside_it() -> None:
    records = [_enqueued(1, 5, 99.5), _enqueued(2, 6, 98.0)]

    result = tally(
        records, {1: None, 2: None}, stopped_at=STOP, promoted_at=PROMOTED, tail_from=99.0
    )

    assert result.lost == {5, 6}
    assert result.in_tail == 1
    assert result.lost_outside_tail == 1  # n=6 returned before the standby was cut off


def test_a_job_run_again_after_a_true_ack_counts_as_acked_twice() -> None:
    records = [
        _claim(1, 5, 1, 90.0),
        _ack(1, 5, 1, True),
        _claim(1, 5, 2, 102.0, "w1"),
        _ack(1, 5, 2, True, "w1"),
    ]

    result = tally(records, {1: None}, stopped_at=STOP, promoted_at=PROMOTED)

    assert result.acked_twice == {5}
    assert result.reran_after_confirmed_ack == 1
    assert result.reran_unconfirmed == 0


def test_a_job_run_again_after_an_ack_that_raised_counts_as_unconfirmed() -> None:
    records = [_claim(1, 5, 1, 99.0), _ack(1, 5, 1, None), _claim(1, 5, 2, 104.0, "w1")]

    result = tally(records, {1: None}, stopped_at=STOP, promoted_at=PROMOTED)

    assert result.reran_unconfirmed == 1
    assert result.reran_after_confirmed_ack == 0
    assert not result.lost
    assert result.first_claim_after_s == pytest.approx(3.0)


def test_one_attempt_claimed_on_both_servers_counts_as_a_claim_the_tail_lost() -> None:
    records = [_claim(1, 5, 1, 99.0), _claim(1, 5, 1, 102.0, "w1"), _claim(1, 5, 1, 103.0, "w2")]

    result = tally(records, {1: None}, stopped_at=STOP, promoted_at=PROMOTED)

    assert result.reclaimed_after_lost_claim == 1
    assert result.claimed_twice_by_one_server == 1  # the promoted server's two claims


def test_a_surviving_job_still_pending_counts_as_stranded(pending_job: alkstore.Job) -> None:
    records = [_enqueued(pending_job.id, 5, 50.0)]

    result = tally(records, {pending_job.id: pending_job}, stopped_at=STOP, promoted_at=PROMOTED)

    assert result.stranded == 1
    assert not result.lost
