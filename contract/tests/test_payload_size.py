"""A payload's JSON text is at most the store's bound in UTF-8 bytes, and a payload
too deep for the encoders' recursion is refused as too deep (contract §0.4, §0.5)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fakes import FakeDriver, FakeProfilesDriver

from alkstore.aio import AsyncStore
from alkstore.constants import MAX_PAYLOAD_BYTES
from alkstore.core import CoreStore
from alkstore.errors import InvalidOptions, PayloadError
from alkstore.payload import (
    check_max_payload_bytes,
    decode_payload,
    encode_payload,
    nests_deeper_than,
)
from alkstore.testing import FakeClock

LOWERED = 100
"""The bound the store under test is opened with."""


def text_of_bytes(size: int) -> str:
    """A payload whose JSON text is ``size`` bytes: a string and its two quotes."""
    return "x" * (size - 2)


def nested(depth: int, kinds: str = "l") -> Any:
    """``depth`` levels, cycling through ``kinds`` (``l``: a list, ``d``: a dict)."""
    value: Any = 1
    for level in range(depth):
        value = [value] if kinds[level % len(kinds)] == "l" else {"k": value}
    return value


# -- the encoder -----------------------------------------------------------------------


def test_a_payload_of_exactly_the_contract_bound_round_trips() -> None:
    payload = text_of_bytes(MAX_PAYLOAD_BYTES)
    text = encode_payload(payload)
    assert len(text.encode()) == MAX_PAYLOAD_BYTES
    assert decode_payload(text) == payload


def test_a_payload_one_byte_over_the_contract_bound_is_refused_naming_both_sizes() -> None:
    with pytest.raises(PayloadError) as raised:
        encode_payload(text_of_bytes(MAX_PAYLOAD_BYTES + 1))
    assert f"{MAX_PAYLOAD_BYTES + 1} bytes" in str(raised.value)
    assert f"bound of {MAX_PAYLOAD_BYTES} bytes" in str(raised.value)


def test_the_bound_counts_utf8_bytes_not_characters() -> None:
    payload = "é" * 40  # 42 characters of JSON text, 82 bytes in UTF-8
    assert encode_payload(payload, max_bytes=82) == '"' + payload + '"'
    with pytest.raises(PayloadError, match="82 bytes"):
        encode_payload(payload, max_bytes=81)


@pytest.mark.parametrize("kinds", ["l", "d", "ld", "dll"], ids=["lists", "dicts", "mixed", "dll"])
@pytest.mark.parametrize("depth", [10_000, 100_000])
def test_a_payload_deeper_than_the_stack_gets_the_nesting_limit_message(
    depth: int, kinds: str
) -> None:
    with pytest.raises(PayloadError, match="nests deeper than 64 levels") as raised:
        encode_payload(nested(depth, kinds))
    assert "recursion" not in str(raised.value)


def test_a_cycle_is_still_refused_as_a_cycle() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(PayloadError, match="Circular reference"):
        encode_payload(loop)


@pytest.mark.parametrize(("depth", "deeper"), [(0, False), (64, False), (65, True)])
def test_nests_deeper_than_counts_levels_of_lists_and_dicts(depth: int, deeper: bool) -> None:
    assert nests_deeper_than(nested(depth, "ld"), 64) is deeper


def test_nests_deeper_than_walks_a_shared_child_once_per_level() -> None:
    value: Any = 1
    for _ in range(200):
        value = [value, value]  # 2**200 paths, 200 distinct lists
    assert nests_deeper_than(value, 64)


# -- the option ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, LOWERED, MAX_PAYLOAD_BYTES])
def test_max_payload_bytes_accepts_a_positive_int_up_to_the_contract_bound(value: int) -> None:
    assert check_max_payload_bytes(value) == value


@pytest.mark.parametrize(
    "value",
    [0, -1, MAX_PAYLOAD_BYTES + 1, True, 1.5, "100", None],
    ids=["zero", "negative", "over-the-bound", "bool", "float", "str", "none"],
)
def test_max_payload_bytes_refuses_anything_else_naming_the_option(value: object) -> None:
    with pytest.raises(InvalidOptions, match="max_payload_bytes"):
        check_max_payload_bytes(value)


def test_the_core_refuses_a_bound_over_the_contracts(driver: FakeDriver) -> None:
    with pytest.raises(InvalidOptions, match="max_payload_bytes"):
        CoreStore(driver, max_payload_bytes=MAX_PAYLOAD_BYTES + 1)


# -- every surface that writes a payload honours the store's bound ---------------------


@pytest.fixture
def lowered(clock: FakeClock) -> Iterator[tuple[CoreStore, FakeDriver]]:
    driver = FakeProfilesDriver()
    store = CoreStore(
        driver,
        clock=clock,
        capabilities=driver.capabilities,
        engine_name="fake",
        max_payload_bytes=LOWERED,
    )
    yield store, driver
    store.close()


def _in_transaction(call: Callable[[CoreStore, Any], object]) -> Callable[[CoreStore], object]:
    def run(store: CoreStore) -> object:
        with store.transaction() as tx:
            return call(store, tx)

    return run


OVERSIZE = text_of_bytes(LOWERED + 1)

SURFACES: dict[str, Callable[[CoreStore], object]] = {
    "enqueue": lambda s: s.queue("q").enqueue(OVERSIZE),
    "enqueue_many": lambda s: s.queue("q").enqueue_many([{"ok": 1}, OVERSIZE, {"ok": 2}]),
    "outbox.enqueue": lambda s: s.outbox("o").enqueue(OVERSIZE),
    "tx.enqueue": _in_transaction(lambda s, tx: tx.enqueue("q", OVERSIZE)),
    "tx.enqueue(handle)": _in_transaction(lambda s, tx: tx.enqueue(s.queue("q"), OVERSIZE)),
    "tx.outbox_enqueue": _in_transaction(lambda s, tx: tx.outbox_enqueue("o", OVERSIZE)),
    "tx.stream_append": _in_transaction(lambda s, tx: tx.stream_append("s", OVERSIZE)),
    "tx.notify": _in_transaction(lambda s, tx: tx.notify("c", OVERSIZE)),
    "schedule": lambda s: s.schedule("sched", "@every 1m", "q", OVERSIZE),
    "stream.append": lambda s: s.stream("s").append(OVERSIZE),
    "notify": lambda s: s.notify("c", OVERSIZE),
}


@pytest.mark.parametrize("surface", list(SURFACES))
def test_a_payload_over_the_stores_bound_is_refused_with_no_statement_run(
    lowered: tuple[CoreStore, FakeDriver], surface: str
) -> None:
    store, driver = lowered
    with pytest.raises(PayloadError, match=f"over the bound of {LOWERED} bytes"):
        SURFACES[surface](store)
    assert driver.statement_names() == []


def test_a_payload_at_the_stores_bound_is_enqueued(
    lowered: tuple[CoreStore, FakeDriver],
) -> None:
    store, _ = lowered
    queue = store.queue("q")
    job_id = queue.enqueue(text_of_bytes(LOWERED))
    job = queue.get_job(job_id)
    assert job is not None
    assert job.payload == text_of_bytes(LOWERED)


def test_the_async_surface_refuses_a_payload_over_the_stores_bound(
    lowered: tuple[CoreStore, FakeDriver],
) -> None:
    store, driver = lowered

    async def enqueue() -> None:
        async with AsyncStore(store) as aio:
            await aio.queue("q").enqueue(OVERSIZE)

    with pytest.raises(PayloadError, match=f"over the bound of {LOWERED} bytes"):
        asyncio.run(enqueue())
    assert driver.statement_names() == []
