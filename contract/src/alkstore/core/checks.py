"""Argument checks the front ends share (names live in ``alkstore.names``)."""

from __future__ import annotations

from ..constants import ERROR_NUL_STAND_IN, MAX_BATCH, MAX_ERROR_LENGTH, MAX_JOBS_PAGE
from ..errors import InvalidOptions
from ..options import DEFAULT_ENQUEUE_OPTS, EnqueueOpts, check_type
from ..values import JobState

MAX_JOB_ID = 2**63 - 1
"""Ids are int64 on every engine: a larger (or negative) id names no job."""

MAX_OFFSET = 2**63 - 1
"""Offsets are int64 on every engine: a larger one names no event and cannot be stored."""


def check_job_id(job_id: object) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise InvalidOptions(f"job_id must be an int, got {type(job_id).__name__}")
    return job_id


def storable_id(job_id: int) -> bool:
    """Whether ``job_id`` could name a job at all (else: no job, without asking)."""
    return 0 <= job_id <= MAX_JOB_ID


def check_error(error: object) -> str:
    """``error`` as a job keeps it: each NUL becomes ``ERROR_NUL_STAND_IN`` (contract §11)."""
    if not isinstance(error, str):
        raise InvalidOptions(f"error must be a str, got {type(error).__name__}")
    return error.replace("\x00", ERROR_NUL_STAND_IN) if "\x00" in error else error


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:
        raise InvalidOptions(f"limit must be an int within 1..{MAX_BATCH}, got {limit!r}")
    return limit


def check_offset(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
        raise InvalidOptions(f"{field} must be an int within 0..{MAX_OFFSET}, got {value!r}")
    return value


def enqueue_opts(opts: EnqueueOpts | None) -> EnqueueOpts:
    """``opts`` checked, or the defaults."""
    if opts is None:
        return DEFAULT_ENQUEUE_OPTS
    check_type(opts, EnqueueOpts, "opts")
    return opts


def history_error(error: str) -> str:
    """An error as the error history keeps it: its first ``MAX_ERROR_LENGTH`` characters."""
    return error[:MAX_ERROR_LENGTH]


def check_page_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_JOBS_PAGE:
        raise InvalidOptions(f"limit must be an int within 1..{MAX_JOBS_PAGE}, got {limit!r}")
    return limit


def check_state(state: object) -> JobState | None:
    """A job state given as a ``JobState``, its name (``"dead"``), or ``None`` (any)."""
    if state is None or isinstance(state, JobState):
        return state
    if isinstance(state, str):
        try:
            return JobState(state.lower())
        except ValueError:
            pass
    states = ", ".join(s.value for s in JobState)
    raise InvalidOptions(f"state must be one of {states} (or None), got {state!r}")
