"""``WakeHub``: in-process fan-out of wakes without lost notifications."""

from __future__ import annotations

import threading

import pytest

from alkstore.core.wake import WakeHub


def test_a_notify_between_clear_and_wait_is_not_lost() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a") as waiter:
        waiter.clear()
        hub.notify("queue:a")
        assert waiter.wait(timeout=5) is True


def test_clear_forgets_an_earlier_notify() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a") as waiter:
        hub.notify("queue:a")
        waiter.clear()
        assert waiter.wait(timeout=0) is False


def test_notify_wakes_only_its_topic() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a") as a, hub.waiter("queue:b") as b:
        hub.notify("queue:a")
        assert a.wait(timeout=0) is True
        assert b.wait(timeout=0) is False


@pytest.mark.parametrize("topic", ["queue:a", "queue:b"])
def test_a_waiter_on_two_topics_is_woken_by_either(topic: str) -> None:
    hub = WakeHub()
    with hub.waiter("queue:a", "queue:b") as waiter:
        hub.notify(topic)
        assert waiter.wait(timeout=0) is True


def test_a_waiter_on_two_topics_is_not_woken_by_a_third() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a", "queue:b") as waiter:
        hub.notify("queue:c")
        assert waiter.wait(timeout=0) is False


def test_closing_a_waiter_on_two_topics_removes_it_from_both() -> None:
    hub = WakeHub()
    waiter = hub.waiter("queue:a", "queue:b")
    waiter.close()
    hub.notify("queue:a")
    hub.notify("queue:b")
    assert waiter.wait(timeout=0) is False
    assert not hub.has_waiters()


def test_closing_a_waiter_on_two_topics_keeps_the_others_of_a_shared_topic() -> None:
    hub = WakeHub()
    with hub.waiter("queue:b") as other:
        hub.waiter("queue:a", "queue:b").close()
        hub.notify("queue:b")
        assert other.wait(timeout=0) is True


def test_notify_wakes_every_waiter_of_the_topic() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a") as first, hub.waiter("queue:a") as second:
        hub.notify("queue:a")
        assert first.wait(timeout=0) is True
        assert second.wait(timeout=0) is True


def test_notify_all_wakes_every_topic() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a") as a, hub.waiter("queue:b") as b:
        hub.notify_all()
        assert a.wait(timeout=0) is True
        assert b.wait(timeout=0) is True


def test_close_wakes_everyone() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a") as a, hub.waiter("stream:b") as b:
        hub.close()
        assert a.wait(timeout=0) is True
        assert b.wait(timeout=0) is True


def test_a_waiter_registered_after_close_is_woken_at_once() -> None:
    hub = WakeHub()
    hub.close()
    with hub.waiter("queue:a") as waiter:
        assert waiter.wait(timeout=0) is True


def test_has_waiters_tracks_registration() -> None:
    hub = WakeHub()
    assert not hub.has_waiters()
    with hub.waiter("queue:a"):
        assert hub.has_waiters()
    assert not hub.has_waiters()


def test_a_closed_waiter_is_no_longer_notified() -> None:
    hub = WakeHub()
    waiter = hub.waiter("queue:a")
    waiter.close()
    hub.notify("queue:a")
    assert waiter.wait(timeout=0) is False


def test_notify_from_another_thread_releases_a_blocked_waiter() -> None:
    hub = WakeHub()
    with hub.waiter("queue:a") as waiter:
        thread = threading.Thread(target=hub.notify, args=("queue:a",))
        thread.start()
        assert waiter.wait(timeout=10) is True
        thread.join()
