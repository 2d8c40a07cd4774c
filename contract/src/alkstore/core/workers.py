"""The worker registry (contract 1.2 §19, the workers profile).

Every rule is here: what a registration may hold, the lease (``WORKER_LEASE_S``
from the last registration or heartbeat), that a heartbeat renews only a worker
whose lease has not lapsed, and that a lapsed worker is not listed. The engine
stores the rows and runs the statements the params describe.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..constants import (
    MAX_FINISHED_COUNT,
    MAX_HOST_CHARS,
    MAX_SECONDS,
    MAX_WORKER_QUEUES,
    THROUGHPUT_BUCKET_S,
    THROUGHPUT_WINDOW_S,
    WORKER_LEASE_S,
)
from ..errors import InvalidOptions
from ..names import validate_identifier, validate_name
from ..options import check_type
from ..params import (
    ThroughputAdd,
    ThroughputSince,
    WorkerRef,
    WorkerRegister,
    WorkerRenew,
    WorkersAt,
)
from ..values import QueueThroughput, WorkerInfo
from .context import StoreContext

MAX_PID = 2**31 - 1
"""The largest process id a worker registers (a signed 32-bit integer, as every OS's)."""


def _host(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidOptions(f"host must be a str, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_HOST_CHARS:
        raise InvalidOptions(f"host must be 1..{MAX_HOST_CHARS} characters, got {len(value)}")
    if "\x00" in value:
        raise InvalidOptions("host must not contain NUL")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidOptions("host contains a lone surrogate (not valid UTF-8)") from exc
    return value


def _whole(value: object, field: str, top: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptions(f"{field} must be an int, got {type(value).__name__}")
    if not 0 <= value <= top:
        raise InvalidOptions(f"{field} must be within 0..{top}, got {value}")
    return value


def _queues(value: object) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise InvalidOptions(
            f"queues must be a list or tuple of queue names, got {type(value).__name__}"
        )
    if len(value) > MAX_WORKER_QUEUES:
        raise InvalidOptions(f"queues must name at most {MAX_WORKER_QUEUES}, got {len(value)}")
    names = tuple(validate_name(name, "queue name") for name in value)
    if len(set(names)) != len(names):
        raise InvalidOptions("queues must name each queue once")
    return names


def checked_finished(finished: object) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """A heartbeat's ``finished`` counts as queue names and counts, by name, zeros
    left out (``InvalidOptions``, ``InvalidName``, ``ReservedName``)."""
    if finished is None:
        return (), ()
    if not isinstance(finished, Mapping):
        raise InvalidOptions(
            f"finished must be a mapping of queue names to counts, got {type(finished).__name__}"
        )
    if len(finished) > MAX_WORKER_QUEUES:
        raise InvalidOptions(
            f"finished must name at most {MAX_WORKER_QUEUES} queues, got {len(finished)}"
        )
    counted: dict[str, int] = {}
    for name, count in finished.items():
        counted[validate_name(name, "queue name")] = _whole(
            count, f"finished[{name!r}]", MAX_FINISHED_COUNT
        )
    kept = sorted((name, count) for name, count in counted.items() if count)
    return tuple(name for name, _ in kept), tuple(count for _, count in kept)


def minute_of(now: int) -> int:
    """The start of the minute (``THROUGHPUT_BUCKET_S``) that holds ``now``."""
    return now - now % THROUGHPUT_BUCKET_S


BUCKETS = THROUGHPUT_WINDOW_S // THROUGHPUT_BUCKET_S
"""Counts per queue in ``store.throughput()``: the minutes of the last hour."""


def checked_info(info: object) -> WorkerInfo:
    """``info`` with every field checked (``InvalidName``, ``InvalidOptions``), the
    queues a tuple; ``last_seen`` and ``lease_until`` are the store's to set."""
    check_type(info, WorkerInfo, "info")
    assert isinstance(info, WorkerInfo)
    return WorkerInfo(
        id=validate_identifier(info.id, "worker id"),
        host=_host(info.host),
        pid=_whole(info.pid, "pid", MAX_PID),
        queues=_queues(info.queues),
        started_at=_whole(info.started_at, "started_at", MAX_SECONDS),
    )


class CoreWorkers:
    """``register_worker``, ``heartbeat_worker``, ``deregister_worker`` and ``workers``
    of one store."""

    def __init__(self, context: StoreContext) -> None:
        self._context = context

    def register(self, info: WorkerInfo) -> WorkerInfo:
        checked = checked_info(info)
        ctx = self._context
        driver = ctx.workers()
        now = ctx.now()
        params = WorkerRegister(
            checked.id,
            checked.host,
            checked.pid,
            checked.queues,
            checked.started_at,
            now,
            now + WORKER_LEASE_S,
        )
        ctx.write(lambda c: driver.worker_register(c, params))
        return WorkerInfo(
            checked.id,
            checked.host,
            checked.pid,
            checked.queues,
            checked.started_at,
            last_seen=now,
            lease_until=now + WORKER_LEASE_S,
        )

    def heartbeat(self, worker_id: str, finished: Mapping[str, int] | None = None) -> bool:
        validate_identifier(worker_id, "worker id")
        queues, counts = checked_finished(finished)
        ctx = self._context
        driver = ctx.workers()
        now = ctx.now()
        params = WorkerRenew(worker_id, now, now + WORKER_LEASE_S)
        if not queues:
            return ctx.write(lambda c: driver.worker_renew(c, params))
        minute = minute_of(now)
        added = ThroughputAdd(minute, queues, counts, minute - THROUGHPUT_WINDOW_S)

        def beat(c: object) -> bool:
            # The counts are the jobs it finished: added whether or not its lease held.
            renewed = driver.worker_renew(c, params)
            driver.throughput_add(c, added)
            return renewed

        return ctx.write(beat)

    def throughput(self) -> list[QueueThroughput]:
        ctx = self._context
        driver = ctx.workers()
        current = minute_of(ctx.now())
        first = current - (BUCKETS - 1) * THROUGHPUT_BUCKET_S
        since = ThroughputSince(first - THROUGHPUT_BUCKET_S)
        rows = ctx.read(lambda c: driver.throughput_read(c, since))
        slots: dict[str, list[int]] = {}
        for queue, minute, count in rows:
            index = (minute - first) // THROUGHPUT_BUCKET_S
            if 0 <= index < BUCKETS:  # a row of a later minute (a clock behind): not yet
                slots.setdefault(queue, [0] * BUCKETS)[index] += count
        return [
            QueueThroughput(queue, sum(per_minute), tuple(per_minute))
            for queue, per_minute in sorted(slots.items(), key=lambda kv: kv[0].encode("utf-8"))
        ]

    def deregister(self, worker_id: str) -> bool:
        validate_identifier(worker_id, "worker id")
        ctx = self._context
        driver = ctx.workers()
        params = WorkerRef(worker_id)
        return ctx.write(lambda c: driver.worker_deregister(c, params))

    def listing(self) -> list[WorkerInfo]:
        ctx = self._context
        driver = ctx.workers()
        params = WorkersAt(ctx.now())
        return ctx.read(lambda c: driver.workers_list(c, params))
