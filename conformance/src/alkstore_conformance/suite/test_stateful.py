"""QUEUE-MODEL-AGREEMENT: an engine and the reference model, driven side by side.

A Hypothesis rule-based machine opens one fresh store per example (on a FakeClock)
and applies random operations of contract §2-§7 to the engine and to
``alkstore_conformance.model.ReferenceModel`` at once: enqueues with every option,
claims, every handle op (late ones too), ack_batch, cancel, sweeps, clock moves,
transactions that commit or roll back, claims acked, retried and failed in them
(§3.8, §3.9: stale claims and claims lapsing between two outcomes too, beside an
enqueue, and the same again in the next transaction, on engines with the
transactions profile; every example starts with a claim whose outcome rolled
back, then the next transaction's outcome of it), the outbox, locks with two owners, schedules
ticked by two workers, streams with consumers and trims, the operations of §11 (job
pages, redrive, purge, pause and resume; every retry and fail records its error),
unique enqueues (§15: few keys, payloads that read back equal, periods and dead-
holding states, on engines with the profile), queue limits (§16: concurrency limits and rates
of 1 to 3, per key too, set and cleared between claims, the rates' sliding windows
counted on the FakeClock, on engines with the profiles) and reopening the store. Every return
value must equal the model's, and after every step every job ever seen, every lock,
every schedule and every stream must read back as the model says, and the store's stats
count what the model holds. With the ops profile the jobs are read through each queue's
job pages, and by id those the step changed (without it, all of them by id); each
queue's own stats and limits are read whenever the model's view of them moved, and one
queue's in turn besides. The scheduler, stream and ops rules run only on engines with
those profiles.

A tick does not say which jobs it fired. Their ids lie above every id committed
before the tick and below any id committed after it, so the machine enqueues a
sentinel right after each tick, reads every id in between, hands what it finds to
the model to match against the fires it expects, and cancels the sentinel. Fired
jobs then live in the ordinary queues like every other job.

Reopening closes the store and opens a new one on the same spec and clock. Handles
claimed before stay readable values (``job``, ``id``, ``attempts``), but their ops
raise ``StoreClosed`` (contract §1: any call after ``close()``); their claims
stay reachable by id, through ``ack_batch`` on the new store.

Option ranges are small on purpose (priorities -1..1, deadlines of seconds, clock
steps that land exactly on visibility timeouts) so that ties, boundaries and
reclaims happen often.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from alkstore import (
    CATCH_UP_CAP,
    CATCH_UP_POLICIES,
    DEFAULT_QUEUE_OPTS,
    OUTBOX_QUEUE_OPTS,
    Capabilities,
    EngineProvider,
    EngineSpec,
    EnqueueOpts,
    InvalidOptions,
    Job,
    JobHandle,
    JobState,
    Limits,
    ProfileUnavailable,
    QueueConsumer,
    QueueOpts,
    ScheduleOpts,
    StaleHandle,
    Store,
    StoreClosed,
    Stream,
    StreamEvent,
    Transaction,
    Unique,
    WorkerInfo,
    outbox_queue_name,
)
from alkstore.testing import FakeClock, seed_jitter
from alkstore_conformance.certify.state import kit_state
from alkstore_conformance.helpers.bounded import pages
from alkstore_conformance.helpers.trials import trial_seed
from alkstore_conformance.helpers.via_aio import AioStore
from alkstore_conformance.model import (
    Claim,
    ModelTransaction,
    ReferenceModel,
    job_differences,
)

PROPERTY = "QUEUE-MODEL-AGREEMENT"

START = 1_700_000_000

QUEUES: dict[str, QueueOpts] = {
    # Two attempts, 5 s backoff, dead rows kept 100 s: retries, exhaustion and purges.
    "mail": QueueOpts(
        visibility_timeout_s=30, max_attempts=2, backoff_base_s=5, dead_letter_retention_s=100
    ),
    # One attempt, no backoff, dead rows purged a second after death: the edges.
    "flaky": QueueOpts(
        visibility_timeout_s=10, max_attempts=1, backoff_base_s=0, dead_letter_retention_s=0
    ),
}
# The outbox's stamps (60 s / 5 / 5 s / kept forever) make the third kind of queue.
OUTBOX = "sync"
OUTBOX_QUEUE = outbox_queue_name(OUTBOX)
# A queue that keeps its acked jobs 30 s (§17, on engines with the results profile;
# without it, the same queue without the retention): completed jobs, their results
# and the sweep that ends them.
UNISSUED_ID = 10**12
"""An id no job of the machine's store ever has: a dependency on it is refused (§18.2)."""
PAGE = 100
"""The page size of the job listings: those that find the jobs a redrive brought back,
and those every step reads every job through."""
MAX_PAGES = 100
"""The bound on those reads: far above the jobs one example makes."""
KEEPING = "reports"
KEEPING_OPTS = QueueOpts(
    visibility_timeout_s=30, max_attempts=2, backoff_base_s=5, completed_retention_s=30
)
NOT_KEEPING_OPTS = dataclasses.replace(KEEPING_OPTS, completed_retention_s=None)
CONSUMERS = (*QUEUES, OUTBOX_QUEUE, KEEPING)
"""Queue names the machine consumes from; the outbox by its backing queue's name."""

WORKERS = ("w1", "w2")
LOCK_NAMES = ("leader", "janitor")
LOCK_OWNERS = ("o1", "o2")

SCHEDULE_NAMES = ("nightly", "digest", "report")
WORKER_IDS = ("worker-a", "worker-b")
"""Two ids, so registrations replace, lapse and clean each other up."""
SCHEDULE_TARGETS = tuple(QUEUES)
"""Fires land in queues the machine claims from, so fired jobs meet every other rule;
their stamps come from the default opts, not from these queues' handles."""
SPECS = ("@every 5s", "@every 30s", "@every 1m", "@every 60s", "@every 2m")
"""Short intervals so clock steps cross many boundaries (5 s x 400 s passes the
catch-up cap); "@every 1m" and "@every 60s" are one interval but different specs."""
CRON_SPECS = ("* * * * *", "*/2 * * * *", "*/7 * * * *", "0,30 * * * *")
"""Cron specs of minutes (an engine with the cron profile): their boundaries depend
on the zone whenever its offset is not whole hours (Chatham's even local minutes
are odd minutes of UTC), and "*/7" leaves a short gap at every hour."""
ZONES = ("UTC", "Pacific/Chatham", "Asia/Kolkata", "Europe/Berlin")
TICKERS = ("t1", "t2")
"""Worker ids ticking the scheduler: the leadership lock makes one wait for the other."""
PROBE_QUEUE = "id-probe"
"""Nothing claims it: it holds, for an instant, the sentinel that bounds fired ids."""
STREAMS = ("orders", "audit")
TX_QUEUE = "ledger"
"""The queue of ``outcome_rolled_back_at_start``'s job: no other rule claims from it."""
TX_QUEUE_OPTS = QueueOpts(visibility_timeout_s=30, max_attempts=2, backoff_base_s=5)
LISTED_QUEUES = (*CONSUMERS, TX_QUEUE, PROBE_QUEUE)
"""Every queue the machine puts jobs in (schedules fire into ``QUEUES``)."""
STREAM_CONSUMERS = ("c1", "c2")

EXAMPLES_PER_PROFILE_EXAMPLE = 4
"""The machine runs this many examples per example of the selected profile: a profile
is sized for one-call properties, while meeting a rare interleaving (a heartbeat off by
a few seconds, a zombie row) takes about a hundred scenarios. One costs ~0.1 s on
SQLite, so the dev profile (25) runs 100 in 5-15 s; the certify profile scales it."""


# -- strategies ------------------------------------------------------------------------
BOUNDARIES = (1, 10, 30, 60, 120)
"""Durations shared by every duration strategy (they include the queues' visibility
timeouts), so deadlines, expiries and lock TTLs land exactly on "now" often."""
boundaries = st.sampled_from(BOUNDARIES)
ODD_DURATIONS = (0.5, timedelta(seconds=2.5))
"""Non-integral durations: the store rounds them up to whole seconds."""

# Flat (not recursive) JSON values: cheap to draw and to shrink; payload fidelity in
# depth is PAYLOAD-* territory, here a payload only has to come back as it went in.
payloads = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.text(max_size=1), max_size=2),
)


@dataclass(frozen=True)
class OptsDraw:
    """EnqueueOpts with ``run_at`` drawn relative to the clock (built at enqueue time)."""

    delay: int | float | timedelta | None
    priority: int
    max_attempts: int | None
    expires: int | timedelta | None
    run_at_offset: int | float | None

    def build(self, clock_now: float) -> EnqueueOpts:
        run_at = None if self.run_at_offset is None else clock_now + self.run_at_offset
        return EnqueueOpts(
            delay=self.delay,
            priority=self.priority,
            max_attempts=self.max_attempts,
            expires=self.expires,
            run_at=run_at,
        )


opt_draws = st.none() | st.builds(
    OptsDraw,
    delay=st.none() | boundaries | st.integers(0, 90) | st.sampled_from(ODD_DURATIONS),
    priority=st.integers(-1, 1),
    max_attempts=st.none() | st.integers(1, 3),
    expires=st.none() | boundaries | st.integers(1, 300) | st.just(timedelta(seconds=30)),
    run_at_offset=st.none() | boundaries | st.integers(-60, 180) | st.just(0.5),
)
# Unique jobs (§15): few keys and a few payloads that read back equal, so enqueues
# collide with each other, with dead jobs and with jobs past their period.
unique_payloads = st.sampled_from([{"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, "x", 3]) | payloads
uniques = st.builds(
    Unique,
    key=st.sampled_from([None, "k1", "k2"]),
    period=st.none() | st.sampled_from([5, 30, 60]),
    states=st.sampled_from([("pending", "processing"), ("pending", "processing", "dead")]),
)
RATE_WINDOW_S = 2
"""The window of every rate the machine sets (§16.6): two seconds, so a step of one
second (one of the ``boundaries``) lands on the window's last second, where a start
must still count, and a step of two past it. One window for every rate: the starts a
claim drops as out of its window are the same on every engine."""
# The store floors its clock: half a second may or may not tick.
clock_steps = boundaries | st.integers(0, 400) | st.just(0.5)
durations = boundaries | st.integers(1, 200) | st.sampled_from(ODD_DURATIONS)
retry_delays = st.none() | boundaries | st.integers(0, 90) | st.just(1.5)
snooze_delays = boundaries | st.integers(0, 90) | st.just(1.5)
errors = st.sampled_from(["boom", "bad input", ""])
tick_waits = st.sampled_from((0, 5, 29, 30, 60, 320, 325)) | st.integers(0, 400)
"""Clock moves before a tick: none (a second tick of one boundary), one interval, just
under and at the scheduler lease (30 s), and around 64 boundaries of 5 s (the cap)."""
schedule_opts = st.none() | st.builds(
    ScheduleOpts,
    priority=st.integers(-1, 1),
    max_attempts=st.none() | st.integers(1, 3),
    expires=st.none() | boundaries | st.just(timedelta(seconds=2.5)),
    timezone=st.sampled_from(ZONES),
    catch_up=st.sampled_from(CATCH_UP_POLICIES),
)
"""Zones and policies other than UTC and "all" need the cron profile."""
TX_VERBS = ("ack", "retry", "fail", "ack_all", "retry_all", "fail_all")
"""A claim's outcome in a transaction: one claim's call (§3.8, §3.9), or the
many-claims call naming it (§3.10, §3.11), which returns a refusal instead of raising."""
in_tx_waits = st.sampled_from((0, 0, 1, 10, 30))
"""Clock moves inside a transaction, before an outcome: mostly none, sometimes onto
the queues' visibility timeouts, so a claim lapses between two outcomes of one
transaction."""


@dataclass(frozen=True)
class HeldClaim:
    """A handle the engine returned, the claim the model expected, and which opening
    of the store it came from (a handle of a closed store refuses with StoreClosed)."""

    handle: JobHandle
    claim: Claim
    generation: int

    def __repr__(self) -> str:
        return f"HeldClaim(job={self.claim.job_id}, attempt={self.claim.attempt})"


@dataclass(frozen=True)
class TxOutcome:
    """One ``tx.ack`` / ``tx.retry`` / ``tx.fail`` of a transaction, after ``wait``."""

    held: HeldClaim | None
    """``None``: a held claim (``pick``) or one of the claims the rule makes first."""
    pick: int | None
    """Which held claim (modulo their number); ``None``: one the rule makes first."""
    verb: str
    error: str
    delay: int | float | None
    result: Any
    wait: int


tx_outcomes = st.builds(
    TxOutcome,
    held=st.none(),
    pick=st.none() | st.integers(0, 7),
    verb=st.sampled_from(TX_VERBS),
    error=errors,
    delay=retry_delays,
    result=payloads,
    wait=in_tx_waits,
)


def agree(what: str, engine: object, model: object) -> None:
    assert engine == model, f"{what}: the engine gives {engine!r}, the model {model!r}"


def agree_job(what: str, engine: Job | None, model: Job | None) -> None:
    assert engine == model, f"{what} disagrees with the model: " + "; ".join(
        job_differences(engine, model)
    )


def read_all(stream: Stream) -> list[StreamEvent]:
    """Every event of a stream, page by page at ``read``'s default limit."""
    return pages(stream.read, _offset, what=f"stream {stream.name!r}.read()")


def _offset(event: StreamEvent) -> int:
    return event.offset


class _Rollback(Exception):
    """Raised inside a transaction to roll it back."""


class QueueModelMachine(RuleBasedStateMachine):
    """Engine and model side by side; one provisioned store per example."""

    provider: ClassVar[EngineProvider | None] = None
    """Bound by the test's fixture before Hypothesis instantiates the machine."""

    job_ids = Bundle("job_ids")
    held = Bundle("held")

    def __init__(self) -> None:
        super().__init__()
        provider = type(self).provider
        if provider is None:
            raise RuntimeError("QueueModelMachine needs an engine: run it through the suite")
        self.engine = provider
        self.capabilities = provider.capabilities
        self.clock = FakeClock(START)
        self.model = ReferenceModel(self.clock, ops=self.capabilities.ops)
        self.generation = 0
        self.had_outage = False
        self.rate_limited: str | None = None
        self._last_read: dict[int, Job | None] = {}
        """What the model said each job read at the last check (``get_job`` reads again
        the jobs whose view moved)."""
        self._last_views: dict[str, tuple[object, ...]] = {}
        """Each queue's stats, pause and limits as the model said at the last check."""
        self._checks = 0
        """The queue ``rate_limited_at_start`` gave a rate (``None`` before it ran)."""
        self._resources = ExitStack()
        # Hypothesis reuses function-scoped fixtures across examples, so each example
        # provisions (and in teardown removes) its own store.
        try:
            self.spec: EngineSpec = self._resources.enter_context(provider.provision())
            self.store = self._open()
        except BaseException:
            self._resources.close()
            raise

    def _open(self) -> Store:
        store = self.engine.open(self.spec.url, clock=self.clock, **self.spec.opts)
        # A default backoff's jitter decides which later claims meet the job, so the
        # held bundle's size: Hypothesis replays an example (to explore or shrink it)
        # and refuses one whose bundles changed (FlakyStrategyDefinition).
        seed_jitter(store.aio if isinstance(store, AioStore) else store, self.generation)
        self.consumers: dict[str, QueueConsumer] = {
            name: store.queue(name, opts) for name, opts in QUEUES.items()
        }
        self.consumers[OUTBOX_QUEUE] = store.outbox(OUTBOX)
        self.consumers[KEEPING] = store.queue(KEEPING, self.queue_opts(KEEPING))
        self.ledger = store.queue(TX_QUEUE, TX_QUEUE_OPTS)
        return store

    def teardown(self) -> None:
        try:
            self.store.close()
        finally:
            self._resources.close()

    def queue_opts(self, queue: str) -> QueueOpts:
        if queue == KEEPING:
            return KEEPING_OPTS if self.capabilities.results else NOT_KEEPING_OPTS
        return OUTBOX_QUEUE_OPTS if queue == OUTBOX_QUEUE else QUEUES[queue]

    # -- producing ---------------------------------------------------------------------
    @initialize(
        target=job_ids,
        batch=st.lists(
            st.tuples(
                st.sampled_from(CONSUMERS),
                payloads,
                st.integers(-1, 1),
                st.none() | boundaries,
            ),
            min_size=1,
            max_size=4,
        ),
    )
    def ready_work(self, batch: list[tuple[str, Any, int, int | None]]) -> MultipleResults[int]:
        """Every example starts with some claimable jobs, so claims meet work early."""
        ids = []
        for queue, payload, priority, expires in batch:
            opts = EnqueueOpts(priority=priority, expires=expires)
            job_id = self.consumers[queue].enqueue(payload, opts)
            self.model.enqueue(queue, payload, self.queue_opts(queue), opts, job_id)
            ids.append(job_id)
        return multiple(*ids)

    @rule(target=job_ids, queue=st.sampled_from(CONSUMERS), payload=payloads, draw=opt_draws)
    def enqueue(self, queue: str, payload: Any, draw: OptsDraw | None) -> int:
        opts = None if draw is None else draw.build(self.clock.now())
        job_id = self.consumers[queue].enqueue(payload, opts)
        self.model.enqueue(queue, payload, self.queue_opts(queue), opts, job_id)
        return job_id

    @rule(
        target=job_ids,
        queue=st.sampled_from(CONSUMERS),
        batch=st.lists(payloads, max_size=3),
        draw=opt_draws,
    )
    def enqueue_many(
        self, queue: str, batch: list[Any], draw: OptsDraw | None
    ) -> MultipleResults[int]:
        opts = None if draw is None else draw.build(self.clock.now())
        ids = self.consumers[queue].enqueue_many(batch, opts)
        self.model.enqueue_many(queue, batch, self.queue_opts(queue), opts, ids)
        return multiple(*ids)

    @precondition(lambda self: self.capabilities.dependencies)
    @rule(
        target=job_ids,
        queue=st.sampled_from(CONSUMERS),
        batch=st.lists(payloads, min_size=1, max_size=2),
        after=st.lists(job_ids | st.just(UNISSUED_ID), min_size=1, max_size=3, unique=True),
        fan_in=st.booleans(),
    )
    def enqueue_after(
        self, queue: str, batch: list[Any], after: list[int], fan_in: bool
    ) -> MultipleResults[int]:
        """§18: jobs waiting for others (to complete, or to finish whatever the outcome)."""
        ids = [int(i) for i in after]
        opts = EnqueueOpts(after_finished=ids) if fan_in else EnqueueOpts(after=ids)
        consumer = self.consumers[queue]
        if self.model.refuses_after(opts):
            with pytest.raises(InvalidOptions):
                consumer.enqueue_many(batch, opts)
            return multiple()
        new_ids = consumer.enqueue_many(batch, opts)
        self.model.enqueue_many(queue, batch, self.queue_opts(queue), opts, new_ids)
        return multiple(*new_ids)

    @precondition(lambda self: self.capabilities.unique)
    @rule(
        target=job_ids,
        queue=st.sampled_from(CONSUMERS),
        batch=st.lists(unique_payloads, min_size=1, max_size=3),
        unique=uniques,
        draw=opt_draws,
    )
    def unique_enqueue(
        self, queue: str, batch: list[Any], unique: Unique, draw: OptsDraw | None
    ) -> MultipleResults[int]:
        """§15: one payload through enqueue, more through enqueue_many, keyed."""
        base = EnqueueOpts() if draw is None else draw.build(self.clock.now())
        opts = dataclasses.replace(base, unique=unique)
        consumer = self.consumers[queue]
        if len(batch) == 1:
            results = [consumer.enqueue(batch[0], opts)]
        else:
            results = consumer.enqueue_many(batch, opts)
        self.model.unique_enqueue_many(queue, batch, self.queue_opts(queue), opts, results)
        return multiple(*(result for result in results if not result.duplicate))

    @precondition(lambda self: self.capabilities.transactions)
    @rule(
        target=job_ids,
        writes=st.lists(
            st.tuples(st.sampled_from(CONSUMERS), payloads, opt_draws), min_size=1, max_size=3
        ),
        commit=st.booleans(),
        by_handle=st.booleans(),
        outcomes=st.lists(tx_outcomes, max_size=3),
        fresh=st.none() | st.tuples(st.sampled_from(CONSUMERS), st.sampled_from(WORKERS)),
        again=st.lists(st.booleans(), max_size=2),
    )
    def transactional_enqueue(
        self,
        writes: list[tuple[str, Any, OptsDraw | None]],
        commit: bool,
        by_handle: bool,
        outcomes: list[TxOutcome],
        fresh: tuple[str, str] | None,
        again: list[bool],
    ) -> MultipleResults[int]:
        """§3: enqueues in a transaction that commits or rolls back; and claims'
        outcomes written beside them (§3.8-§3.11: ``tx.ack``, ``tx.retry``, ``tx.fail``,
        and ``tx.ack_all``, ``tx.retry_all``, ``tx.fail_all`` naming the claim; stale
        claims too, and claims that lapse between two outcomes),
        then the same outcomes again in the next transaction, once per entry of
        ``again``, as a caller does whose transaction rolled back (after a commit, the
        claims it finished are refused). A refused outcome raises ``StaleHandle``
        (a many-claims call returns it) and leaves the transaction usable: the machine
        carries on past it. An outcome takes a held claim (``pick``) or one of the
        claims ``fresh`` makes first (a claim of up to three jobs, made only for a
        transaction with outcomes). The outcomes live in this rule, not in one of
        their own, so that the other rules' share of an example's steps stays as it
        was."""
        claimed: list[HeldClaim] = []
        if outcomes and fresh is not None:
            claimed = list(self.claim_batch(fresh[0], fresh[1], 3).values)
        ids = self._outcomes_in_a_transaction(claimed, outcomes, writes, by_handle, commit)
        for then in again if outcomes else []:
            ids.extend(self._outcomes_in_a_transaction(claimed, outcomes, [], by_handle, then))
        return multiple(*ids)

    @initialize(
        payload=payloads,
        first=tx_outcomes,
        then=tx_outcomes,
        commit=st.booleans(),
    )
    def outcome_rolled_back_at_start(
        self, payload: Any, first: TxOutcome, then: TxOutcome, commit: bool
    ) -> None:
        """§3.8, §3.9: every example (on an engine with the transactions profile) starts
        with a claim whose ``tx.ack``, ``tx.retry`` or ``tx.fail`` rolled back: the job
        reads back as it was, claimed (the invariants read it after the step, and the
        transaction read its outcome before the rollback), and the next transaction's
        outcome of the same claim is accepted, then committed or rolled back in turn.
        Its job lives in a queue of its own (``TX_QUEUE``) that no other rule claims
        from or limits, so the other rules meet the same queues as before."""
        if not self.capabilities.transactions:  # (@initialize rules take no @precondition)
            return
        job_id = self.ledger.enqueue(payload)
        self.model.enqueue(TX_QUEUE, payload, TX_QUEUE_OPTS, None, job_id)
        handles = self.ledger.claim_batch(WORKERS[0], 1)
        (held,) = self._check_claims(handles, self.model.claim(TX_QUEUE, WORKERS[0], 1))
        for outcome, ends in ((first, False), (then, commit)):
            done = dataclasses.replace(outcome, held=held, wait=0)
            self._outcomes_in_a_transaction([held], [done], [], False, ends)
            agree_job(
                f"get_job({job_id}) after its claim's tx.{outcome.verb}",
                self.ledger.get_job(job_id),
                self.model.get_job(job_id),
            )

    def _outcomes_in_a_transaction(
        self,
        claimed: list[HeldClaim],
        outcomes: list[TxOutcome],
        writes: list[tuple[str, Any, OptsDraw | None]],
        by_handle: bool,
        commit: bool,
    ) -> list[int]:
        """One transaction: ``writes`` and ``outcomes`` interleaved (the first write,
        the first outcome, the second write...), then a commit or a rollback."""
        model_tx = self.model.begin()
        ids: list[int] = []
        try:
            with self.store.transaction() as tx:
                for position in range(max(len(writes), len(outcomes))):
                    if position < len(writes):
                        queue, payload, draw = writes[position]
                        ids.append(self._tx_write(tx, model_tx, queue, payload, draw, by_handle))
                    if position < len(outcomes):
                        outcome = outcomes[position]
                        held = self._outcome_claim(outcome, claimed, position)
                        self.clock.advance(outcome.wait)
                        if held is not None:
                            self._tx_outcome(tx, model_tx, dataclasses.replace(outcome, held=held))
                if not commit:
                    raise _Rollback
        except _Rollback:
            self.model.rollback(model_tx)
        else:
            self.model.commit(model_tx)
            reader = self.consumers["mail"]  # get_job is id-global
            for job_id in sorted(model_tx.unsettled):  # the jitter is the engine's
                job = reader.get_job(job_id)
                assert job is not None, f"job {job_id}, retried in a transaction, vanished"
                self.model.settle_retry(job_id, job.run_at)
        return ids

    def _outcome_claim(
        self, outcome: TxOutcome, claimed: list[HeldClaim], position: int
    ) -> HeldClaim | None:
        """The claim an outcome writes: its own, a held one (``pick``), else one of
        ``claimed``; ``None`` when there is none."""
        if outcome.held is not None:
            return outcome.held
        held = self.bundle("held")
        if outcome.pick is not None and held:
            picked: HeldClaim = self.names_to_values[held[outcome.pick % len(held)].name]
            return picked
        return claimed[position % len(claimed)] if claimed else None

    def _tx_write(
        self,
        tx: Transaction,
        model_tx: ModelTransaction,
        queue: str,
        payload: Any,
        draw: OptsDraw | None,
        by_handle: bool,
    ) -> int:
        if queue == OUTBOX_QUEUE:
            job_id = tx.outbox_enqueue(OUTBOX, payload)
            model_tx.enqueue(queue, payload, OUTBOX_QUEUE_OPTS, None, job_id)
            return job_id  # the backing queue's name is reserved: no get_job_tx
        opts = None if draw is None else draw.build(self.clock.now())
        if by_handle and self.capabilities.ops:
            # Contract 1.1: a Queue handle stamps that handle's opts.
            handle = self.store.queue(queue, self.queue_opts(queue))
            job_id = tx.enqueue(handle, payload, opts)
            stamped = self.queue_opts(queue)
        else:
            # A transaction names a queue without a handle: the defaults.
            job_id = tx.enqueue(queue, payload, opts)
            stamped = DEFAULT_QUEUE_OPTS
        model_tx.enqueue(queue, payload, stamped, opts, job_id)
        # get_job_tx sees the transaction's own rows, filtered by queue.
        for other in QUEUES:
            agree_job(
                f"tx.get_job_tx({other!r}, {job_id})",
                tx.get_job_tx(other, job_id),
                model_tx.get_job(other, job_id),
            )
        return job_id

    def _tx_outcome(self, tx: Transaction, model_tx: ModelTransaction, outcome: TxOutcome) -> None:
        held, verb = outcome.held, outcome.verb
        assert held is not None
        if held.generation != self.generation:
            # A handle of a closed opening of the store is another store's (§3.8).
            with pytest.raises(InvalidOptions):
                self._tx_call(tx, outcome)
            return
        before = self.model.describe(held.claim.job_id)
        try:
            refused = self._tx_call(tx, outcome)
        except StaleHandle:
            if verb.endswith("_all"):
                raise  # a many-claims call returns its refusals (§3.10, §3.11)
            refused = True
        one = verb.removesuffix("_all")  # the model writes one claim either way
        if one == "ack":
            result = outcome.result if self.capabilities.results else None
            valid = model_tx.ack(held.claim, result)
        elif one == "retry":
            valid = model_tx.retry(held.claim, outcome.error, outcome.delay).accepted
        else:
            valid = model_tx.fail(held.claim, outcome.error)
        agree(f"tx.{verb}({held}) refused with StaleHandle [{before}]", refused, not valid)
        queue = held.claim.job.queue
        if queue != OUTBOX_QUEUE and held.claim.job_id not in model_tx.unsettled:
            # The transaction reads its own outcome (§3.4).
            agree_job(
                f"tx.get_job_tx({queue!r}, {held.claim.job_id}) after tx.{verb}",
                tx.get_job_tx(queue, held.claim.job_id),
                model_tx.get_job(queue, held.claim.job_id),
            )

    def _tx_call(self, tx: Transaction, outcome: TxOutcome) -> bool:
        """Write ``outcome``; whether the many-claims call refused it (a one-claim
        call raises ``StaleHandle`` instead)."""
        assert outcome.held is not None
        handle = outcome.held.handle
        result = outcome.result if self.capabilities.results else None
        delay, error = outcome.delay, outcome.error
        match outcome.verb:
            case "ack":
                tx.ack(handle, result=result) if result is not None else tx.ack(handle)
            case "retry":
                tx.retry(handle, error) if delay is None else tx.retry(handle, error, delay)
            case "fail":
                tx.fail(handle, error)
            case "ack_all":
                return tx.ack_all([handle], [result]) == (handle,)
            case "retry_all":
                return tx.retry_all([handle], [error], [delay]) == (handle,)
            case _:
                return tx.fail_all([handle], error) == (handle,)
        return False

    # -- claiming ----------------------------------------------------------------------
    def _check_claims(self, handles: list[JobHandle], claims: list[Claim]) -> list[HeldClaim]:
        agree(
            "claimed (id, attempt) in order",
            [(h.id, h.attempts) for h in handles],
            [(c.job_id, c.attempt) for c in claims],
        )
        for handle, claim in zip(handles, claims, strict=True):
            agree_job(f"handle.job of job {claim.job_id}", handle.job, claim.job)
            agree(f"handle.payload of job {claim.job_id}", handle.payload, claim.job.payload)
        return [HeldClaim(h, c, self.generation) for h, c in zip(handles, claims, strict=True)]

    @rule(target=held, queue=st.sampled_from(CONSUMERS), worker=st.sampled_from(WORKERS))
    def claim(self, queue: str, worker: str) -> MultipleResults[HeldClaim]:
        handle = self.consumers[queue].claim(worker)
        claims = self.model.claim(queue, worker, 1)
        return multiple(*self._check_claims([] if handle is None else [handle], claims))

    def _claims_of_the_rate_limited_queue(
        self, worker: str, first: int, step: int
    ) -> MultipleResults[HeldClaim]:
        """A claim of up to ``first`` jobs of the queue ``rate_limited_at_start`` limited
        (its rates as the last set_or_clear_limits left them), then one of up to three
        ``step`` seconds later."""
        queue = self.rate_limited
        assert queue is not None
        before = self.claim_batch(queue, worker, first)
        self.clock.advance(step)
        after = self.claim_batch(queue, worker, 3)
        return multiple(*before.values, *after.values)

    # Two rules, not one with the step drawn: each edge of the window is met about once
    # an example, so a rate counted wrong (either mutant) shows within a selftest run.
    @precondition(lambda self: self.capabilities.limits and self.rate_limited is not None)
    @rule(target=held, worker=st.sampled_from(WORKERS), first=st.integers(1, 3))
    def claims_of_the_rate_limited_queue_a_second_apart(
        self, worker: str, first: int
    ) -> MultipleResults[HeldClaim]:
        """§16.6, §16.11: the first claim's starts are in the window's last second one
        second later and still count, against the queue's rate and their own key's."""
        return self._claims_of_the_rate_limited_queue(worker, first, 1)

    @precondition(lambda self: self.capabilities.limits and self.rate_limited is not None)
    @rule(target=held, worker=st.sampled_from(WORKERS), first=st.integers(1, 3))
    def claims_of_the_rate_limited_queue_a_window_apart(
        self, worker: str, first: int
    ) -> MultipleResults[HeldClaim]:
        """§16.6: ``RATE_WINDOW_S`` seconds later the first claim's starts have left the
        window and count no more."""
        return self._claims_of_the_rate_limited_queue(worker, first, RATE_WINDOW_S)

    @rule(
        target=held,
        queue=st.sampled_from(CONSUMERS),
        worker=st.sampled_from(WORKERS),
        limit=st.integers(1, 3),
    )
    def claim_batch(self, queue: str, worker: str, limit: int) -> MultipleResults[HeldClaim]:
        handles = self.consumers[queue].claim_batch(worker, limit)
        claims = self.model.claim(queue, worker, limit)
        return multiple(*self._check_claims(handles, claims))

    # -- handle ops ----------------------------------------------------------------------
    def _refused_as_closed(self, held: HeldClaim, op: Callable[[JobHandle], object]) -> bool:
        """A handle from before a reopen still reads as a value, but its store is
        closed: every op raises StoreClosed and changes nothing."""
        if held.generation == self.generation:
            return False
        agree_job("a closed store's handle.job", held.handle.job, held.claim.job)
        with pytest.raises(StoreClosed):
            op(held.handle)
        return True

    @rule(held=held)
    def ack(self, held: HeldClaim) -> None:
        if self._refused_as_closed(held, lambda h: h.ack()):
            return
        before = self.model.describe(held.claim.job_id)
        agree(f"{held}.ack() [{before}]", held.handle.ack(), self.model.ack(held.claim))

    @precondition(lambda self: self.capabilities.results)
    @rule(held=held, result=payloads)
    def ack_with_result(self, held: HeldClaim, result: Any) -> None:
        """§17: kept as the job's result when its queue keeps it, dropped otherwise."""
        if self._refused_as_closed(held, lambda h: h.ack(result=result)):
            return
        before = self.model.describe(held.claim.job_id)
        agree(
            f"{held}.ack(result={result!r}) [{before}]",
            held.handle.ack(result=result),
            self.model.ack(held.claim, result),
        )

    @rule(target=held, held=held, worker=st.sampled_from(WORKERS), limit=st.integers(1, 3))
    def ack_and_claim(self, held: HeldClaim, worker: str, limit: int) -> MultipleResults[HeldClaim]:
        if self._refused_as_closed(held, lambda h: h.ack_and_claim(worker, limit)):
            return multiple()
        before = self.model.describe(held.claim.job_id)
        acked, handles = held.handle.ack_and_claim(worker, limit)
        # One transaction in the engine; in the model, the ack and then the claim.
        agree(f"{held}.ack_and_claim().acked [{before}]", acked, self.model.ack(held.claim))
        claims = self.model.claim(held.claim.job.queue, worker, limit)
        return multiple(*self._check_claims(handles, claims))

    @rule(held=held, extend=durations)
    def heartbeat(self, held: HeldClaim, extend: int | float | timedelta) -> None:
        if self._refused_as_closed(held, lambda h: h.heartbeat(extend)):
            return
        before = self.model.describe(held.claim.job_id)
        agree(
            f"{held}.heartbeat({extend!r}) [{before}]",
            held.handle.heartbeat(extend),
            self.model.heartbeat(held.claim, extend),
        )

    @rule(held=held, error=errors, delay=retry_delays)
    def retry(self, held: HeldClaim, error: str, delay: int | float | None) -> None:
        if self._refused_as_closed(held, lambda h: h.retry(error, delay)):
            return
        before = self.model.describe(held.claim.job_id)
        accepted = held.handle.retry(error) if delay is None else held.handle.retry(error, delay)
        outcome = self.model.retry(held.claim, error, delay)
        agree(f"{held}.retry({error!r}, {delay!r}) [{before}]", accepted, outcome.accepted)
        if outcome.run_at_bounds is not None:
            # The jitter is the engine's: check its run_at against the curve, then adopt it.
            job = self.consumers[held.claim.job.queue].get_job(held.claim.job_id)
            assert job is not None, f"retried job {held.claim.job_id} vanished"
            self.model.settle_retry(job.id, job.run_at)

    @precondition(lambda self: self.capabilities.snooze)
    @rule(held=held, delay=snooze_delays)
    def snooze(self, held: HeldClaim, delay: int | float) -> None:
        if self._refused_as_closed(held, lambda h: h.snooze(delay)):
            return
        before = self.model.describe(held.claim.job_id)
        agree(
            f"{held}.snooze({delay!r}) [{before}]",
            held.handle.snooze(delay),
            self.model.snooze(held.claim, delay),
        )

    @rule(held=held, error=errors)
    def fail(self, held: HeldClaim, error: str) -> None:
        if self._refused_as_closed(held, lambda h: h.fail(error)):
            return
        before = self.model.describe(held.claim.job_id)
        agree(
            f"{held}.fail({error!r}) [{before}]",
            held.handle.fail(error),
            self.model.fail(held.claim, error),
        )

    # -- queue-level ops -------------------------------------------------------------------
    @precondition(lambda self: bool(self.bundle("held")))  # a list of a bundle needs one
    @rule(
        claims=st.lists(held, min_size=1, max_size=3),
        strays=st.lists(job_ids, max_size=2),
        worker=st.sampled_from(WORKERS),
        queue=st.none() | st.sampled_from(CONSUMERS),
    )
    def ack_batch(
        self, claims: list[HeldClaim], strays: list[int], worker: str, queue: str | None
    ) -> None:
        """Ids of claims (any opening of the store) plus strays; ``queue=None`` means the
        first claim's queue, so matches are common and mismatches still happen."""
        target = claims[0].claim.job.queue if queue is None else queue
        ids = [c.claim.job_id for c in claims] + strays
        agree(
            f"{target!r} ack_batch({ids}, {worker!r})",
            self.consumers[target].ack_batch(ids, worker),
            self.model.ack_batch(target, ids, worker),
        )

    @rule(queue=st.sampled_from(CONSUMERS), job_id=job_ids)
    def cancel(self, queue: str, job_id: int) -> None:
        agree(
            f"{queue!r} cancel({job_id})",
            self.consumers[queue].cancel(job_id),
            self.model.cancel(queue, job_id),
        )

    @rule(queue=st.sampled_from(CONSUMERS))
    def sweep_expired(self, queue: str) -> None:
        agree(
            f"{queue!r} sweep_expired()",
            self.consumers[queue].sweep_expired(),
            self.model.sweep_expired(queue),
        )

    @rule()
    def maintenance(self) -> None:
        """The documented recipe (contract §5): sweep every queue in turn."""
        for queue in CONSUMERS:
            self.sweep_expired(queue)

    @rule(seconds=clock_steps)
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.generation += 1
        self.store = self._open()
        self._last_read, self._last_views = {}, {}  # the new store's reads: all of them

    # -- operations (contract §11) -------------------------------------------------------------
    @precondition(lambda self: self.capabilities.ops)
    @rule(
        queue=st.sampled_from(CONSUMERS),
        state=st.none() | st.sampled_from(JobState),
        after=st.just(0) | job_ids,
        limit=st.integers(1, 4),
    )
    def list_jobs(self, queue: str, state: JobState | None, after: int, limit: int) -> None:
        if (state is JobState.COMPLETED and not self.capabilities.results) or (
            state is JobState.WAITING and not self.capabilities.dependencies
        ):
            with pytest.raises(ProfileUnavailable):  # §17, §18: no such state without it
                self.consumers[queue].jobs(state, after_id=after, limit=limit)
            return
        agree(
            f"{queue!r} jobs({state}, after_id={after}, limit={limit})",
            self.consumers[queue].jobs(state, after_id=after, limit=limit),
            self.model.jobs(queue, state, after, limit),
        )

    @precondition(lambda self: self.capabilities.ops)
    @rule(
        target=job_ids,
        queue=st.sampled_from(CONSUMERS),
        ids=st.none() | st.lists(job_ids, max_size=3),
        limit=st.integers(1, 3),
    )
    def redrive(self, queue: str, ids: list[int] | None, limit: int) -> MultipleResults[int]:
        new_ids = self.consumers[queue].redrive(ids, limit=limit)
        revived = self.waiting_redriven() if self.capabilities.dependencies else {}
        brought_back = self.model.redrive(queue, ids, limit, new_ids, revived)
        return multiple(*new_ids, *brought_back)

    def waiting_redriven(self) -> dict[int, int]:
        """Every waiting job redriven from a dead one, by the dead id (§18.4: the jobs
        a redrive brought back), read page by page from every queue."""
        found: dict[int, int] = {}
        for consumer in self.consumers.values():
            after = 0
            for _ in range(MAX_PAGES):
                page = consumer.jobs(JobState.WAITING, after_id=after, limit=PAGE)
                found.update({j.redriven_from: j.id for j in page if j.redriven_from})
                if len(page) < PAGE:
                    break
                after = page[-1].id
        return found

    @precondition(lambda self: self.capabilities.ops)
    @rule(
        queue=st.sampled_from(CONSUMERS),
        ids=st.none() | st.lists(job_ids, max_size=3),
        older_than_s=st.none() | boundaries,
    )
    def purge_dead(self, queue: str, ids: list[int] | None, older_than_s: int | None) -> None:
        agree(
            f"{queue!r} purge_dead({ids}, older_than_s={older_than_s})",
            self.consumers[queue].purge_dead(ids, older_than_s=older_than_s),
            self.model.purge_dead(queue, ids, older_than_s),
        )

    @precondition(lambda self: self.capabilities.ops)
    @rule(queue=st.sampled_from(CONSUMERS), paused=st.booleans())
    def pause_or_resume(self, queue: str, paused: bool) -> None:
        handle = self.consumers[queue]
        agree(
            f"{queue!r} {'pause' if paused else 'resume'}()",
            handle.pause() if paused else handle.resume(),
            self.model.set_paused(queue, paused),
        )

    @precondition(lambda self: self.capabilities.limits)
    @rule(
        queue=st.sampled_from(CONSUMERS),
        concurrency=st.none() | st.integers(1, 3),
        per_key=st.none() | st.integers(1, 2),
        rate=st.none() | st.integers(1, 3),
        rate_per_key=st.none() | st.integers(1, 2),
    )
    def set_or_clear_limits(
        self,
        queue: str,
        concurrency: int | None,
        per_key: int | None,
        rate: int | None,
        rate_per_key: int | None,
    ) -> None:
        """§16, §16.6, §16.9, §16.11: every limit of 1 to 3; the rates' window is
        ``RATE_WINDOW_S`` (one window for every rate, so clock steps land on its edges)."""
        handle = self.consumers[queue]
        if not self.capabilities.key_limits:
            per_key = rate_per_key = None
        per = None if rate is None and rate_per_key is None else RATE_WINDOW_S
        if concurrency is None and per_key is None and per is None:
            agree(
                f"{queue!r} clear_limits()",
                handle.clear_limits(),
                self.model.set_limits(queue, None),
            )
        else:
            limits = Limits(
                concurrency,
                rate=rate,
                per=per,
                concurrency_per_key=per_key,
                rate_per_key=rate_per_key,
            )
            agree(
                f"{queue!r} set_limits({limits!r})",
                handle.set_limits(limits),
                self.model.set_limits(
                    queue, concurrency, per_key, rate=rate, rate_per_key=rate_per_key, per=per
                ),
            )

    @initialize(
        target=job_ids,
        queue=st.sampled_from(CONSUMERS),
        rate=st.integers(1, 3),
        rate_per_key=st.sampled_from([None, 1, 2]),
        backlog=st.lists(
            st.tuples(payloads, st.sampled_from([None, "a", "b"])), min_size=4, max_size=8
        ).filter(lambda jobs: {"a", "b"} <= {key for _, key in jobs}),
        first=st.integers(1, 3),
    )
    def rate_limited_at_start(
        self,
        queue: str,
        rate: int,
        rate_per_key: int | None,
        backlog: list[tuple[Any, str | None]],
        first: int,
    ) -> MultipleResults[int]:
        """Every example starts with one queue rate limited (per key too, in about two
        thirds of them, on engines with the key_limits profile) and a backlog on it, its
        jobs of both limit keys and none, so claims meet the rates' windows (and their
        last second) often. A per-key rate is set below the queue's (``rate`` above it): a
        claim of two keys' jobs then meets the per-key rate before the queue's, so a
        per-key rate counted over every key's starts (§16.11) shows in the claims. The
        other combinations (a per-key rate at or above the queue's) come from
        ``set_or_clear_limits``.

        With a per-key rate, the backlog is claimed a second apart at once, while both
        keys have jobs: a later rule meets that state too rarely for a selftest run of
        a hundred examples to be sure of it. Those claims' handles are not kept; their
        jobs lapse and are claimed again."""
        keyed = self.capabilities.key_limits
        if self.capabilities.limits:  # (@initialize rules take no @precondition)
            if keyed and rate_per_key is not None:
                self.set_or_clear_limits(queue, None, None, rate_per_key + rate, rate_per_key)
            else:
                self.set_or_clear_limits(queue, None, None, rate, None)
            self.rate_limited = queue
        ids = []
        for payload, key in backlog:
            opts = EnqueueOpts(limit_key=key if keyed else None)
            job_id = self.consumers[queue].enqueue(payload, opts)
            self.model.enqueue(queue, payload, self.queue_opts(queue), opts, job_id)
            ids.append(job_id)
        if self.capabilities.limits and keyed and rate_per_key is not None:
            self._claims_of_the_rate_limited_queue(WORKERS[0], first, 1)
        return multiple(*ids)

    @precondition(lambda self: self.capabilities.key_limits)
    @rule(
        target=job_ids,
        queue=st.sampled_from(CONSUMERS),
        batch=st.lists(payloads, min_size=1, max_size=3),
        key=st.sampled_from([None, "a", "b"]),
        draw=opt_draws,
    )
    def keyed_enqueue(
        self, queue: str, batch: list[Any], key: str | None, draw: OptsDraw | None
    ) -> MultipleResults[int]:
        """§16.9: jobs stamped with a limit key (``None``: the shared key)."""
        base = EnqueueOpts() if draw is None else draw.build(self.clock.now())
        opts = dataclasses.replace(base, limit_key=key)
        ids = self.consumers[queue].enqueue_many(batch, opts)
        self.model.enqueue_many(queue, batch, self.queue_opts(queue), opts, ids)
        return multiple(*ids)

    @precondition(lambda self: self.capabilities.metadata)
    @rule(
        target=job_ids,
        queue=st.sampled_from(CONSUMERS),
        batch=st.lists(payloads, min_size=1, max_size=3),
        metadata=st.sampled_from([{}, {"traceparent": "00-ab-cd-01"}, {"a": "1", "b": "é"}]),
        draw=opt_draws,
    )
    def tagged_enqueue(
        self, queue: str, batch: list[Any], metadata: dict[str, str], draw: OptsDraw | None
    ) -> MultipleResults[int]:
        """§20: jobs carrying metadata, kept by every later step of their lives."""
        base = EnqueueOpts() if draw is None else draw.build(self.clock.now())
        opts = dataclasses.replace(base, metadata=metadata)
        ids = self.consumers[queue].enqueue_many(batch, opts)
        self.model.enqueue_many(queue, batch, self.queue_opts(queue), opts, ids)
        return multiple(*ids)

    # -- locks -----------------------------------------------------------------------------
    @initialize(
        name=st.sampled_from(LOCK_NAMES), owner=st.sampled_from(LOCK_OWNERS), ttl=boundaries
    )
    def lock_held_at_start(self, name: str, owner: str, ttl: int) -> None:
        """Every example starts with a lock held, so renewals meet lapsed locks often."""
        if self.capabilities.locks:  # (@initialize rules take no @precondition)
            self.lock_acquire(name, owner, ttl)

    @precondition(lambda self: self.capabilities.locks)
    @rule(name=st.sampled_from(LOCK_NAMES), owner=st.sampled_from(LOCK_OWNERS), ttl=durations)
    def lock_acquire(self, name: str, owner: str, ttl: int | float | timedelta) -> None:
        agree(
            f"lock {name!r} acquire({owner!r}, {ttl!r})",
            self.store.lock(name).acquire(owner, ttl),
            self.model.lock_acquire(name, owner, ttl),
        )

    @precondition(lambda self: self.capabilities.locks)
    @rule(name=st.sampled_from(LOCK_NAMES), owner=st.sampled_from(LOCK_OWNERS), ttl=durations)
    def lock_renew(self, name: str, owner: str, ttl: int | float | timedelta) -> None:
        agree(
            f"lock {name!r} renew({owner!r}, {ttl!r})",
            self.store.lock(name).renew(owner, ttl),
            self.model.lock_renew(name, owner, ttl),
        )

    @precondition(lambda self: self.capabilities.locks)
    @rule(name=st.sampled_from(LOCK_NAMES), owner=st.sampled_from(LOCK_OWNERS))
    def lock_release(self, name: str, owner: str) -> None:
        agree(
            f"lock {name!r} release({owner!r})",
            self.store.lock(name).release(owner),
            self.model.lock_release(name, owner),
        )

    # -- scheduler -------------------------------------------------------------------------
    @initialize(
        name=st.sampled_from(SCHEDULE_NAMES),
        spec=st.sampled_from(SPECS + CRON_SPECS),
        queue=st.sampled_from(SCHEDULE_TARGETS),
        payload=payloads,
        opts=schedule_opts,
    )
    def scheduled_at_start(
        self, name: str, spec: str, queue: str, payload: Any, opts: ScheduleOpts | None
    ) -> None:
        """Every example starts with a schedule, so ticks meet due boundaries often."""
        if self.capabilities.scheduler:  # (@initialize rules take no @precondition)
            self.schedule(name, spec, False, queue, payload, opts)

    def _respecified(
        self, name: str, keep_spec: bool, spec: str, opts: ScheduleOpts | None
    ) -> tuple[str, ScheduleOpts | None]:
        """With ``keep_spec``, an existing schedule's own spec and zone (its boundary must
        stay) beside the drawn other opts; else what was drawn."""
        current = self.model.get_schedule(name)
        if not keep_spec or current is None:
            return spec, opts
        return current.spec, dataclasses.replace(opts or ScheduleOpts(), timezone=current.timezone)

    @precondition(lambda self: self.capabilities.scheduler)
    @rule(
        name=st.sampled_from(SCHEDULE_NAMES),
        spec=st.sampled_from(SPECS + CRON_SPECS),
        keep_spec=st.booleans(),
        queue=st.sampled_from(SCHEDULE_TARGETS),
        payload=payloads,
        opts=schedule_opts,
    )
    def schedule(
        self,
        name: str,
        spec: str,
        keep_spec: bool,
        queue: str,
        payload: Any,
        opts: ScheduleOpts | None,
    ) -> None:
        """Register or re-register; ``keep_spec`` re-registers an existing schedule with
        its own spec and zone (the boundary must stay) and new queue, payload, opts or
        policy. Without the cron profile, a cron spec, a zone or a policy is refused."""
        spec, opts = self._respecified(name, keep_spec, spec, opts)
        if not self.capabilities.cron and _needs_cron(spec, opts):
            with pytest.raises(ProfileUnavailable):
                self.store.schedule(name, spec, queue, payload, opts)
            return
        before = self.model.describe_schedules()
        agree(
            f"schedule({name!r}, {spec!r}, {queue!r}, {payload!r}, {opts!r}) [{before}]",
            self.store.schedule(name, spec, queue, payload, opts),
            self.model.schedule(name, spec, queue, payload, opts),
        )

    @precondition(lambda self: _declares(self.capabilities))
    @rule(
        name=st.sampled_from(SCHEDULE_NAMES),
        spec=st.sampled_from(SPECS + CRON_SPECS),
        keep_spec=st.booleans(),
        queue=st.sampled_from(SCHEDULE_TARGETS),
        payload=payloads,
        opts=schedule_opts,
    )
    def declare_schedule(
        self,
        name: str,
        spec: str,
        keep_spec: bool,
        queue: str,
        payload: Any,
        opts: ScheduleOpts | None,
    ) -> None:
        """A worker starting declares a schedule (§5.11): ``schedule`` with a lease, so
        ``keep_spec`` (a fleet's next worker starting) must keep the boundary."""
        spec, opts = self._respecified(name, keep_spec, spec, opts)
        before = self.model.describe_schedules()
        agree(
            f"declare_schedule({name!r}, {spec!r}, {queue!r}, {payload!r}, {opts!r}) [{before}]",
            self.store.declare_schedule(name, spec, queue, payload, opts),
            self.model.declare_schedule(name, spec, queue, payload, opts),
        )

    @precondition(lambda self: _declares(self.capabilities))
    @rule(names=st.lists(st.sampled_from(SCHEDULE_NAMES), max_size=3))
    def renew_schedules(self, names: list[str]) -> None:
        """A running worker renews what it declares; undeclared and gone names are not."""
        before = self.model.describe_schedules()
        agree(
            f"renew_schedules({names!r}) [{before}]",
            self.store.renew_schedules(names),
            self.model.renew_schedules(names),
        )

    @precondition(lambda self: self.capabilities.workers)
    @rule(
        worker_id=st.sampled_from(WORKER_IDS),
        queues=st.lists(st.sampled_from(sorted(QUEUES)), max_size=2, unique=True),
    )
    def register_worker(self, worker_id: str, queues: list[str]) -> None:
        """A worker starting registers (§19.1); a lapsed one's row goes with it."""
        info = WorkerInfo(worker_id, "model-host", 4242, tuple(queues), START)
        agree(
            f"register_worker({worker_id!r}, {queues!r})",
            self.store.register_worker(info),
            self.model.register_worker(info),
        )

    @precondition(lambda self: self.capabilities.workers)
    @rule(
        worker_id=st.sampled_from(WORKER_IDS),
        finished=st.none()
        | st.dictionaries(st.sampled_from(sorted(QUEUES)), st.integers(0, 3), max_size=2),
    )
    def heartbeat_worker(self, worker_id: str, finished: dict[str, int] | None) -> None:
        """A running worker heartbeats with its acks (§19.2, §19.6); a lapsed one is not
        renewed, its counts still added."""
        agree(
            f"heartbeat_worker({worker_id!r}, {finished!r})",
            self.store.heartbeat_worker(worker_id, finished),
            self.model.heartbeat_worker(worker_id, finished),
        )

    @precondition(lambda self: self.capabilities.workers)
    @rule(worker_id=st.sampled_from(WORKER_IDS))
    def deregister_worker(self, worker_id: str) -> None:
        agree(
            f"deregister_worker({worker_id!r})",
            self.store.deregister_worker(worker_id),
            self.model.deregister_worker(worker_id),
        )

    @precondition(lambda self: self.capabilities.workers)
    @rule()
    def workers_and_throughput(self) -> None:
        """The live workers by id, and the hour's counts (§19.1, §19.6)."""
        agree("workers()", self.store.workers(), self.model.workers())
        agree("throughput()", self.store.throughput(), self.model.throughput())

    @precondition(lambda self: self.capabilities.scheduler)
    @rule(name=st.sampled_from(SCHEDULE_NAMES))
    def unschedule(self, name: str) -> None:
        agree(f"unschedule({name!r})", self.store.unschedule(name), self.model.unschedule(name))

    @precondition(lambda self: self.capabilities.scheduler)
    @rule(ticks=st.lists(st.tuples(st.sampled_from(TICKERS), tick_waits), min_size=1, max_size=3))
    def tick_schedules(self, ticks: list[tuple[str, int]]) -> None:
        """A few ticks in a row, each after letting some time pass: boundaries come
        due, missed ones pile up past the catch-up cap, and one ticker meets the
        other's leadership, live or lapsed."""
        for worker, seconds in ticks:
            self._tick(worker, seconds)

    def _tick(self, worker: str, seconds: int) -> None:
        self.clock.advance(seconds)
        floor = self.model.max_committed_id or 0
        before = self.model.describe_schedules()
        agree(
            f"tick_schedules({worker!r}) [{before}]",
            self.store.tick_schedules(worker),
            self.model.tick_schedules(worker),
        )
        self._adopt_fired_jobs(floor)

    @precondition(
        lambda self: (
            self.capabilities.scheduler and not self.had_outage and bool(self.model.schedules())
        )
    )
    @rule(
        worker=st.sampled_from(TICKERS),
        missed=st.sampled_from(
            (CATCH_UP_CAP + 1, CATCH_UP_CAP, CATCH_UP_CAP - 1, CATCH_UP_CAP + 2)
        ),
        data=st.data(),
    )
    def tick_after_outage(self, worker: str, missed: int, data: st.DataObject) -> None:
        """Nobody ticked for a while: move the clock so that exactly ``missed``
        boundaries of one schedule are due, around the catch-up cap, then tick. Once
        per example: every fire is a job the invariants read after every step."""
        self.had_outage = True
        name = data.draw(st.sampled_from([s.name for s in self.model.schedules()]), label="name")
        due = self.model.get_schedule(name)
        assert due is not None
        # (Never backwards: if more are due already, the tick meets more.)
        self.clock.set(max(self.clock.now(), self.model.later_boundary(name, missed - 1)))
        self._tick(worker, 0)

    def _adopt_fired_jobs(self, floor: int) -> None:
        """Find the jobs the tick created: every id between the largest committed before
        the tick (``floor``) and a sentinel enqueued now. Any job there is a fire, so the
        model must expect it, and every fire it expects must be there."""
        probe = self.store.queue(PROBE_QUEUE)
        sentinel = probe.enqueue(None)
        assert sentinel > floor, (
            f"job id {sentinel} is not larger than every id before it ({floor}): ids must "
            "increase in enqueue order and never be reused"
        )
        reader = self.consumers["mail"]  # get_job is id-global
        found = [job for i in range(floor + 1, sentinel) if (job := reader.get_job(i)) is not None]
        self.model.adopt_fired(found)
        self.model.enqueue(PROBE_QUEUE, None, DEFAULT_QUEUE_OPTS, None, sentinel)
        agree(
            f"cancel({sentinel}) of the id sentinel",
            probe.cancel(sentinel),
            self.model.cancel(PROBE_QUEUE, sentinel),
        )

    # -- streams -------------------------------------------------------------------------
    @initialize(
        appends=st.lists(st.tuples(st.sampled_from(STREAMS), payloads), min_size=1, max_size=3)
    )
    def events_at_start(self, appends: list[tuple[str, Any]]) -> None:
        """Every example starts with some events, so reads and trims meet them early."""
        if self.capabilities.streams:  # (@initialize rules take no @precondition)
            for stream, payload in appends:
                self.stream_append(stream, payload)

    @precondition(lambda self: self.capabilities.streams)
    @rule(stream=st.sampled_from(STREAMS), payload=payloads)
    def stream_append(self, stream: str, payload: Any) -> None:
        offset = self.store.stream(stream).append(payload)
        self.model.stream_append(stream, payload, offset)

    @precondition(lambda self: self.capabilities.streams and self.capabilities.transactions)
    @rule(
        target=job_ids,
        appends=st.lists(st.tuples(st.sampled_from(STREAMS), payloads), min_size=1, max_size=3),
        job=st.none() | st.tuples(st.sampled_from(tuple(QUEUES)), payloads),
        commit=st.booleans(),
    )
    def stream_transaction(
        self, appends: list[tuple[str, Any]], job: tuple[str, Any] | None, commit: bool
    ) -> MultipleResults[int]:
        """Appends (and maybe an enqueue) that commit or roll back together (§3)."""
        model_tx = self.model.begin()
        ids: list[int] = []
        try:
            with self.store.transaction() as tx:
                for stream, payload in appends:
                    model_tx.stream_append(stream, payload, tx.stream_append(stream, payload))
                if job is not None:
                    queue, payload = job
                    job_id = tx.enqueue(queue, payload)
                    model_tx.enqueue(queue, payload, DEFAULT_QUEUE_OPTS, None, job_id)
                    ids.append(job_id)
                if not commit:
                    raise _Rollback
        except _Rollback:
            self.model.rollback(model_tx)
        else:
            self.model.commit(model_tx)
        return multiple(*ids)

    @precondition(lambda self: self.capabilities.streams)
    @rule(stream=st.sampled_from(STREAMS), limit=st.integers(1, 4), data=st.data())
    def stream_read(self, stream: str, limit: int, data: st.DataObject) -> None:
        after = data.draw(st.integers(0, self.model.stream_top(stream) + 1), label="after")
        agree(
            f"stream {stream!r} read({after}, {limit})",
            self.store.stream(stream).read(after, limit),
            self.model.stream_read(stream, after, limit),
        )

    @precondition(lambda self: self.capabilities.streams)
    @rule(
        stream=st.sampled_from(STREAMS),
        consumer=st.sampled_from(STREAM_CONSUMERS),
        data=st.data(),
    )
    def stream_commit(self, stream: str, consumer: str, data: st.DataObject) -> None:
        """Any offset, backwards too: a consumer's offset is what it last committed."""
        offset = data.draw(st.integers(0, self.model.stream_top(stream) + 1), label="offset")
        self.store.stream(stream).commit(consumer, offset)
        self.model.stream_commit(stream, consumer, offset)

    @precondition(lambda self: self.capabilities.streams)
    @rule(stream=st.sampled_from(STREAMS), data=st.data())
    def stream_trim(self, stream: str, data: st.DataObject) -> None:
        """Up to past the last offset, so trimming everything happens often."""
        offset = data.draw(st.integers(0, self.model.stream_top(stream) + 2), label="offset")
        agree(
            f"stream {stream!r} trim_to({offset})",
            self.store.stream(stream).trim_to(offset),
            self.model.stream_trim(stream, offset),
        )

    # -- after every step ---------------------------------------------------------------------
    @invariant()
    def every_job_reads_as_the_model_says(self) -> None:
        """Every job ever seen, through ``get_job`` on engines without the ops profile;
        with it, through each queue's job pages (a statement or so a queue, where
        ``get_job`` costs one a job: most of the model's time on a server), and through
        ``get_job`` every job the step changed (the model's view of it moved)."""
        expected = {job_id: self.model.get_job(job_id) for job_id in sorted(self.model.seen_ids)}
        changed = expected
        if self.capabilities.ops:
            listed = self._every_listed_job()
            for job_id, job in expected.items():
                agree_job(f"job {job_id} in its queue's jobs()", listed.pop(job_id, None), job)
            assert not listed, f"jobs() lists jobs the model never made: {sorted(listed)}"
            changed = {i: job for i, job in expected.items() if self._last_read.get(i) != job}
        # get_job is id-global: one queue's handle reads every queue's (and dead) rows.
        reader = self.consumers["mail"]
        for job_id, job in changed.items():
            agree_job(f"get_job({job_id})", reader.get_job(job_id), job)
        self._last_read = expected

    def _every_listed_job(self) -> dict[int, Job]:
        """Every job of every queue the machine uses (dead and completed ones too),
        by id, each queue read page by page."""
        found: dict[int, Job] = {}
        for name in LISTED_QUEUES:
            queue = self.consumers.get(name) or self.store.queue(name)
            after = 0
            for _ in range(MAX_PAGES):
                page = queue.jobs(after_id=after, limit=PAGE)
                for job in page:
                    assert job.id > after, f"{name!r} jobs(after_id={after}) gave job {job.id}"
                    assert job.id not in found, f"job {job.id} is listed twice"
                    found[job.id] = job
                if len(page) < PAGE:
                    break
                after = page[-1].id
            else:
                raise AssertionError(f"{name!r} jobs() did not end in {MAX_PAGES} pages")
        return found

    @precondition(lambda self: self.capabilities.ops)
    @invariant()
    def every_queues_stats_count_what_the_model_holds(self) -> None:
        """The store's stats (every queue's counts and pause) after every step; each
        queue's own ``stats``, ``paused`` and limits whenever the model's view of them
        moved, and one queue's in turn every step besides (a change the model does not
        expect shows in the store's stats, or within a turn for the limits)."""
        agree("store.stats()", self.store.stats(), self.model.store_stats())
        self._checks += 1
        in_turn = CONSUMERS[self._checks % len(CONSUMERS)]
        for queue in CONSUMERS:
            expected = self._queue_view(queue)
            if queue != in_turn and self._last_views.get(queue) == expected:
                continue
            self._last_views[queue] = expected
            agree(f"{queue!r} stats()", self.consumers[queue].stats(), expected[0])
            agree(f"{queue!r} paused()", self.consumers[queue].paused(), expected[1])
            if self.capabilities.limits:
                stored = self.consumers[queue].limits()
                concurrency = None if stored is None else stored.concurrency
                agree(f"{queue!r} limits()", concurrency, expected[2])
                per_key = None if stored is None else stored.concurrency_per_key
                agree(f"{queue!r} per-key limit", per_key, expected[3])
                rates = None
                if stored is not None and (stored.rate, stored.rate_per_key) != (None, None):
                    assert stored.per is not None, f"{queue!r} limits() has a rate without per"
                    rates = (stored.rate, stored.rate_per_key, stored.per)
                agree(f"{queue!r} rates", rates, expected[4])

    def _queue_view(self, queue: str) -> tuple[object, ...]:
        """What the model says ``queue``'s stats, pause and limits read."""
        model = self.model
        if not self.capabilities.limits:
            return (model.stats(queue), model.paused(queue))
        limits = (model.limits(queue), model.per_key(queue), model.rates(queue))
        return (model.stats(queue), model.paused(queue), *limits)

    @precondition(lambda self: self.capabilities.locks)
    @invariant()
    def every_lock_holder_reads_as_the_model_says(self) -> None:
        for name in LOCK_NAMES:
            agree(
                f"lock {name!r} holder()",
                self.store.lock(name).holder(),
                self.model.lock_holder(name),
            )

    @precondition(lambda self: self.capabilities.scheduler)
    @invariant()
    def every_schedule_reads_as_the_model_says(self) -> None:
        for name in SCHEDULE_NAMES:
            agree(
                f"get_schedule({name!r})",
                self.store.get_schedule(name),
                self.model.get_schedule(name),
            )
        listed = self.store.schedules()
        agree(
            "schedules() (sorted by name)",
            sorted(listed, key=lambda schedule: schedule.name),
            self.model.schedules(),
        )

    @precondition(lambda self: self.capabilities.streams)
    @invariant()
    def every_stream_reads_as_the_model_says(self) -> None:
        for stream in STREAMS:
            handle = self.store.stream(stream)
            agree(f"stream {stream!r} events", read_all(handle), self.model.stream_events(stream))
            for consumer in STREAM_CONSUMERS:
                agree(
                    f"stream {stream!r} offset({consumer!r})",
                    handle.offset(consumer),
                    self.model.stream_offset(stream, consumer),
                )


MODEL_SHARDS = 4
"""The machine's examples are dealt over this many tests, each on a seed of its own
(drawn from the run's), which a run's xdist workers explore side by side: as one test
the model was every certification's longest (163 s of a reduced PostgreSQL run of
202 s on two cores; 293 s of 333 behind PgBouncer), and its worker's other tests
waited behind it."""


def _machine_settings() -> settings:
    """The selected profile's settings (read when the suite is imported, after the
    profile is loaded), scaled to this machine's example budget and dealt over its
    shards."""
    profile = settings()
    examples = profile.max_examples * EXAMPLES_PER_PROFILE_EXAMPLE
    return settings(
        profile,
        max_examples=-(-examples // MODEL_SHARDS),  # rounded up: no example lost
        deadline=None,
        # One clear, shrunk counterexample; a broken engine fails many steps at once and
        # shrinking each distinct failure would take minutes.
        report_multiple_bugs=False,
        # The explain phase replays the shrunk scenario hundreds of times to annotate
        # which values don't matter; for a whole scenario that takes minutes.
        phases=[phase for phase in profile.phases if phase is not Phase.explain],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _shard(number: int) -> type[QueueModelMachine]:
    machine: type[QueueModelMachine] = type(
        f"QueueModelShard{number}",
        (QueueModelMachine,),
        {"__doc__": f"Shard {number} of {MODEL_SHARDS} of the machine's examples."},
    )
    machine.TestCase.settings = _machine_settings()
    return machine


SHARDS = tuple(_shard(number) for number in range(1, MODEL_SHARDS + 1))


def shard_seed(run_seed: str, machine: type[QueueModelMachine]) -> int:
    """A shard's Hypothesis seed: the same run seed gives the same examples, and no two
    shards share them (on the run's own seed they would all draw the same)."""
    return trial_seed(run_seed, f"{PROPERTY}:{machine.__name__}")


@pytest.fixture(autouse=True)
def _bind_engine(request: pytest.FixtureRequest, engine: EngineProvider) -> Iterator[None]:
    state = kit_state(request.config)
    if state is not None:
        for machine in SHARDS:
            seed(shard_seed(state.seed, machine))(machine)
    QueueModelMachine.provider = engine
    yield
    QueueModelMachine.provider = None


(
    TestQueueModelAgreement1,
    TestQueueModelAgreement2,
    TestQueueModelAgreement3,
    TestQueueModelAgreement4,
) = (pytest.mark.property(PROPERTY)(machine.TestCase) for machine in SHARDS)


def _declares(capabilities: Capabilities) -> bool:
    """Whether the engine takes declared schedules (§5.11): the periodic profile, over
    the scheduler and the cron profile's schedule row."""
    return capabilities.scheduler and capabilities.cron and capabilities.periodic


def _needs_cron(spec: str, opts: ScheduleOpts | None) -> bool:
    """Whether a schedule uses what only the cron profile stores (contract 1.2)."""
    plain = opts is None or (opts.timezone, opts.catch_up) == ("UTC", "all")
    return not (spec.startswith("@every") and plain)
