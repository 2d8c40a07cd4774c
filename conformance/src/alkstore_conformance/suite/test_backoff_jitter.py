"""§2: the backoff curve is a *range*, and retries are spread over it.

``retry(error)`` without a delay waits ``d`` drawn uniformly from
``[c/2, c]`` with ``c = min(base * 2**(attempt-1), 3600)``. A delay that is
always the same point of the range (no jitter) makes a fleet of workers that
failed together retry together; a delay past 3600 s breaks the cap. Both are
checked on many jobs retried at the same attempt with the same base, so a
spread is certain whenever the range holds more than one whole second.
"""

from __future__ import annotations

import pytest

from alkstore import BACKOFF_CAP_S, JobState, QueueOpts, Store
from alkstore.backoff import retry_delay_range
from alkstore.testing import FakeClock

JOBS = 16
"""Retried together: with >= 6 possible delays, all alike has odds below 1e-11."""


def _retry_all_at_first_attempt(store: Store, clock: FakeClock, base: int) -> list[int]:
    """Delays the engine gave ``JOBS`` jobs of ``base``, each retried once, no delay given."""
    queue = store.queue(f"jitter-{base}", QueueOpts(backoff_base_s=base, max_attempts=2))
    ids = queue.enqueue_many([{"n": n} for n in range(JOBS)])
    handles = queue.claim_batch("worker", JOBS)
    assert sorted(h.id for h in handles) == sorted(ids)
    now = int(clock.now())
    delays: list[int] = []
    for handle in handles:
        assert handle.attempts == 1
        assert handle.retry("transient") is True
        job = queue.get_job(handle.id)
        assert job is not None
        assert job.state is JobState.PENDING
        delays.append(job.run_at - now)
    return delays


@pytest.mark.property("QUEUE-RETRY-BACKOFF")
@pytest.mark.parametrize("base", [10, 1000])
def test_retries_of_one_attempt_and_base_spread_over_the_curve(
    clocked_store: Store, clock: FakeClock, base: int
) -> None:
    low, high = retry_delay_range(base, 1)
    delays = _retry_all_at_first_attempt(clocked_store, clock, base)
    assert all(low <= d <= high for d in delays), (low, high, delays)
    assert len(set(delays)) > 1, f"no jitter: every retry waited {delays[0]} s"


@pytest.mark.property("QUEUE-RETRY-BACKOFF")
def test_capped_retries_stay_under_the_cap_and_keep_their_jitter(
    clocked_store: Store, clock: FakeClock
) -> None:
    base = 4 * BACKOFF_CAP_S  # the very first retry is already capped
    delays = _retry_all_at_first_attempt(clocked_store, clock, base)
    assert max(delays) <= BACKOFF_CAP_S, f"past the {BACKOFF_CAP_S} s cap: {delays}"
    assert min(delays) >= BACKOFF_CAP_S // 2, delays
    assert len(set(delays)) > 1, f"no jitter at the cap: every retry waited {delays[0]} s"
