"""§11: a Queue handle passed to tx.enqueue stamps its QueueOpts (ops profile)."""

from __future__ import annotations

import pytest

from alkstore import DEFAULT_QUEUE_OPTS, QueueOpts, Store

PROPERTY = "OPS-TX-ENQUEUE-HANDLE"
pytestmark = pytest.mark.requires("transactions")
STAMPS = QueueOpts(
    visibility_timeout_s=17, max_attempts=7, backoff_base_s=9, dead_letter_retention_s=321
)
STAMPED = ("visibility_timeout_s", "max_attempts", "backoff_base_s", "dead_letter_retention_s")


def _stamps(store: Store, queue: str, job_id: int) -> list[object]:
    job = store.queue(queue).get_job(job_id)
    assert job is not None
    return [getattr(job, field) for field in STAMPED]


@pytest.mark.property(PROPERTY)
def test_a_queue_handle_in_a_transaction_stamps_its_own_opts(store: Store) -> None:
    handle = store.queue("stamped", STAMPS)
    with store.transaction() as tx:
        job_id = tx.enqueue(handle, {"n": 1})
        staged = tx.get_job_tx("stamped", job_id)
        assert staged is not None
        assert staged.visibility_timeout_s == 17
    assert _stamps(store, "stamped", job_id) == [17, 7, 9, 321]


@pytest.mark.property(PROPERTY)
def test_a_bare_queue_name_in_a_transaction_stamps_the_defaults(store: Store) -> None:
    store.queue("by-name", STAMPS)  # a handle elsewhere changes nothing for a bare name
    with store.transaction() as tx:
        job_id = tx.enqueue("by-name", {"n": 1})
    assert _stamps(store, "by-name", job_id) == [
        DEFAULT_QUEUE_OPTS.visibility_timeout_s,
        DEFAULT_QUEUE_OPTS.max_attempts,
        DEFAULT_QUEUE_OPTS.backoff_base_s,
        DEFAULT_QUEUE_OPTS.dead_letter_retention_s,
    ]
