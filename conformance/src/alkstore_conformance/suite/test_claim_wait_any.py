"""§12.1: ``claim_wait_any`` is ``claim_wait`` over several queues at once.

The functional tests use generous timeouts and no latency assertions; short
sleeps only sequence "the waiter has started waiting" before "the job is
enqueued" (a sleep that is too short makes a test check less, never fail).
``QUEUE-CLAIM-WAIT-ANY-PROMPT`` bounds the lateness the way
``suite/test_wake_latency.py`` does: the median of a few samples, each written
at a random phase of the waiter's re-poll interval.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from alkstore import (
    EngineSpec,
    EnqueueOpts,
    InvalidName,
    InvalidOptions,
    JobHandle,
    JobState,
    Outbox,
    Queue,
    QueueConsumer,
    StopToken,
    Store,
)
from alkstore.constants import MAX_WAIT_QUEUES
from alkstore_conformance.helpers.common import MALFORMED_IDS, MALFORMED_NAMES
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import writer_on_signals
from alkstore_conformance.helpers.profiles import Children, Outcome, in_thread
from alkstore_conformance.helpers.trials import Trial

GENEROUS_S = 15.0
"""The timeout of a wait that must end with a job: a safety net, never a measure.
Fifteen of the core's default 1 s re-polls: an engine that only re-polls passes too."""
SETTLE_S = 0.2
SHORT_S = 0.3
"""The timeout of a wait that must end with ``None``."""
SAMPLES = 3
PROMPT_S = 0.25
"""The median lateness allowed, as for ``WAKE-CROSS-PROCESS-PROMPT``."""
WAIT_PHASE_S = (0.3, 0.7)
"""How long after waiting starts the other process writes: a waiter that hears only
its re-poll is then at least 0.3 s late on every sample."""
CHILD_LIMIT_S = 60.0
"""How long the writer processes wait for a command, and the parent for a report."""
JOIN_S = GENEROUS_S + 15
"""A waiting thread's bound: past its own timeout, so it never fails the join first."""

NAMES = ("first", "second", "third")


def _queues(store: Store) -> list[Queue]:
    return [store.queue(name) for name in NAMES]


def _waiting(
    store: Store,
    queues: Sequence[Queue | Outbox],
    timeout: float | None = GENEROUS_S,
    stop: StopToken | None = None,
) -> Outcome[JobHandle | None]:
    return in_thread(lambda: store.claim_wait_any(queues, "waiter", timeout=timeout, stop=stop))


def _assert_unclaimed(queue: QueueConsumer, job_id: int) -> None:
    job = queue.get_job(job_id)
    assert job is not None
    assert (job.state, job.attempts, job.worker_id) == (JobState.PENDING, 0, None)


# -- QUEUE-CLAIM-WAIT-ANY-TAKES-ANY ---------------------------------------------------


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
@pytest.mark.parametrize("position", [1, 2], ids=["second", "third"])
def test_a_job_waiting_only_in_a_later_queue_is_returned(store: Store, position: int) -> None:
    queues = _queues(store)
    job_id = queues[position].enqueue({"n": 1})
    handle = store.claim_wait_any(queues, "waiter", timeout=GENEROUS_S)
    assert handle is not None
    assert (handle.id, handle.job.queue) == (job_id, NAMES[position])
    assert handle.job.worker_id == "waiter"
    assert handle.ack() is True


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
def test_the_queues_are_tried_in_the_order_given(store: Store) -> None:
    first, second = store.queue("first"), store.queue("second")
    first_id = first.enqueue({"n": 1})
    second_id = second.enqueue({"n": 2})
    in_order = store.claim_wait_any([first, second], "waiter", timeout=GENEROUS_S)
    # Work for the first queue again: the reversed list then also has a choice.
    first_again = first.enqueue({"n": 3})
    reversed_order = store.claim_wait_any([second, first], "waiter", timeout=GENEROUS_S)
    assert in_order is not None
    assert reversed_order is not None
    assert (in_order.id, reversed_order.id) == (first_id, second_id)
    _assert_unclaimed(first, first_again)


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
def test_an_earlier_queue_wins_over_a_higher_priority_job_of_a_later_one(store: Store) -> None:
    # Order of the list first, then each queue's own claim order (§2) within it.
    first, second = store.queue("first"), store.queue("second")
    low = first.enqueue({"n": 1}, EnqueueOpts(priority=-10))
    high = second.enqueue({"n": 2}, EnqueueOpts(priority=10))
    handle = store.claim_wait_any([first, second], "waiter", timeout=GENEROUS_S)
    assert handle is not None
    assert handle.id == low
    _assert_unclaimed(second, high)


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
def test_an_outbox_is_waited_on_like_a_queue(store: Store) -> None:
    # A queue and an outbox of one name are different queues (§4), not a duplicate.
    queue, outbox = store.queue("sync"), store.outbox("sync")
    job_id = outbox.enqueue({"order": 7})
    handle = store.claim_wait_any([queue, outbox], "relay", timeout=GENEROUS_S)
    assert handle is not None
    assert (handle.id, handle.job.queue) == (job_id, outbox.name)


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
@pytest.mark.parametrize("position", [0, 1, 2], ids=["first", "second", "third"])
def test_a_job_enqueued_while_waiting_to_any_listed_queue_ends_the_wait(
    store: Store, position: int
) -> None:
    queues = _queues(store)
    waiting = _waiting(store, queues)
    time.sleep(SETTLE_S)
    job_id = queues[position].enqueue({"n": 1})
    handle = waiting.join(JOIN_S)
    assert handle is not None
    assert (handle.id, handle.job.queue) == (job_id, NAMES[position])


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
def test_a_delayed_job_of_a_later_queue_is_returned_once_due(store: Store) -> None:
    queues = _queues(store)
    # Whole-second stamps: due in one to two seconds from now.
    job_id = queues[1].enqueue({"n": 1}, EnqueueOpts(delay=2))
    job = queues[1].get_job(job_id)
    assert job is not None
    handle = store.claim_wait_any(queues, "waiter", timeout=GENEROUS_S)
    assert handle is not None
    assert handle.id == job_id
    assert handle.job.claimed_at is not None
    assert handle.job.claimed_at >= job.run_at


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
@pytest.mark.parametrize("timeout", [0, SHORT_S])
def test_none_at_the_timeout_with_nothing_claimed(store: Store, timeout: float) -> None:
    queues = _queues(store)
    later = queues[1].enqueue({"n": 1}, EnqueueOpts(delay=3600))
    unlisted = store.queue("unlisted")
    elsewhere = unlisted.enqueue({"n": 2})
    assert store.claim_wait_any(queues, "waiter", timeout=timeout) is None
    _assert_unclaimed(queues[1], later)
    _assert_unclaimed(unlisted, elsewhere)


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
def test_none_when_stopped_while_waiting_with_nothing_claimed(store: Store) -> None:
    queues = _queues(store)
    later = queues[2].enqueue({"n": 1}, EnqueueOpts(delay=3600))
    stop = StopToken()
    waiting = _waiting(store, queues, timeout=None, stop=stop)
    time.sleep(SETTLE_S)
    stop.stop()
    assert waiting.join(JOIN_S) is None
    _assert_unclaimed(queues[2], later)


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-TAKES-ANY")
def test_a_stop_already_set_returns_none_without_claiming(store: Store) -> None:
    queues = _queues(store)
    ready = [queue.enqueue({"n": n}) for n, queue in enumerate(queues)]
    stop = StopToken()
    stop.stop()
    assert store.claim_wait_any(queues, "waiter", timeout=GENEROUS_S, stop=stop) is None
    for queue, job_id in zip(queues, ready, strict=True):
        _assert_unclaimed(queue, job_id)


# -- QUEUE-CLAIM-WAIT-ANY-PROMPT ------------------------------------------------------


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-PROMPT")
@pytest.mark.requires("multi_process")
def test_claim_wait_any_returns_a_job_another_process_enqueued_to_a_later_queue_promptly(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    rng = trial.random()
    queues = _queues(store)
    lateness: list[float] = []
    with Children(CHILD_LIMIT_S) as children:
        # One writer per later queue: each sample picks which of them writes.
        commands = {position: children.context.Queue() for position in (1, 2)}
        for position, orders in commands.items():
            children.start(
                writer_on_signals,
                engine_name,
                engine_group,
                engine_spec,
                "queue",
                NAMES[position],
                orders,
                children.results,
                CHILD_LIMIT_S,
            )
        for _ in commands:
            children.expect("ready")
        for _ in range(SAMPLES):
            position = rng.choice(sorted(commands))
            waiting = _waiting(store, queues)
            time.sleep(rng.uniform(*WAIT_PHASE_S))
            commands[position].put("write")
            job_id, committed_at = children.expect("wrote")
            handle = waiting.join(JOIN_S)
            returned = time.time()
            assert handle is not None
            assert (handle.id, handle.job.queue) == (job_id, NAMES[position])
            lateness.append(returned - committed_at)
            assert handle.ack() is True
        for orders in commands.values():
            orders.put(None)
        for _ in commands:
            children.expect("done")
    assert statistics.median(lateness) < PROMPT_S, (
        f"median {statistics.median(lateness) * 1000:.0f} ms of {[round(x, 3) for x in lateness]}"
    )


# -- QUEUE-CLAIM-WAIT-ANY-ARGUMENTS ---------------------------------------------------

QueueList = Callable[[Store, StoreFactory], Any]
BAD_QUEUE_LISTS: dict[str, QueueList] = {
    "empty-list": lambda s, o: [],
    "empty-tuple": lambda s, o: (),
    "str": lambda s, o: "first",
    "none": lambda s, o: None,
    "a-set": lambda s, o: {s.queue("first")},
    "too-many": lambda s, o: [s.queue(f"q{n}") for n in range(MAX_WAIT_QUEUES + 1)],
    "one-handle-twice": lambda s, o: [s.queue("first")] * 2,
    "one-name-twice": lambda s, o: [s.queue("first"), s.queue("second"), s.queue("first")],
    "outbox-twice": lambda s, o: [s.outbox("sync"), s.outbox("sync")],
    "another-stores-handle": lambda s, o: [o().queue("first")],
    "another-stores-handle-too": lambda s, o: [s.queue("second"), o().queue("third")],
    "a-name": lambda s, o: ["first"],
    "a-name-among-handles": lambda s, o: [s.queue("second"), "first"],
    "not-a-handle": lambda s, o: [object()],
}


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-ARGUMENTS")
@pytest.mark.parametrize("case", list(BAD_QUEUE_LISTS))
def test_a_bad_queue_list_is_refused_before_anything_is_claimed(
    store: Store, open_store: StoreFactory, case: str
) -> None:
    first = store.queue("first")
    job_id = first.enqueue({"n": 1})
    queues = BAD_QUEUE_LISTS[case](store, open_store)
    with pytest.raises(InvalidOptions, match="queue"):
        store.claim_wait_any(queues, "waiter", timeout=0)
    _assert_unclaimed(first, job_id)


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-ARGUMENTS")
def test_as_many_as_max_wait_queues_are_accepted(store: Store) -> None:
    queues = [store.queue(f"q{n}") for n in range(MAX_WAIT_QUEUES)]
    job_id = queues[-1].enqueue({"n": 1})
    handle = store.claim_wait_any(tuple(queues), "waiter", timeout=GENEROUS_S)
    assert handle is not None
    assert handle.id == job_id


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-ARGUMENTS")
@pytest.mark.parametrize("worker_id", MALFORMED_NAMES, ids=MALFORMED_IDS)
def test_a_malformed_worker_id_is_refused_before_anything_is_claimed(
    store: Store, worker_id: Any
) -> None:
    queues = _queues(store)
    job_id = queues[0].enqueue({"n": 1})
    with pytest.raises(InvalidName):
        store.claim_wait_any(queues, worker_id, timeout=0)
    _assert_unclaimed(queues[0], job_id)


BAD_WAITS: dict[str, tuple[dict[str, Any], str]] = {
    "timeout-negative": ({"timeout": -1}, "timeout"),
    "timeout-str": ({"timeout": "soon"}, "timeout"),
    "timeout-nan": ({"timeout": float("nan")}, "timeout"),
    "stop-event": ({"stop": threading.Event()}, "stop"),
    "stop-true": ({"stop": True}, "stop"),
}


@pytest.mark.property("QUEUE-CLAIM-WAIT-ANY-ARGUMENTS")
@pytest.mark.parametrize("case", list(BAD_WAITS))
def test_a_bad_timeout_or_stop_is_refused_before_anything_is_claimed(
    store: Store, case: str
) -> None:
    queues = _queues(store)
    job_id = queues[0].enqueue({"n": 1})
    kwargs, field = BAD_WAITS[case]
    with pytest.raises(InvalidOptions, match=field):
        store.claim_wait_any(queues, "waiter", **kwargs)
    _assert_unclaimed(queues[0], job_id)
