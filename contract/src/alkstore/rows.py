"""The rows an engine stores and reads back: their columns and their decoders.

A job row's columns are ``values.Job``'s fields, by name: ``JOB_COLUMNS`` is
derived from ``Job``, so a new job field is a new column here without an edit.
An engine decodes its rows with a decoder made once for the columns it selects
(``job_decoder(columns)``), so a row is read by its column names, never by how
many columns it has; a column the engine does not select takes ``Job``'s
default (an engine without the ops profile leaves out ``errors`` and
``redriven_from``, one without the snooze profile ``snoozes``, one without the
unique profile ``unique_key``, one without the key_limits profile ``limit_key``,
one without the metadata profile ``metadata``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any

from .constants import MAX_PAYLOAD_DEPTH
from .options import ScheduleOpts
from .payload import decode_payload, encode_payload, scan_stored
from .values import Job, JobError, JobState, Schedule, StreamEvent
from .zones import UTC_ZONE

JobDecoder = Callable[[Sequence[Any]], Job]
"""A row of one engine's job columns (payload and errors as JSON text) as a ``Job``."""

ClaimedDecoder = Callable[[Iterable[Sequence[Any]], str, str, int], list[Job]]
"""``(rows, queue, worker_id, now)``: the ``Job`` of each row a claim returned."""

JOB_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Job))
"""A job row's columns: ``Job``'s fields, in their order (the order ``job_from_row``
reads). ``errors`` is the error history as JSON text: an array of ``[attempt, at,
error]`` arrays, oldest first (``NULL`` or ``'[]'`` for none)."""

OPS_JOB_COLUMNS: tuple[str, ...] = ("errors", "redriven_from")
"""The columns only an engine with the ops profile (contract 1.1) keeps."""

SNOOZE_JOB_COLUMNS: tuple[str, ...] = ("snoozes",)
"""The columns only an engine with the snooze profile (contract 1.2) keeps."""

UNIQUE_JOB_COLUMNS: tuple[str, ...] = ("unique_key",)
"""The columns only an engine with the unique profile (contract 1.2) shows."""

RESULTS_JOB_COLUMNS: tuple[str, ...] = ("completed_retention_s", "completed_at", "result")
"""The columns only an engine with the results profile (contract 1.2) keeps: the stamp
of every job, and what a completed job holds (the result as JSON text, or NULL)."""

KEY_LIMITS_JOB_COLUMNS: tuple[str, ...] = ("limit_key",)
"""The columns only an engine with the key_limits profile (contract 1.2) keeps: the key a
per-key limit counts a job under (NULL: none)."""

METADATA_JOB_COLUMNS: tuple[str, ...] = ("metadata",)
"""The columns only an engine with the metadata profile (contract 1.2 §20) keeps: a
job's metadata as JSON text (NULL: none)."""

COMPLETED_ONLY_COLUMNS: tuple[str, ...] = ("completed_at", "result")
"""What only a completed row holds (``None`` on a live or dead one)."""

V1_JOB_COLUMNS: tuple[str, ...] = tuple(
    c
    for c in JOB_COLUMNS
    if c not in OPS_JOB_COLUMNS
    and c not in SNOOZE_JOB_COLUMNS
    and c not in UNIQUE_JOB_COLUMNS
    and c not in RESULTS_JOB_COLUMNS
    and c not in KEY_LIMITS_JOB_COLUMNS
    and c not in METADATA_JOB_COLUMNS
)
"""Contract 1.0's job row: an engine without the ops, snooze, unique, results,
key_limits and metadata profiles may select only these (and decode with
``job_decoder(V1_JOB_COLUMNS)``)."""

SET_BY_CLAIM: tuple[str, ...] = ("queue", "state", "claimed_at", "worker_id")
"""What a claim sets itself, so ``claimed_jobs`` takes it from the claim, not the row."""

DEAD_ONLY_COLUMNS: tuple[str, ...] = ("last_error", "died_at")
"""What only a dead row holds (``None`` on a live one)."""

CLAIMED_COLUMNS: tuple[str, ...] = tuple(
    c
    for c in JOB_COLUMNS
    if c not in SET_BY_CLAIM and c not in DEAD_ONLY_COLUMNS and c not in COMPLETED_ONLY_COLUMNS
)
"""The columns ``claimed_jobs`` reads from a claim's ``RETURNING``: a job row without
``SET_BY_CLAIM``, ``DEAD_ONLY_COLUMNS`` and ``COMPLETED_ONLY_COLUMNS``. Fewer columns to
send and convert per claimed row; an engine may as well return ``JOB_COLUMNS`` and use
``job_from_row``."""


def decode_errors(text: str | None) -> tuple[JobError, ...]:
    """The ``errors`` column (JSON ``[[attempt, at, error], ...]``) as ``JobError``s."""
    if not text or text == "[]":
        return ()
    entries = decode_payload(text)
    if not isinstance(entries, list):  # undecodable: a history is never worth a failure
        return ()
    return tuple(
        JobError(int(entry[0]), int(entry[1]), str(entry[2]))
        for entry in entries
        if isinstance(entry, list) and len(entry) == 3
    )


def error_entry(attempt: int, at: int, error: str) -> str:
    """One history entry as the JSON text engines append to ``errors``."""
    return encode_payload([attempt, at, error])


# -- decoders --------------------------------------------------------------------
# Job is a frozen dataclass with slots: its __init__ sets each field through
# object.__setattr__, and even a slot's own descriptor setter, called once per
# field, costs more than the rest of building a claimed job (26 calls a job).
# A decoder instead builds the job as a ``_JobUnderConstruction`` -- Job's own
# layout (no slot added), with plain attribute assignment, which the interpreter
# stores straight into the slot -- and, once every slot is set, makes it a
# ``Job`` by assigning its class: the very object ``Job(...)`` would have made
# (same type, same slots, frozen from then on), for about a fifth of the cost of
# the setters. Each decoder is generated once, for one tuple of column names, as
# the straight line of code a hand-written one would be (the names are Job's
# fields, checked before they are used). It skips nothing: Job has no
# __post_init__ (checked) and its fields are all slots (checked below).
if hasattr(Job, "__post_init__"):
    raise TypeError("the row decoders set Job's slots directly: Job must have no __post_init__")


class _JobUnderConstruction(Job):
    """A ``Job`` while a decoder fills its slots: the same layout, assignable; never
    seen outside a decoder (its last step makes it a ``Job``)."""

    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


if set(getattr(Job, "__slots__", ())) != set(JOB_COLUMNS):
    raise TypeError("the row decoders fill Job's slots: every Job field must be a slot")
# The class assignment a decoder ends with; it raises TypeError here, at import, if
# the two layouts ever differ.
_probe: Any = object.__new__(_JobUnderConstruction)
_probe.__class__ = Job
del _probe


_FIELDS = {f.name: f for f in fields(Job)}

# How a stored column becomes a field's value; a column not named here is stored as is.
_CONVERT = {
    "state": "states[{}]",
    "payload": "p_payload",
    "errors": "(history({0}) if {0} else ())",
    "result": "(None if {0} is None else decode({0}))",
    "metadata": "(None if {0} is None else decode({0}))",
}


def _default(name: str) -> Any:
    field = _FIELDS[name]
    if field.default is MISSING:
        raise ValueError(f"a job row must have the column {name!r} (Job.{name} has no default)")
    return field.default


def _check_columns(columns: Sequence[str], given: Iterable[str] = ()) -> None:
    unknown = [c for c in columns if c not in _FIELDS]
    if unknown:
        raise ValueError(f"not job columns: {unknown} (the columns are {JOB_COLUMNS})")
    if len(set(columns)) != len(columns):
        raise ValueError(f"a job column is named twice in {tuple(columns)}")
    clash = set(columns) & set(given)
    if clash:
        raise ValueError(f"a claim sets {sorted(clash)} itself: leave them out of its row")


# The payload, decoded in line: ``decode_payload``'s own fast path (a str of too few
# brackets to nest past the limit, one scan that reads it to its end), without the two
# calls per job that cost as much as the scan of a small payload; any other text (bytes,
# many brackets, whitespace around it, not JSON) goes to ``decode_payload`` itself, so
# every rule of contract §0.5 and §0.6 for reading a payload is decode_payload's.
_DECODE_PAYLOAD = """\
if type(v_payload) is str and v_payload.count("[") + v_payload.count("{") <= max_depth:
    try:
        p_payload, p_end = scan(v_payload, 0)
        if p_end != len(v_payload):
            p_payload = decode(v_payload)
    except (StopIteration, ValueError, RecursionError):
        p_payload = decode(v_payload)
else:
    p_payload = decode(v_payload)"""


def _build_job(columns: Sequence[str], given: dict[str, str], indent: str) -> list[str]:
    """Lines that unpack ``row`` (``columns``), set every slot of a new ``job`` and make
    it a ``Job`` (see above)."""
    names = [f"v_{c}" for c in columns]
    lines = [f"{indent}({', '.join(names)},) = row"]
    if "payload" in columns:
        lines += [f"{indent}{line}" for line in _DECODE_PAYLOAD.splitlines()]
    lines.append(f"{indent}job = new(Building)")
    for name in JOB_COLUMNS:
        if name in given:
            value = given[name]
        elif name in columns:
            value = _CONVERT.get(name, "{}").format(f"v_{name}")
        else:
            value = f"default_{name}"
        lines.append(f"{indent}job.{name} = {value}")
    lines.append(f"{indent}job.__class__ = Job")
    return lines


def _namespace(columns: Sequence[str], given: Iterable[str]) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        "new": object.__new__,
        "Job": Job,
        "Building": _JobUnderConstruction,
        "states": {state.value: state for state in JobState},
        "decode": decode_payload,
        "scan": scan_stored,
        "max_depth": MAX_PAYLOAD_DEPTH,
        "history": decode_errors,
        "processing": JobState.PROCESSING,
    }
    for name in JOB_COLUMNS:
        if name not in columns and name not in given:
            namespace[f"default_{name}"] = _default(name)
    return namespace


def _compile(source: str, namespace: dict[str, Any], name: str) -> Any:
    exec(compile(source, f"<alkstore.rows.{name}>", "exec"), namespace)
    return namespace[name]


def job_decoder(columns: Sequence[str]) -> JobDecoder:
    """A decoder of rows that hold ``columns`` (a subset of ``JOB_COLUMNS``, in any
    order; every field without a default among them): make it once, where the
    engine's statements are, and call it per row. ``ValueError`` names a column
    that is not a job column or a required one that is missing."""
    columns = tuple(columns)
    _check_columns(columns)
    body = _build_job(columns, {}, "    ")
    source = "\n".join(["def job_from_row(row):", *body, "    return job"])
    decoder: JobDecoder = _compile(source, _namespace(columns, ()), "job_from_row")
    decoder.__doc__ = f"A ``Job`` from a row of the columns {columns}."
    return decoder


# What a claim sets itself, as the claimed decoder's arguments (or constants).
_CLAIM_GIVES = {
    "queue": "queue",
    "state": "processing",
    "claimed_at": "now",
    "worker_id": "worker_id",
    "last_error": "None",
    "died_at": "None",
}


def claimed_decoder(columns: Sequence[str]) -> ClaimedDecoder:
    """A decoder of the rows a claim returns holding ``columns``: each ``Job``
    processing, ``claimed_at = now``, the claim's ``queue`` and ``worker_id``, no
    ``last_error`` or ``died_at``; so ``columns`` leave those out."""
    columns = tuple(columns)
    _check_columns(columns, _CLAIM_GIVES)
    body = _build_job(columns, _CLAIM_GIVES, "        ")
    source = "\n".join(
        [
            "def claimed_jobs(rows, queue, worker_id, now):",
            "    jobs = []",
            "    append = jobs.append",
            "    for row in rows:",
            *body,
            "        append(job)",
            "    return jobs",
        ]
    )
    decoder: ClaimedDecoder = _compile(source, _namespace(columns, _CLAIM_GIVES), "claimed_jobs")
    decoder.__doc__ = f"The claimed ``Job`` of each row of the columns {columns}."
    return decoder


job_from_row: JobDecoder = job_decoder(JOB_COLUMNS)
"""A ``Job`` from a row in ``JOB_COLUMNS`` order (payload and errors as JSON text)."""

claimed_jobs: ClaimedDecoder = claimed_decoder(CLAIMED_COLUMNS)
"""The ``Job`` of each row a claim of ``queue`` by ``worker_id`` at ``now`` returned,
the rows in ``CLAIMED_COLUMNS`` order (payload and errors as JSON text)."""


# -- other rows ------------------------------------------------------------------

_SET_OFFSET, _SET_EVENT_PAYLOAD, _SET_CREATED_AT = (
    getattr(StreamEvent, name).__set__ for name in ("offset", "payload", "created_at")
)


def stream_event(offset: int, payload: str, created_at: int) -> StreamEvent:
    """A ``StreamEvent`` from its stored columns (payload as JSON text).

    Built slot by slot, as the job decoders build a ``Job``: a read of a page of
    events makes one per event, and the frozen dataclass's ``__init__`` costs
    more than the rest of the read."""
    event: StreamEvent = object.__new__(StreamEvent)
    _SET_OFFSET(event, offset)
    _SET_EVENT_PAYLOAD(event, decode_payload(payload))
    _SET_CREATED_AT(event, created_at)
    return event


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """A schedule row. ``payload`` is JSON text; ``expires_s`` may be ``None``.

    ``interval_s`` is an ``@every`` spec's interval (``None`` for cron). The last two
    fields are contract 1.2's (the ``cron`` profile) and default to what every
    schedule of an engine without that profile has: a driver written before them
    builds its records without them.
    """

    name: str
    spec: str
    queue: str
    payload: str
    priority: int
    max_attempts: int | None
    expires_s: int | None
    interval_s: int | None
    next_fire_at: int
    timezone: str = UTC_ZONE
    catch_up: str = "all"
    declared_until: int | None = None
    """Contract 1.2's periodic profile: the lease of a declared schedule (§5.11);
    ``None`` for a schedule made by ``store.schedule``, which never lapses."""

    def to_schedule(self) -> Schedule:
        return Schedule(
            name=self.name,
            spec=self.spec,
            queue=self.queue,
            payload=decode_payload(self.payload),
            opts=ScheduleOpts.stored(
                self.priority, self.max_attempts, self.expires_s, self.timezone, self.catch_up
            ),
            interval_s=self.interval_s,
            next_fire_at=self.next_fire_at,
            declared_until=self.declared_until,
        )
