"""A pure-Python reference model of the contract's queues, outbox, transactional
enqueue, claims' outcomes in a transaction, scheduler, locks, streams and operations
(contract §2-§7 and §11; pub/sub is not modelled).

The model is written from the contract text, not from ``alkstore.core``: the kit's
stateful machine drives an engine and this model side by side and fails on the
first disagreement, so a bug shared by the core and the model would go unseen.
It only borrows the contract's own pure rules: option normalization (``QueueOpts``,
``EnqueueOpts`` and ``ScheduleOpts`` validate and round on construction), the
backoff range and the constants.

What the model cannot predict it checks and adopts instead:

* job ids are the engine's to choose; the model checks they are new and larger
  than every id committed before (contract §2: unique, never reused), then uses them;
* a retry without an explicit delay draws its jitter from a range; the model
  knows the range, the engine's ``run_at`` is checked against it and then adopted
  (``settle_retry``);
* a scheduler tick creates jobs without returning their ids: the model knows what
  each fire must have enqueued, and the jobs the engine shows are matched against
  that and adopted (``adopt_fired``);
* a rolled-back stream append may or may not give its offset back: the next append
  may take either (``ModelStream.next_offsets``), and nothing else;
* a redrive's new ids are the engine's too: checked like an enqueue's, then adopted.
* a transaction's outcomes (``ModelTransaction.ack``, ``retry``, ``fail``) are applied
  as the transaction sees them, so its later outcomes meet them, and undone by a
  rollback (the tables as they were before the first); a jittered ``tx.retry`` is
  settled after the commit.

The ops profile (contract §11: error history, stats, job pages, redrive, purge,
pause) is modelled when the model is built with ``ops=True``; without it a job's
``errors`` stay ``()`` and ``redriven_from`` ``None``, as on an engine without it.

Time is whole seconds: every operation reads ``floor(clock.now())`` once, like a
store does. Disagreements raise ``ModelDisagreement`` (an ``AssertionError``).

One module per profile, each a mixin over ``state.ModelState`` (the tables, "now",
the id rule), as the engines mix in their statements by profile: ``queues``,
``transactions`` (the outbox included), ``locks``, ``scheduler``, ``streams`` and
``ops``; ``reference.ReferenceModel`` composes them and ``values`` holds the rows.
"""

from .queues import RetryOutcome
from .reference import ReferenceModel
from .scheduler import spec_interval
from .transactions import ModelTransaction
from .values import (
    ERROR_EXHAUSTED,
    ERROR_EXPIRED,
    Claim,
    ModelDisagreement,
    ModelJob,
    ModelSchedule,
    ModelStream,
    job_differences,
    json_round_trip,
    whole_seconds,
)

__all__ = [
    "ERROR_EXHAUSTED",
    "ERROR_EXPIRED",
    "Claim",
    "ModelDisagreement",
    "ModelJob",
    "ModelSchedule",
    "ModelStream",
    "ModelTransaction",
    "ReferenceModel",
    "RetryOutcome",
    "job_differences",
    "json_round_trip",
    "spec_interval",
    "whole_seconds",
]
