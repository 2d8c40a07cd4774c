"""Direct sanity checks of the memory engine through the public API.

The conformance kit certifies the engine; these tests pin what an author would
check first, plus the engine's own choices (snapshot reads, refused attach).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import alkstore
from alkstore import EngineSpec, EnqueueOpts, JobState, QueueOpts, StopToken, Store
from alkstore.testing import FakeClock
from alkstore_memory import ENGINE

T0 = 1_700_000_000


class Boom(Exception):
    pass


@pytest.fixture
def spec() -> Iterator[EngineSpec]:
    with alkstore.load_engine("memory").provision() as provisioned:
        yield provisioned


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(spec: EngineSpec, clock: FakeClock) -> Iterator[Store]:
    with alkstore.open(spec.url, clock=clock, **spec.opts) as opened:
        yield opened


def test_the_entry_point_finds_the_engine_by_url_scheme() -> None:
    with alkstore.open("memory://t1") as store:
        assert store.queue("q").enqueue("x") >= 1


def test_enqueue_claim_ack_deletes_the_job(store: Store) -> None:
    q = store.queue("emails")
    job_id = q.enqueue({"to": "a@b"})
    handle = q.claim("w1")
    assert handle is not None
    assert (handle.id, handle.payload, handle.attempts) == (job_id, {"to": "a@b"}, 1)
    assert handle.ack() is True
    assert q.get_job(job_id) is None
    assert q.claim("w1") is None


def test_claim_order_is_priority_then_run_at_then_id(store: Store, clock: FakeClock) -> None:
    q = store.queue("q")
    late = q.enqueue("late", EnqueueOpts(run_at=T0 - 10))
    early = q.enqueue("early", EnqueueOpts(run_at=T0 - 20))
    urgent = q.enqueue("urgent", EnqueueOpts(priority=5))
    assert [h.id for h in q.claim_batch("w", 10)] == [urgent, early, late]


def test_a_reclaim_invalidates_the_earlier_handle(store: Store, clock: FakeClock) -> None:
    q = store.queue("q", QueueOpts(visibility_timeout_s=10))
    q.enqueue("x")
    first = q.claim("w1")
    clock.advance(10)  # deadline = now: lapsed
    second = q.claim("w2")
    assert first is not None
    assert second is not None
    assert second.attempts == 2
    assert first.ack() is False
    assert second.ack() is True


def test_a_failed_job_keeps_its_id_in_dead_storage(store: Store) -> None:
    q = store.queue("q")
    job_id = q.enqueue("x")
    handle = q.claim("w")
    assert handle is not None
    assert handle.fail("bad") is True
    job = q.get_job(job_id)
    assert job is not None
    assert (job.id, job.state, job.last_error, job.died_at) == (job_id, JobState.DEAD, "bad", T0)
    assert q.cancel(job_id) is False
    assert q.enqueue("y") > job_id


def test_a_rolled_back_transaction_leaves_nothing(store: Store) -> None:
    ids: list[int] = []

    def enqueue_append_then_fail() -> None:
        with store.transaction() as tx:
            ids.append(tx.enqueue("q", "x"))
            tx.stream_append("events", "e")
            raise Boom

    with pytest.raises(Boom):
        enqueue_append_then_fail()
    assert store.queue("q").get_job(ids[0]) is None
    assert store.queue("q").claim("w") is None
    assert store.stream("events").read() == []


def test_a_committed_transaction_keeps_everything(store: Store) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue("q", "x")
        offset = tx.stream_append("events", "e")
        assert tx.get_job_tx("q", job_id) is not None
    assert store.queue("q").get_job(job_id) is not None
    assert [e.offset for e in store.stream("events").read()] == [offset]


def test_reads_inside_a_transaction_see_only_committed_rows(store: Store) -> None:
    with store.transaction() as tx:
        job_id = tx.enqueue("q", "x")
        assert store.queue("q").get_job(job_id) is None
    assert store.queue("q").get_job(job_id) is not None


def test_a_second_write_on_the_transactions_thread_is_refused(store: Store) -> None:
    with store.transaction(), pytest.raises(RuntimeError, match="already has a write"):
        store.queue("q").enqueue("x")


def test_reopening_the_url_sees_the_same_data(spec: EngineSpec) -> None:
    with alkstore.open(spec.url) as first:
        job_id = first.queue("q").enqueue("kept")
    with alkstore.open(spec.url) as again:
        job = again.queue("q").get_job(job_id)
    assert job is not None
    assert job.payload == "kept"


def test_provision_forgets_its_database_afterwards() -> None:
    engine = alkstore.load_engine("memory")
    with engine.provision() as spec, alkstore.open(spec.url) as store:
        job_id = store.queue("q").enqueue("x")
    with alkstore.open(spec.url) as fresh:
        assert fresh.queue("q").get_job(job_id) is None


def test_provision_beside_yields_another_database_and_forgets_it_afterwards() -> None:
    with ENGINE.provision() as spec:
        with ENGINE.provision_beside(spec) as beside:
            assert beside.url != spec.url
            with alkstore.open(spec.url) as one, alkstore.open(beside.url) as two:
                job_id = two.queue("q").enqueue("only beside")
                assert one.queue("q").get_job(job_id) is None
        with alkstore.open(beside.url) as fresh:
            assert fresh.queue("q").get_job(job_id) is None


def test_stream_offsets_survive_trim_without_reuse(store: Store) -> None:
    stream = store.stream("s")
    assert [stream.append(i) for i in range(3)] == [1, 2, 3]
    assert stream.trim_to(4) == 3
    assert stream.read() == []
    assert stream.append("next") == 4
    assert [(e.offset, e.payload) for e in stream.read()] == [(4, "next")]


def test_stream_consumer_offsets_are_durable(store: Store) -> None:
    stream = store.stream("s")
    assert stream.offset("c") == 0
    stream.commit("c", 7)
    assert stream.offset("c") == 7


def test_pubsub_delivers_on_commit_only(store: Store) -> None:
    def notify_then_fail() -> None:
        with store.transaction() as tx:
            tx.notify("ch", "rolled back")
            raise Boom

    sub = store.subscribe("ch")
    try:
        with pytest.raises(Boom):
            notify_then_fail()
        with store.transaction() as tx:
            tx.notify("ch", "committed")
            assert sub.get(timeout=0) is None  # not before the commit
        store.notify("ch", "direct")
        assert sub.get(timeout=5) == "committed"
        assert sub.get(timeout=5) == "direct"
        assert sub.get(timeout=0) is None
    finally:
        sub.close()


def test_another_stores_commit_wakes_a_waiting_claimer(spec: EngineSpec) -> None:
    # repoll_s is an hour: only the wake from the other store can end the wait.
    with (
        alkstore.open(spec.url, repoll_s=3600) as consumer,
        alkstore.open(spec.url) as producer,
    ):
        stop = StopToken()
        claimed: list[int] = []
        waiting = threading.Event()

        def work() -> None:
            waiting.set()
            handle = consumer.queue("q").claim_wait("w", timeout=None, stop=stop)
            if handle is not None:
                claimed.append(handle.id)

        worker = threading.Thread(target=work)
        worker.start()
        waiting.wait()
        job_id = producer.queue("q").enqueue("x")
        worker.join(timeout=30)
        stop.stop()
        worker.join()
        assert claimed == [job_id]


def test_locks_are_leases_with_silent_expiry(store: Store, clock: FakeClock) -> None:
    lock = store.lock("l")
    assert lock.acquire("a", 10) is True
    assert lock.acquire("b", 10) is False
    clock.advance(10)  # expires_at <= now: lapsed
    assert lock.holder() is None
    assert lock.renew("a", 10) is False
    assert lock.acquire("b", 10) is True
    assert lock.release("a") is False
    assert lock.release("b") is True


def test_a_due_schedule_fires_into_its_queue(store: Store, clock: FakeClock) -> None:
    store.schedule("every-minute", "@every 1m", "q", {"task": "t"})
    clock.advance(60)
    assert store.tick_schedules("ticker").fired == 1
    handle = store.queue("q").claim("w")
    assert handle is not None
    assert handle.payload == {"task": "t"}


def test_attach_is_refused_with_a_clear_message(store: Store) -> None:
    with pytest.raises(NotImplementedError, match="cannot attach"), store.attach(object()):
        pass


def test_the_transaction_has_no_sql_connection(store: Store) -> None:
    with store.transaction() as tx:
        assert not tx.connection
        with pytest.raises(NotImplementedError, match="no SQL connection"):
            tx.execute("SELECT 1")


def test_claims_of_a_queue_without_a_rate_record_no_starts_a_later_rate_counts(
    store: Store,
) -> None:
    # As SQLite and PostgreSQL record them: a queue's starts only while it has a rate
    # (here only a per-key rate, whose starts are the keys' own).
    q = store.queue("q")
    q.enqueue_many([1, 2, 3])
    q.set_limits(alkstore.Limits(rate_per_key=5, per=10))
    assert len(q.claim_batch("w", 2)) == 2
    q.set_limits(alkstore.Limits(rate=1, per=10))
    assert [h.job.payload for h in q.claim_batch("w", 3)] == [3]
