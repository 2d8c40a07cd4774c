"""§20 (metadata profile): job metadata.

``EnqueueOpts(metadata={...})`` gives a job a small map of ``str`` keys to ``str``
values (a trace context, a request id) that the engine stores with it and returns on
every read of it -- ``get_job``, the claimed handle -- for its whole life: through
retries, snoozes and the move to dead, onto a redriven copy, onto a completed row.
Malformed or oversized metadata is refused with ``InvalidOptions`` before anything
is written; an engine without the profile raises ``ProfileUnavailable``.
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import (
    MAX_METADATA_BYTES,
    MAX_METADATA_ENTRIES,
    EngineProvider,
    EnqueueOpts,
    InvalidOptions,
    JobState,
    ProfileUnavailable,
    QueueOpts,
    Store,
)
from alkstore_conformance.helpers.common import unique_name

TRACE = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "vendor=é",
}


# -- METADATA-PROFILE-DECLARED (every engine) -----------------------------------------


@pytest.mark.property("METADATA-PROFILE-DECLARED")
def test_metadata_works_exactly_when_the_engine_declares_the_profile(
    store: Store, engine: EngineProvider
) -> None:
    queue = store.queue(unique_name("declared"))
    if engine.capabilities.metadata:
        job = queue.get_job(queue.enqueue({"n": 1}, EnqueueOpts(metadata=TRACE)))
        assert job is not None
        assert job.metadata == TRACE
        return
    with pytest.raises(ProfileUnavailable):
        queue.enqueue({"n": 1}, EnqueueOpts(metadata=TRACE))
    with pytest.raises(ProfileUnavailable):
        queue.enqueue_many([], EnqueueOpts(metadata=TRACE))
    if engine.capabilities.transactions:
        with store.transaction() as tx, pytest.raises(ProfileUnavailable):
            tx.enqueue(queue.name, {"n": 2}, EnqueueOpts(metadata=TRACE))
    assert queue.claim("w") is None  # nothing was written


# -- METADATA-ROUND-TRIP ----------------------------------------------------------------


@pytest.mark.property("METADATA-ROUND-TRIP")
def test_a_jobs_metadata_reads_back_from_get_job_and_the_claimed_handle(store: Store) -> None:
    queue = store.queue(unique_name("round"))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(metadata=TRACE))
    pending = queue.get_job(job_id)
    assert pending is not None
    assert pending.metadata == TRACE
    handle = queue.claim("w")
    assert handle is not None
    assert handle.job.metadata == TRACE


@pytest.mark.property("METADATA-ROUND-TRIP")
def test_every_job_of_enqueue_many_carries_the_metadata(store: Store) -> None:
    queue = store.queue(unique_name("many"))
    ids = queue.enqueue_many([1, 2, 3], EnqueueOpts(metadata=TRACE))
    handles = queue.claim_batch("w", 3)
    assert sorted(h.id for h in handles) == sorted(ids)
    assert [h.job.metadata for h in handles] == [TRACE] * 3


@pytest.mark.property("METADATA-ROUND-TRIP")
def test_a_transactions_enqueue_carries_the_metadata(store: Store) -> None:
    queue = store.queue(unique_name("tx"))
    with store.transaction() as tx:
        job_id = tx.enqueue(queue.name, {"n": 1}, EnqueueOpts(metadata=TRACE))
    job = queue.get_job(job_id)
    assert job is not None
    assert job.metadata == TRACE


@pytest.mark.property("METADATA-ROUND-TRIP")
def test_a_job_without_metadata_and_one_with_an_empty_map_have_none(store: Store) -> None:
    queue = store.queue(unique_name("none"))
    for opts in (None, EnqueueOpts(metadata={})):
        job = queue.get_job(queue.enqueue({"n": 1}, opts))
        assert job is not None
        assert job.metadata is None


@pytest.mark.property("METADATA-ROUND-TRIP")
def test_the_largest_metadata_is_stored_as_given(store: Store) -> None:
    queue = store.queue(unique_name("largest"))
    # 16 entries of "kNN":"v..." whose JSON object is exactly MAX_METADATA_BYTES bytes.
    keys = [f"k{n:02d}" for n in range(MAX_METADATA_ENTRIES)]
    fixed = 2 + sum(len(k) + 6 for k in keys) - 1  # braces, quotes, colons and commas
    share, extra = divmod(MAX_METADATA_BYTES - fixed, MAX_METADATA_ENTRIES)
    metadata = {k: "v" * (share + (1 if n < extra else 0)) for n, k in enumerate(keys)}
    job = queue.get_job(queue.enqueue({"n": 1}, EnqueueOpts(metadata=metadata)))
    assert job is not None
    assert job.metadata == metadata


# -- METADATA-KEPT ------------------------------------------------------------------------


@pytest.mark.property("METADATA-KEPT")
def test_metadata_is_kept_across_a_retry_and_a_snooze(store: Store, engine: EngineProvider) -> None:
    queue = store.queue(unique_name("retry"))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(metadata=TRACE))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.retry("boom", delay=0)
    again = queue.claim("w")
    assert again is not None
    assert (again.id, again.job.metadata) == (job_id, TRACE)
    if engine.capabilities.snooze:
        assert again.snooze(0)
        third = queue.claim("w")
        assert third is not None
        assert (third.id, third.job.metadata) == (job_id, TRACE)


@pytest.mark.property("METADATA-KEPT")
def test_metadata_is_kept_by_a_dead_job_and_its_redriven_copy(store: Store) -> None:
    queue = store.queue(unique_name("dead"))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(metadata=TRACE))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.fail("boom")
    dead = queue.get_job(job_id)
    assert dead is not None
    assert (dead.state, dead.metadata) == (JobState.DEAD, TRACE)
    (new_id,) = queue.redrive(ids=[job_id])
    redriven = queue.get_job(new_id)
    assert redriven is not None
    assert redriven.metadata == TRACE
    claimed = queue.claim("w")
    assert claimed is not None
    assert (claimed.id, claimed.job.metadata) == (new_id, TRACE)


@pytest.mark.property("METADATA-KEPT")
def test_metadata_is_kept_by_a_completed_job(store: Store) -> None:
    queue = store.queue(unique_name("done"), QueueOpts(completed_retention_s=3600))
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(metadata=TRACE))
    handle = queue.claim("w")
    assert handle is not None
    assert handle.ack(result=1)
    done = queue.get_job(job_id)
    assert done is not None
    assert (done.state, done.metadata) == (JobState.COMPLETED, TRACE)


# -- METADATA-ARGUMENTS -------------------------------------------------------------------


@pytest.mark.property("METADATA-ARGUMENTS")
@pytest.mark.parametrize(
    "metadata",
    [
        ["traceparent"],
        "traceparent=1",
        {1: "one"},
        {"k": 1},
        {"k": None},
        {"": "empty key"},
        {"k": "nul\x00"},
        {"k\x00": "v"},
        {"k": "\ud800"},
        {f"k{n}": "v" for n in range(MAX_METADATA_ENTRIES + 1)},
        {"k": "v" * MAX_METADATA_BYTES},
        {"k": "é" * (MAX_METADATA_BYTES // 2)},
    ],
    ids=[
        "list",
        "str",
        "int-key",
        "int-value",
        "none-value",
        "empty-key",
        "nul-value",
        "nul-key",
        "surrogate",
        "too-many",
        "too-long",
        "too-long-in-utf8",
    ],
)
def test_malformed_or_oversized_metadata_is_refused_before_anything_is_written(
    store: Store, metadata: Any
) -> None:
    queue = store.queue(unique_name("refused"))
    with pytest.raises(InvalidOptions, match="metadata"):
        queue.enqueue({"n": 1}, EnqueueOpts(metadata=metadata))
    assert queue.claim("w") is None
