"""§8.3: an operation's answer says whether it applied, not whether a value changed.

Some dialects count the rows an UPDATE *changed* rather than those it *matched*
(MySQL's affected rows without ``CLIENT_FOUND_ROWS``), so an engine that reads
"did it apply" from a row count answers ``False`` when the row already held the
value written. Within one second of the store's clock a heartbeat or a lock
renew writes exactly the deadline already stored; the fake clock is not
advanced here, so every write below is such a no-op write.
"""

from __future__ import annotations

import pytest

from alkstore import JobState, LockInfo, QueueOpts, Store
from alkstore.testing import FakeClock

PROPERTY = "OUTCOMES-MATCHED-NOT-CHANGED"
VISIBILITY_S = 30
TTL_S = 30


@pytest.mark.property(PROPERTY)
def test_a_heartbeat_setting_the_deadline_the_claim_already_has_returns_true(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("beats", QueueOpts(visibility_timeout_s=VISIBILITY_S))
    queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    # The claim's deadline is now + VISIBILITY_S: this heartbeat writes it again.
    assert handle.heartbeat(VISIBILITY_S) is True
    assert handle.heartbeat(VISIBILITY_S) is True
    job = queue.get_job(handle.id)
    assert job is not None
    assert (job.state, job.attempts, job.worker_id) == (JobState.PROCESSING, 1, "worker")
    clock.advance(VISIBILITY_S - 1)
    assert queue.claim("rival") is None  # still claimed: the deadline stands
    assert handle.ack() is True


@pytest.mark.property(PROPERTY)
def test_repeated_heartbeats_within_one_second_all_return_true(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue("beats", QueueOpts(visibility_timeout_s=VISIBILITY_S))
    queue.enqueue({"n": 1})
    handle = queue.claim("worker")
    assert handle is not None
    clock.advance(5)
    assert [handle.heartbeat(60) for _ in range(3)] == [True, True, True]
    assert handle.ack() is True


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("locks")
def test_a_renew_setting_the_expiry_the_lock_already_has_returns_true(
    clocked_store: Store, clock: FakeClock
) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("owner", TTL_S) is True
    assert lock.renew("owner", TTL_S) is True
    assert lock.renew("owner", TTL_S) is True
    assert lock.holder() == LockInfo(owner="owner", expires_at=int(clock.now()) + TTL_S)


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("locks")
def test_reacquiring_ones_lock_with_the_expiry_it_already_has_returns_true(
    clocked_store: Store, clock: FakeClock
) -> None:
    lock = clocked_store.lock("leader")
    assert lock.acquire("owner", TTL_S) is True
    assert lock.acquire("owner", TTL_S) is True
    assert lock.holder() == LockInfo(owner="owner", expires_at=int(clock.now()) + TTL_S)
    assert lock.release("owner") is True
