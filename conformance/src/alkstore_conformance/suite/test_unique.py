"""§15 (unique profile): at most one job of a queue holds a key at a time.

An enqueue with ``EnqueueOpts(unique=...)`` whose key a job of the queue holds
writes nothing and returns that job's id as an ``Enqueued`` with ``duplicate``
set. A job holds its key while it is in its states (pending and processing,
and dead when asked) and, with a period, until ``created_at + period``; a
redrive skips a dead job whose key another job holds. Every enqueue, unique or
not, returns ``Enqueued`` ids that are ints wherever code reads one.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import (
    MAX_UNIQUE_KEY_CHARS,
    EngineProvider,
    EngineSpec,
    Enqueued,
    EnqueueOpts,
    InvalidOptions,
    JobState,
    ProfileUnavailable,
    QueueOpts,
    Store,
    Unique,
)
from alkstore.testing import FakeClock
from alkstore_conformance.helpers.common import (
    Rollback,
    business_ids,
    business_table,
    insert_business_row,
    native_sql,
    raise_inside,
    unique_name,
)
from alkstore_conformance.helpers.fixtures import StoreFactory
from alkstore_conformance.helpers.profile_processes import unique_enqueuer_process
from alkstore_conformance.helpers.profiles import Children, drain
from alkstore_conformance.helpers.trials import Trial

KEEPS_DEAD = ("pending", "processing", "dead")
ENQUEUERS = 8
ROUNDS = 6
"""Keys raced per trial: each round 8 enqueuers meet at a barrier and enqueue one key."""
TIME_LIMIT_S = 120.0


def _opts(key: str | None = None, **unique: Any) -> EnqueueOpts:
    return EnqueueOpts(unique=Unique(key, **unique))


def _claimed(queue: Any, worker: str = "w1") -> Any:
    handle = queue.claim(worker)
    assert handle is not None
    return handle


def _job_count(queue: Any) -> int:
    """How many claimable jobs the queue holds (claimed, so call it last)."""
    return len(drain(queue))


# -- ENQUEUE-RESULT-INT (every engine) ------------------------------------------------


@pytest.mark.property("ENQUEUE-RESULT-INT")
def test_an_enqueue_returns_an_id_that_is_an_int_in_every_way_code_reads_one(
    store: Store,
) -> None:
    queue = store.queue(unique_name("ints"))
    got = queue.enqueue({"n": 1})
    assert isinstance(got, Enqueued)
    assert isinstance(got, int)
    assert got.duplicate is False
    plain = got.id
    assert type(plain) is int
    assert (got == plain, hash(got) == hash(plain), {plain: "x"}[got]) == (True, True, "x")
    printf_style = "%d" % (got,)  # noqa: UP031 -- old code formats ids this way too
    assert (json.dumps(got), f"{got}", printf_style, repr(got)) == (str(plain),) * 4
    again = pickle.loads(pickle.dumps(got))
    assert (again, again.duplicate) == (plain, False)
    job = queue.get_job(got)
    assert job is not None
    assert job.id == plain


@pytest.mark.property("ENQUEUE-RESULT-INT")
def test_enqueue_many_returns_ids_of_one_type_none_a_duplicate(store: Store) -> None:
    ids = store.queue(unique_name("ints")).enqueue_many([1, 2, 3])
    assert {type(i) for i in ids} == {Enqueued}
    assert [i.duplicate for i in ids] == [False, False, False]
    assert [i.id for i in ids] == sorted(int(i) for i in ids)


@pytest.mark.property("ENQUEUE-RESULT-INT")
@pytest.mark.requires("transactions")
def test_a_transactional_enqueue_returns_an_enqueued_id(store: Store) -> None:
    name = unique_name("ints")
    with store.transaction() as tx:
        got = tx.enqueue(name, {"n": 1})
    assert isinstance(got, Enqueued)
    assert got.duplicate is False
    assert _claimed(store.queue(name)).id == got


@pytest.mark.property("ENQUEUE-RESULT-INT")
@pytest.mark.requires("sql")
def test_an_enqueued_id_binds_as_a_parameter_of_the_engines_sql(store: Store) -> None:
    with business_table(store) as table:
        with store.transaction() as tx:
            got = tx.enqueue(unique_name("ints"), {"n": 1})
            insert = native_sql(tx.connection, f"INSERT INTO {table} (id) VALUES (?)")
            tx.execute(insert, (got,))
        assert business_ids(store, table) == [got.id]


# -- UNIQUE-PROFILE-DECLARED (every engine) -----------------------------------------------


@pytest.mark.property("UNIQUE-PROFILE-DECLARED")
def test_a_unique_enqueue_works_exactly_when_the_engine_declares_the_profile(
    store: Store, engine: EngineProvider
) -> None:
    queue = store.queue(unique_name("declared"))
    opts = EnqueueOpts(unique="k")
    if engine.capabilities.unique:
        first = queue.enqueue(1, opts)
        assert queue.enqueue(2, opts) == first
        assert queue.enqueue(2, opts).duplicate
        return
    with pytest.raises(ProfileUnavailable):
        queue.enqueue(1, opts)
    with pytest.raises(ProfileUnavailable):
        queue.enqueue_many([1, 2], opts)
    with pytest.raises(ProfileUnavailable):
        queue.enqueue_many([], opts)
    if engine.capabilities.transactions:
        with store.transaction() as tx, pytest.raises(ProfileUnavailable):
            tx.enqueue(queue.name, 3, opts)
    assert queue.claim("w1") is None  # nothing was written
    assert not queue.enqueue(4).duplicate  # and a plain enqueue carries on


# -- UNIQUE-DUPLICATE --------------------------------------------------------------------


@pytest.mark.property("UNIQUE-DUPLICATE")
def test_an_enqueue_of_a_held_key_writes_nothing_and_returns_the_holder(store: Store) -> None:
    queue = store.queue(unique_name("unique"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="sync-user-42"))
    second = queue.enqueue({"n": 2}, EnqueueOpts(unique="sync-user-42"))
    assert first.duplicate is False
    assert (second, second.duplicate) == (first, True)
    (only,) = drain(queue)
    assert (only.id, only.payload) == (first, {"n": 1})


@pytest.mark.property("UNIQUE-DUPLICATE")
def test_a_key_is_a_key_of_its_queue_only(store: Store) -> None:
    one, other = store.queue(unique_name("one")), store.queue(unique_name("other"))
    a = one.enqueue(1, EnqueueOpts(unique="k"))
    b = other.enqueue(1, EnqueueOpts(unique="k"))
    assert (a.duplicate, b.duplicate) == (False, False)
    assert a != b
    assert (_job_count(one), _job_count(other)) == (1, 1)


@pytest.mark.property("UNIQUE-DUPLICATE")
def test_a_duplicate_changes_nothing_of_the_job_holding_the_key(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("unique"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(delay=60, priority=3, unique="k"))
    before = queue.get_job(first)
    clock.advance(5)
    again = queue.enqueue({"n": 2}, EnqueueOpts(priority=9, max_attempts=7, unique="k"))
    assert (again, again.duplicate) == (first, True)
    assert queue.get_job(first) == before


# -- UNIQUE-KEY-SHOWN ---------------------------------------------------------------------


@pytest.mark.property("UNIQUE-KEY-SHOWN")
def test_a_jobs_unique_key_shows_on_get_job_and_its_handle_for_its_whole_life(
    store: Store,
) -> None:
    queue = store.queue(unique_name("shown"))
    plain = queue.enqueue({"n": 0})
    keyed = queue.enqueue({"n": 1}, EnqueueOpts(unique="shown-key"))
    plain_job, keyed_job = queue.get_job(plain), queue.get_job(keyed)
    assert plain_job is not None
    assert keyed_job is not None
    assert (plain_job.unique_key, keyed_job.unique_key) == (None, "shown-key")
    handles = {handle.id: handle for handle in queue.claim_batch("w1", 2)}
    assert handles[keyed].job.unique_key == "shown-key"
    assert handles[keyed].fail("broken")
    dead = queue.get_job(keyed)
    assert dead is not None
    assert (dead.state, dead.unique_key) == (JobState.DEAD, "shown-key")


@pytest.mark.property("UNIQUE-KEY-SHOWN")
@pytest.mark.requires("ops")
def test_a_page_of_jobs_shows_each_jobs_unique_key(store: Store) -> None:
    queue = store.queue(unique_name("shown"))
    queue.enqueue({"n": 0})
    queue.enqueue({"n": 1}, EnqueueOpts(unique="page-key"))
    assert [job.unique_key for job in queue.jobs()] == [None, "page-key"]


# -- UNIQUE-BY-PAYLOAD ----------------------------------------------------------------------


@pytest.mark.property("UNIQUE-BY-PAYLOAD")
def test_payloads_that_read_back_equal_share_a_key_whatever_their_key_order(
    store: Store,
) -> None:
    queue = store.queue(unique_name("by-payload"))
    first = queue.enqueue({"a": 1, "b": [1, 2]}, _opts())
    assert queue.enqueue({"b": (1, 2), "a": 1}, _opts()) == first
    assert queue.enqueue({"b": [1, 2], "a": 1}, _opts()).duplicate
    other = queue.enqueue({"a": 2, "b": [1, 2]}, _opts())
    assert (other.duplicate, other != first) == (False, True)
    assert _job_count(queue) == 2


@pytest.mark.property("UNIQUE-BY-PAYLOAD")
def test_a_payloads_key_is_the_sha256_of_its_canonical_json(store: Store) -> None:
    queue = store.queue(unique_name("by-payload"))
    payload = {"zeta": "ü", "alpha": [1, {"y": None, "x": 2.5}]}
    job = queue.get_job(queue.enqueue(payload, _opts()))
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert job is not None
    assert job.unique_key == f"payload:sha256:{digest}"


# -- UNIQUE-BATCH ----------------------------------------------------------------------------


@pytest.mark.property("UNIQUE-BATCH")
def test_items_of_one_batch_with_one_key_are_the_first_items_duplicates(store: Store) -> None:
    queue = store.queue(unique_name("batch"))
    ids = queue.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}], EnqueueOpts(unique="k"))
    assert [i.duplicate for i in ids] == [False, True, True]
    assert len(set(ids)) == 1
    (only,) = drain(queue)
    assert only.payload == {"n": 1}


@pytest.mark.property("UNIQUE-BATCH")
def test_a_batch_keyed_by_payload_makes_one_job_per_distinct_payload(store: Store) -> None:
    queue = store.queue(unique_name("batch"))
    x, y, z = {"x": 1}, {"y": 1}, {"z": 1}
    ids = queue.enqueue_many([x, y, x, y, z], _opts())
    assert [i.duplicate for i in ids] == [False, False, True, True, False]
    assert (ids[2], ids[3]) == (ids[0], ids[1])
    assert ids[0] < ids[1] < ids[4]  # new jobs' ids increase in payload order
    assert Counter(json.dumps(h.payload) for h in drain(queue)) == Counter(
        json.dumps(p) for p in (x, y, z)
    )


@pytest.mark.property("UNIQUE-BATCH")
def test_a_batch_meets_the_keys_held_before_it(store: Store) -> None:
    queue = store.queue(unique_name("batch"))
    held = queue.enqueue({"x": 1}, _opts())
    ids = queue.enqueue_many([{"y": 1}, {"x": 1}], _opts())
    assert [(i == held, i.duplicate) for i in ids] == [(False, False), (True, True)]
    assert _job_count(queue) == 2


@pytest.mark.property("UNIQUE-BATCH")
def test_a_batch_taking_a_key_whose_period_passed_keeps_its_ids_in_payload_order(
    clocked_store: Store, clock: FakeClock
) -> None:
    # The first payload's key is still held by a pending job whose period passed (no
    # enqueue has taken it since), the second's is free: both make new jobs, and the
    # ids increase in payload order (§15.6) however the engine finds the passed hold.
    queue = clocked_store.queue(unique_name("batch"))
    first = queue.enqueue({"x": 1}, _opts(period=5))
    clock.advance(5)
    ids = queue.enqueue_many([{"x": 1}, {"y": 1}], _opts(period=5))
    assert [i.duplicate for i in ids] == [False, False]
    assert first < ids[0] < ids[1]


# -- UNIQUE-CONCURRENT -------------------------------------------------------------------------


def _check_races(outcomes: list[tuple[str, int, bool]], keys: list[str], queue: Any) -> None:
    by_key: dict[str, list[tuple[int, bool]]] = {key: [] for key in keys}
    for key, job_id, duplicate in outcomes:
        by_key[key].append((job_id, duplicate))
    for key, results in by_key.items():
        assert len(results) == ENQUEUERS, (key, results)
        made = [job_id for job_id, duplicate in results if not duplicate]
        assert len(made) == 1, f"{len(made)} enqueues of {key!r} made a job: {results}"
        assert {job_id for job_id, _ in results} == set(made), (key, results)
    counts = Counter(handle.payload["key"] for handle in drain(queue))
    assert counts == Counter(dict.fromkeys(keys, 1)), counts


@pytest.mark.property("UNIQUE-CONCURRENT")
def test_threads_enqueueing_one_key_at_once_make_exactly_one_job(
    store: Store, open_store: StoreFactory, trial: Trial
) -> None:
    name = unique_name("raced")
    keys = [f"key-{trial.seed}-{n}" for n in range(ROUNDS)]
    second = open_store()  # half the threads share a second store object
    barrier = threading.Barrier(ENQUEUERS)
    outcomes: list[tuple[str, int, bool]] = []
    errors: list[BaseException] = []

    def enqueuer(index: int) -> None:
        queue = (store if index % 2 else second).queue(name)
        try:
            for key in keys:
                barrier.wait(timeout=TIME_LIMIT_S)
                got = queue.enqueue({"by": index, "key": key}, EnqueueOpts(unique=key))
                outcomes.append((key, int(got), got.duplicate))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=enqueuer, args=(i,)) for i in range(ENQUEUERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIME_LIMIT_S * 2)
    assert errors == []
    _check_races(outcomes, keys, store.queue(name))


@pytest.mark.property("UNIQUE-CONCURRENT")
@pytest.mark.requires("multi_process")
def test_processes_enqueueing_one_key_at_once_make_exactly_one_job(
    engine_name: str, engine_group: str, engine_spec: EngineSpec, store: Store, trial: Trial
) -> None:
    name = unique_name("raced")
    keys = [f"key-{trial.seed}-{n}" for n in range(ROUNDS)]
    with Children(TIME_LIMIT_S * 2) as children:
        barrier = children.context.Barrier(ENQUEUERS)
        for index in range(ENQUEUERS):
            children.start(
                unique_enqueuer_process,
                engine_name,
                engine_group,
                engine_spec,
                name,
                f"process-{index}",
                keys,
                barrier=barrier,
                results=children.results,
                time_limit_s=TIME_LIMIT_S,
            )
        reports = [children.expect("enqueued") for _ in range(ENQUEUERS)]
    _check_races([outcome for report in reports for outcome in report], keys, store.queue(name))


# -- UNIQUE-TRANSACTIONS -----------------------------------------------------------------------


@pytest.mark.property("UNIQUE-TRANSACTIONS")
@pytest.mark.requires("transactions")
def test_a_key_enqueued_in_a_transaction_is_held_for_its_later_enqueues(store: Store) -> None:
    name = unique_name("tx-unique")
    with store.transaction() as tx:
        first = tx.enqueue(name, {"n": 1}, EnqueueOpts(unique="k"))
        again = tx.enqueue(name, {"n": 2}, EnqueueOpts(unique="k"))
        assert (first.duplicate, again, again.duplicate) == (False, first, True)
    after = store.queue(name).enqueue({"n": 3}, EnqueueOpts(unique="k"))
    assert (after, after.duplicate) == (first, True)
    assert _job_count(store.queue(name)) == 1


@pytest.mark.property("UNIQUE-TRANSACTIONS")
@pytest.mark.requires("transactions")
def test_a_key_held_outside_is_a_duplicate_inside_a_transaction(store: Store) -> None:
    name = unique_name("tx-unique")
    held = store.queue(name).enqueue({"n": 1}, EnqueueOpts(unique="k"))
    with store.transaction() as tx:
        inside = tx.enqueue(name, {"n": 2}, EnqueueOpts(unique="k"))
    assert (inside, inside.duplicate) == (held, True)


@pytest.mark.property("UNIQUE-TRANSACTIONS")
@pytest.mark.requires("transactions")
def test_a_rolled_back_transaction_frees_its_key(store: Store) -> None:
    name = unique_name("tx-unique")
    made: list[Enqueued] = []
    with pytest.raises(Rollback):
        raise_inside(
            store.transaction(),
            lambda tx: made.append(tx.enqueue(name, {"n": 1}, EnqueueOpts(unique="k"))),
        )
    (rolled_back,) = made
    assert not rolled_back.duplicate
    after = store.queue(name).enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert after.duplicate is False
    (only,) = drain(store.queue(name))
    assert (only.id, only.payload) == (after, {"n": 2})


@pytest.mark.property("UNIQUE-TRANSACTIONS")
@pytest.mark.requires("attach")
def test_an_attached_transactions_key_is_held_until_the_caller_rolls_it_back(
    store: Store, native_connect: Callable[[], Any]
) -> None:
    name = unique_name("tx-unique")
    with business_table(store) as table:
        connection = native_connect()
        try:
            insert_business_row(connection, table, 7)
            with store.attach(connection) as tx:
                first = tx.enqueue(name, {"n": 1}, EnqueueOpts(unique="k"))
                again = tx.enqueue(name, {"n": 2}, EnqueueOpts(unique="k"))
            assert (first.duplicate, again, again.duplicate) == (False, first, True)
            connection.rollback()
        finally:
            connection.close()
    after = store.queue(name).enqueue({"n": 3}, EnqueueOpts(unique="k"))
    assert after.duplicate is False
    assert _job_count(store.queue(name)) == 1


# -- UNIQUE-PERIOD ---------------------------------------------------------------------------


@pytest.mark.property("UNIQUE-PERIOD")
def test_a_key_is_held_for_its_period_and_a_new_job_takes_it_after(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("period"))
    first = queue.enqueue({"n": 1}, _opts("k", period=60))
    clock.advance(59)
    within = queue.enqueue({"n": 2}, _opts("k", period=60))
    assert (within, within.duplicate) == (first, True)
    clock.advance(1)
    after = queue.enqueue({"n": 3}, _opts("k", period=60))
    assert after.duplicate is False
    assert after != first
    old = queue.get_job(first)
    assert old is not None
    assert (old.state, old.unique_key) == (JobState.PENDING, "k")  # still pending, key shown
    again = queue.enqueue({"n": 4}, _opts("k", period=60))
    assert (again, again.duplicate) == (after, True)  # the new job holds it now
    assert _job_count(queue) == 2


@pytest.mark.property("UNIQUE-PERIOD")
def test_a_key_without_a_period_is_held_as_long_as_the_job_waits(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("period"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    clock.advance(10**6)
    assert queue.enqueue({"n": 2}, EnqueueOpts(unique="k")) == first


# -- UNIQUE-STATES ---------------------------------------------------------------------------


@pytest.mark.property("UNIQUE-STATES")
def test_a_claimed_job_holds_its_key(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("states"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    handle = _claimed(queue)
    again = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (again, again.duplicate) == (first, True)
    assert handle.ack()
    assert queue.claim("w2") is None  # the duplicate wrote nothing


@pytest.mark.property("UNIQUE-STATES")
def test_a_retried_job_keeps_its_key(clocked_store: Store, clock: FakeClock) -> None:
    queue = clocked_store.queue(unique_name("states"), QueueOpts(max_attempts=5))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    assert _claimed(queue).retry("try again", delay=30)
    assert queue.enqueue({"n": 2}, EnqueueOpts(unique="k")) == first
    clock.advance(30)
    retried = _claimed(queue)
    assert (retried.id, retried.attempts) == (first, 2)
    assert queue.enqueue({"n": 3}, EnqueueOpts(unique="k")).duplicate


@pytest.mark.property("UNIQUE-STATES")
def test_a_released_job_keeps_its_key(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("states"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    assert _claimed(queue).release()
    assert queue.enqueue({"n": 2}, EnqueueOpts(unique="k")) == first


@pytest.mark.property("UNIQUE-STATES")
@pytest.mark.requires("snooze")
def test_a_snoozed_job_keeps_its_key(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("states"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    assert _claimed(queue).snooze(60)
    assert queue.enqueue({"n": 2}, EnqueueOpts(unique="k")) == first


@pytest.mark.property("UNIQUE-STATES")
def test_an_acked_job_frees_its_key(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("states"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    assert _claimed(queue).ack()
    after = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (after.duplicate, after != first) == (False, True)


@pytest.mark.property("UNIQUE-STATES")
def test_a_cancelled_job_frees_its_key(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("states"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    assert queue.cancel(first)
    after = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (after.duplicate, after != first) == (False, True)


# -- UNIQUE-DEAD -----------------------------------------------------------------------------


@pytest.mark.property("UNIQUE-DEAD")
def test_a_dead_job_frees_its_key_by_default(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("dead"))
    first = queue.enqueue({"n": 1}, EnqueueOpts(unique="k"))
    assert _claimed(queue).fail("broken")
    after = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (after.duplicate, after != first) == (False, True)


@pytest.mark.property("UNIQUE-DEAD")
def test_a_dead_job_with_dead_among_its_states_keeps_its_key(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("dead"))
    first = queue.enqueue({"n": 1}, _opts("k", states=KEEPS_DEAD))
    assert _claimed(queue).fail("broken")
    again = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (again, again.duplicate) == (first, True)
    assert queue.claim("w2") is None


@pytest.mark.property("UNIQUE-DEAD")
def test_an_expired_job_swept_to_dead_frees_or_keeps_its_key_as_its_states_say(
    clocked_store: Store, clock: FakeClock
) -> None:
    queue = clocked_store.queue(unique_name("dead"))
    freed = queue.enqueue(1, EnqueueOpts(expires=10, unique="freed"))
    kept = queue.enqueue(2, EnqueueOpts(expires=10, unique=Unique("kept", states=KEEPS_DEAD)))
    clock.advance(10)
    assert queue.sweep_expired().expired == 2
    assert queue.enqueue(3, EnqueueOpts(unique="freed")) != freed
    assert queue.enqueue(4, EnqueueOpts(unique="kept")) == kept


@pytest.mark.property("UNIQUE-DEAD")
@pytest.mark.requires("ops")
def test_a_purged_dead_job_frees_the_key_it_kept(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("dead"))
    first = queue.enqueue({"n": 1}, _opts("k", states=KEEPS_DEAD))
    assert _claimed(queue).fail("broken")
    assert queue.purge_dead([first]) == 1
    after = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (after.duplicate, after != first) == (False, True)


# -- UNIQUE-REDRIVE --------------------------------------------------------------------------


def _dead(queue: Any, payload: Any, opts: EnqueueOpts) -> Enqueued:
    got: Enqueued = queue.enqueue(payload, opts)
    handle = _claimed(queue)
    assert handle.id == got
    assert handle.fail("broken")
    return got


@pytest.mark.property("UNIQUE-REDRIVE")
@pytest.mark.requires("ops")
def test_redrive_skips_a_dead_job_whose_key_another_job_holds(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("redrive"))
    dead = _dead(queue, {"n": 1}, EnqueueOpts(unique="k"))
    holder = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert not holder.duplicate
    assert queue.redrive([dead]) == []
    assert queue.redrive() == []
    still = queue.get_job(dead)
    assert still is not None
    assert still.state is JobState.DEAD
    (only,) = drain(queue)
    assert only.id == holder


@pytest.mark.property("UNIQUE-REDRIVE")
@pytest.mark.requires("ops")
def test_a_dead_job_keeping_its_key_hands_it_to_its_new_job(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("redrive"))
    dead = _dead(queue, {"n": 1}, _opts("k", states=KEEPS_DEAD))
    (new,) = queue.redrive([dead])
    assert queue.get_job(dead) is None
    again = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (again, again.duplicate) == (new, True)
    job = queue.get_job(new)
    assert job is not None
    assert (job.unique_key, job.redriven_from) == ("k", dead)


@pytest.mark.property("UNIQUE-REDRIVE")
@pytest.mark.requires("ops")
def test_a_dead_job_whose_key_is_free_takes_it_again_on_redrive(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("redrive"))
    dead = _dead(queue, {"n": 1}, EnqueueOpts(unique="k"))
    (new,) = queue.redrive()
    job = queue.get_job(new)
    assert job is not None
    assert job.redriven_from == dead
    again = queue.enqueue({"n": 2}, EnqueueOpts(unique="k"))
    assert (again, again.duplicate) == (new, True)


@pytest.mark.property("UNIQUE-REDRIVE")
@pytest.mark.requires("ops")
def test_of_two_dead_jobs_of_one_key_only_the_first_is_redriven(clocked_store: Store) -> None:
    queue = clocked_store.queue(unique_name("redrive"))
    first = _dead(queue, {"n": 1}, EnqueueOpts(unique="k"))
    second = _dead(queue, {"n": 2}, EnqueueOpts(unique="k"))
    (new,) = queue.redrive([second, first])
    job = queue.get_job(new)
    assert job is not None
    assert job.redriven_from == second
    left = queue.get_job(first)
    assert left is not None
    assert left.state is JobState.DEAD


# -- UNIQUE-ARGUMENTS ------------------------------------------------------------------------

BAD_KEYS = [5, b"k", "", "k" * (MAX_UNIQUE_KEY_CHARS + 1), "a\x00b", "lone \ud800"]


@pytest.mark.property("UNIQUE-ARGUMENTS")
@pytest.mark.parametrize("key", BAD_KEYS, ids=["int", "bytes", "empty", "long", "nul", "surrogate"])
def test_a_malformed_key_is_refused_naming_the_key(store: Store, key: Any) -> None:
    queue = store.queue(unique_name("arguments"))
    with pytest.raises(InvalidOptions, match="key"):
        Unique(key)
    if isinstance(key, str):
        with pytest.raises(InvalidOptions, match="key"):
            queue.enqueue(1, EnqueueOpts(unique=key))
    assert queue.claim("w1") is None


@pytest.mark.property("UNIQUE-ARGUMENTS")
@pytest.mark.parametrize("period", [0, -1, 0.0, "5", float("nan"), True])
def test_a_malformed_period_is_refused_naming_the_period(period: Any) -> None:
    with pytest.raises(InvalidOptions, match="period"):
        Unique("k", period=period)


@pytest.mark.property("UNIQUE-ARGUMENTS")
@pytest.mark.parametrize(
    "states",
    [
        ("pending",),
        ("processing", "dead"),
        ("pending", "processing", "done"),
        "pending",
        [1, "pending", "processing"],
        None,
    ],
)
def test_malformed_states_are_refused_naming_the_states(states: Any) -> None:
    with pytest.raises(InvalidOptions, match="states"):
        Unique("k", states=states)


@pytest.mark.property("UNIQUE-ARGUMENTS")
@pytest.mark.parametrize("unique", [5, ["k"], {"key": "k"}])
def test_a_unique_that_is_no_key_nor_unique_is_refused_naming_unique(unique: Any) -> None:
    with pytest.raises(InvalidOptions, match="unique"):
        EnqueueOpts(unique=unique)


@pytest.mark.property("UNIQUE-ARGUMENTS")
def test_the_longest_key_and_every_state_list_spelled_in_any_order_are_taken(
    store: Store,
) -> None:
    queue = store.queue(unique_name("arguments"))
    longest = "k" * MAX_UNIQUE_KEY_CHARS
    assert Unique(longest, states=["dead", "processing", "pending"]).states == KEEPS_DEAD
    first = queue.enqueue(1, EnqueueOpts(unique=longest))
    assert queue.enqueue(2, EnqueueOpts(unique=longest)) == first
    job = queue.get_job(first)
    assert job is not None
    assert job.unique_key == longest
