"""Unique enqueues (contract §15): the key of each payload, one row per distinct key.

The core decides everything but whether a key is held: each payload's key (the
``Unique.key``, or the payload's own), that an item of one ``enqueue_many`` whose
key an earlier item already has is that item's duplicate (the engine sees each
key once), and the hold's end (``created_at + period``). The engine's
``UniqueDriver.insert_unique_jobs`` then inserts, race-free, only the rows whose
key no job holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..driver import UniqueDriver
from ..options import JobStamps, Unique
from ..params import InsertUnique
from ..values import Enqueued

PAYLOAD_KEY_PREFIX = "payload:sha256:"
"""A payload's own key (``Unique(key=None)``): this, then the SHA-256 of its canonical JSON."""

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
"""Made once: ``json.dumps`` with options builds a new encoder on every call."""
_DECODE = json.JSONDecoder().decode


def payload_key(text: str) -> str:
    """The key of the payload whose stored JSON text is ``text``: of the payload as it
    comes back (contract §0.4), with object keys sorted and no whitespace, so payloads
    that read back equal have equal keys whatever their keys' order."""
    canonical = _CANONICAL(_DECODE(text))
    return PAYLOAD_KEY_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def keys_of(unique: Unique, texts: Sequence[str]) -> list[str]:
    """Each payload's key: ``unique.key`` for all, or each payload's own."""
    if unique.key is not None:
        return [unique.key] * len(texts)
    return [payload_key(text) for text in texts]


def insert_unique_one(
    driver: UniqueDriver[Any], c: Any, stamps: JobStamps, text: str, unique: Unique
) -> Enqueued:
    """Inside a write unit: the lone enqueue of ``text`` under ``unique`` (checked), a
    new job or the duplicate of the job holding its key. The hot path of a unique
    enqueue: nothing to sort out between items, so no lists beyond the engine's."""
    key = unique.key
    period = unique.period
    params = InsertUnique(
        stamps,
        (text,),
        (payload_key(text) if key is None else key,),
        None if period is None else stamps.created_at + period,
        unique.holds_dead,
    )
    ((job_id, duplicate),) = driver.insert_unique_jobs(c, params)
    return Enqueued.of(job_id, duplicate)


def insert_unique(
    driver: UniqueDriver[Any], c: Any, stamps: JobStamps, texts: Sequence[str], unique: Unique
) -> list[Enqueued]:
    """Inside a write unit: the ids of ``texts`` enqueued under ``unique`` (checked), in
    order, each a new job or the duplicate of the job holding its key."""
    if len(texts) == 1:
        return [insert_unique_one(driver, c, stamps, texts[0], unique)]
    hold_until = None if unique.period is None else stamps.created_at + unique.period
    first: dict[str, int] = {}
    """Each distinct key -> its position among the rows the engine is given."""
    distinct_texts: list[str] = []
    positions: list[int] = []
    for text, key in zip(texts, keys_of(unique, texts), strict=True):
        position = first.get(key)
        if position is None:
            position = first[key] = len(distinct_texts)
            distinct_texts.append(text)
        positions.append(position)
    params = InsertUnique(stamps, distinct_texts, list(first), hold_until, unique.holds_dead)
    outcomes = driver.insert_unique_jobs(c, params)
    results: list[Enqueued] = []
    given: set[int] = set()
    for position in positions:
        job_id, duplicate = outcomes[position]
        # A later item with an earlier item's key is that item's duplicate.
        results.append(Enqueued.of(job_id, duplicate or position in given))
        given.add(position)
    return results


def any_new(results: Sequence[Enqueued]) -> bool:
    """Whether an enqueue wrote a job (so waiters have something to wake for)."""
    return not all(result.duplicate for result in results)
