"""A claim's rows: the rarely set columns come back as one value (``claimed.py``).

NULL while each holds ``Job``'s default, else a JSON array of them; a batch decodes
either way to the same ``Job`` as a read of the row.
"""

from __future__ import annotations

from alkstore import EnqueueOpts, QueueOpts, Store, Unique
from alkstore_sqlite.claimed import claimed_jobs
from alkstore_sqlite.statements import CLAIMED_COMMON, RARE_CLAIMED


def _common_row(job_id: int) -> tuple[object, ...]:
    values = {
        "id": job_id,
        "payload": '{"n":1}',
        "priority": 0,
        "attempts": 1,
        "max_attempts": 3,
        "created_at": 10,
        "run_at": 10,
        "expires_at": None,
        "visibility_timeout_s": 30,
        "backoff_base_s": 1,
        "dead_letter_retention_s": None,
    }
    return tuple(values[name] for name in CLAIMED_COMMON)


def test_a_row_without_rare_values_takes_the_defaults() -> None:
    (job,) = claimed_jobs([(*_common_row(7), None)], "q", "w", 20)
    assert (job.errors, job.redriven_from, job.snoozes, job.unique_key) == ((), None, 0, None)
    assert (job.completed_retention_s, job.limit_key, job.metadata) == (None, None, None)


def test_a_row_with_rare_values_unpacks_them_in_order() -> None:
    rare = '[null, 5, 2, "k", 60, "tenant", "{\\"a\\":\\"b\\"}"]'
    assert list(RARE_CLAIMED)[-1] == "metadata"
    plain, packed = claimed_jobs([(*_common_row(7), None), (*_common_row(8), rare)], "q", "w", 20)
    assert (plain.id, plain.snoozes, plain.metadata) == (7, 0, None)
    assert (packed.id, packed.redriven_from, packed.snoozes, packed.unique_key) == (8, 5, 2, "k")
    assert (packed.completed_retention_s, packed.limit_key) == (60, "tenant")
    assert packed.metadata == {"a": "b"}


def test_a_claimed_batch_equals_the_rows_read_back(store: Store) -> None:
    queue = store.queue("rare", QueueOpts(completed_retention_s=60))
    queue.enqueue({"n": 1})
    queue.enqueue({"n": 2}, EnqueueOpts(unique=Unique("k"), metadata={"trace": "t1"}))
    queue.enqueue({"n": 3}, EnqueueOpts(limit_key="tenant"))
    handles = queue.claim_batch("w", 10)
    assert len(handles) == 3
    for handle in handles:
        stored = queue.get_job(handle.id)
        assert stored is not None
        assert handle.job == stored
    assert handles[1].job.metadata == {"trace": "t1"}
    assert handles[1].job.unique_key == "k"
    assert handles[2].job.limit_key == "tenant"
    assert handles[0].job.completed_retention_s == 60
