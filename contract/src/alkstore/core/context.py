"""``StoreContext``: what every front end of one store shares, in one small object.

The queue, lock, stream, scheduler, subscription and transaction front ends
each hold the context of the store that made them, never the store itself:
they need the driver, the clock, the wake hub and the rule that a closed
store refuses every call, and nothing else of ``CoreStore``.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ..clock import Clock
from ..constants import MAX_PAYLOAD_BYTES
from ..driver import (
    DependenciesDriver,
    Driver,
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
    async_ack_hint,
    one_commit_hint,
)
from ..engine import Capabilities
from ..errors import ProfileUnavailable, StoreClosed
from ..payload import encode_payload
from ..timeconv import whole_now
from .wake import WakeHub

T = TypeVar("T")


class StoreContext:
    """The driver, clock, wake hub, randomness and payload bound of one open store."""

    __slots__ = (
        "_close_lock",
        "_closed",
        "capabilities",
        "clock",
        "commit_acks_without_waiting",
        "driver",
        "engine_name",
        "hub",
        "max_payload_bytes",
        "prefer_one_commit",
        "repoll_s",
        "rng",
    )

    def __init__(
        self,
        driver: Driver[Any],
        clock: Clock,
        *,
        repoll_s: float,
        capabilities: Capabilities,
        engine_name: str,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        self.driver = driver
        self.prefer_one_commit = one_commit_hint(driver)
        """The driver's optional ``OneCommitHint``, or a no-op."""
        self.commit_acks_without_waiting = async_ack_hint(driver, capabilities.async_acks)
        """The driver's ``AsyncAcksDriver`` (the async_acks profile, §12.11), or a no-op."""
        self.clock = clock
        self.repoll_s = repoll_s
        self.capabilities = capabilities
        self.engine_name = engine_name
        self.max_payload_bytes = max_payload_bytes
        """The store's payload size bound (engine option ``max_payload_bytes``)."""
        self.hub = WakeHub()
        self.rng = random.Random()
        """The core's one random source: retry jitter."""
        self._closed = False
        self._close_lock = threading.Lock()

    # -- open or closed -----------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def mark_closed(self) -> bool:
        """Close the context; ``True`` only for the call that closed it."""
        with self._close_lock:
            if self._closed:
                return False
            self._closed = True
            return True

    # -- payloads -------------------------------------------------------------
    def encode(self, payload: object) -> str:
        """``payload``'s stored text under this store's bounds, or ``PayloadError``:
        every surface that writes a payload encodes it here, before it writes."""
        return encode_payload(payload, self.max_payload_bytes)

    # -- time and units of work ----------------------------------------------
    def now(self) -> int:
        """The store's "now" in whole seconds (and a check that the store is open)."""
        self.check_open()
        return whole_now(self.clock.now())

    def write(self, work: Callable[[Any], T], wait_s: float | None = None) -> T:
        """Run ``work`` in a driver write unit; ``wait_s`` bounds waiting for the engine."""
        self.check_open()
        if wait_s is None:
            return self.driver.write(work)
        return self.driver.write(work, wait_s=wait_s)

    def read(self, work: Callable[[Any], T], wait_s: float | None = None) -> T:
        """Run ``work`` on a consistent read; ``wait_s`` as for ``write``."""
        self.check_open()
        if wait_s is None:
            return self.driver.read(work)
        return self.driver.read(work, wait_s=wait_s)

    # -- optional profiles (capabilities are data, not method probes) -----------
    def scheduler(self) -> SchedulerDriver[Any]:
        driver: SchedulerDriver[Any] = self._profile("scheduler")
        return driver

    def cron(self) -> SchedulerDriver[Any]:
        """The scheduler driver of an engine whose schedule rows hold a cron spec, a
        zone and a catch-up policy (contract 1.2's ``cron`` profile)."""
        self.scheduler()
        driver: SchedulerDriver[Any] = self._profile("cron")
        return driver

    def periodic(self) -> PeriodicDriver[Any]:
        """The driver of an engine whose schedule rows carry a declaration's lease
        (contract 1.2's ``periodic`` profile, which needs ``scheduler`` and ``cron``:
        an engine declaring it without them is refused it as one without it)."""
        self.cron()
        driver: PeriodicDriver[Any] = self._profile("periodic")
        return driver

    def workers(self) -> WorkersDriver[Any]:
        """The driver of an engine with the worker registry (contract 1.2 §19)."""
        driver: WorkersDriver[Any] = self._profile("workers")
        return driver

    def streams(self) -> StreamDriver[Any]:
        driver: StreamDriver[Any] = self._profile("streams")
        return driver

    def pubsub(self) -> PubSubDriver[Any]:
        driver: PubSubDriver[Any] = self._profile("pubsub")
        return driver

    def ops(self) -> OpsDriver[Any]:
        driver: OpsDriver[Any] = self._profile("ops")
        return driver

    def snooze(self) -> SnoozeDriver[Any]:
        driver: SnoozeDriver[Any] = self._profile("snooze")
        return driver

    def unique(self) -> UniqueDriver[Any]:
        driver: UniqueDriver[Any] = self._profile("unique")
        return driver

    def limits(self) -> LimitsDriver[Any]:
        driver: LimitsDriver[Any] = self._profile("limits")
        return driver

    def key_limits(self) -> LimitsDriver[Any]:
        """The limits driver, once the engine declares the key_limits profile too."""
        self._profile("key_limits")
        return self.limits()

    def results(self) -> ResultsDriver[Any]:
        driver: ResultsDriver[Any] = self._profile("results")
        return driver

    def dependencies(self) -> DependenciesDriver[Any]:
        driver: DependenciesDriver[Any] = self._profile("dependencies")
        return driver

    def require(self, profile: str) -> None:
        """Refuse a call that needs ``profile`` unless the engine declares it
        (``ProfileUnavailable``; ``StoreClosed`` on a closed store)."""
        self._profile(profile)

    def _profile(self, profile: str) -> Any:
        self.check_open()
        if not getattr(self.capabilities, profile):
            raise ProfileUnavailable(self.engine_name, profile)
        return self.driver
