"""What the benchmarks that time two sides side by side share: a side's timing (wall
clock and this process's CPU) and the turns the two sides take, chunk by chunk, so a
burst of load on the shared machine lands on both alike."""

from __future__ import annotations

import time
from collections.abc import Callable

Timing = tuple[float, float]
"""Seconds of a timed side: wall clock, then this process's CPU."""


def start_timing() -> Timing:
    return time.perf_counter(), time.process_time()


def timing_since(started: Timing) -> Timing:
    return time.perf_counter() - started[0], time.process_time() - started[1]


def add_timings(total: Timing, more: Timing) -> Timing:
    return total[0] + more[0], total[1] + more[1]


def alternating(
    jobs: int, chunk: int, number: int, run: Callable[[bool, int, int], Timing]
) -> tuple[Timing, Timing]:
    """One round: ``run(keyed, start, end)`` over chunks of ``chunk`` items, the two
    sides taking turns chunk by chunk (which goes first flips each chunk), so a burst
    of load on the shared machine lands on both; the total of each side."""
    totals = {False: (0.0, 0.0), True: (0.0, 0.0)}
    for count, start in enumerate(range(0, jobs, chunk)):
        end = min(start + chunk, jobs)
        for keyed in (False, True) if (count + number) % 2 == 0 else (True, False):
            totals[keyed] = add_timings(totals[keyed], run(keyed, start, end))
    return totals[False], totals[True]
