"""The JSON documents ``--json`` prints: one per command, plain dicts (stdlib only).

Their shapes are a published interface (``docs/operations.md``): add keys, never
rename or drop one. Times are whole epoch seconds of the store's clock, as the
values carry them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..options import Limits
from ..payload import UndecodablePayload
from ..values import Job, QueueStats, QueueThroughput, Schedule

SCHEMA_VERSION = 1
"""Bumped only if a document ever has to change incompatibly."""


def stats_entry(
    stats: QueueStats, throughput: Mapping[str, QueueThroughput] | None = None
) -> dict[str, Any]:
    """One queue's entry; its acked counts (contract 1.2 §19.6) are ``null`` when the
    engine has no workers profile (``throughput`` is ``None``)."""
    counted = None if throughput is None else throughput.get(stats.queue)
    return {
        "queue": stats.queue,
        "ready": stats.ready,
        "scheduled": stats.scheduled,
        "processing": stats.processing,
        "lapsed": stats.lapsed,
        "dead": stats.dead,
        "oldest_ready_age_s": stats.oldest_ready_age_s,
        "paused": stats.paused,
        "concurrency_limit": stats.concurrency_limit,
        "rate_limit": stats.rate_limit,
        "rate_per_s": stats.rate_per_s,
        "completed": stats.completed,
        "concurrency_per_key": stats.concurrency_per_key,
        "rate_per_key": stats.rate_per_key,
        "waiting": stats.waiting,
        "acked_last_minute": None if throughput is None else acked_last_minute(counted),
        "acked_last_hour": None if throughput is None else acked_last_hour(counted),
    }


def acked_last_minute(counted: QueueThroughput | None) -> int:
    """The jobs of a queue workers acked in the current minute (none: ``0``)."""
    return counted.per_minute[-1] if counted is not None and counted.per_minute else 0


def acked_last_hour(counted: QueueThroughput | None) -> int:
    """The jobs of a queue workers acked in the last hour (none: ``0``)."""
    return counted.total if counted is not None else 0


def job_entry(job: Job) -> dict[str, Any]:
    payload: Any = job.payload
    payload_error = None
    if isinstance(job.payload, UndecodablePayload):
        # A row written around alkstore may not decode: say why instead of failing.
        payload = None
        payload_error = job.payload.reason
    return {
        "id": job.id,
        "queue": job.queue,
        "state": job.state.value,
        "payload": payload,
        "payload_error": payload_error,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "snoozes": job.snoozes,
        "created_at": job.created_at,
        "run_at": job.run_at,
        "claimed_at": job.claimed_at,
        "expires_at": job.expires_at,
        "worker_id": job.worker_id,
        "visibility_timeout_s": job.visibility_timeout_s,
        "backoff_base_s": job.backoff_base_s,
        "dead_letter_retention_s": job.dead_letter_retention_s,
        "last_error": job.last_error,
        "died_at": job.died_at,
        "errors": [{"attempt": e.attempt, "at": e.at, "error": e.error} for e in job.errors],
        "redriven_from": job.redriven_from,
        "unique_key": job.unique_key,
        "limit_key": job.limit_key,
        "metadata": job.metadata,
        "completed_retention_s": job.completed_retention_s,
        "completed_at": job.completed_at,
        "result": None if isinstance(job.result, UndecodablePayload) else job.result,
    }


def schedule_entry(schedule: Schedule) -> dict[str, Any]:
    return {
        "name": schedule.name,
        "spec": schedule.spec,
        "queue": schedule.queue,
        "payload": schedule.payload,
        "priority": schedule.opts.priority,
        "max_attempts": schedule.opts.max_attempts,
        "expires_s": schedule.opts.expires,
        "interval_s": schedule.interval_s,
        "next_fire_at": schedule.next_fire_at,
        "timezone": schedule.timezone,
        "catch_up": schedule.catch_up,
        "declared_until": schedule.declared_until,
    }


def stats_document(
    stats: Sequence[QueueStats], throughput: Mapping[str, QueueThroughput] | None = None
) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "queues": [stats_entry(s, throughput) for s in stats]}


def jobs_document(
    queue: str, state: str | None, jobs: Sequence[Job], next_after: int | None
) -> dict[str, Any]:
    return {
        "version": SCHEMA_VERSION,
        "queue": queue,
        "state": state,
        "jobs": [job_entry(j) for j in jobs],
        "next_after": next_after,
    }


def job_document(job: Job) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "job": job_entry(job)}


def redrive_document(
    queue: str,
    dry_run: bool,
    moves: Sequence[tuple[int | None, int | None]],
    skipped: Sequence[int],
) -> dict[str, Any]:
    return {
        "version": SCHEMA_VERSION,
        "queue": queue,
        "dry_run": dry_run,
        "redriven": [{"from": old, "to": new} for old, new in moves],
        "skipped": list(skipped),
    }


def cancel_document(queue: str, cancelled: Sequence[int], missed: Sequence[int]) -> dict[str, Any]:
    return {
        "version": SCHEMA_VERSION,
        "queue": queue,
        "cancelled": list(cancelled),
        "skipped": list(missed),
    }


def purge_document(queue: str, purged: int) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "queue": queue, "purged": purged}


def limits_document(queue: str, limits: Limits | None, changed: bool | None) -> dict[str, Any]:
    """A queue's limits (``changed``: ``None`` when only shown)."""
    document: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        "queue": queue,
        "concurrency": None if limits is None else limits.concurrency,
        "rate": None if limits is None else limits.rate,
        "per_s": None if limits is None else limits.per,
        "concurrency_per_key": None if limits is None else limits.concurrency_per_key,
        "rate_per_key": None if limits is None else limits.rate_per_key,
    }
    if changed is not None:
        document["changed"] = changed
    return document


def pause_document(queue: str, paused: bool, changed: bool) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "queue": queue, "paused": paused, "changed": changed}


def schedules_document(schedules: Sequence[Schedule]) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "schedules": [schedule_entry(s) for s in schedules]}


def enqueue_document(queue: str, job_id: int, duplicate: bool) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "queue": queue, "id": int(job_id), "duplicate": duplicate}


def dumps(document: dict[str, Any]) -> str:
    """One line of JSON: ``--watch`` prints one document per line (JSON Lines)."""
    # ASCII escapes: an error text may hold characters the terminal cannot encode.
    return json.dumps(document, separators=(",", ":"))
