"""What the commands print by default: rich tables for a person at a terminal.

Every value that came from the store (queue names, payloads, error texts) is
wrapped in ``Text`` so that rich never reads it as markup.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..errors import InvalidSpec
from ..options import Limits
from ..payload import UndecodablePayload
from ..values import Job, QueueStats, QueueThroughput, Schedule
from ..zones import resolve_zone
from . import documents

PREVIEW_CHARS = 60
"""Payloads and errors are cut to this many characters in listings (``job ID`` shows all)."""

NONE = "-"

PIPED_WIDTH = 160
"""Tables written to a pipe or a file are this wide (a terminal's own width otherwise):
rich's 80 columns would cut the jobs listing to nothing."""


def console() -> Console:
    """Where tables go: stdout, at the terminal's width or ``PIPED_WIDTH``."""
    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def instant(epoch_s: int | None) -> str:
    """``1764570400`` -> ``2025-12-01 06:26:40Z``: the store's UTC times, readable."""
    if epoch_s is None:
        return NONE
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def zoned_instant(epoch_s: int, timezone: str) -> str:
    """``1774854000`` in ``Europe/Berlin`` -> ``2026-03-30 09:00:00 +0200``: the time on
    the zone's clocks, with the offset (its name when this process lacks the zone)."""
    try:
        zone = resolve_zone(timezone)
    except InvalidSpec:
        return f"({timezone})"
    return datetime.fromtimestamp(epoch_s, zone).strftime("%Y-%m-%d %H:%M:%S %z")


def age(seconds: int | None) -> str:
    """``200`` -> ``3m 20s``; the two largest units are enough to act on."""
    if seconds is None:
        return NONE
    parts: list[str] = []
    rest = seconds
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    parts.append(f"{rest}s")
    return " ".join(parts[:2])


def payload_text(payload: object) -> str:
    if isinstance(payload, UndecodablePayload):
        return f"<undecodable: {payload.reason}>"
    return json.dumps(payload)


def preview(text: str | None, limit: int = PREVIEW_CHARS) -> Text:
    if text is None:
        return Text(NONE)
    one_line = " ".join(text.split())
    return Text(one_line if len(one_line) <= limit else one_line[: limit - 1] + "…")


def limits_text(limits: Limits | None) -> str:
    """``3``, ``10/60s``, ``2/key``, ``5/60s/key`` or ``3, 10/60s, 2/key``: a queue's
    limits, blank without any."""
    if limits is None:
        return ""
    parts = [] if limits.concurrency is None else [str(limits.concurrency)]
    if limits.rate is not None:
        parts.append(f"{limits.rate}/{limits.per}s")
    if limits.concurrency_per_key is not None:
        parts.append(f"{limits.concurrency_per_key}/key")
    if limits.rate_per_key is not None:
        parts.append(f"{limits.rate_per_key}/{limits.per}s/key")
    return ", ".join(parts)


def stats_table(
    stats: Sequence[QueueStats],
    now: int,
    throughput: Mapping[str, QueueThroughput] | None = None,
) -> Table:
    table = Table(title="queues", caption=f"at {instant(now)}", caption_justify="left")
    table.add_column("queue", overflow="fold", min_width=12)
    headings = (
        "ready",
        "scheduled",
        "waiting",
        "processing",
        "lapsed",
        "dead",
        "completed",
        "oldest ready",
    )
    for heading in headings:
        table.add_column(heading, justify="right")
    table.add_column("paused")
    table.add_column("limit", justify="right")
    if throughput is not None:  # the workers profile's acked counts (contract 1.2 §19.6)
        table.add_column("acked 1m", justify="right")
        table.add_column("acked 1h", justify="right")
    for s in stats:
        acked = (
            ()
            if throughput is None
            else (
                str(documents.acked_last_minute(throughput.get(s.queue))),
                str(documents.acked_last_hour(throughput.get(s.queue))),
            )
        )
        table.add_row(
            Text(s.queue),
            str(s.ready),
            str(s.scheduled),
            str(s.waiting),
            str(s.processing),
            str(s.lapsed),
            str(s.dead),
            str(s.completed),
            age(s.oldest_ready_age_s),
            "PAUSED" if s.paused else "",
            limits_text(
                None
                if s.concurrency_limit is None
                and s.rate_limit is None
                and s.concurrency_per_key is None
                and s.rate_per_key is None
                else Limits(
                    s.concurrency_limit,
                    rate=s.rate_limit,
                    per=s.rate_per_s,
                    concurrency_per_key=s.concurrency_per_key,
                    rate_per_key=s.rate_per_key,
                )
            ),
            *acked,
        )
    return table


def jobs_table(queue: str, jobs: Sequence[Job], next_after: int | None) -> Table:
    more = f"more: --after {next_after}" if next_after is not None else "end of the queue"
    table = Table(title=Text(f"jobs of {queue}"), caption=more, caption_justify="left")
    # The short columns keep their width; the free texts give way (cut with an ellipsis).
    table.add_column("id", justify="right", no_wrap=True, min_width=4)
    table.add_column("state", no_wrap=True, min_width=10)
    table.add_column("attempts", justify="right", no_wrap=True, min_width=8)
    table.add_column("priority", justify="right", no_wrap=True, min_width=8)
    table.add_column("run_at / died_at / completed_at", no_wrap=True, min_width=20)
    for heading in ("worker", "last error", "payload"):
        table.add_column(heading, overflow="ellipsis", no_wrap=True, min_width=4)
    for job in jobs:
        table.add_row(
            str(job.id),
            job.state.value,
            f"{job.attempts}/{job.max_attempts}",
            str(job.priority),
            instant(_when(job)),
            preview(job.worker_id),
            preview(job.last_error or (job.errors[-1].error if job.errors else None)),
            preview(payload_text(job.payload)),
        )
    return table


def _when(job: Job) -> int:
    """The instant a jobs listing shows: when a dead job died, a completed one
    completed, else when it is (or was) due."""
    if job.died_at is not None:
        return job.died_at
    return job.completed_at if job.completed_at is not None else job.run_at


def job_view(job: Job) -> RenderableType:
    fields = Table(title=Text(f"job {job.id}"), show_header=False)
    fields.add_column("field", style="bold")
    fields.add_column("value", overflow="fold")
    rows: list[tuple[str, str | None]] = [
        ("queue", job.queue),
        ("state", job.state.value),
        ("payload", payload_text(job.payload)),
        ("priority", str(job.priority)),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("snoozes", str(job.snoozes)),
        ("created_at", instant(job.created_at)),
        ("run_at", instant(job.run_at)),
        ("claimed_at", instant(job.claimed_at)),
        ("worker_id", job.worker_id),
        ("expires_at", instant(job.expires_at)),
        ("visibility_timeout_s", str(job.visibility_timeout_s)),
        ("backoff_base_s", str(job.backoff_base_s)),
        ("dead_letter_retention_s", _optional(job.dead_letter_retention_s)),
        ("died_at", instant(job.died_at)),
        ("last_error", job.last_error),
        ("redriven_from", _optional(job.redriven_from)),
        ("unique_key", job.unique_key),
        ("limit_key", job.limit_key),
        ("metadata", None if job.metadata is None else payload_text(job.metadata)),
        ("completed_retention_s", _optional(job.completed_retention_s)),
        ("completed_at", instant(job.completed_at)),
        ("result", None if job.result is None else payload_text(job.result)),
    ]
    for name, value in rows:
        fields.add_row(name, Text(value if value is not None else NONE))
    if not job.errors:
        return Group(fields, Text("no error history"))
    errors = Table(title="error history (newest last)")
    errors.add_column("attempt", justify="right")
    errors.add_column("at")
    errors.add_column("error", overflow="fold")
    for entry in job.errors:
        errors.add_row(str(entry.attempt), instant(entry.at), Text(entry.error))
    return Group(fields, errors)


def dead_jobs_table(title: str, jobs: Sequence[Job], new_ids: dict[int, int]) -> Table:
    """The dead jobs a redrive takes (or would take), with the new ids once it ran."""
    table = Table(title=Text(title))
    table.add_column("dead id", justify="right", no_wrap=True, min_width=7)
    table.add_column("new id", justify="right", no_wrap=True, min_width=6)
    table.add_column("attempts", justify="right", no_wrap=True, min_width=8)
    table.add_column("died_at", no_wrap=True, min_width=20)
    table.add_column("last error", overflow="ellipsis", no_wrap=True, min_width=10)
    for job in jobs:
        new = new_ids.get(job.id)
        table.add_row(
            str(job.id),
            str(new) if new is not None else NONE,
            f"{job.attempts}/{job.max_attempts}",
            instant(job.died_at),
            preview(job.last_error),
        )
    return table


def schedules_table(schedules: Sequence[Schedule]) -> Table:
    table = Table(title="schedules")
    table.add_column("name", overflow="fold")
    table.add_column("spec", no_wrap=True)
    table.add_column("zone", no_wrap=True)
    table.add_column("catch-up", no_wrap=True)
    table.add_column("next fire (zone)", no_wrap=True, min_width=25)
    table.add_column("next fire (UTC)", no_wrap=True, min_width=20)
    table.add_column("queue", overflow="fold")
    table.add_column("declared until (UTC)", no_wrap=True)
    table.add_column("payload", overflow="ellipsis", no_wrap=True, min_width=6)
    for s in schedules:
        table.add_row(
            Text(s.name),
            Text(s.spec),
            Text(s.timezone),
            s.catch_up,
            zoned_instant(s.next_fire_at, s.timezone),
            instant(s.next_fire_at),
            Text(s.queue),
            instant(s.declared_until),
            preview(payload_text(s.payload)),
        )
    return table


def _optional(value: int | None) -> str | None:
    return None if value is None else str(value)
