"""The job row's columns and decoders (``alkstore.rows``): by name, never by count."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields
from typing import Any

import pytest

from alkstore.constants import MAX_PAYLOAD_DEPTH
from alkstore.payload import UndecodablePayload, decode_payload
from alkstore.rows import (
    CLAIMED_COLUMNS,
    JOB_COLUMNS,
    KEY_LIMITS_JOB_COLUMNS,
    METADATA_JOB_COLUMNS,
    OPS_JOB_COLUMNS,
    RESULTS_JOB_COLUMNS,
    SNOOZE_JOB_COLUMNS,
    UNIQUE_JOB_COLUMNS,
    V1_JOB_COLUMNS,
    ScheduleRecord,
    claimed_decoder,
    claimed_jobs,
    job_decoder,
    job_from_row,
)
from alkstore.values import Job, JobError, JobState

STORED: dict[str, Any] = {
    "id": 7,
    "queue": "mail",
    "state": "dead",
    "payload": '{"to": "a"}',
    "priority": 2,
    "attempts": 3,
    "max_attempts": 3,
    "created_at": 100,
    "run_at": 110,
    "claimed_at": 120,
    "expires_at": None,
    "worker_id": "w1",
    "visibility_timeout_s": 30,
    "backoff_base_s": 5,
    "dead_letter_retention_s": 3600,
    "last_error": "boom",
    "died_at": 130,
    "errors": '[[3, 125, "boom"]]',
    "redriven_from": 4,
    "snoozes": 2,
    "unique_key": "sync-user-42",
    "completed_retention_s": 60,
    "completed_at": None,
    "result": None,
    "limit_key": "customer-42",
    "metadata": '{"traceparent":"00-ab-cd-01"}',
}
"""One job's stored columns (payload and errors as JSON text)."""

JOB = Job(
    **{
        **STORED,
        "state": JobState.DEAD,
        "payload": {"to": "a"},
        "errors": (JobError(3, 125, "boom"),),
        "metadata": {"traceparent": "00-ab-cd-01"},
    }
)


def _row(columns: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(STORED[column] for column in columns)


def test_the_job_columns_are_the_job_fields_in_order() -> None:
    assert tuple(f.name for f in fields(Job)) == JOB_COLUMNS


def test_a_row_of_every_column_decodes_to_the_job() -> None:
    assert job_from_row(_row(JOB_COLUMNS)) == JOB


def test_a_completed_row_decodes_its_result_and_a_null_one_is_none() -> None:
    completed = {**STORED, "state": "completed", "completed_at": 140, "result": '{"n":[1]}'}
    job = job_from_row(tuple(completed[column] for column in JOB_COLUMNS))
    assert (job.state, job.completed_at, job.result) == (JobState.COMPLETED, 140, {"n": [1]})
    without = job_from_row(tuple({**completed, "result": None}[c] for c in JOB_COLUMNS))
    assert without.result is None


def test_a_decoder_reads_its_columns_in_any_order() -> None:
    columns = tuple(reversed(JOB_COLUMNS))
    assert job_decoder(columns)(_row(columns)) == JOB


def test_a_contract_1_0_row_takes_the_ops_snooze_and_unique_fields_defaults() -> None:
    job = job_decoder(V1_JOB_COLUMNS)(_row(V1_JOB_COLUMNS))
    assert (job.errors, job.redriven_from, job.snoozes, job.unique_key) == ((), None, 0, None)
    assert job.limit_key is None
    assert job.metadata is None
    assert job.last_error == "boom"


def test_the_1_0_row_is_every_column_but_the_profiles_ones() -> None:
    profiles = {
        *METADATA_JOB_COLUMNS,
        *OPS_JOB_COLUMNS,
        *SNOOZE_JOB_COLUMNS,
        *UNIQUE_JOB_COLUMNS,
        *RESULTS_JOB_COLUMNS,
        *KEY_LIMITS_JOB_COLUMNS,
    }
    assert set(V1_JOB_COLUMNS) == set(JOB_COLUMNS) - profiles
    assert SNOOZE_JOB_COLUMNS == ("snoozes",)
    assert UNIQUE_JOB_COLUMNS == ("unique_key",)


def test_a_decoder_refuses_a_row_of_another_width() -> None:
    with pytest.raises(ValueError):
        job_from_row(_row(V1_JOB_COLUMNS))


def test_a_decoder_refuses_a_column_that_is_not_a_job_field() -> None:
    # An engine's own column (the unique profile's hold) is not a job column.
    with pytest.raises(ValueError, match="unique_hold"):
        job_decoder((*JOB_COLUMNS, "unique_hold"))


def test_a_decoder_refuses_to_leave_out_a_field_without_a_default() -> None:
    with pytest.raises(ValueError, match="'queue'"):
        job_decoder(tuple(c for c in JOB_COLUMNS if c != "queue"))


def test_a_decoder_refuses_a_column_named_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        job_decoder((*V1_JOB_COLUMNS, "id"))


def test_an_empty_error_history_decodes_to_no_errors() -> None:
    for stored in (None, "", "[]"):
        row = {**STORED, "errors": stored}
        assert job_from_row(tuple(row[c] for c in JOB_COLUMNS)).errors == ()


def test_a_claimed_row_takes_what_the_claim_set_from_the_claim() -> None:
    (job,) = claimed_jobs([_row(CLAIMED_COLUMNS)], "mail", "w2", 200)
    assert (job.queue, job.state, job.worker_id, job.claimed_at) == (
        "mail",
        JobState.PROCESSING,
        "w2",
        200,
    )
    assert (job.last_error, job.died_at) == (None, None)
    assert job.errors == JOB.errors


def test_a_claimed_decoder_refuses_a_column_the_claim_sets() -> None:
    with pytest.raises(ValueError, match="worker_id"):
        claimed_decoder((*CLAIMED_COLUMNS, "worker_id"))


def test_a_claimed_decoder_of_fewer_columns_takes_the_defaults() -> None:
    columns = tuple(c for c in CLAIMED_COLUMNS if c not in OPS_JOB_COLUMNS)
    (job,) = claimed_decoder(columns)([_row(columns)], "mail", "w2", 200)
    assert (job.errors, job.redriven_from) == ((), None)


def test_a_schedule_record_built_as_a_1_1_driver_builds_it_is_in_utc_replaying_all() -> None:
    record = ScheduleRecord("s", "@every 10s", "q", '{"v": 1}', 0, None, None, 10, 100)
    schedule = record.to_schedule()
    assert (schedule.timezone, schedule.catch_up, schedule.interval_s) == ("UTC", "all", 10)


def test_a_decoded_job_is_a_job_itself_not_a_subclass() -> None:
    assert type(job_from_row(_row(JOB_COLUMNS))) is Job
    (claimed,) = claimed_jobs([_row(CLAIMED_COLUMNS)], "mail", "w2", 200)
    assert type(claimed) is Job


def test_a_decoded_job_is_frozen() -> None:
    job = job_from_row(_row(JOB_COLUMNS))
    with pytest.raises(FrozenInstanceError):
        job.attempts = 4  # type: ignore[misc]


def test_a_decoded_job_hashes_and_compares_as_the_job_built_from_its_fields() -> None:
    stored = {**STORED, "payload": "7", "errors": None, "metadata": None}  # all hashable
    built = Job(**{**stored, "state": JobState.DEAD, "payload": 7, "errors": ()})
    decoded = job_from_row(tuple(stored[c] for c in JOB_COLUMNS))
    assert decoded == built
    assert hash(decoded) == hash(built)


# Stored payload texts a decoder reads in line or hands to decode_payload: each must
# come back exactly as decode_payload reads it (contract §0.4 to §0.6).
PAYLOAD_TEXTS: tuple[str | bytes, ...] = (
    '{"to": "a"}',
    "[1, [2, [3]]]",
    '"a string with [ brackets {"',
    "[" * 64 + "]" * 64,
    "[" * 65 + "]" * 65,
    "[" * 5000 + "]" * 5000,
    '"' + "[" * 70 + '"',
    ' {"padded": true} ',
    "not json",
    '{"a": 1} trailing',
    "",
    "-Infinity",
    b'{"bytes": 1}',
    b"\xff\xfe",
)


@pytest.mark.parametrize("text", PAYLOAD_TEXTS, ids=repr)
def test_a_decoder_reads_a_payload_as_decode_payload_does(text: str | bytes) -> None:
    row = {**STORED, "payload": text}
    assert job_from_row(tuple(row[c] for c in JOB_COLUMNS)).payload == decode_payload(text)


@pytest.mark.parametrize("text", PAYLOAD_TEXTS, ids=repr)
def test_a_claimed_decoder_reads_a_payload_as_decode_payload_does(text: str | bytes) -> None:
    row = {**STORED, "payload": text}
    (job,) = claimed_jobs([tuple(row[c] for c in CLAIMED_COLUMNS)], "mail", "w2", 200)
    assert job.payload == decode_payload(text)


def test_a_payload_deeper_than_the_limit_reads_as_undecodable() -> None:
    text = "[" * (MAX_PAYLOAD_DEPTH + 1) + "]" * (MAX_PAYLOAD_DEPTH + 1)
    row = {**STORED, "payload": text}
    (job,) = claimed_jobs([tuple(row[c] for c in CLAIMED_COLUMNS)], "mail", "w2", 200)
    assert type(job.payload) is UndecodablePayload
