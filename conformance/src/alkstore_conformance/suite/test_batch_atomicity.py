"""enqueue_many is one transaction at any size (§2): no reader ever sees part of a batch.

A reader claims everything it can see while large batches commit; every claim
must hold either all of a batch or none of it. (A crash in the middle of a
batch is ``test_crash_points``' business.)
"""

from __future__ import annotations

from collections import Counter

import pytest

from alkstore import EngineSpec, Store
from alkstore.constants import MAX_BATCH
from alkstore_conformance.fixtures import StoreFactory
from alkstore_conformance.profile_processes import batch_reader_process
from alkstore_conformance.profile_support import Children, in_thread
from alkstore_conformance.support import unique_name
from alkstore_conformance.trials import Trial

BATCHES = 4
BATCH_SIZE = 2500
TIME_LIMIT_S = 60.0


def _enqueue_batches(store: Store, queue_name: str) -> None:
    queue = store.queue(queue_name)
    for batch in range(BATCHES):
        queue.enqueue_many([{"batch": batch, "n": n} for n in range(BATCH_SIZE)])


def _check_whole_batches(claims: list[dict[int, int]]) -> None:
    partial = [claim for claim in claims if set(claim.values()) != {BATCH_SIZE}]
    assert partial == [], f"claims saw part of a batch ({{batch: jobs}}): {partial[:5]}"
    assert sum(sum(claim.values()) for claim in claims) == BATCHES * BATCH_SIZE


def _claim_all(store: Store, queue_name: str) -> list[dict[int, int]]:
    queue = store.queue(queue_name)
    claims: list[dict[int, int]] = []
    claimed = 0
    for _ in range(100_000):
        if claimed >= BATCHES * BATCH_SIZE:
            break
        handles = queue.claim_batch("batch-reader", MAX_BATCH)
        if handles:
            claims.append(dict(Counter(int(h.payload["batch"]) for h in handles)))
            claimed += len(handles)
    return claims


@pytest.mark.property("QUEUE-ENQUEUE-MANY-ATOMIC")
def test_a_reader_in_another_thread_never_sees_part_of_a_batch(
    open_store: StoreFactory, store: Store, trial: Trial
) -> None:
    queue_name = unique_name("batches")
    reader = in_thread(lambda: _claim_all(open_store(), queue_name))
    _enqueue_batches(store, queue_name)
    _check_whole_batches(reader.join(TIME_LIMIT_S))


@pytest.mark.property("QUEUE-ENQUEUE-MANY-ATOMIC")
@pytest.mark.requires("multi_process")
def test_a_reader_in_another_process_never_sees_part_of_a_batch(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    queue_name = unique_name("batches")
    with Children(TIME_LIMIT_S) as children:
        children.start(
            batch_reader_process,
            engine_name,
            engine_group,
            engine_spec,
            queue_name,
            BATCHES * BATCH_SIZE,
            children.results,
            TIME_LIMIT_S,
        )
        children.expect("ready")
        _enqueue_batches(store, queue_name)
        claims = children.expect("claims")
    _check_whole_batches(claims)
