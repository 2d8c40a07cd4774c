"""§11: listing a queue's jobs in keyset pages (ops profile)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import pytest

from alkstore import Job, JobState, Queue, Store
from alkstore_conformance.helpers.bounded import MOST_PAGES, pages
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.ops import every_job, make_dead
from alkstore_conformance.helpers.profiles import in_thread

PAGE = 3
THREADED_PAGE = 10


def _job_id(job: Job) -> int:
    return job.id


JOIN_S = 120.0


@pytest.mark.property("OPS-JOBS-PAGES")
def test_pages_give_every_job_of_the_queue_once_in_id_order(store: Store) -> None:
    queue, other = store.queue("listed"), store.queue("elsewhere")
    mine: list[int] = []
    for n in range(8):
        mine.append(queue.enqueue({"n": n}))
        other.enqueue({"n": n})

    def read(after: int) -> list[Job]:
        page = queue.jobs(after_id=after, limit=PAGE)
        assert len(page) <= PAGE
        return page

    seen = [job.id for job in pages(read, _job_id, what="queue.jobs()")]
    assert seen == mine


@pytest.mark.property("OPS-JOBS-PAGES")
def test_a_page_lists_live_and_dead_jobs_as_get_job_reads_them(store: Store) -> None:
    queue = store.queue("mixed")
    dead = make_dead(queue, 2)
    pending = queue.enqueue({"pending": True})
    listed = queue.jobs()
    assert [job.id for job in listed] == [*dead, pending]
    assert listed == [queue.get_job(job.id) for job in listed]


@pytest.mark.property("OPS-JOBS-PAGES")
@pytest.mark.parametrize("state", [JobState.PENDING, JobState.PROCESSING, JobState.DEAD])
def test_a_state_filter_lists_only_jobs_in_that_state(store: Store, state: JobState) -> None:
    queue = store.queue("filtered")
    by_state: dict[JobState, Sequence[int]] = {JobState.DEAD: make_dead(queue, 2)}
    claimed = [queue.enqueue({"claimed": n}) for n in range(2)]
    assert len(queue.claim_batch("w", 2)) == 2
    by_state[JobState.PROCESSING] = claimed
    by_state[JobState.PENDING] = [queue.enqueue({"pending": n}) for n in range(2)]
    assert [job.id for job in queue.jobs(state)] == list(by_state[state])
    assert [job.id for job in queue.jobs(state.value)] == by_state[state]
    assert [job.id for job in queue.jobs(state, limit=1)] == by_state[state][:1]


@pytest.mark.property("OPS-JOBS-PAGES")
def test_after_id_past_the_last_job_gives_an_empty_page(store: Store) -> None:
    queue = store.queue("short")
    job_id = queue.enqueue({"n": 1})
    assert queue.jobs(after_id=job_id) == []
    assert store.queue("nothing").jobs() == []


@pytest.mark.property("OPS-JOBS-PAGES")
def test_a_page_holds_up_to_a_thousand_jobs(store: Store) -> None:
    queue = store.queue("big")
    ids = queue.enqueue_many([{"n": n} for n in range(1001)])
    assert [job.id for job in queue.jobs(limit=1000)] == ids[:1000]
    assert [job.id for job in queue.jobs(after_id=ids[999], limit=1000)] == ids[1000:]


# -- OPS-JOBS-PAGES-UNDER-INSERTS ------------------------------------------------------------


def _page_through(
    store: Store, queue_name: str, between_pages: list[Callable[[], None]], limit: int = PAGE
) -> list[int]:
    """Read ``queue_name`` page by page; before each next page, run one writer step."""
    queue = store.queue(queue_name)
    seen: list[int] = []
    steps = iter(between_pages)
    for _ in range(MOST_PAGES):
        page = queue.jobs(after_id=seen[-1] if seen else 0, limit=limit)
        if not page:
            return seen
        seen.extend(job.id for job in page)
        step = next(steps, None)
        if step is not None:
            step()
    raise AssertionError(f"queue.jobs() never returned an empty page after {MOST_PAGES} pages")


@pytest.mark.property("OPS-JOBS-PAGES-UNDER-INSERTS")
def test_jobs_added_and_finished_between_pages_never_make_a_page_skip_or_repeat(
    store: Store, open_store: StoreFactory
) -> None:
    writer = open_store().queue("paged")
    before = writer.enqueue_many([{"n": n} for n in range(12)])
    finished: list[int] = []

    def write() -> None:
        # Another connection adds a job and finishes the oldest unfinished one behind
        # the reader: an offset-based page would now start in the wrong place.
        writer.enqueue({"added": True})
        handle = writer.claim("writer")
        assert handle is not None
        finished.append(handle.id)
        assert (handle.ack() if len(finished) % 2 else handle.fail("done")) is True

    seen = _page_through(store, "paged", [write] * 20)
    assert seen == sorted(set(seen)), f"pages repeated or went back: {seen}"
    acked = set(finished[0::2])
    missing = [job_id for job_id in before if job_id not in seen and job_id not in acked]
    assert missing == [], f"jobs that existed throughout were skipped: {missing}"


@pytest.mark.property("OPS-JOBS-PAGES-UNDER-INSERTS")
@pytest.mark.usefixtures("trial")
def test_pages_read_while_other_connections_write_never_skip_or_repeat(
    store: Store, open_store: StoreFactory
) -> None:
    name = "racing"
    before = store.queue(name).enqueue_many([{"n": n} for n in range(60)])
    stop = threading.Event()
    writers = [open_store().queue(name) for _ in range(2)]

    def enqueue_until_stopped(queue: Queue) -> int:
        written = 0
        while not stop.is_set() and written < 2000:
            queue.enqueue({"added": written})
            written += 1
        return written

    def fail_until_stopped(queue: Queue) -> int:
        failed = 0
        while not stop.is_set() and failed < 2000:
            handle = queue.claim("failer")
            if handle is None:
                break
            handle.fail("moved to dead while listed")
            failed += 1
        return failed

    running = [in_thread(lambda: enqueue_until_stopped(writers[0]), "enqueuer")]
    running.append(in_thread(lambda: fail_until_stopped(writers[1]), "failer"))
    try:
        seen = _page_through(store, name, [], limit=THREADED_PAGE)
    finally:
        stop.set()
        for outcome in running:
            outcome.join(JOIN_S)
    assert seen == sorted(set(seen)), "pages repeated or went back"
    missing = sorted(set(before) - set(seen))
    assert missing == [], f"jobs that existed throughout were skipped: {missing}"
    assert every_job(store.queue(name))  # the store still reads whole


# -- newest first (contract 1.2: before_id) ---------------------------------------------
def _newest_pages(queue: Queue, state: JobState | None, *, after: int = 0) -> list[int]:
    """Every id of a newest-first listing, page by page from the top, each page's ids
    checked to fall, and the walk bounded (a cursor ignored fails, never loops)."""
    ids: list[int] = []
    before = 2**63 - 1
    for _ in range(MOST_PAGES):
        page = [job.id for job in queue.jobs(state, after_id=after, before_id=before, limit=PAGE)]
        assert len(page) <= PAGE
        if not page:
            return ids
        assert page == sorted(page, reverse=True), (
            f"a newest-first page is not newest first: {page}"
        )
        assert page[0] < before, f"before_id={before} returned {page[0]}: not below the cursor"
        ids.extend(page)
        before = page[-1]
    raise AssertionError(f"queue.jobs(before_id=) never returned an empty page after {MOST_PAGES}")


@pytest.mark.property("OPS-JOBS-NEWEST-FIRST")
def test_newest_first_pages_give_every_job_once_largest_id_first(store: Store) -> None:
    queue, other = store.queue("newest"), store.queue("beside")
    dead = make_dead(queue, 2)
    mine: list[int] = []
    for n in range(8):
        mine.append(queue.enqueue({"n": n}))
        other.enqueue({"n": n})
    assert _newest_pages(queue, None) == sorted([*mine, *dead], reverse=True)


@pytest.mark.property("OPS-JOBS-NEWEST-FIRST")
def test_a_newest_first_page_is_the_largest_ids_below_the_cursor(store: Store) -> None:
    queue = store.queue("top")
    ids = queue.enqueue_many([{"n": n} for n in range(10)])
    page = queue.jobs(before_id=ids[7], limit=3)
    assert [job.id for job in page] == [ids[6], ids[5], ids[4]]
    assert page == [queue.get_job(job.id) for job in page]


@pytest.mark.property("OPS-JOBS-NEWEST-FIRST")
@pytest.mark.parametrize("state", [JobState.PENDING, JobState.PROCESSING, JobState.DEAD])
def test_newest_first_with_a_state_lists_only_that_state(store: Store, state: JobState) -> None:
    queue = store.queue("newest-filtered")
    by_state: dict[JobState, Sequence[int]] = {JobState.DEAD: make_dead(queue, 4)}
    claimed = [queue.enqueue({"claimed": n}) for n in range(4)]
    assert len(queue.claim_batch("w", 4)) == 4
    by_state[JobState.PROCESSING] = claimed
    by_state[JobState.PENDING] = [queue.enqueue({"pending": n}) for n in range(4)]
    assert _newest_pages(queue, state) == sorted(by_state[state], reverse=True)


@pytest.mark.property("OPS-JOBS-NEWEST-FIRST")
def test_newest_first_stays_above_after_id(store: Store) -> None:
    queue = store.queue("window")
    make_dead(queue, 1)
    ids = queue.enqueue_many([{"n": n} for n in range(9)])
    assert _newest_pages(queue, JobState.PENDING, after=ids[2]) == sorted(ids[3:], reverse=True)
    assert queue.jobs(after_id=ids[4], before_id=ids[5]) == []
