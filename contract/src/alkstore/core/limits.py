"""Queue limits in the statistics (contract 1.2 §16, the limits profile).

The engine stores each queue's limit and honours it in its claim statement
(``alkstore.driver.LimitsDriver``); here the core only shows it: ``QueueStats``
carries the limit, and ``store.stats()`` lists a limited queue even when it holds
nothing, as it lists a paused one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..options import Limits
from ..values import QueueStats
from .context import StoreContext


def with_limits(
    ctx: StoreContext, c: Any, stats: list[QueueStats], *, every: bool = False
) -> list[QueueStats]:
    """``stats`` with each queue's concurrency limit, read in the same unit ``c``; with
    ``every``, also a zero row for each limited queue missing from ``stats`` (in name
    order). Unchanged on an engine without the limits profile."""
    if not ctx.capabilities.limits:
        return stats
    driver = ctx.limits()
    one = not every and len(stats) == 1
    limits = driver.queue_limits(c, stats[0].queue if one else None)
    if not limits:
        return stats
    shown = [_shown(s, limits.get(s.queue)) for s in stats]
    if every:
        listed = {s.queue for s in stats}
        shown += [_shown(_empty(queue), n) for queue, n in limits.items() if queue not in listed]
        shown.sort(key=lambda s: s.queue)
    return shown


def _shown(stats: QueueStats, limits: Limits | None) -> QueueStats:
    if limits is None:
        return stats
    return replace(
        stats,
        concurrency_limit=limits.concurrency,
        rate_limit=limits.rate,
        rate_per_s=limits.per,
        concurrency_per_key=limits.concurrency_per_key,
        rate_per_key=limits.rate_per_key,
    )


def _empty(queue: str) -> QueueStats:
    return QueueStats(
        queue=queue,
        ready=0,
        scheduled=0,
        processing=0,
        lapsed=0,
        dead=0,
        oldest_ready_age_s=None,
        paused=False,
    )
