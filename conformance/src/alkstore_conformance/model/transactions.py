"""Transactions and the outbox in the model (contract §3): enqueues and stream
appends staged until the transaction commits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alkstore import EnqueueOpts, Job, QueueOpts, StreamEvent

from .state import ModelState
from .values import ModelJob, json_round_trip


@dataclass
class ModelTransaction:
    """Enqueues staged inside one transaction; they exist only if it commits (§3)."""

    model: ModelState
    staged: dict[int, ModelJob] = field(default_factory=dict)
    staged_events: dict[str, list[StreamEvent]] = field(default_factory=dict)
    finished: bool = False

    def enqueue(
        self,
        queue: str,
        payload: Any,
        queue_opts: QueueOpts,
        opts: EnqueueOpts | None,
        job_id: int,
    ) -> None:
        if self.finished:
            raise RuntimeError("the model transaction has already finished")
        self.model._check_new_ids([job_id], after=max(self.staged, default=None))
        job = self.model._new_job(job_id, queue, payload, queue_opts, opts or EnqueueOpts())
        self.staged[job_id] = job

    def stream_append(self, stream: str, payload: Any, offset: int) -> None:
        """``tx.stream_append``: the first append of a stream in the transaction lands
        where a plain append would; the next ones follow it one by one."""
        if self.finished:
            raise RuntimeError("the model transaction has already finished")
        staged = self.staged_events.setdefault(stream, [])
        model_stream = self.model._stream(stream)
        allowed = frozenset({staged[-1].offset + 1}) if staged else model_stream.next_offsets()
        model_stream.hand_out(offset, allowed, stream)
        staged.append(StreamEvent(offset, json_round_trip(payload), self.model.now))

    def get_job(self, queue: str, job_id: int) -> Job | None:
        """``tx.get_job_tx``: queue-filtered, and it sees the transaction's own rows."""
        job = self.staged.get(job_id) or self.model._row(job_id)
        if job is None or job.queue != queue:
            return None
        return job.as_job()


class TransactionsModel(ModelState):
    """Beginning, committing and rolling back a ``ModelTransaction``."""

    def begin(self) -> ModelTransaction:
        return ModelTransaction(self)

    def commit(self, tx: ModelTransaction) -> None:
        tx.finished = True
        self._commit_jobs(tx.staged.values())
        for stream, events in tx.staged_events.items():
            self._stream(stream).commit_events(events)

    def rollback(self, tx: ModelTransaction) -> None:
        """Nothing staged survives; the ids are remembered so reads of them see nothing,
        and the offsets handed out stay handed out (``ModelStream.next_offsets``)."""
        tx.finished = True
        self._seen_ids.update(tx.staged)
