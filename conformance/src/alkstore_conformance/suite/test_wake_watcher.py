"""A wake watcher hears what a waiting claim hears, without claiming (§2.15).

The watcher is made on a store of its own (``open_store``): what it hears of the
test store's commits comes through the engine's wakes, never through the test
store's in-process hub. Its lateness is bounded as a claim's is (§2.14,
``helpers.wakes``): each sample's enqueue lands at a random phase of the re-poll
interval, and the median lateness stays well under that interval.
"""

from __future__ import annotations

import statistics
import time

import pytest

from alkstore import Store
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profiles import in_thread
from alkstore_conformance.helpers.trials import Trial
from alkstore_conformance.helpers.wakes import (
    JOIN_S,
    PROMPT_S,
    REPOLL_S,
    SAMPLES,
    WAIT_PHASE_S,
    median_ms,
)

IDLE_WAIT_S = REPOLL_S / 2
"""How long a wait on an idle store must last: half the re-poll interval."""
SETTLE_WAITS = 3
"""Waits an idle store's watcher may end with a wake (an engine's wake as it starts
watching, the echo of the provisioning's commits)."""
IDLE_WAITS = 2
"""Waits after those that must each run their timeout out."""
WAKE_WAIT_S = 5 * REPOLL_S
"""The timeout of a wait that must end with a wake: a safety net, never a measure (a
wake that late fails the median bound many times over)."""


@pytest.mark.property("WAKE-WATCHER-PROMPT")
def test_a_wake_watcher_returns_promptly_when_another_store_enqueues_into_its_queue(
    store: Store, open_store: StoreFactory, trial: Trial
) -> None:
    rng = trial.random()
    queue = store.queue(unique_name("watched"))
    lateness: list[float] = []
    with open_store() as elsewhere, elsewhere.wake_watcher([queue.name]) as watcher:

        def wait() -> tuple[bool, float]:
            woke = watcher.wait(WAKE_WAIT_S)
            return woke, time.time()

        for _ in range(SAMPLES):
            waiting = in_thread(wait, "alkstore-kit-watcher")
            time.sleep(rng.uniform(*WAIT_PHASE_S))
            queue.enqueue({"watched": True})
            committed_at = time.time()
            woke, returned = waiting.join(JOIN_S)
            assert woke is True, "the watcher's wait timed out: the enqueue never woke it"
            lateness.append(returned - committed_at)
    assert statistics.median(lateness) < PROMPT_S, median_ms(lateness)


@pytest.mark.property("WAKE-WATCHER-IDLE")
def test_a_wake_watcher_on_an_idle_store_settles_into_waiting_its_timeout_out(
    store: Store,
) -> None:
    queue = store.queue(unique_name("idle"))
    outcomes: list[tuple[bool, float]] = []
    with store.wake_watcher([queue.name]) as watcher:
        for _ in range(SETTLE_WAITS + IDLE_WAITS):
            started = time.monotonic()
            woke = watcher.wait(IDLE_WAIT_S)
            outcomes.append((woke, time.monotonic() - started))
    settled = [woke for woke, _ in outcomes[SETTLE_WAITS:]]
    assert settled == [False] * IDLE_WAITS, f"an idle store kept waking it: {outcomes}"
    short = [waited for woke, waited in outcomes if not woke and waited < IDLE_WAIT_S * 0.9]
    assert short == [], f"a wait returned False before its timeout: {outcomes}"
