"""enqueue_many and ack_batch are one transaction at any size (§2): no reader ever
sees part of a batch.

A reader claims everything it can see while large batches commit; every claim
must hold either all of a batch or none of it. Another reads a queue's stats
while a large ack_batch commits: the processing count is the whole batch, then
none. (A crash in the middle of a batch is ``test_crash_points``' business; a
crash point falls between the engine's driver calls, so an engine committing
one ack_batch in several statements is caught here, by a reader.)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from functools import partial

import pytest

from alkstore import EngineSpec, Store
from alkstore.constants import MAX_BATCH
from alkstore_conformance.helpers.common import unique_name
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import batch_reader_process
from alkstore_conformance.helpers.profiles import Children, in_thread
from alkstore_conformance.helpers.trials import Trial

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


# -- QUEUE-ACK-BATCH-SEEN-WHOLE ------------------------------------------------------------

ACK_BATCH_SIZE = 2000
"""Longer than one statement of an engine that acks in chunks (SQLite: 256 ids)."""
ACK_ROUNDS = 4


def _processing_counts(store: Store, queue_name: str, watching: threading.Event) -> list[int]:
    """Read the queue's processing count over and over, from before the ack_batch
    begins (``watching`` says the first read is done) until it reads none."""
    queue = store.queue(queue_name)
    counts: list[int] = []
    give_up_at = time.monotonic() + TIME_LIMIT_S
    while time.monotonic() < give_up_at:
        counts.append(queue.stats().processing)
        watching.set()
        if counts[-1] == 0:
            break
    return counts


@pytest.mark.property("QUEUE-ACK-BATCH-SEEN-WHOLE")
def test_a_reader_never_sees_part_of_an_ack_batch(
    open_store: StoreFactory, store: Store, trial: Trial
) -> None:
    reader_store = open_store()
    for _ in range(ACK_ROUNDS):
        queue_name = unique_name("acks")
        queue = store.queue(queue_name)
        ids = queue.enqueue_many([{"n": n} for n in range(ACK_BATCH_SIZE)])
        assert len(queue.claim_batch("acker", ACK_BATCH_SIZE)) == ACK_BATCH_SIZE
        watching = threading.Event()
        reader = in_thread(partial(_processing_counts, reader_store, queue_name, watching))
        assert watching.wait(TIME_LIMIT_S)
        assert queue.ack_batch(ids, "acker") == ACK_BATCH_SIZE
        counts = reader.join(TIME_LIMIT_S)
        between = sorted({count for count in counts if count not in (0, ACK_BATCH_SIZE)})
        assert between == [], f"a reader saw {between} of {ACK_BATCH_SIZE} jobs still processing"
        assert counts[-1] == 0
