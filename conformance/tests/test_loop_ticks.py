"""ASYNC-LOOP-NEVER-BLOCKED's measure: a loop's gaps, less what stalled the whole process."""

from __future__ import annotations

import asyncio
import time

import pytest

from alkstore_conformance.suite.test_async import WORST_GAP_S, _less_stalls, _stalls, tick_gaps


def test_a_call_that_blocks_the_loop_shows_as_one_long_gap() -> None:
    async def blocking() -> None:
        await asyncio.sleep(0.01)  # the ticker starts
        time.sleep(WORST_GAP_S * 4)  # a sync call on the loop's thread
        await asyncio.sleep(0.01)

    gaps = asyncio.run(tick_gaps(blocking()))
    assert max(gaps) >= WORST_GAP_S


def test_a_call_that_awaits_leaves_the_loop_ticking() -> None:
    gaps = asyncio.run(tick_gaps(asyncio.sleep(WORST_GAP_S * 1.5)))
    assert len(gaps) > 10
    assert max(gaps) < WORST_GAP_S


def test_the_ticks_off_the_loop_that_are_far_apart_are_the_stalls() -> None:
    assert _stalls([0.0, 0.001, 0.002, 0.300, 0.301]) == [(0.002, 0.300)]


def test_a_loop_gap_inside_a_stall_of_the_process_is_not_the_loops() -> None:
    assert _less_stalls(0.01, 0.29, [(0.002, 0.300)]) == 0.0


def test_only_the_part_of_a_loop_gap_outside_the_stalls_counts() -> None:
    stalls = [(0.0, 0.1), (0.2, 0.25)]
    assert _less_stalls(0.05, 0.4, stalls) == pytest.approx(0.35 - 0.05 - 0.05)
