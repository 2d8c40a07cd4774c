"""Scheduler rows: one tick firing 1,000 cron schedules, and one next-fire computation.

The tick row opens a second store on the provisioned one with a ``FakeClock`` (a
real clock would wait for the boundaries), registers the schedules untimed, sets
the clock just past their next boundary -- every schedule has exactly one due --
and times ``tick_schedules``: what a leader pays in the minute a thousand
schedules come due together. Half the specs follow the wall clock and half run on
elapsed time, in six zones whose offsets are whole quarter hours, so all of them
fire at the same quarter hour. The next-fire row times the contract's cadence
alone (``alkstore.parse_spec(spec, zone).next_after(t)``), which is what the core
computes once per fire: it touches no engine, so it runs on one.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

from bench_report import Measurement
from bench_workloads import Bench, timed

import alkstore
from alkstore import ScheduleOpts
from alkstore.testing import FakeClock

SCHEDULES = 1_000
QUICK_SCHEDULES = 100
TICK_ROUNDS = 3
"""Ticks timed, a quarter hour apart: each fires every schedule once."""
ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
)
SPECS = ("*/15 * * * *", "0,15,30,45 0-23 * * *")
"""Elapsed time and the wall clock, both firing at every quarter hour."""
QUARTER_S = 15 * 60
START = int(datetime(2026, 1, 12, 9, 0, 30, tzinfo=UTC).timestamp())

NEXT_FIRE_SPECS = (
    "*/15 * * * *",
    "0 9 * * MON-FRI",
    "30 2 * * *",
    "0 0 1 * *",
    "5-55/10 */3 * * *",
    "0 0 13 * FRI",
    "@hourly",
)
NEXT_FIRE_SAMPLES = 2_000
QUICK_NEXT_FIRE_SAMPLES = 200


def tick_cron_schedules(bench: Bench) -> Measurement:
    """C1: ``tick_schedules`` with 1,000 cron schedules due, one boundary each."""
    count = QUICK_SCHEDULES if bench.quick else SCHEDULES
    clock = FakeClock(START)
    spec = bench.spec
    store = alkstore.load_engine(bench.engine).open(spec.url, clock=clock, **spec.opts)
    try:
        for n in range(count):
            opts = ScheduleOpts(timezone=ZONES[n % len(ZONES)])
            store.schedule(f"cron-{n}", SPECS[n % len(SPECS)], "cron-fires", {"n": n}, opts)
        boundary = min(s.next_fire_at for s in store.schedules())
        fired = 0
        seconds = 0.0
        latencies: list[float] = []
        for round_no in range(TICK_ROUNDS):
            clock.set(boundary + round_no * QUARTER_S + 10)
            result, took = timed(bench, "cron_tick", lambda: store.tick_schedules("bench"))
            if result.fired != count or result.skipped:
                raise RuntimeError(f"a tick fired {result}, not {count} boundaries")
            fired += result.fired
            seconds += took
            latencies.append(took * 1000)
    finally:
        store.close()
    m = Measurement(jobs=fired, seconds=seconds)
    m.notes.append(
        f"{count:,} schedules in {len(ZONES)} zones; ticks of "
        + ", ".join(f"{ms:,.0f}" for ms in latencies)
        + " ms"
    )
    return m


def cron_next_fire(bench: Bench) -> Measurement:
    """C2: one cron next-fire computation (the contract's cadence, no engine)."""
    samples = QUICK_NEXT_FIRE_SAMPLES if bench.quick else NEXT_FIRE_SAMPLES
    rng = random.Random(7)
    cases = [
        (
            alkstore.parse_spec(rng.choice(NEXT_FIRE_SPECS), rng.choice(ZONES)),
            START + rng.randrange(366 * 86_400),
        )
        for _ in range(samples)
    ]
    latencies = []
    for cadence, after in cases:
        started = time.perf_counter()
        cadence.next_after(after)
        latencies.append((time.perf_counter() - started) * 1000)
    m = Measurement(jobs=len(latencies), seconds=sum(latencies) / 1000, latencies_ms=latencies)
    m.notes.append(f"{len(NEXT_FIRE_SPECS)} specs x {len(ZONES)} zones, random instants")
    return m
