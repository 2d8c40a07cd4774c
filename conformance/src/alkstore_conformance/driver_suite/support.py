"""What every driver-suite test uses: the engine's factory, row builders, a sink.

Timestamps are whole ints around ``T0`` passed as ``now``; no clock is read.
The driver is typed as ``SeamDriver`` (the queue seam plus every optional
profile) so one annotation serves every suite; only the suites an engine's
capabilities select ever call a profile's methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from alkstore.driver import (
    DependenciesDriver,
    Driver,
    JobStamps,
    LimitsDriver,
    OpsDriver,
    PeriodicDriver,
    PubSubDriver,
    ResultsDriver,
    SchedulerDriver,
    SnoozeDriver,
    StreamDriver,
    UniqueDriver,
    WorkersDriver,
)
from alkstore.params import Claim, GetJob
from alkstore.rows import ScheduleRecord
from alkstore.values import Job

T0 = 1_700_000_000
"""The suite's "now" unless a test moves it."""

VISIBILITY_S = 30
DELIVERY_LIMIT_S = 30.0
"""How long a sink may take to hear of a commit: a liveness bound, never a timing check."""


class SeamDriver(
    Driver[Any],
    SchedulerDriver[Any],
    StreamDriver[Any],
    PubSubDriver[Any],
    OpsDriver[Any],
    SnoozeDriver[Any],
    UniqueDriver[Any],
    PeriodicDriver[Any],
    LimitsDriver[Any],
    ResultsDriver[Any],
    WorkersDriver[Any],
    DependenciesDriver[Any],
    Protocol,
):
    """A driver with every optional profile (what the suites are written against)."""


DriverFactory = Callable[[], Driver[Any]]
"""``driver_factory()``: another opened driver on the test's one fresh store."""


@contextmanager
def opened_drivers(open_driver: Callable[[], Driver[Any]]) -> Iterator[DriverFactory]:
    """Wrap an engine's "open a driver on this store" as the suite's ``driver_factory``:
    every driver it opened is closed when the block ends (newest first)."""
    opened: list[Driver[Any]] = []

    def factory() -> Driver[Any]:
        driver = open_driver()
        opened.append(driver)
        return driver

    try:
        yield factory
    finally:
        for driver in reversed(opened):
            driver.close()


# -- rows ---------------------------------------------------------------------------------

DEFAULT_STAMPS = JobStamps(
    queue="q",
    priority=0,
    created_at=T0,
    run_at=T0,
    expires_at=None,
    max_attempts=3,
    visibility_timeout_s=VISIBILITY_S,
    backoff_base_s=5,
    dead_letter_retention_s=None,
)


def stamps(**fields: Any) -> JobStamps:
    """``DEFAULT_STAMPS`` with ``fields`` replaced."""
    return replace(DEFAULT_STAMPS, **fields)


def insert(driver: SeamDriver, c: Any, job_stamps: JobStamps, payloads: Sequence[str]) -> list[int]:
    """The one call of ``insert_jobs`` (so a change of its signature touches one line)."""
    return driver.insert_jobs(c, job_stamps, payloads)


def enqueue(driver: SeamDriver, *payloads: str, **fields: Any) -> list[int]:
    """Commit one pending row per payload (``"1"`` when none is given)."""
    job_stamps = stamps(**fields)
    return driver.write(lambda c: insert(driver, c, job_stamps, payloads or ("1",)))


def enqueue_one(driver: SeamDriver, payload: str = "1", **fields: Any) -> int:
    (job_id,) = enqueue(driver, payload, **fields)
    return job_id


def claim(
    driver: SeamDriver, now: int = T0, limit: int = 100, queue: str = "q", worker: str = "w"
) -> list[Job]:
    return driver.write(lambda c: driver.claim(c, Claim(queue, worker, now, limit)))


def claim_one(driver: SeamDriver, now: int = T0, queue: str = "q", worker: str = "w") -> Job:
    """Claim exactly one row (the test set up exactly one claimable row)."""
    (job,) = claim(driver, now, 1, queue, worker)
    return job


def get_job(driver: SeamDriver, job_id: int, queue: str | None = None) -> Job | None:
    return driver.read(lambda c: driver.get_job(c, GetJob(job_id, queue)))


def ids(jobs: Sequence[Job]) -> list[int]:
    return [job.id for job in jobs]


def schedule_record(**fields: Any) -> ScheduleRecord:
    values: dict[str, Any] = {
        "name": "s",
        "spec": "@every 10s",
        "queue": "q",
        "payload": '{"v": 1}',
        "priority": 0,
        "max_attempts": None,
        "expires_s": None,
        "interval_s": 10,
        "next_fire_at": T0 + 10,
    }
    values.update(fields)
    return ScheduleRecord(**values)


# -- wakes --------------------------------------------------------------------------------


class RecordingSink:
    """A ``WakeSink`` that remembers what it was told and lets a test wait for it."""

    def __init__(self) -> None:
        self.topics: list[str] = []
        self.everyone = 0
        self.messages: list[tuple[str, str]] = []
        self._changed = threading.Condition()

    def notify(self, topic: str) -> None:
        with self._changed:
            self.topics.append(topic)
            self._changed.notify_all()

    def notify_all(self) -> None:
        with self._changed:
            self.everyone += 1
            self._changed.notify_all()

    def has_waiters(self) -> bool:
        return True

    def deliver(self, channel: str, payload: str) -> None:
        with self._changed:
            self.messages.append((channel, payload))
            self._changed.notify_all()

    def woken_for(self, topic: str) -> bool:
        """Told of ``topic``, by name or by a wake-everyone."""
        with self._changed:
            return topic in self.topics or self.everyone > 0

    def wait_for(self, condition: Callable[[RecordingSink], bool]) -> bool:
        """Whether ``condition(self)`` came to hold within ``DELIVERY_LIMIT_S``."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(self), DELIVERY_LIMIT_S)

    def clear(self) -> None:
        with self._changed:
            self.topics.clear()
            self.everyone = 0
            self.messages.clear()


def watching(driver: SeamDriver) -> RecordingSink:
    """A fresh sink the driver reports to."""
    sink = RecordingSink()
    driver.start_watching(sink)
    return sink
