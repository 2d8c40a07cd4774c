"""The core's unique enqueue (contract §15): keys, one statement, the profile's gate."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest
from fakes import FakeDriver, FakeUniqueDriver

from alkstore.core import CoreStore
from alkstore.core.unique import PAYLOAD_KEY_PREFIX, payload_key
from alkstore.errors import ProfileUnavailable
from alkstore.options import EnqueueOpts, Unique
from alkstore.payload import encode_payload
from alkstore.testing import FakeClock
from alkstore.values import Enqueued


@pytest.fixture
def unique_driver() -> FakeUniqueDriver:
    return FakeUniqueDriver()


@pytest.fixture
def unique_store(unique_driver: FakeUniqueDriver, clock: FakeClock) -> Iterator[CoreStore]:
    with CoreStore(unique_driver, clock=clock, capabilities=unique_driver.capabilities) as store:
        yield store


def test_a_plain_enqueue_runs_the_plain_insert_and_nothing_else(
    unique_store: CoreStore, unique_driver: FakeUniqueDriver
) -> None:
    unique_store.queue("q").enqueue(1)
    unique_store.queue("q").enqueue_many([2, 3])
    assert unique_driver.statement_names() == ["insert_jobs", "insert_jobs"]


def test_a_unique_enqueue_is_one_statement_with_its_key_and_hold(
    unique_store: CoreStore, unique_driver: FakeUniqueDriver, clock: FakeClock
) -> None:
    unique = Unique("k", period=90, states=("pending", "processing", "dead"))
    got = unique_store.queue("q").enqueue({"n": 1}, EnqueueOpts(unique=unique))
    (call,) = unique_driver.calls_named("insert_unique_jobs")
    stamps, payloads, keys, hold_until, hold_dead = call.args
    assert (stamps.queue, payloads, keys) == ("q", ('{"n":1}',), ("k",))
    assert (hold_until, hold_dead) == (int(clock.now()) + 90, True)
    assert unique_driver.statement_names() == ["insert_unique_jobs"]
    assert got.duplicate is False


def test_a_batch_sends_each_key_once_and_later_items_get_the_first_ones_id(
    unique_store: CoreStore, unique_driver: FakeUniqueDriver
) -> None:
    ids = unique_store.queue("q").enqueue_many(
        [{"x": 1}, {"y": 1}, {"x": 1}], EnqueueOpts(unique=Unique())
    )
    (call,) = unique_driver.calls_named("insert_unique_jobs")
    assert call.args[2] == (payload_key('{"x":1}'), payload_key('{"y":1}'))
    assert [(int(i), i.duplicate) for i in ids] == [
        (int(ids[0]), False),
        (int(ids[1]), False),
        (int(ids[0]), True),
    ]


def test_an_engine_without_the_profile_refuses_unique_before_writing(
    store: CoreStore, driver: FakeDriver
) -> None:
    queue = store.queue("q")
    opts = EnqueueOpts(unique="k")
    with pytest.raises(ProfileUnavailable, match="unique"):
        queue.enqueue(1, opts)
    with pytest.raises(ProfileUnavailable, match="unique"):
        queue.enqueue_many([], opts)
    with store.transaction() as tx, pytest.raises(ProfileUnavailable, match="unique"):
        tx.enqueue("q", 1, opts)
    assert [n for n in driver.statement_names() if n.startswith("insert")] == []


def test_a_payloads_key_is_of_the_payload_as_it_reads_back() -> None:
    assert payload_key(encode_payload({"b": 1, "a": 2})) == payload_key(
        encode_payload({"a": 2, "b": 1})
    )
    assert payload_key(encode_payload({1: "a"})) == payload_key(encode_payload({"1": "a"}))
    assert payload_key(encode_payload((1, 2))) == payload_key(encode_payload([1, 2]))
    assert payload_key(encode_payload([1, 2])) != payload_key(encode_payload([2, 1]))
    assert payload_key("[1]").startswith(PAYLOAD_KEY_PREFIX)
    assert len(payload_key("[1]")) == len(PAYLOAD_KEY_PREFIX) + 64


def test_a_new_and_a_duplicate_result_are_one_type_and_keep_their_flag_pickled() -> None:
    new, duplicate = Enqueued.of(3, False), Enqueued.of(4, True)
    assert type(new) is type(duplicate) is Enqueued
    assert (new.duplicate, duplicate.duplicate) == (False, True)
    assert [pickle.loads(pickle.dumps(r)).duplicate for r in (new, duplicate)] == [False, True]


def test_a_result_is_immutable() -> None:
    result = Enqueued.of(4, True)
    with pytest.raises(AttributeError):
        result.duplicate = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del result.duplicate


def test_a_str_unique_is_the_unique_of_that_key_and_states_are_kept_in_one_order() -> None:
    assert EnqueueOpts(unique="k") == EnqueueOpts(unique=Unique("k"))
    unique = Unique(None, states={"dead", "pending", "processing"})
    assert (unique.states, unique.holds_dead) == (("pending", "processing", "dead"), True)
    assert Unique("k").holds_dead is False
