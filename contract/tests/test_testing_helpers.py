"""``FakeClock``, ``seed_jitter`` and ``StopToken``: the helpers tests rely on."""

from __future__ import annotations

import threading

import pytest
from fakes import FakeDriver

from alkstore.aio import AsyncStore
from alkstore.clock import Clock, OffsetClock, RealtimeClock, SystemClock
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions
from alkstore.options import QueueOpts
from alkstore.stop import StopToken
from alkstore.testing import FakeClock, seed_jitter


def test_fake_clock_starts_where_told() -> None:
    assert FakeClock(1_234).now() == 1_234


def test_fake_clock_is_a_clock_but_not_a_realtime_one() -> None:
    clock = FakeClock()
    assert isinstance(clock, Clock)
    assert not isinstance(clock, RealtimeClock)


def test_fake_clock_set_moves_to_the_instant() -> None:
    clock = FakeClock(0)
    clock.set(500.5)
    assert clock.now() == 500.5


def test_fake_clock_advance_moves_forward_and_returns_the_new_time() -> None:
    clock = FakeClock(100)
    assert clock.advance(2.5) == 102.5
    assert clock.now() == 102.5


def test_fake_clock_sleep_advances_it_at_once() -> None:
    clock = FakeClock(100)
    clock.sleep(30)
    assert clock.now() == 130


def test_fake_clock_refuses_to_advance_backwards() -> None:
    clock = FakeClock(100)
    with pytest.raises(InvalidOptions):
        clock.advance(-1)
    assert clock.now() == 100


def test_fake_clock_sleep_of_a_negative_time_does_not_go_backwards() -> None:
    clock = FakeClock(100)
    clock.sleep(-5)
    assert clock.now() == 100


def test_system_and_offset_clocks_are_realtime() -> None:
    assert isinstance(SystemClock(), RealtimeClock)
    assert isinstance(OffsetClock(1.0), RealtimeClock)


def test_offset_clock_is_shifted_from_the_system_clock() -> None:
    # Far apart offsets keep the comparison free of timing.
    assert OffsetClock(10_000).now() > SystemClock().now() + 5_000


def test_stop_token_starts_unset() -> None:
    token = StopToken()
    assert not token.is_set()
    assert token.wait(0) is False


def test_stop_sets_the_token() -> None:
    token = StopToken()
    token.stop()
    assert token.is_set()
    assert token.wait(0) is True


def test_callbacks_run_on_stop() -> None:
    token = StopToken()
    seen: list[str] = []
    token.add_callback(lambda: seen.append("a"))
    token.add_callback(lambda: seen.append("b"))
    assert seen == []
    token.stop()
    assert seen == ["a", "b"]


def test_a_callback_added_after_stop_runs_at_once() -> None:
    token = StopToken()
    token.stop()
    seen: list[int] = []
    token.add_callback(lambda: seen.append(1))
    assert seen == [1]


def test_a_removed_callback_does_not_run() -> None:
    token = StopToken()
    seen: list[int] = []

    def callback() -> None:
        seen.append(1)

    token.add_callback(callback)
    token.remove_callback(callback)
    token.stop()
    assert seen == []


def test_removing_an_unknown_callback_is_harmless() -> None:
    token = StopToken()
    token.remove_callback(lambda: None)
    token.stop()
    assert token.is_set()


def test_stop_from_another_thread_releases_a_waiter() -> None:
    token = StopToken()
    thread = threading.Thread(target=token.stop)
    thread.start()
    assert token.wait(10) is True
    thread.join()


def _store() -> CoreStore:
    return CoreStore(FakeDriver(), clock=FakeClock(1_700_000_000), engine_name="fake")


def _default_backoffs(store: CoreStore, retries: int = 8) -> list[int]:
    """The delays of ``retries`` retries without a delay, each claimed once it is due."""
    queue = store.queue("q", QueueOpts(backoff_base_s=600, max_attempts=retries + 1))
    queue.enqueue(1)
    driver, clock, delays = store.driver, store.clock, []
    for _ in range(retries):
        handle = queue.claim("w1")
        assert handle is not None
        assert handle.retry("boom") is True
        _, _, now, run_at, _ = driver.calls_named("reschedule")[-1].args
        delays.append(run_at - now)
        assert isinstance(clock, FakeClock)
        clock.set(run_at)
    return delays


def test_stores_seeded_alike_draw_the_same_default_backoffs() -> None:
    with _store() as first, _store() as second:
        seed_jitter(first, 7)
        seed_jitter(second, 7)
        assert _default_backoffs(first) == _default_backoffs(second)


def test_stores_seeded_apart_draw_different_default_backoffs() -> None:
    with _store() as first, _store() as second:
        seed_jitter(first, 7)
        seed_jitter(second, 8)
        assert _default_backoffs(first) != _default_backoffs(second)


def test_seed_jitter_seeds_an_async_stores_sync_store() -> None:
    with _store() as first, _store() as second:
        seed_jitter(first, 7)
        seed_jitter(AsyncStore(second), 7)
        assert _default_backoffs(first) == _default_backoffs(second)


def test_seed_jitter_refuses_what_alkstore_open_did_not_make() -> None:
    with pytest.raises(InvalidOptions, match="seed_jitter takes a store"):
        seed_jitter(object(), 7)


@pytest.mark.parametrize("seed", [True, 1.5, "7", None])
def test_seed_jitter_refuses_a_seed_that_is_not_an_int(seed: object) -> None:
    with _store() as store, pytest.raises(InvalidOptions, match="seed must be an int"):
        seed_jitter(store, seed)  # type: ignore[arg-type]
