"""Queue, enqueue and schedule options (contract §2, §5; decision 010 §3a).

Options validate and normalize on construction, so a bad value is refused
with ``InvalidOptions`` naming the field before anything is written. The
constructors accept durations as ``int | float`` seconds or a ``timedelta`` and
instants as epoch seconds or an aware ``datetime``; the fields hold what they
resolve to: whole seconds (rounded up), plain ``int``s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Final

from .constants import (
    CATCH_UP_POLICIES,
    MAX_CONCURRENCY_LIMIT,
    MAX_DEPENDENCIES,
    MAX_LIMIT_KEY_CHARS,
    MAX_METADATA_BYTES,
    MAX_METADATA_ENTRIES,
    MAX_RATE_LIMIT,
    MAX_RATE_WINDOW_S,
    MAX_UNIQUE_KEY_CHARS,
    PRIORITY_RANGE,
)
from .errors import InvalidOptions
from .timeconv import Duration, Instant, duration_seconds, instant_seconds
from .zones import UTC_ZONE, check_timezone


def _init(obj: object, **fields: object) -> None:
    # The one way to set the fields of a frozen dataclass from its own __init__.
    for name, value in fields.items():
        object.__setattr__(obj, name, value)


def _check_max_attempts(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"{field} must be an int, got {type(value).__name__}")
    if not 1 <= value <= 2**31 - 1:
        raise InvalidOptions(f"{field} must be between 1 and {2**31 - 1}, got {value}")
    return value


def _check_priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"priority must be an int, got {type(value).__name__}")
    low, high = PRIORITY_RANGE
    if not low <= value <= high:
        raise InvalidOptions(f"priority must be within {low}..{high}, got {value}")
    return value


def _optional_duration(value: Duration | None, field: str, *, minimum: int = 0) -> int | None:
    return None if value is None else duration_seconds(value, field, minimum=minimum)


def _optional_max_attempts(value: object) -> int | None:
    return None if value is None else _check_max_attempts(value, "max_attempts")


@dataclass(frozen=True, slots=True, init=False)
class QueueOpts:
    """Per-queue defaults, stamped on each job at enqueue (never read live).

    Pass to ``store.queue(name, opts)``. Durations are ``int | float`` seconds or a
    ``timedelta``, rounded up and stored as ``int`` (contract §0, §2); after
    construction every field holds whole seconds.

    Attributes:
        visibility_timeout_s: how long a claim lasts without a heartbeat; at least 1 s.
            Default 300.
        max_attempts: how many claims a job gets (1..2**31-1); a job overrides it with
            ``EnqueueOpts.max_attempts``. Default 3.
        backoff_base_s: the base ``b`` of the retry curve (``alkstore.retry_delay``).
            Default 5.
        dead_letter_retention_s: how long a dead job is kept before ``sweep_expired``
            deletes it; ``None`` (the default) keeps it forever.
        completed_retention_s: how long an acked job is kept as ``completed``, with its
            result, before ``sweep_expired`` deletes it (contract 1.2 §17, the results
            profile); ``None`` or ``0`` (the default): an ack deletes the job.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range; the message
            names the field.
    """

    visibility_timeout_s: int
    max_attempts: int
    backoff_base_s: int
    dead_letter_retention_s: int | None
    completed_retention_s: int | None

    def __init__(
        self,
        visibility_timeout_s: Duration = 300,
        max_attempts: int = 3,
        backoff_base_s: Duration = 5,
        dead_letter_retention_s: Duration | None = None,
        completed_retention_s: Duration | None = None,
    ) -> None:
        _init(
            self,
            visibility_timeout_s=duration_seconds(
                visibility_timeout_s, "visibility_timeout_s", minimum=1
            ),
            max_attempts=_check_max_attempts(max_attempts, "max_attempts"),
            backoff_base_s=duration_seconds(backoff_base_s, "backoff_base_s"),
            dead_letter_retention_s=_optional_duration(
                dead_letter_retention_s, "dead_letter_retention_s"
            ),
            # 0 keeps nothing: the same as None, so a stamp is either off or a period.
            completed_retention_s=_optional_duration(completed_retention_s, "completed_retention_s")
            or None,
        )


UNIQUE_STATES: Final = ("pending", "processing", "dead")
"""The states a unique job may hold its key in, in the order ``Unique.states`` lists them."""

DEFAULT_UNIQUE_STATES: Final = ("pending", "processing")
"""What ``Unique`` holds a key in by default, and what it always holds it in: a retry
moves a job from processing back to pending, so a key freed at the claim would let
the retried job collide with a newer one."""


def _check_after(value: object, field: str) -> tuple[int, ...] | None:
    """``EnqueueOpts.after`` (or ``after_finished``, named ``field``): distinct job ids
    (ints, not bools), at most ``MAX_DEPENDENCIES``; an empty one is no dependencies
    (``None``)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidOptions(
            f"{field} must be a list or tuple of job ids (or None), got {type(value).__name__}"
        )
    ids = list(value)
    for job_id in ids:
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise InvalidOptions(f"{field} must hold job ids (ints), got {job_id!r}")
        if job_id < 1:
            raise InvalidOptions(f"{field}: {job_id} is no job id (ids are positive)")
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise InvalidOptions(f"{field} names job {twice} twice")
    if len(ids) > MAX_DEPENDENCIES:
        raise InvalidOptions(
            f"{field} names {len(ids)} jobs; the limit is MAX_DEPENDENCIES ({MAX_DEPENDENCIES})"
        )
    return tuple(int(i) for i in ids) or None


def _check_unique_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidOptions(f"unique key must be a str (or None), got {type(value).__name__}")
    if not value:
        raise InvalidOptions("unique key must not be empty")
    if len(value) > MAX_UNIQUE_KEY_CHARS:
        raise InvalidOptions(
            f"unique key is {len(value)} characters long; the limit is {MAX_UNIQUE_KEY_CHARS}"
        )
    if "\x00" in value:
        raise InvalidOptions("unique key must not contain NUL (PostgreSQL text cannot hold it)")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidOptions("unique key contains a lone surrogate (not valid UTF-8)") from exc
    return value


def _check_limit_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidOptions(f"limit_key must be a str (or None), got {type(value).__name__}")
    if not value:
        raise InvalidOptions("limit_key must not be empty (a job without a key: None)")
    if len(value) > MAX_LIMIT_KEY_CHARS:
        raise InvalidOptions(
            f"limit_key is {len(value)} characters long; the limit is {MAX_LIMIT_KEY_CHARS}"
        )
    if "\x00" in value:
        raise InvalidOptions("limit_key must not contain NUL (PostgreSQL text cannot hold it)")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidOptions("limit_key contains a lone surrogate (not valid UTF-8)") from exc
    return value


def encode_metadata(metadata: Mapping[str, str]) -> str:
    """A job's metadata as the JSON text engines store: an object, keys sorted, no
    spaces, UTF-8 as is (contract 1.2 §20)."""
    return json.dumps(dict(metadata), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _check_metadata_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidOptions(f"metadata {what} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidOptions(f"metadata {what} must not contain NUL (PostgreSQL cannot hold it)")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidOptions(
                f"metadata {what} {value!r} contains a lone surrogate (not valid UTF-8)"
            ) from exc
    return value


def _check_metadata(value: object) -> Mapping[str, str] | None:
    """``EnqueueOpts.metadata`` checked (contract 1.2 §20): a mapping of at most
    ``MAX_METADATA_ENTRIES`` non-empty ``str`` keys to ``str`` values, at most
    ``MAX_METADATA_BYTES`` as stored; an empty one is none (``None``)."""
    if not isinstance(value, Mapping):
        raise InvalidOptions(
            f"metadata must be a mapping of str to str (or None), got {type(value).__name__}"
        )
    if len(value) > MAX_METADATA_ENTRIES:
        raise InvalidOptions(
            f"metadata has {len(value)} entries; the limit is {MAX_METADATA_ENTRIES}"
        )
    if not value:
        return None
    checked: dict[str, str] = {}
    for key in sorted(value, key=lambda k: (not isinstance(k, str), str(k))):
        _check_metadata_text(key, "keys")
        if not key:
            raise InvalidOptions("metadata keys must not be empty")
        checked[key] = _check_metadata_text(value[key], f"value of {key!r}")
    size = len(encode_metadata(checked).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidOptions(
            f"metadata is {size} bytes as stored (JSON, UTF-8); the limit is {MAX_METADATA_BYTES}"
        )
    return MappingProxyType(checked)


def _check_unique_states(value: object) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidOptions(
            f"unique states must be a tuple, list or set of state names, got {value!r}"
        )
    given = list(value)
    unknown = [s for s in given if not isinstance(s, str) or s not in UNIQUE_STATES]
    if unknown:
        raise InvalidOptions(
            f"unique states must be among {', '.join(UNIQUE_STATES)}, got {unknown[0]!r}"
        )
    missing = [s for s in DEFAULT_UNIQUE_STATES if s not in given]
    if missing:
        raise InvalidOptions(
            f"unique states must include {' and '.join(DEFAULT_UNIQUE_STATES)} (a retry moves "
            f"a job from processing back to pending); {missing[0]!r} is missing"
        )
    return tuple(s for s in UNIQUE_STATES if s in given)


@dataclass(frozen=True, slots=True, init=False)
class Unique:
    """Only one job of a queue holds a key at a time (contract §15, the unique profile).

    Pass as ``EnqueueOpts(unique=Unique(...))``, or ``EnqueueOpts(unique="key")`` for
    ``Unique("key")``. An enqueue whose key another job of the queue holds writes
    nothing and returns that job's id with ``.duplicate`` set (``alkstore.Enqueued``).

    Attributes:
        key: the key (1 to ``MAX_UNIQUE_KEY_CHARS`` characters, no NUL), or ``None``
            for the payload's own: ``"payload:sha256:"`` and the SHA-256 of its
            canonical JSON (keys sorted, no whitespace), so equal payloads collide.
        period: how long a job holds its key at most, from its enqueue: after
            ``created_at + period`` an enqueue of the same key makes a new job even
            while this one is still pending. ``None`` (the default): as long as the
            job is in ``states``. At least 1 s.
        states: the states a job holds its key in, among ``"pending"``,
            ``"processing"`` and ``"dead"``; ``pending`` and ``processing`` always
            (the default is just those two). With ``"dead"`` a dead job keeps its key
            until it is purged or redriven.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range; the message
            names the field.
    """

    key: str | None
    period: int | None
    states: tuple[str, ...]

    def __init__(
        self,
        key: str | None = None,
        period: Duration | None = None,
        states: Iterable[str] = DEFAULT_UNIQUE_STATES,
    ) -> None:
        put = object.__setattr__  # field by field: a key per enqueue makes one per call
        put(self, "key", _check_unique_key(key))
        put(
            self,
            "period",
            None if period is None else duration_seconds(period, "unique period", minimum=1),
        )
        # The default, as is: one check fewer on the path of a key per enqueue.
        put(
            self,
            "states",
            states if states is DEFAULT_UNIQUE_STATES else _check_unique_states(states),
        )

    @property
    def holds_dead(self) -> bool:
        """Whether a dead job keeps holding its key (``"dead"`` in ``states``)."""
        return "dead" in self.states


@dataclass(frozen=True, slots=True, init=False)
class Limits:
    """A queue's fleet-wide limits (contract 1.2 §16, the limits profile).

    Set with ``q.set_limits(Limits(concurrency=N))``, ``Limits(rate=R, per=W)`` or
    both; stored by the engine and honoured by every process at once. Remove them
    with ``q.clear_limits()``.

    Attributes:
        concurrency: at most this many jobs of the queue are processing (claimed,
            deadline not passed) at any instant, across every process: an int
            within 1..``MAX_CONCURRENCY_LIMIT``, or ``None``.
        rate: at most this many claims of the queue start in any window of ``per``
            seconds (a sliding window: the claims started at instants ``t`` with
            ``now - per < t <= now``, §16.6): an int within 1..``MAX_RATE_LIMIT``,
            or ``None``; given with ``per``.
        per: the window of ``rate``: a duration (§0.2) of 1 s to
            ``MAX_RATE_WINDOW_S``, in whole seconds; given with ``rate``.
        concurrency_per_key: at most this many jobs of each limit key
            (``EnqueueOpts.limit_key``; the jobs without one share a key) are
            processing at any instant, and claims serve the keys in turn (§16.9,
            §16.10, the key_limits profile): an int within
            1..``MAX_CONCURRENCY_LIMIT``, or ``None``.
        rate_per_key: at most this many claims of each limit key start in any
            window of ``per`` seconds (§16.11, the key_limits profile): an int within
            1..``MAX_RATE_LIMIT``, or ``None``; given with ``per``, which it shares
            with ``rate``.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range, ``rate`` and
            ``per`` are not given together, or none of a concurrency, a rate and a
            concurrency per key is; the message names the field.
    """

    concurrency: int | None
    rate: int | None
    per: int | None
    concurrency_per_key: int | None
    rate_per_key: int | None

    def __init__(
        self,
        concurrency: int | None = None,
        *,
        rate: int | None = None,
        per: Duration | None = None,
        concurrency_per_key: int | None = None,
        rate_per_key: int | None = None,
    ) -> None:
        if concurrency is not None:
            concurrency = _check_count(concurrency, "concurrency", MAX_CONCURRENCY_LIMIT)
        if concurrency_per_key is not None:
            concurrency_per_key = _check_count(
                concurrency_per_key, "concurrency_per_key", MAX_CONCURRENCY_LIMIT
            )
        if rate is not None:
            rate = _check_count(rate, "rate", MAX_RATE_LIMIT)
        if rate_per_key is not None:
            rate_per_key = _check_count(rate_per_key, "rate_per_key", MAX_RATE_LIMIT)
        window = None if per is None else duration_seconds(per, "per", minimum=1)
        if window is not None and window > MAX_RATE_WINDOW_S:
            raise InvalidOptions(f"per must be at most {MAX_RATE_WINDOW_S} s, got {window} s")
        if (rate is None and rate_per_key is None) != (window is None):
            raise InvalidOptions(
                "rate and per go together: at most rate claims per window (rate_per_key "
                "shares the window)"
            )
        if all(v is None for v in (concurrency, rate, concurrency_per_key, rate_per_key)):
            raise InvalidOptions(
                "Limits needs a concurrency, a rate, a concurrency_per_key or a "
                "rate_per_key (a queue without a limit: clear_limits())"
            )
        _init(
            self,
            concurrency=concurrency,
            rate=rate,
            per=window,
            concurrency_per_key=concurrency_per_key,
            rate_per_key=rate_per_key,
        )


def _check_count(value: object, field: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"{field} must be an int, got {type(value).__name__}")
    if not 1 <= value <= most:
        raise InvalidOptions(
            f"{field} must be within 1..{most}, got {value} (a queue without a limit: "
            "clear_limits())"
        )
    return int(value)


def _check_unique(value: object) -> Unique | None:
    if value is None or isinstance(value, Unique):
        return value
    if isinstance(value, str):
        return Unique(value)
    raise InvalidOptions(
        f"unique must be a Unique, a str (a key) or None, got {type(value).__name__}"
    )


@dataclass(frozen=True, slots=True, init=False)
class EnqueueOpts:
    """Per-job options. ``delay`` wins over ``run_at``; ``expires`` is relative to enqueue.

    Pass to ``enqueue``, ``enqueue_many`` or ``Transaction.enqueue`` (contract §2).
    With neither ``delay`` nor ``run_at`` the job is ready now.

    Attributes:
        delay: seconds (or a ``timedelta``) from now until the job is due.
        priority: a 32-bit int; higher is claimed first. Default 0.
        max_attempts: overrides the queue's ``max_attempts`` for this job.
        expires: seconds (at least 1) after enqueue at which the job expires:
            ``expires_at = now + expires``. An expired job is never claimed.
        run_at: the instant the job is due: epoch seconds or an aware ``datetime``
            (naive ones are refused), rounded up to a whole second.
        unique: a ``Unique`` (or a ``str``, its key): at most one job of the queue
            holds the key (contract §15, the unique profile). ``None`` (the default):
            every enqueue makes a job.
        limit_key: the key a per-key limit counts the job under (a tenant, a
            customer id: 1 to ``MAX_LIMIT_KEY_CHARS`` characters, no NUL; contract 1.2
            §16.9, the key_limits profile). ``None`` (the default): the job shares the
            key of every job without one.
        after: the ids of the jobs (of any queue of the store) this one waits for:
            it is ``waiting`` until each of them has completed, then ``pending``
            (contract 1.2 §18, the dependencies profile). At most
            ``MAX_DEPENDENCIES`` distinct ids; ``None`` or empty: no dependencies.
        after_finished: like ``after``, but the job waits until each of them has
            *finished*, whatever its outcome: completed, dead or cancelled (a fan-in
            callback, §18.6). At most one of ``after`` and ``after_finished``.
        metadata: a small map of ``str`` keys to ``str`` values the job carries for
            its whole life (``Job.metadata``: a trace context, a request id; contract
            1.2 §20, the metadata profile): at most ``MAX_METADATA_ENTRIES`` entries
            and ``MAX_METADATA_BYTES`` as stored. ``None`` or empty: none.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range; the message
            names the field.
    """

    delay: int | None
    priority: int
    max_attempts: int | None
    expires: int | None
    run_at: int | None
    unique: Unique | None
    limit_key: str | None
    after: tuple[int, ...] | None
    after_finished: tuple[int, ...] | None
    metadata: Mapping[str, str] | None

    def __init__(
        self,
        delay: Duration | None = None,
        priority: int = 0,
        max_attempts: int | None = None,
        expires: Duration | None = None,
        run_at: Instant | None = None,
        unique: Unique | str | None = None,
        limit_key: str | None = None,
        after: Iterable[int] | None = None,
        after_finished: Iterable[int] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        # Field by field, defaults unchecked: an enqueue often builds its opts per
        # call (a unique key per job), so they stay cheap to make.
        put = object.__setattr__
        put(self, "delay", None if delay is None else duration_seconds(delay, "delay"))
        put(self, "priority", _check_priority(priority))
        put(self, "max_attempts", _optional_max_attempts(max_attempts))
        put(self, "expires", _optional_duration(expires, "expires", minimum=1))
        put(self, "run_at", None if run_at is None else instant_seconds(run_at, "run_at"))
        put(self, "unique", _check_unique(unique))
        put(self, "limit_key", None if limit_key is None else _check_limit_key(limit_key))
        put(self, "after", None if after is None else _check_after(after, "after"))
        finished = (
            None if after_finished is None else _check_after(after_finished, "after_finished")
        )
        if finished is not None and self.after is not None:
            raise InvalidOptions("give after or after_finished, not both")
        put(self, "after_finished", finished)
        put(self, "metadata", None if metadata is None else _check_metadata(metadata))


@dataclass(frozen=True, slots=True, init=False)
class ScheduleOpts:
    """How a schedule reads its spec and what each of its fires stamps.

    Pass to ``store.schedule`` (contract §5). The fired jobs take the rest of
    their stamps from ``DEFAULT_QUEUE_OPTS``.

    Attributes:
        priority: each fired job's priority (a 32-bit int). Default 0.
        max_attempts: each fired job's claim budget; ``None`` = the queue default.
        expires: seconds (at least 1) after each fire at which its job expires;
            ``None`` = never.
        timezone: the IANA time zone a cron spec is read in, e.g. ``"Europe/Berlin"``
            (§5.7). Default ``"UTC"``. ``@every`` runs on elapsed time and ignores it.
        catch_up: what a tick does with missed boundaries (§5.4): ``"all"`` (the
            default) fires every one, at most ``CATCH_UP_CAP`` per tick; ``"latest"``
            fires only the most recent; ``"none"`` fires only those that came due less
            than ``MISFIRE_GRACE_S`` ago. The others are skipped.

    Raises:
        InvalidOptions: a field is of the wrong type or out of range; the message
            names the field.
        InvalidSpec: ``timezone`` is not a ``str``, is empty, or names no IANA zone
            this process knows; the message names the zone.
    """

    priority: int
    max_attempts: int | None
    expires: int | None
    timezone: str
    catch_up: str

    def __init__(
        self,
        priority: int = 0,
        max_attempts: int | None = None,
        expires: Duration | None = None,
        timezone: str = UTC_ZONE,
        catch_up: str = "all",
    ) -> None:
        _init(
            self,
            priority=_check_priority(priority),
            max_attempts=_optional_max_attempts(max_attempts),
            expires=_optional_duration(expires, "expires", minimum=1),
            timezone=check_timezone(timezone),
            catch_up=_check_catch_up(catch_up),
        )

    def as_enqueue_opts(self) -> EnqueueOpts:
        """The ``EnqueueOpts`` one fire enqueues with: these fields, ready now."""
        return EnqueueOpts(
            priority=self.priority, max_attempts=self.max_attempts, expires=self.expires
        )

    @classmethod
    def stored(
        cls,
        priority: int,
        max_attempts: int | None,
        expires: int | None,
        timezone: str,
        catch_up: str,
    ) -> ScheduleOpts:
        """The opts of a stored schedule, read back: checked like any, except that the
        zone is not looked up, since a process whose time-zone database lacks a zone
        another process stored must still list the schedule."""
        if not isinstance(timezone, str):
            raise InvalidOptions(f"timezone must be a str, got {type(timezone).__name__}")
        opts = cls(priority, max_attempts, expires, catch_up=catch_up)
        object.__setattr__(opts, "timezone", timezone)
        return opts


def _check_catch_up(value: object) -> str:
    if not isinstance(value, str) or value not in CATCH_UP_POLICIES:
        allowed = ", ".join(repr(p) for p in CATCH_UP_POLICIES)
        raise InvalidOptions(f"catch_up must be one of {allowed}, got {value!r}")
    return value


DEFAULT_QUEUE_OPTS = QueueOpts(300, 3, 5, None)
"""What ``store.queue(name)`` stamps without opts: 300 s, 3 attempts, base 5 s, dead jobs
kept forever, acked ones deleted."""
OUTBOX_QUEUE_OPTS = QueueOpts(60, 5, 5, None)
"""What every outbox stamps: 60 s, 5 attempts, base 5 s, dead jobs kept forever, acked
ones deleted (contract §4)."""
DEFAULT_ENQUEUE_OPTS = EnqueueOpts()


def check_type(value: object, cls: type, field: str) -> None:
    """Refuse a ``field`` argument that is not a ``cls`` with ``InvalidOptions``."""
    if not isinstance(value, cls):
        raise InvalidOptions(f"{field} must be a {cls.__name__}, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class JobStamps:
    """Everything an enqueue decides for its jobs but their payloads (contract §2).

    Every job of one enqueue is stamped alike, so the core resolves the stamps
    once and hands the driver ``(stamps, payloads)``; later operations read
    the job's own stamps, never the queue's live options.
    """

    queue: str
    priority: int
    created_at: int
    run_at: int
    expires_at: int | None
    max_attempts: int
    visibility_timeout_s: int
    backoff_base_s: int
    dead_letter_retention_s: int | None
    completed_retention_s: int | None = None
    limit_key: str | None = None
    metadata: str | None = None
    """The job's metadata as JSON text (``encode_metadata``, contract 1.2 §20), or
    ``None`` for none."""


JOB_STAMP_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(JobStamps))
"""The fields of ``JobStamps`` in declaration order: the one place their order is kept."""

stamp_values: Callable[[JobStamps], tuple[Any, ...]] = attrgetter(*JOB_STAMP_FIELDS)
"""``JobStamps`` as a tuple in ``JOB_STAMP_FIELDS`` order (for positional parameters)."""


def resolve_stamps(queue: str, queue_opts: QueueOpts, opts: EnqueueOpts, now: int) -> JobStamps:
    """Apply the resolution rules of contract §2 at enqueue time ``now``: ``delay``
    wins over ``run_at``, ``expires`` counts from now, the job's ``max_attempts``
    over the queue's."""
    if opts.delay is not None:
        run_at = now + opts.delay
    elif opts.run_at is not None:
        run_at = opts.run_at
    else:
        run_at = now
    return JobStamps(
        queue=queue,
        priority=opts.priority,
        created_at=now,
        run_at=run_at,
        expires_at=None if opts.expires is None else now + opts.expires,
        max_attempts=queue_opts.max_attempts if opts.max_attempts is None else opts.max_attempts,
        visibility_timeout_s=queue_opts.visibility_timeout_s,
        backoff_base_s=queue_opts.backoff_base_s,
        dead_letter_retention_s=queue_opts.dead_letter_retention_s,
        completed_retention_s=queue_opts.completed_retention_s,
        limit_key=opts.limit_key,
        metadata=None if opts.metadata is None else encode_metadata(opts.metadata),
    )
