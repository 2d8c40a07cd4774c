"""§0.1: names are compared exactly, on any dialect.

A database's default collation may compare text case-insensitively (MySQL's
``_ci`` collations), ignore trailing spaces (``PAD SPACE``) or fold Unicode
normalization forms. Names and identities that differ only so are different
names, so each surface gets a family of such near-twins and must keep every one
apart: each queue holds its own jobs, each lock its own holder, each stream its
own events, each consumer its own offset, each channel its own messages, each
schedule its own spec.
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import Store

PROPERTY = "NAMES-BYTE-EXACT"

TWINS = [
    "jobs",
    "Jobs",
    "JOBS",
    "jobs ",
    " jobs",
    "jobs  ",
    "jobs\t",
    "jobs\u00a0",
    "caf\u00e9",
    "cafe\u0301",
    "CAF\u00c9",
    "stra\u00dfe",
    "strasse",
    "\ufb01le",
    "file",
]
"""Names equal under some collation and different as strings: case, trailing and
leading spaces, a tab and a no-break space, NFC against NFD ("é" as one code point
or as "e" and a combining accent), "ß" against "ss", and the "ﬁ" ligature."""

GENEROUS_S = 60.0
MOST_MESSAGES = 5 * len(TWINS)


def _by_twin(values: list[Any]) -> dict[str, Any]:
    return dict(zip(TWINS, values, strict=True))


@pytest.mark.property(PROPERTY)
def test_queues_whose_names_differ_only_in_case_spaces_or_normal_form_are_distinct(
    store: Store,
) -> None:
    enqueued = _by_twin([store.queue(name).enqueue({"queue": name}) for name in TWINS])
    for name in TWINS:
        others = [job_id for twin, job_id in enqueued.items() if twin != name]
        cancelled = [job_id for job_id in others if store.queue(name).cancel(job_id)]
        assert cancelled == [], f"queue {name!r} cancelled its near-twins' jobs {cancelled}"
    for name in TWINS:
        queue = store.queue(name)
        handle = queue.claim("worker")
        assert handle is not None, f"queue {name!r} lost its job"
        assert (handle.id, handle.payload, handle.job.queue) == (
            enqueued[name],
            {"queue": name},
            name,
        ), f"queue {name!r} handed out another queue's job"
        assert queue.claim("worker") is None, f"queue {name!r} holds another queue's job"


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("transactions")
def test_a_queue_filtered_read_never_finds_a_near_twins_job(store: Store) -> None:
    enqueued = _by_twin([store.queue(name).enqueue({"queue": name}) for name in TWINS])
    with store.transaction() as tx:
        for name in TWINS:
            found = {
                twin: tx.get_job_tx(name, job_id) is not None for twin, job_id in enqueued.items()
            }
            assert found == {twin: twin == name for twin in TWINS}, f"read through {name!r}"


@pytest.mark.property(PROPERTY)
def test_outboxes_whose_names_differ_only_in_case_or_spaces_are_distinct(store: Store) -> None:
    names = ["Mail", "mail", "mail "]
    for name in names:
        store.outbox(name).enqueue({"outbox": name})
    for name in names:
        claimed = store.outbox(name).claim_batch("relay", len(names))
        assert [handle.payload for handle in claimed] == [{"outbox": name}]


@pytest.mark.property(PROPERTY)
def test_a_batch_ack_by_one_worker_id_never_acks_a_near_twins_claims(store: Store) -> None:
    queue = store.queue("acked")
    ids = queue.enqueue_many([{"n": n} for n in range(len(TWINS))])
    for name in TWINS:
        assert queue.claim(name) is not None
    handles = _by_twin(ids)
    for name in TWINS:
        # Claims go in id order, so the job claimed by ``name`` is its twin's id.
        assert queue.ack_batch(ids, name) == 1, f"worker {name!r} acked another's claims"
        assert queue.get_job(handles[name]) is None


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("locks")
def test_locks_whose_names_differ_only_in_case_spaces_or_normal_form_are_distinct(
    clocked_store: Store,
) -> None:
    for n, name in enumerate(TWINS):
        assert clocked_store.lock(name).acquire(f"owner-{n}", 60) is True, (
            f"lock {name!r} was taken by a near-twin's holder"
        )
    for n, name in enumerate(TWINS):
        holder = clocked_store.lock(name).holder()
        assert holder is not None
        assert holder.owner == f"owner-{n}"


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("locks")
def test_a_lock_owner_is_not_its_near_twin(clocked_store: Store) -> None:
    lock = clocked_store.lock("leader")
    holder, *twins = TWINS
    assert lock.acquire(holder, 60) is True
    for twin in twins:
        assert lock.acquire(twin, 60) is False, f"{twin!r} took {holder!r}'s lock"
        assert lock.renew(twin, 60) is False, f"{twin!r} renewed {holder!r}'s lock"
        assert lock.release(twin) is False, f"{twin!r} released {holder!r}'s lock"
    info = lock.holder()
    assert info is not None
    assert info.owner == holder


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("streams")
def test_streams_whose_names_differ_only_in_case_spaces_or_normal_form_are_distinct(
    store: Store,
) -> None:
    for name in TWINS:
        store.stream(name).append({"stream": name})
    for name in TWINS:
        events = store.stream(name).read(after=0, limit=len(TWINS) + 1)
        assert [event.payload for event in events] == [{"stream": name}]


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("streams")
def test_consumers_whose_names_differ_only_in_case_spaces_or_normal_form_keep_own_offsets(
    store: Store,
) -> None:
    stream = store.stream("consumed")
    for n in range(len(TWINS)):
        stream.append({"n": n})
    for offset, name in enumerate(TWINS, 1):
        stream.commit(name, offset)
    assert [stream.offset(name) for name in TWINS] == list(range(1, len(TWINS) + 1))


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("pubsub")
def test_channels_whose_names_differ_only_in_case_spaces_or_normal_form_are_distinct(
    store: Store,
) -> None:
    subscriptions = _by_twin([store.subscribe(name) for name in TWINS])
    try:
        for name in TWINS:
            store.notify(name, {"channel": name})
        # Each channel's marker comes after every message: a subscription that reads
        # up to its own marker has seen whatever else reached it.
        for name in TWINS:
            store.notify(name, {"marker": name})
        for name, subscription in subscriptions.items():
            received: list[Any] = []
            for _ in range(MOST_MESSAGES):
                message = subscription.get(timeout=GENEROUS_S)
                assert message is not None, f"channel {name!r}'s marker never arrived"
                if message == {"marker": name}:
                    break
                received.append(message)
            assert received == [{"channel": name}], f"channel {name!r} received {received}"
    finally:
        for subscription in subscriptions.values():
            subscription.close()


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("scheduler")
def test_schedules_whose_names_differ_only_in_case_spaces_or_normal_form_are_distinct(
    clocked_store: Store,
) -> None:
    for minutes, name in enumerate(TWINS, 1):
        clocked_store.schedule(name, f"@every {minutes}m", "fired", {"schedule": name})
    for minutes, name in enumerate(TWINS, 1):
        stored = clocked_store.get_schedule(name)
        assert stored is not None
        assert (stored.name, stored.spec, stored.payload) == (
            name,
            f"@every {minutes}m",
            {"schedule": name},
        )
    assert sorted(s.name for s in clocked_store.schedules()) == sorted(TWINS)


@pytest.mark.property(PROPERTY)
@pytest.mark.requires("ops")
def test_pausing_a_queue_leaves_its_near_twins_running(store: Store) -> None:
    paused, *twins = TWINS
    assert store.queue(paused).pause() is True
    for twin in twins:
        queue = store.queue(twin)
        assert queue.paused() is False, f"pausing {paused!r} paused {twin!r}"
        queue.enqueue({"queue": twin})
        assert queue.claim("worker") is not None
