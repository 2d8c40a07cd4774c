"""OpenTelemetry traces of enqueues and runs (``pip install 'alkstore[otel]'``).

Opt-in, and the only module of alkstore that imports ``opentelemetry`` (the API
package only; an application brings its SDK and exporters)::

    import alkstore, alkstore.otel

    store = alkstore.otel.instrument(alkstore.open(url))  # PRODUCER spans
    store.queue("emails").enqueue({"to": "a@example.com"})  # "send emails"

    worker = alkstore.Worker(store)
    worker.observe(alkstore.otel.RunTracing())  # CONSUMER spans, "process emails"

* **Enqueue** (``queue.enqueue``, ``enqueue_many``, ``tx.enqueue`` of
  ``store.transaction()`` and ``store.attach(conn)``, and ``alkstore.aio`` over the
  instrumented store, whose calls run the same sync methods on its threads): a
  ``PRODUCER`` span ``send <queue>`` with the messaging attributes
  (``messaging.system="alkstore"``, ``messaging.destination.name``,
  ``messaging.operation="publish"``, ``messaging.message.id``, or
  ``messaging.batch.message_count`` for a batch). The W3C trace context of that span
  (``traceparent``, ``tracestate``) is injected into the job's metadata (contract 1.2
  §20, merged over ``EnqueueOpts.metadata``), so it travels with the job through
  every retry, snooze and redrive. On an engine without the metadata profile the
  span is still made and nothing is carried.
* **Run** (a ``Worker`` observer, §12.8, so sync and async handlers alike): a
  ``CONSUMER`` span ``process <queue>`` per run, **linked** to the enqueue's span
  context rather than its child. A job runs later than its enqueue, possibly many
  times (each retry is a run with the same enqueue), and after its producer's trace
  has ended; OpenTelemetry's messaging conventions model that as a link, so each run
  is a trace of its own that points back at the one enqueue, and every retry links
  to the same span. The run's outcome (one of ``alkstore.worker.OUTCOMES``:
  ``acked``, ``retried``, ``failed``, ``dead``, ``snoozed``, ...) is the
  ``alkstore.outcome`` attribute; an outcome other than acked, released or snoozed
  sets the span's status to ``ERROR``, and an exception the handler raised is
  recorded on the span (the observer's optional ``run_raised``, §12.8). The span
  is not made current while the handler runs (the observer is told on the
  worker's threads, not inside the handler's call).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from .api import Queue, Store, Transaction
from .errors import ProfileUnavailable
from .options import EnqueueOpts, QueueOpts
from .values import Enqueued, Job
from .worker.observe import ACKED, RELEASED, SNOOZED

__all__ = ["RunTracing", "TracedStore", "instrument"]

SYSTEM = "alkstore"
"""``messaging.system`` of every span this module makes."""

_SCOPE = "alkstore.otel"
_FINE = frozenset({ACKED, RELEASED, SNOOZED})

T = TypeVar("T")


def _tracer(tracer_provider: TracerProvider | None) -> Tracer:
    provider = trace.get_tracer_provider() if tracer_provider is None else tracer_provider
    return provider.get_tracer(_SCOPE)


def instrument(store: Store, *, tracer_provider: TracerProvider | None = None) -> TracedStore:
    """``store`` with a PRODUCER span around each enqueue and the trace context
    carried in each job's metadata. Everything else is the store's own."""
    return TracedStore(store, _tracer(tracer_provider))


class _Producer:
    """The enqueue side shared by a store's queues and transactions."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.carries = True  # until the engine refuses metadata (no metadata profile)

    def send(
        self,
        queue: str,
        count: int | None,
        opts: EnqueueOpts | None,
        write: Callable[[EnqueueOpts | None], T],
    ) -> T:
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": queue,
            "messaging.operation": "publish",
        }
        if count is not None:
            attributes["messaging.batch.message_count"] = count
        with self.tracer.start_as_current_span(
            f"send {queue}", kind=SpanKind.PRODUCER, attributes=attributes
        ) as span:
            result = self._write(opts, write)
            if isinstance(result, int):
                span.set_attribute("messaging.message.id", str(int(result)))
            return result

    def _write(self, opts: EnqueueOpts | None, write: Callable[[EnqueueOpts | None], T]) -> T:
        if not self.carries:
            return write(opts)
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        if not carrier:
            return write(opts)
        try:
            return write(_with_context(opts, carrier))
        except ProfileUnavailable as exc:
            if exc.profile != "metadata":
                raise
            self.carries = False  # refused before anything was written: carry nothing
            return write(opts)


def _with_context(opts: EnqueueOpts | None, carrier: Mapping[str, str]) -> EnqueueOpts:
    base = EnqueueOpts() if opts is None else opts
    metadata = {**(base.metadata or {}), **carrier}
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(EnqueueOpts)}
    fields["metadata"] = metadata
    return EnqueueOpts(**fields)


class TracedQueue:
    """A queue whose enqueues are traced; every other call is the queue's own."""

    def __init__(self, queue: Queue, producer: _Producer) -> None:
        self._queue = queue
        self._producer = producer

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> Enqueued:
        queue = self._queue
        return self._producer.send(queue.name, None, opts, lambda o: queue.enqueue(payload, o))

    def enqueue_many(
        self, payloads: Sequence[Any], opts: EnqueueOpts | None = None
    ) -> list[Enqueued]:
        queue = self._queue
        count = len(payloads) if isinstance(payloads, Sequence) else None
        return self._producer.send(
            queue.name, count, opts, lambda o: queue.enqueue_many(payloads, o)
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


class TracedTransaction:
    """A transaction whose enqueues are traced; every other call is its own."""

    def __init__(self, tx: Transaction, producer: _Producer) -> None:
        self._tx = tx
        self._producer = producer

    def enqueue(self, queue: Any, payload: Any, opts: EnqueueOpts | None = None) -> Enqueued:
        tx = self._tx
        name = queue if isinstance(queue, str) else getattr(queue, "name", str(queue))
        result: Enqueued = self._producer.send(
            name, None, opts, lambda o: tx.enqueue(queue, payload, o)
        )
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)


class TracedStore:
    """A store whose enqueues are traced (``instrument``); every other call, a
    ``Worker`` and ``alkstore.aio.AsyncStore`` over it included, is the store's own."""

    def __init__(self, store: Store, tracer: Tracer) -> None:
        self._store = store
        self._producer = _Producer(tracer)

    @property
    def wrapped(self) -> Store:
        """The store itself."""
        return self._store

    def queue(self, name: str, opts: QueueOpts | None = None) -> TracedQueue:
        return TracedQueue(self._store.queue(name, opts), self._producer)

    def claim_wait_any(self, queues: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        """The store's own, given the queues themselves (a ``Worker`` claims so)."""
        own = [q._queue if isinstance(q, TracedQueue) else q for q in queues]
        return self._store.claim_wait_any(own, *args, **kwargs)

    @contextmanager
    def transaction(self) -> Iterator[TracedTransaction]:
        with self._store.transaction() as tx:
            yield TracedTransaction(tx, self._producer)

    @contextmanager
    def attach(self, connection: Any) -> Iterator[TracedTransaction]:
        with self._store.attach(connection) as tx:
            yield TracedTransaction(tx, self._producer)

    def __enter__(self) -> TracedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self._store.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def enqueue_context(job: Job) -> trace.SpanContext | None:
    """The span context of ``job``'s enqueue, from its metadata; ``None`` if it
    carries none (enqueued untraced, or on an engine without the metadata profile)."""
    if not job.metadata:
        return None
    context = trace.get_current_span(propagate.extract(job.metadata)).get_span_context()
    return context if context.is_valid else None


class RunTracing:
    """A ``WorkerObserver`` (contract §12.8) that makes a CONSUMER span per run,
    linked to the job's enqueue span (``Worker.observe(RunTracing())``)."""

    def __init__(self, *, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = _tracer(tracer_provider)
        self._spans: dict[int, Span] = {}
        self._lock = threading.Lock()

    def run_started(self, job: Job) -> None:
        enqueued = enqueue_context(job)
        span = self._tracer.start_span(
            f"process {job.queue}",
            kind=SpanKind.CONSUMER,
            links=[] if enqueued is None else [Link(enqueued)],
            attributes={
                "messaging.system": SYSTEM,
                "messaging.destination.name": job.queue,
                "messaging.operation": "process",
                "messaging.message.id": str(job.id),
                "alkstore.job.attempt": job.attempts,
            },
        )
        with self._lock:
            self._spans[job.id] = span

    def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
        with self._lock:
            span = self._spans.pop(job.id, None)
        if span is None:
            return
        span.set_attribute("alkstore.outcome", outcome)
        if outcome not in _FINE:
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end()

    def run_raised(self, job: Job, exc: BaseException) -> None:
        """The handler's exception, recorded on the run's span (``Retry``, ``Snooze``
        and ``Fail`` too: the outcome attribute says what became of the job)."""
        with self._lock:
            span = self._spans.get(job.id)
        if span is not None and isinstance(exc, Exception):
            span.record_exception(exc)

    def heartbeat_lost(self, job: Job) -> None:
        with self._lock:
            span = self._spans.get(job.id)
        if span is not None:
            span.add_event("alkstore.heartbeat_lost")
