"""Bounded waits and outages of the memory engine (contract §8.4, §8.5), and the
conformance kit's hooks that provoke them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import alkstore
from alkstore import EngineSpec, EngineUnavailable, InvalidOptions, Store
from alkstore_memory import ENGINE

HOLD_S = 10.0


@pytest.fixture
def spec() -> Iterator[EngineSpec]:
    with ENGINE.provision() as provisioned:
        yield provisioned


@pytest.fixture
def store(spec: EngineSpec) -> Iterator[Store]:
    with alkstore.open(spec.url, lock_timeout_s=0.3) as opened:
        yield opened


@pytest.fixture
def open_transaction(spec: EngineSpec) -> Iterator[None]:
    """Another store's transaction, kept open on another thread."""
    holding, let_go = threading.Event(), threading.Event()

    def hold() -> None:
        with alkstore.open(spec.url) as other, other.transaction() as tx:
            tx.enqueue("other", {"held": True})
            holding.set()
            let_go.wait(HOLD_S)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(HOLD_S)
    yield
    let_go.set()
    thread.join(HOLD_S)


@pytest.mark.usefixtures("open_transaction")
def test_a_write_behind_another_threads_transaction_raises_after_lock_timeout_s(
    store: Store,
) -> None:
    with pytest.raises(EngineUnavailable, match="another thread's transaction"):
        store.queue("q").enqueue({"n": 1})


@pytest.mark.usefixtures("open_transaction")
def test_claim_wait_returns_none_at_its_timeout_behind_another_threads_transaction(
    spec: EngineSpec,
) -> None:
    with alkstore.open(spec.url, lock_timeout_s=HOLD_S) as store:
        assert store.queue("q").claim_wait("w", timeout=0.2) is None


def test_writes_go_on_once_the_transaction_commits(store: Store, spec: EngineSpec) -> None:
    with alkstore.open(spec.url) as other, other.transaction() as tx:
        tx.enqueue("q", {"n": 1})
    assert store.queue("q").claim("w") is not None


@pytest.mark.parametrize("value", [0, -1, 3601, float("nan"), True, "5"])
def test_a_bad_lock_timeout_s_is_refused(spec: EngineSpec, value: object) -> None:
    with pytest.raises(InvalidOptions, match="lock_timeout_s"):
        alkstore.open(spec.url, lock_timeout_s=value)


def test_hold_write_path_holds_the_database_until_it_lets_go(
    store: Store, spec: EngineSpec
) -> None:
    queue = store.queue("q")
    with ENGINE.hold_write_path(spec, HOLD_S), pytest.raises(EngineUnavailable):
        queue.enqueue({"n": 1})
    assert queue.enqueue({"n": 2}) >= 1
    assert [h.payload for h in queue.claim_batch("w", 10)] == [{"n": 2}]


def test_the_outage_switch_refuses_every_call_until_it_is_switched_back(spec: EngineSpec) -> None:
    with (
        ENGINE.outage_switch(spec) as switch,
        alkstore.open(switch.spec.url, **switch.spec.opts) as store,
    ):
        queue = store.queue("q")
        job_id = queue.enqueue({"n": 1})
        with switch.unavailable(HOLD_S):
            with pytest.raises(EngineUnavailable, match="an outage"):
                queue.enqueue({"n": 2})
            with pytest.raises(EngineUnavailable, match="an outage"):
                queue.get_job(job_id)
        assert queue.get_job(job_id) is not None
