"""Crash atomicity at every statement (§2, §3, §5, §11), not where a random kill lands.

Through the engine's ``open_with_driver_wrapper`` hook a child process runs
one operation over the kit's counting driver proxy and SIGKILLs itself right
after statement N, before the engine commits (``alkstore_conformance.helpers.faults``);
the test does this for every N the operation has, and after each crash checks
the store shows all of the operation's transaction or none of it. Engines
without the hook report these properties not_applicable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from alkstore import (
    EngineProvider,
    EngineSpec,
    Enqueued,
    EnqueueOpts,
    Job,
    JobState,
    QueueOpts,
    Store,
)
from alkstore.driver import ERROR_EXHAUSTED, ERROR_EXPIRED
from alkstore.testing import FakeClock
from alkstore_conformance.helpers import crashes
from alkstore_conformance.helpers.common import business_ids, business_table
from alkstore_conformance.helpers.crashes import crash_at_every_statement, require_driver_wrapper
from alkstore_conformance.helpers.faults import CrashPoint
from alkstore_conformance.helpers.ops import make_dead, one_life_each
from alkstore_conformance.helpers.profiles import drain

pytestmark = pytest.mark.requires("multi_process")

TRACEBACK_ERROR = "Traceback (most recent call last):\n" + "  File 'w.py', line 1\n" * 400
"""A failure's error the size of a real traceback (about 9 KB)."""

EngineRef = tuple[str, str, EngineSpec]


@pytest.fixture
def engine_ref(
    engine: EngineProvider, engine_name: str, engine_group: str, engine_spec: EngineSpec
) -> EngineRef:
    require_driver_wrapper(engine)
    return (engine_name, engine_group, engine_spec)


def _where(point: CrashPoint | None, statements: list[str]) -> str:
    if point is None:
        return f"after an uncrashed run of {statements}"
    return f"after a crash right after statement {point.statement} of {statements}"


def _job(store: Store, queue: str, job_id: int) -> Job:
    job = store.queue(queue).get_job(job_id)
    assert job is not None, f"job {job_id} vanished"
    return job


# -- SCHED-FIRE-CRASH-ATOMIC -----------------------------------------------------------

FIRE_INTERVAL_S = 10


@pytest.mark.property("SCHED-FIRE-CRASH-ATOMIC")
@pytest.mark.requires("scheduler")
def test_a_crash_at_any_statement_of_a_tick_keeps_each_advance_with_its_job(
    engine_ref: EngineRef, clocked_store: Store, clock: FakeClock, store: Store
) -> None:
    registered = {}

    def argument_for(run: int) -> str:
        spec = f"@every {FIRE_INTERVAL_S}s"
        registered[run] = clocked_store.schedule(f"fire-{run}", spec, f"fired-{run}", {"run": run})
        return "crasher"  # one ticker identity: it re-takes its own leadership lease

    def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
        schedule = registered[run]
        current = clocked_store.get_schedule(schedule.name)
        assert current is not None
        advanced = (current.next_fire_at - schedule.next_fire_at) // FIRE_INTERVAL_S
        jobs = len(drain(store.queue(schedule.queue)))
        where = _where(point, statements)
        assert jobs == advanced, f"{advanced} boundaries advanced but {jobs} jobs, {where}"
        if point is None:
            assert advanced >= 2, where
        assert clocked_store.unschedule(schedule.name) is True  # out of later ticks' way

    # At least two boundaries due per tick: a crash can land between two fires too.
    crash_at = int(clock.now()) + 3 * FIRE_INTERVAL_S
    crash_at_every_statement(engine_ref, crashes.tick, argument_for, check, crash_at)


# -- QUEUE-DEAD-MOVE-CRASH-ATOMIC ----------------------------------------------------------


def _dead_or_untouched(job: Job, error: str, where: str) -> None:
    if job.state is JobState.DEAD:
        assert (job.last_error, job.died_at is not None) == (error, True), where
    else:
        assert job.state is JobState.PROCESSING, where
        assert (job.attempts, job.last_error, job.died_at) == (1, None, None), where


def _crash_a_claimed_job(
    engine_ref: EngineRef,
    store: Store,
    operation: crashes.Operation,
    error: str,
    expected_error: str,
    opts: EnqueueOpts | None = None,
) -> None:
    ids: dict[int, int] = {}

    def argument_for(run: int) -> tuple[str, str]:
        name = f"dead-{run}"
        ids[run] = store.queue(name).enqueue({"run": run}, opts)
        return (name, error)

    def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
        where = _where(point, statements)
        job = _job(store, f"dead-{run}", ids[run])
        _dead_or_untouched(job, expected_error, where)
        if point is None:
            assert job.state is JobState.DEAD, where

    crash_at_every_statement(engine_ref, operation, argument_for, check)


@pytest.mark.property("QUEUE-DEAD-MOVE-CRASH-ATOMIC")
def test_a_crash_at_any_statement_of_fail_leaves_the_job_claimed_or_wholly_dead(
    engine_ref: EngineRef, store: Store
) -> None:
    _crash_a_claimed_job(
        engine_ref, store, crashes.claim_then_fail, TRACEBACK_ERROR, TRACEBACK_ERROR
    )


@pytest.mark.property("QUEUE-DEAD-MOVE-CRASH-ATOMIC")
def test_a_crash_at_any_statement_of_retry_at_budget_leaves_the_job_claimed_or_wholly_dead(
    engine_ref: EngineRef, store: Store
) -> None:
    _crash_a_claimed_job(
        engine_ref,
        store,
        crashes.claim_then_retry,
        "one more time",
        ERROR_EXHAUSTED,
        EnqueueOpts(max_attempts=1),
    )


SWEEP_AFTER_S = 100


@pytest.mark.property("QUEUE-DEAD-MOVE-CRASH-ATOMIC")
def test_a_crash_at_any_statement_of_a_sweep_moves_each_step_whole_or_not_at_all(
    engine_ref: EngineRef, clocked_store: Store, clock: FakeClock
) -> None:
    jobs: dict[int, dict[str, int]] = {}
    sweep_at = int(clock.now()) + SWEEP_AFTER_S

    def argument_for(run: int) -> str:
        name = f"sweep-{run}"
        queue = clocked_store.queue(name, QueueOpts(visibility_timeout_s=1))
        expiring = EnqueueOpts(expires=5)
        pending = queue.enqueue({"pending": True}, expiring)
        held = queue.enqueue({"held": True}, EnqueueOpts(expires=5, priority=9))
        exhausted = queue.enqueue({"exhausted": True}, EnqueueOpts(max_attempts=1, priority=9))
        assert len(queue.claim_batch("holder", 2)) == 2  # held and exhausted: processing
        jobs[run] = {"pending": pending, "held": held, "exhausted": exhausted}
        return name

    def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
        where = _where(point, statements)
        name = f"sweep-{run}"
        found = {key: _job(clocked_store, name, job_id) for key, job_id in jobs[run].items()}
        for key, expected_error in (
            ("pending", ERROR_EXPIRED),
            ("held", ERROR_EXPIRED),
            ("exhausted", ERROR_EXHAUSTED),
        ):
            job = found[key]
            if job.state is JobState.DEAD:
                assert (job.last_error, job.died_at) == (expected_error, sweep_at), where
            else:
                untouched = JobState.PENDING if key == "pending" else JobState.PROCESSING
                assert (job.state, job.last_error, job.died_at) == (untouched, None, None), where
        # The expiry step is one move: both expired jobs died together or neither did.
        dead = JobState.DEAD
        assert (found["pending"].state is dead) == (found["held"].state is dead), where
        if point is None:
            assert {job.state for job in found.values()} == {JobState.DEAD}, where

    crash_at_every_statement(engine_ref, crashes.sweep, argument_for, check, sweep_at)


# -- QUEUE-ENQUEUE-MANY-ATOMIC, QUEUE-ACK-BATCH-ATOMIC, TX-MANY-WRITES-ATOMIC -------------

BATCH = 2000
ACK_BATCH = 300
TX_WRITES = 4


@pytest.mark.property("QUEUE-ENQUEUE-MANY-ATOMIC")
def test_a_crash_at_any_statement_of_a_large_enqueue_many_leaves_all_or_none(
    engine_ref: EngineRef, store: Store
) -> None:
    def argument_for(run: int) -> tuple[str, int]:
        return (f"batch-{run}", BATCH)

    def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
        stored = len(drain(store.queue(f"batch-{run}")))
        allowed = {BATCH} if point is None else {0, BATCH}
        assert stored in allowed, f"{stored} of {BATCH} jobs stored {_where(point, statements)}"

    crash_at_every_statement(engine_ref, crashes.enqueue_batch, argument_for, check)


@pytest.mark.property("QUEUE-ACK-BATCH-ATOMIC")
def test_a_crash_at_any_statement_of_ack_batch_acks_all_or_none(
    engine_ref: EngineRef, store: Store
) -> None:
    ids: dict[int, list[Enqueued]] = {}

    def argument_for(run: int) -> tuple[str, int]:
        name = f"acks-{run}"
        ids[run] = store.queue(name).enqueue_many([{"n": n} for n in range(ACK_BATCH)])
        return (name, ACK_BATCH)

    def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
        queue = store.queue(f"acks-{run}")
        left = sum(queue.get_job(job_id) is not None for job_id in ids[run])
        allowed = {0} if point is None else {0, ACK_BATCH}
        assert left in allowed, f"{left} of {ACK_BATCH} jobs left {_where(point, statements)}"

    crash_at_every_statement(engine_ref, crashes.claim_then_ack_batch, argument_for, check)


@pytest.mark.property("TX-MANY-WRITES-ATOMIC")
def test_a_crash_at_any_statement_of_a_transaction_commits_all_its_writes_or_none(
    engine: EngineProvider, engine_ref: EngineRef, store: Store
) -> None:
    streams = engine.capabilities.streams

    def argument_for(run: int) -> tuple[str, str | None, int]:
        return (f"tx-{run}", f"tx-{run}" if streams else None, TX_WRITES)

    def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
        jobs = len(drain(store.queue(f"tx-{run}")))
        events = len(store.stream(f"tx-{run}").read(0, 100)) if streams else jobs
        allowed = {(TX_WRITES, TX_WRITES)} if point is None else {(0, 0), (TX_WRITES, TX_WRITES)}
        where = _where(point, statements)
        assert (jobs, events) in allowed, f"{jobs} jobs and {events} events {where}"

    crash_at_every_statement(engine_ref, crashes.many_writes_in_a_transaction, argument_for, check)


# -- TX-ACK-CRASH-ATOMIC -----------------------------------------------------------------


@pytest.mark.requires("sql")
@pytest.mark.property("TX-ACK-CRASH-ATOMIC")
def test_a_crash_at_any_statement_of_a_tx_ack_commits_the_ack_with_the_business_writes_or_neither(
    engine_ref: EngineRef, store: Store
) -> None:
    jobs: dict[int, int] = {}

    with business_table(store) as table:

        def argument_for(run: int) -> tuple[str, str, int]:
            name = f"txack-{run}"
            jobs[run] = store.queue(name, QueueOpts(visibility_timeout_s=3600)).enqueue({})
            return (name, table, run)

        def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
            where = _where(point, statements)
            name = f"txack-{run}"
            job = store.queue(name).get_job(jobs[run])
            written = run in business_ids(store, table)
            following = len(drain(store.queue(f"{name}-next")))
            if point is None or written or job is None or following:
                # Committed: the business row, the ack and the next step, all three.
                assert (written, job, following) == (True, None, 1), f"{job} {where}"
            else:
                # Not committed: the claim as it was, none of the transaction's writes.
                assert (job.state, job.attempts) == (JobState.PROCESSING, 1), where

        crash_at_every_statement(
            engine_ref, crashes.tx_ack_with_business_writes, argument_for, check
        )


# -- TX-ACK-ALL-CRASH-ATOMIC -------------------------------------------------------------

ACK_ALL_QUEUES = ("a", "b")
ACK_ALL_CLAIMS = 3
"""Claims per queue: the one tx.ack_all acks claims of two queues."""
ACK_ALL_VISIBILITY_S = 60


def _claimable(store: Store, names: list[str]) -> dict[str, list[int]]:
    """``ACK_ALL_CLAIMS`` new jobs in each queue of ``names``, their ids in order."""
    opts = QueueOpts(visibility_timeout_s=ACK_ALL_VISIBILITY_S)
    return {
        name: [store.queue(name, opts).enqueue({"n": n}) for n in range(ACK_ALL_CLAIMS)]
        for name in names
    }


def _claims_as_they_were(
    store: Store, clock: FakeClock, claimed_at: int, jobs: dict[str, list[int]], where: str
) -> None:
    """What a transaction that did not commit leaves of the claims of ``jobs``: each
    as it was (processing, its first attempt), held until it lapses, then claimable."""
    found = [store.queue(name).get_job(job_id) for name, ids in jobs.items() for job_id in ids]
    claims = [(job.state, job.attempts) if job is not None else None for job in found]
    assert claims == [(JobState.PROCESSING, 1)] * len(found), where
    held = [store.queue(name).claim_batch("meanwhile", ACK_ALL_CLAIMS) for name in jobs]
    assert held == [[]] * len(jobs), where
    clock.set(claimed_at + ACK_ALL_VISIBILITY_S + 1)
    try:
        again = {
            name: sorted(
                (handle.id, handle.attempts)
                for handle in store.queue(name).claim_batch("after-crash", ACK_ALL_CLAIMS)
            )
            for name in jobs
        }
    finally:
        clock.set(claimed_at)
    assert again == {name: [(job_id, 2) for job_id in ids] for name, ids in jobs.items()}, where


Committed = Callable[[list[Job | None], bool, int, str], bool]
"""Judges a group's crashed run from its jobs (``None``: gone), whether its business
row is there and how many next-step jobs it left: ``True`` (having asserted the
whole of it) if it committed, ``False`` if it left nothing of it."""


def _crash_at_every_statement_of_a_group(
    engine_ref: EngineRef,
    store: Store,
    clock: FakeClock,
    prefix: str,
    step: Callable[..., None],
    committed: Committed,
) -> None:
    """``step`` (a ``crashes`` function: claims of two queues, then one transaction
    with a business row, the claims' outcomes and the next step's job) crashed at
    every statement: what committed is ``committed``'s to judge; what did not left
    every claim as it was."""
    claimed_at = int(clock.now())
    jobs: dict[int, dict[str, list[int]]] = {}

    def names(run: int) -> list[str]:
        return [f"{prefix}-{run}-{suffix}" for suffix in ACK_ALL_QUEUES]

    with business_table(store) as table:

        def argument_for(run: int) -> tuple[list[str], int, str, int]:
            jobs[run] = _claimable(store, names(run))
            return (names(run), ACK_ALL_CLAIMS, table, run)

        def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
            where = _where(point, statements)
            found = [
                store.queue(name).get_job(job_id)
                for name, ids in jobs[run].items()
                for job_id in ids
            ]
            written = run in business_ids(store, table)
            following = len(drain(store.queue(f"{names(run)[0]}-next")))
            if committed(found, written, following, where):
                return
            assert point is not None, f"the run without a crash left nothing {where}"
            _claims_as_they_were(store, clock, claimed_at, jobs[run], where)

        crash_at_every_statement(engine_ref, step, argument_for, check, claimed_at)


@pytest.mark.requires("sql")
@pytest.mark.property("TX-ACK-ALL-CRASH-ATOMIC")
def test_a_crash_at_any_statement_of_a_tx_ack_all_commits_every_ack_with_the_business_write_or_none(
    engine_ref: EngineRef, clocked_store: Store, clock: FakeClock
) -> None:
    def committed(found: list[Job | None], written: bool, following: int, where: str) -> bool:
        acked = sum(job is None for job in found)
        if not (written or acked or following):
            return False
        # Committed: the business row, every ack and the next step together.
        assert (written, acked, following) == (True, len(found), 1), where
        return True

    step = crashes.tx_ack_all_with_business_writes
    _crash_at_every_statement_of_a_group(
        engine_ref, clocked_store, clock, "txackall", step, committed
    )


# -- TX-RETRY-ALL-CRASH-ATOMIC -----------------------------------------------------------


@pytest.mark.requires("sql")
@pytest.mark.property("TX-RETRY-ALL-CRASH-ATOMIC")
def test_a_crash_at_any_statement_of_a_tx_retry_all_and_fail_all_commits_all_of_it_or_none(
    engine_ref: EngineRef, clocked_store: Store, clock: FakeClock
) -> None:
    def committed(found: list[Job | None], written: bool, following: int, where: str) -> bool:
        assert all(job is not None for job in found), where  # nothing is ever lost
        states = Counter(job.state for job in found if job is not None)
        if not (written or following or set(states) != {JobState.PROCESSING}):
            return False
        # Committed: the business row, every retry and fail, the next step.
        half = len(found) // 2
        expected = Counter({JobState.PENDING: half, JobState.DEAD: len(found) - half})
        assert (written, states, following) == (True, expected, 1), where
        return True

    step = crashes.tx_retry_all_and_fail_all_with_business_writes
    _crash_at_every_statement_of_a_group(
        engine_ref, clocked_store, clock, "txretryall", step, committed
    )


# -- OPS-REDRIVE-CRASH-ATOMIC ------------------------------------------------------------

REDRIVEN = 3


@pytest.mark.property("OPS-REDRIVE-CRASH-ATOMIC")
def test_a_crash_at_any_statement_of_a_redrive_leaves_each_dead_job_or_its_new_job(
    engine_ref: EngineRef, store: Store
) -> None:
    dead: dict[int, list[int]] = {}

    def argument_for(run: int) -> str:
        name = f"redrive-{run}"
        dead[run] = make_dead(store.queue(name), REDRIVEN)
        return name

    def check(run: int, point: CrashPoint | None, statements: list[str]) -> None:
        where = _where(point, statements)
        lives = one_life_each(store.queue(f"redrive-{run}"), dead[run])
        # One transaction: every dead job kept, or every one replaced by one new job.
        allowed = [{"redriven"}] if point is None else [{"dead"}, {"redriven"}]
        assert set(lives.values()) in allowed, f"{lives} {where}"

    crash_at_every_statement(engine_ref, crashes.redrive_all, argument_for, check)
