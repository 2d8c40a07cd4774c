"""What the core hands a driver's statement: one frozen value per statement.

Every ``Driver`` method (and every optional profile's) that takes more than one
value besides the transaction handle ``c`` takes ``(c, params)``, ``params``
one of these, named after its statement (``insert_jobs`` takes ``JobStamps``
and the payloads). A value has each argument by name, so an engine passes them
to its SQL by name (``bind_by_name``), and a statement that gains an argument
gains a field, not a position in every engine's signature.

Every timestamp is whole UTC epoch seconds from the store's clock, every value
already resolved and validated by the core: a driver never checks them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields
from operator import attrgetter
from typing import Any

from .options import JobStamps
from .values import JobState

SEAM = 2
"""The driver seam these values make: 2 (statement methods take ``(c, params)``).
Seam 1 (alkstore 0.1) took each value as a positional argument."""

# -- queues -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """``claim``: up to ``limit`` claimable jobs of ``queue`` for ``worker_id``."""

    queue: str
    worker_id: str
    now: int
    limit: int


@dataclass(frozen=True, slots=True)
class Sweep:
    """``bury_exhausted``, ``bury_expired``, ``purge_dead``: one sweep step of ``queue``."""

    queue: str
    now: int


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """``ack``, ``release_claim``: the claim ``(job_id, attempt)``, valid at ``now``."""

    job_id: int
    attempt: int
    now: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """``ack_batch``: the jobs ``job_ids`` of ``queue`` claimed by ``worker_id``."""

    queue: str
    job_ids: Sequence[int]
    worker_id: str
    now: int


@dataclass(frozen=True, slots=True)
class AckClaims:
    """``ack_claims``: the claims ``(job_ids[i], attempts[i])``, each valid at ``now``
    (contract 1.2 §3.10: ``tx.ack_all``'s one statement)."""

    job_ids: Sequence[int]
    attempts: Sequence[int]
    now: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """``heartbeat``: the claim's new ``deadline``."""

    job_id: int
    attempt: int
    now: int
    deadline: int


@dataclass(frozen=True, slots=True)
class Reschedule:
    """``reschedule``: the claim back to pending at ``run_at``, its failure ``error``."""

    job_id: int
    attempt: int
    now: int
    run_at: int
    error: str


@dataclass(frozen=True, slots=True)
class Snooze:
    """``snooze`` (snooze profile): the claim back to pending at ``run_at``, unspent."""

    job_id: int
    attempt: int
    now: int
    run_at: int


@dataclass(frozen=True, slots=True)
class Bury:
    """``bury``: the claim's job dead with ``last_error``; ``error`` for its history."""

    job_id: int
    attempt: int
    now: int
    last_error: str
    error: str | None


@dataclass(frozen=True, slots=True)
class RescheduleClaims:
    """``reschedule_claims``: each claim ``(job_ids[i], attempts[i])`` valid at ``now``
    back to pending at ``run_ats[i]``, its failure ``errors[i]`` (contract 1.2 §3.11:
    ``tx.retry_all``'s one statement)."""

    job_ids: Sequence[int]
    attempts: Sequence[int]
    now: int
    run_ats: Sequence[int]
    errors: Sequence[str]


@dataclass(frozen=True, slots=True)
class BuryClaims:
    """``bury_claims``: each claim ``(job_ids[i], attempts[i])`` valid at ``now`` dead
    with ``last_errors[i]``, ``errors[i]`` (if any) for its history (contract 1.2 §3.11:
    ``tx.fail_all``'s one statement, and ``tx.retry_all``'s at the attempt budget)."""

    job_ids: Sequence[int]
    attempts: Sequence[int]
    now: int
    last_errors: Sequence[str]
    errors: Sequence[str | None]


@dataclass(frozen=True, slots=True)
class Cancel:
    """``cancel``: the live job ``job_id`` of ``queue``, at ``now`` (the dependencies
    profile dead-letters the jobs waiting for it then)."""

    queue: str
    job_id: int
    now: int = 0


@dataclass(frozen=True, slots=True)
class GetJob:
    """``get_job``: the job ``job_id`` (of ``queue`` when given)."""

    job_id: int
    queue: str | None = None


@dataclass(frozen=True, slots=True)
class NextWake:
    """``next_wake_at``: the earliest instant after ``now`` a job of ``queue`` is due."""

    queue: str
    now: int


@dataclass(frozen=True, slots=True)
class InsertAfter:
    """``insert_after_jobs`` (dependencies profile): one row per payload, stamped
    ``stamps``, waiting for the jobs ``after`` (distinct ids, of any queue of the
    store) that have not completed; ``stamps.created_at`` is "now"."""

    stamps: JobStamps
    payloads: Sequence[str]
    after: Sequence[int]
    finished: bool = False
    """``after_finished``: the rows wait for the jobs ``after`` to finish whatever their
    outcome (a dead or cancelled one counts as finished, and a dead one is no refusal)."""


@dataclass(frozen=True, slots=True)
class RedriveDependents:
    """``redrive_dependents`` (dependencies profile): the jobs ``job_ids`` were just
    made, in this transaction, from the dead jobs they name in ``redriven_from``."""

    job_ids: Sequence[int]
    now: int


@dataclass(frozen=True, slots=True)
class InsertUnique:
    """``insert_unique_jobs`` (unique profile): one pending row per payload, stamped
    ``stamps``, holding its key of ``keys`` (distinct, one per payload) unless another
    job of the queue holds it. The hold lasts until ``hold_until`` (``None``: as long
    as the job lives), and through the job's death when ``hold_dead``; ``stamps.created_at``
    is "now"."""

    stamps: JobStamps
    payloads: Sequence[str]
    keys: Sequence[str]
    hold_until: int | None
    hold_dead: bool


@dataclass(frozen=True, slots=True)
class Complete:
    """``complete`` (results profile): the ack of the claim ``(job_id, attempt)`` at
    ``now`` that keeps the job as completed with ``result`` (JSON text, or ``None``)."""

    job_id: int
    attempt: int
    now: int
    result: str | None


# -- locks --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockLease:
    """``lock_acquire``, ``lock_renew``: the lock ``name`` for ``owner`` until ``expires_at``."""

    name: str
    owner: str
    now: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class LockRelease:
    """``lock_release``: the lock ``name`` given back by ``owner``."""

    name: str
    owner: str
    now: int


@dataclass(frozen=True, slots=True)
class LockHolder:
    """``lock_holder``: who holds the lock ``name`` at ``now``."""

    name: str
    now: int


# -- scheduler, streams, pub/sub ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScheduleAdvance:
    """``schedule_advance``: move ``name``'s ``next_fire_at`` from ``expected`` to
    ``new_fire_at``."""

    name: str
    expected: int
    new_fire_at: int


@dataclass(frozen=True, slots=True)
class ScheduleRenew:
    """``schedules_renew``: extend the lease of the declared schedules ``names`` to
    ``declared_until``."""

    names: Sequence[str]
    declared_until: int


@dataclass(frozen=True, slots=True)
class ScheduleLapse:
    """``schedules_lapse``: remove every declared schedule whose lease is at or before
    ``now``."""

    now: int


@dataclass(frozen=True, slots=True)
class StreamAppend:
    """``stream_append``: ``payloads`` (JSON text) onto ``stream``."""

    stream: str
    payloads: Sequence[str]
    now: int


@dataclass(frozen=True, slots=True)
class StreamRead:
    """``stream_read``: up to ``limit`` events of ``stream`` with offsets after ``after``."""

    stream: str
    after: int
    limit: int


@dataclass(frozen=True, slots=True)
class StreamCommit:
    """``stream_commit``: ``consumer``'s offset of ``stream`` set to ``offset``."""

    stream: str
    consumer: str
    offset: int


@dataclass(frozen=True, slots=True)
class StreamOffset:
    """``stream_offset``: ``consumer``'s committed offset of ``stream``."""

    stream: str
    consumer: str


@dataclass(frozen=True, slots=True)
class StreamTrim:
    """``stream_trim``: the events of ``stream`` before the offset ``before``."""

    stream: str
    before: int


@dataclass(frozen=True, slots=True)
class Publish:
    """``publish``: ``payload`` (JSON text) on ``channel``."""

    channel: str
    payload: str
    now: int


# -- operations (the ops profile) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueStatsAt:
    """``queue_stats``: the stats of ``queues`` (every queue when ``None``) at ``now``."""

    queues: Sequence[str] | None
    now: int


@dataclass(frozen=True, slots=True)
class ListJobs:
    """``list_jobs``: a keyset page of ``queue``'s jobs (only ``state`` when given);
    newest first below ``before_id`` when it is given."""

    queue: str
    state: JobState | None
    after_id: int
    limit: int
    before_id: int | None = None


@dataclass(frozen=True, slots=True)
class Redrive:
    """``redrive``: dead jobs of ``queue`` (``ids``, or the oldest ``limit``) made new."""

    queue: str
    ids: Sequence[int] | None
    limit: int
    now: int


@dataclass(frozen=True, slots=True)
class PurgeDeadJobs:
    """``purge_dead_jobs``: dead jobs of ``queue`` (``ids``, died before ``died_before``)."""

    queue: str
    ids: Sequence[int] | None
    died_before: int | None
    now: int


@dataclass(frozen=True, slots=True)
class SetPaused:
    """``set_paused``: pause (``paused``) or resume ``queue``."""

    queue: str
    paused: bool


@dataclass(frozen=True, slots=True)
class SetLimits:
    """``set_limits``: store ``queue``'s limits, or remove them (every field ``None``):
    ``concurrency``, ``rate`` claims per ``per_s`` seconds (given together), and
    ``concurrency_per_key`` and ``rate_per_key`` per ``per_s`` (the key_limits profile)."""

    queue: str
    concurrency: int | None
    rate: int | None = None
    per_s: int | None = None
    concurrency_per_key: int | None = None
    rate_per_key: int | None = None


@dataclass(frozen=True, slots=True)
class WorkerRegister:
    """``worker_register``: store the worker ``worker_id`` (replacing a row of that id)
    seen at ``now`` and listed until ``lease_until``; ``queues`` in the worker's order."""

    worker_id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    started_at: int
    now: int
    lease_until: int


@dataclass(frozen=True, slots=True)
class WorkerRenew:
    """``worker_renew``: the heartbeat of ``worker_id`` at ``now``, listed until
    ``lease_until``, if its lease has not lapsed by ``now``."""

    worker_id: str
    now: int
    lease_until: int


@dataclass(frozen=True, slots=True)
class WorkerRef:
    """``worker_deregister``: the worker ``worker_id``."""

    worker_id: str


@dataclass(frozen=True, slots=True)
class WorkersAt:
    """``workers_list``: the workers whose lease is after ``now``; and the lapsed ones
    to remove (``worker_register``'s own clean-up)."""

    now: int


@dataclass(frozen=True, slots=True)
class ThroughputAdd:
    """``throughput_add``: add ``counts[i]`` to the count of ``queues[i]`` in the minute
    starting at ``minute`` (creating it at 0), then delete every count whose minute is
    at or before ``prune_through``."""

    minute: int
    queues: tuple[str, ...]
    counts: tuple[int, ...]
    prune_through: int


@dataclass(frozen=True, slots=True)
class ThroughputSince:
    """``throughput_read``: every count whose minute is after ``after``."""

    after: int


PARAMS: tuple[type, ...] = (
    Claim,
    Sweep,
    ClaimRef,
    AckBatch,
    AckClaims,
    Heartbeat,
    Reschedule,
    Bury,
    RescheduleClaims,
    BuryClaims,
    Cancel,
    GetJob,
    NextWake,
    LockLease,
    LockRelease,
    LockHolder,
    ScheduleAdvance,
    ScheduleRenew,
    ScheduleLapse,
    StreamAppend,
    StreamRead,
    StreamCommit,
    StreamOffset,
    StreamTrim,
    Publish,
    QueueStatsAt,
    ListJobs,
    Redrive,
    PurgeDeadJobs,
    SetPaused,
    Snooze,
    InsertUnique,
    SetLimits,
    Complete,
    WorkerRegister,
    WorkerRenew,
    WorkerRef,
    WorkersAt,
    ThroughputAdd,
    ThroughputSince,
)
"""Every statement's params class."""


# A frozen dataclass's __init__ sets each field through object.__setattr__; a
# claim and its ack build two of these per job, so each class gets an __init__
# that calls its slots' setters directly instead (as the row decoders build a
# Job): the same frozen value for about half the cost. No class has a
# __post_init__ to skip (checked).
def _slot_init(cls: type) -> Callable[..., None]:
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} must have no __post_init__")
    namespace: dict[str, Any] = {}
    arguments = []
    for field in fields(cls):
        namespace[f"set_{field.name}"] = getattr(cls, field.name).__set__
        if field.default is MISSING:
            arguments.append(field.name)
        else:
            namespace[f"default_{field.name}"] = field.default
            arguments.append(f"{field.name}=default_{field.name}")
    body = [f"    set_{f.name}(self, {f.name})" for f in fields(cls)]
    source = "\n".join([f"def __init__(self, {', '.join(arguments)}):", *body])
    exec(compile(source, f"<alkstore.params.{cls.__name__}>", "exec"), namespace)
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


for _params in PARAMS:
    type.__setattr__(_params, "__init__", _slot_init(_params))


def param_fields(cls: type) -> tuple[str, ...]:
    """The field names of a params class, in order."""
    return tuple(f.name for f in fields(cls))


# ``:name`` not preceded by a colon or a word character (so ``x::text`` is no name).
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def bind_by_name(
    sql: str, cls: type, marker: str = "?", *, extra: Sequence[str] = ()
) -> tuple[str, Callable[[Any], tuple[Any, ...]]]:
    """``sql`` written with ``:name`` placeholders naming ``cls``'s fields, as the same
    statement with positional placeholders, and a function from a ``cls`` value to
    its parameters in their order. Done once per statement, at import: the SQL
    reads by name, and a call costs one ``attrgetter`` (no mapping built per call).

    ``marker`` is the driver's placeholder: ``"?"`` or ``"%s"`` stand for one value
    each, in the order the names occur; a numbered one such as ``"?{}"`` (SQLite's
    ``?NNN``) numbers each name once, the fields first, then ``extra``: names the
    caller computes and appends to the fields' values, in ``extra`` order (a
    numbered marker is needed for them). ``ValueError`` names a placeholder that is
    neither a field of ``cls`` nor in ``extra``."""
    names = _NAMED.findall(sql)
    known = param_fields(cls)
    unknown = sorted(set(names) - set(known) - set(extra))
    if unknown:
        raise ValueError(f"{cls.__name__} has no fields {unknown} (its fields: {known})")
    numbered = "{}" in marker
    if extra and not numbered:
        raise ValueError("extra values need a numbered marker such as '?{}'")
    if numbered:
        used = list(dict.fromkeys(n for n in names if n not in extra))
        order = {name: i for i, name in enumerate([*used, *extra], start=1)}
        positional = _NAMED.sub(lambda m: marker.format(order[m.group(1)]), sql)
    else:
        used = names
        positional = _NAMED.sub(lambda _: marker, sql)
    if not used:
        return positional, _no_values
    getter = attrgetter(*used)
    if len(used) == 1:
        return positional, lambda params: (getter(params),)
    return positional, getter


def _no_values(params: Any) -> tuple[Any, ...]:
    return ()
