"""Transactions and the outbox in the model (contract §3): enqueues and stream
appends staged until the transaction commits, and a claim's outcome written in the
transaction (``tx.ack``, ``tx.retry``, ``tx.fail``: §3.8, §3.9) that commits or
rolls back with it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from alkstore import EnqueueOpts, Job, QueueOpts, StreamEvent

from .queues import QueuesModel, RetryOutcome
from .values import Claim, ModelJob, json_round_trip

OUTCOME_TABLES = (
    "_live",
    "_dead",
    "_completed",
    "_waiting",
    "_waits_for",
    "_fan_ins",
    "_dead_waits",
    "_unsettled",
)
"""What a claim's outcome writes: the job tables, the dependencies' edges (§18) and
the retries awaiting their jitter. Locks, schedules, streams, limits and ids it
leaves alone."""


@dataclass
class ModelTransaction:
    """Enqueues staged inside one transaction, and the outcomes of claims it wrote;
    they exist only if it commits (§3, §3.8, §3.9).

    An outcome is applied to the model's tables at once, as the transaction sees
    them: its later outcomes (and ``get_job``) meet it, so a second outcome of one
    claim is refused as finished. What the tables were before the transaction's
    first outcome is kept (``before``): a rollback puts it back, so nothing an
    outcome did survives it; a commit drops it. The model is never read between an
    outcome and the transaction's end by anything but the transaction itself (the
    machine's invariants run after it), so the pending effects are seen by nobody
    else, as the contract says."""

    model: QueuesModel
    staged: dict[int, ModelJob] = field(default_factory=dict)
    staged_events: dict[str, list[StreamEvent]] = field(default_factory=dict)
    finished: bool = False
    before: dict[str, Any] | None = None
    """The outcome tables as they were before the first outcome (``None``: none yet)."""
    unsettled: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Jittered retries of the transaction: settled against the engine after the commit."""

    def _check_open(self) -> None:
        if self.finished:
            raise RuntimeError("the model transaction has already finished")

    def enqueue(
        self,
        queue: str,
        payload: Any,
        queue_opts: QueueOpts,
        opts: EnqueueOpts | None,
        job_id: int,
    ) -> None:
        self._check_open()
        self.model._check_new_ids([job_id], after=max(self.staged, default=None))
        job = self.model._new_job(job_id, queue, payload, queue_opts, opts or EnqueueOpts())
        self.staged[job_id] = job

    def stream_append(self, stream: str, payload: Any, offset: int) -> None:
        """``tx.stream_append``: the first append of a stream in the transaction lands
        where a plain append would; the next ones follow it one by one."""
        self._check_open()
        staged = self.staged_events.setdefault(stream, [])
        model_stream = self.model._stream(stream)
        allowed = frozenset({staged[-1].offset + 1}) if staged else model_stream.next_offsets()
        model_stream.hand_out(offset, allowed, stream)
        staged.append(StreamEvent(offset, json_round_trip(payload), self.model.now))

    def get_job(self, queue: str, job_id: int) -> Job | None:
        """``tx.get_job_tx``: queue-filtered, and it sees the transaction's own rows
        and outcomes."""
        job = self.staged.get(job_id) or self.model._row(job_id)
        if job is None or job.queue != queue:
            return None
        return job.as_job()

    # -- a claim's outcome in the transaction (§3.8, §3.9) -------------------------------
    def _outcome(self) -> None:
        self._check_open()
        if self.before is None:
            self.model._check_settled()
            tables = {name: getattr(self.model, name) for name in OUTCOME_TABLES}
            self.before = copy.deepcopy(tables)

    def ack(self, claim: Claim, result: Any = None) -> bool:
        """``tx.ack``: what ``handle.ack`` does, or ``False`` where the engine must
        raise ``StaleHandle`` (the claim no longer valid, as the transaction sees it)."""
        self._outcome()
        return self.model.ack(claim, result)

    def retry(
        self, claim: Claim, error: str, delay: int | float | timedelta | None = None
    ) -> RetryOutcome:
        """``tx.retry``; a jittered reschedule is settled after the commit
        (``unsettled``): the transaction's later outcomes do not read ``run_at``."""
        self._outcome()
        outcome = self.model.retry(claim, error, delay)
        self.unsettled.update(self.model._unsettled)
        self.model._unsettled.clear()
        return outcome

    def fail(self, claim: Claim, error: str) -> bool:
        """``tx.fail``, or ``False`` where the engine must raise ``StaleHandle``."""
        self._outcome()
        return self.model.fail(claim, error)


class TransactionsModel(QueuesModel):
    """Beginning, committing and rolling back a ``ModelTransaction``."""

    def begin(self) -> ModelTransaction:
        return ModelTransaction(self)

    def commit(self, tx: ModelTransaction) -> None:
        """The staged rows, events and outcomes become everybody's; the transaction's
        jittered retries await ``settle_retry`` like any other."""
        tx.finished = True
        self._commit_jobs(tx.staged.values())
        for stream, events in tx.staged_events.items():
            self._stream(stream).commit_events(events)
        self._unsettled.update(tx.unsettled)

    def rollback(self, tx: ModelTransaction) -> None:
        """Nothing staged survives; the ids are remembered so reads of them see nothing,
        and the offsets handed out stay handed out (``ModelStream.next_offsets``). The
        outcomes are undone: the tables are as they were before the first."""
        tx.finished = True
        self._seen_ids.update(tx.staged)
        if tx.before is not None:
            for name, table in tx.before.items():
                setattr(self, name, table)
