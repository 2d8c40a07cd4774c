"""§10.7: a broken engine fails, never hangs.

Each test ends on something only the engine can bring about: a listing's empty
last page, or a waiting call's deadline. The listings are read through the
kit's bounded pager (``helpers.bounded.pages``), so an engine whose pages never
end (a cursor it ignores) fails at once. The waiting calls are made on the
test's own thread with nothing around them, so the kit's per-test time budget
(``certify.budget``) is all that stands between an engine that ignores a
timeout and a hung run: such an engine fails at the budget, with the call it
was waiting in. On a correct engine every test passes within a second.
"""

from __future__ import annotations

import pytest

from alkstore import Job, Store, StreamEvent
from alkstore_conformance.helpers.bounded import pages

PROPERTY = "KIT-FAILS-NEVER-HANGS"
PAGE = 3
ITEMS = 10
WAIT_S = 0.2
"""Each waiting call's timeout: short, since only its return is checked."""


def _job_id(job: Job) -> int:
    return job.id


def _offset(event: StreamEvent) -> int:
    return event.offset


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("ops")
def test_paging_through_a_queues_jobs_ends_with_an_empty_page(store: Store) -> None:
    queue = store.queue("listed")
    ids = queue.enqueue_many([{"n": n} for n in range(ITEMS)])
    pages_read = 0

    def read(after: int) -> list[Job]:
        nonlocal pages_read
        pages_read += 1
        return queue.jobs(after_id=after, limit=PAGE)

    listed = pages(read, _job_id, what="queue.jobs()")
    assert [job.id for job in listed] == ids
    assert pages_read == -(-ITEMS // PAGE) + 1  # the full pages, then the empty one


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("streams")
def test_reading_a_stream_page_by_page_ends_with_an_empty_page(store: Store) -> None:
    stream = store.stream("paged")
    offsets = [stream.append({"n": n}) for n in range(ITEMS)]

    def read(after: int) -> list[StreamEvent]:
        return stream.read(after=after, limit=PAGE)

    assert [event.offset for event in pages(read, _offset, what="stream.read()")] == offsets


@pytest.mark.property(PROPERTY)
def test_claim_wait_on_an_empty_queue_returns_at_its_timeout(store: Store) -> None:
    # On the test's own thread: an engine that never returns meets the time budget.
    assert store.queue("empty").claim_wait("waiter", timeout=WAIT_S) is None


@pytest.mark.property(PROPERTY)
def test_claim_wait_any_on_empty_queues_returns_at_its_timeout(store: Store) -> None:
    queues = [store.queue("first-empty"), store.queue("second-empty")]
    assert store.claim_wait_any(queues, "waiter", timeout=WAIT_S) is None


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("streams")
def test_stream_wait_past_the_last_event_returns_at_its_timeout(store: Store) -> None:
    stream = store.stream("quiet")
    last = stream.append({"n": 1})
    assert stream.wait(after=last, timeout=WAIT_S) is False


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("pubsub")
def test_a_quiet_subscription_get_returns_at_its_timeout(store: Store) -> None:
    with store.subscribe("quiet") as subscription:
        assert subscription.get(timeout=WAIT_S) is None
