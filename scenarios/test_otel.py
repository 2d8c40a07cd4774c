"""alkstore.otel on every reference engine and the memory engine: an enqueue's
PRODUCER span, its trace context carried in the job's metadata, and each run's
CONSUMER span linked to it, through the sync worker and through alkstore.aio;
recorded with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import alkstore
import alkstore.otel
from alkstore import EnqueueOpts, Job, QueueOpts
from alkstore.aio import AsyncStore
from alkstore.worker import Retry, Worker

ENGINES = ("sqlite", "postgresql", "memory")
SAFETY_NET_S = 30.0


@pytest.fixture(params=ENGINES)
def raw_store(request: pytest.FixtureRequest) -> Iterator[alkstore.Store]:
    provider = alkstore.load_engine(request.param)
    with provider.provision() as spec, alkstore.open(spec.url, **spec.opts) as store:
        yield store


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


def _eventually(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SAFETY_NET_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def _spans(exporter: InMemorySpanExporter, kind: SpanKind) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.kind is kind]


def _run_until(worker: Worker, done: Callable[[], bool]) -> None:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        _eventually(done, "the runs ended")
    finally:
        worker.stop()
        thread.join(SAFETY_NET_S)


def _worker(store: Any, provider: TracerProvider, handler: Callable[[Job], Any]) -> Worker:
    worker = Worker(store, name="traced")
    worker.observe(alkstore.otel.RunTracing(tracer_provider=provider))
    worker.task("emails")(handler)
    return worker


def test_a_run_span_links_to_its_enqueue_span_in_the_producers_trace(
    raw_store: alkstore.Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = alkstore.otel.instrument(raw_store, tracer_provider=provider)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("request") as request:
        job_id = store.queue("emails").enqueue({"to": "a@example.com"})
    worker = _worker(store, provider, lambda job: None)
    _run_until(worker, lambda: len(_spans(exporter, SpanKind.CONSUMER)) == 1)

    (send,) = _spans(exporter, SpanKind.PRODUCER)
    (process,) = _spans(exporter, SpanKind.CONSUMER)
    assert send.context is not None
    assert process.context is not None
    assert send.context.trace_id == request.get_span_context().trace_id
    assert send.name == "send emails"
    assert dict(send.attributes or {}) == {
        "messaging.system": "alkstore",
        "messaging.destination.name": "emails",
        "messaging.operation": "publish",
        "messaging.message.id": str(job_id),
    }
    (link,) = process.links
    assert (link.context.trace_id, link.context.span_id) == (
        send.context.trace_id,
        send.context.span_id,
    )
    assert process.parent is None  # linked, not a child: the run is a trace of its own
    assert process.name == "process emails"
    attributes = dict(process.attributes or {})
    assert attributes["messaging.message.id"] == str(job_id)
    assert attributes["messaging.operation"] == "process"
    assert attributes["alkstore.outcome"] == "acked"


def test_every_run_of_a_retried_job_links_to_the_same_enqueue_span(
    raw_store: alkstore.Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = alkstore.otel.instrument(raw_store, tracer_provider=provider)
    store.queue("emails", QueueOpts(max_attempts=3)).enqueue({"n": 1})

    def handler(job: Job) -> None:
        if job.attempts == 1:
            raise Retry(delay=0)

    worker = _worker(store, provider, handler)
    _run_until(worker, lambda: len(_spans(exporter, SpanKind.CONSUMER)) == 2)

    (send,) = _spans(exporter, SpanKind.PRODUCER)
    assert send.context is not None
    runs = sorted(
        _spans(exporter, SpanKind.CONSUMER),
        key=lambda span: int((span.attributes or {})["alkstore.job.attempt"]),  # type: ignore[arg-type]
    )
    assert [(span.attributes or {})["alkstore.outcome"] for span in runs] == ["retried", "acked"]
    assert [span.links[0].context.span_id for span in runs] == [send.context.span_id] * 2
    assert runs[0].status.status_code is StatusCode.ERROR
    assert runs[1].status.status_code is not StatusCode.ERROR


def test_the_trace_context_is_merged_into_the_jobs_own_metadata(
    raw_store: alkstore.Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = alkstore.otel.instrument(raw_store, tracer_provider=provider)
    queue = store.queue("emails")
    job_id = queue.enqueue({"n": 1}, EnqueueOpts(metadata={"request_id": "r-17"}, priority=3))
    job = queue.get_job(job_id)
    assert job is not None
    assert job.priority == 3
    assert job.metadata is not None
    assert job.metadata["request_id"] == "r-17"
    (send,) = _spans(exporter, SpanKind.PRODUCER)
    assert send.context is not None
    assert f"{send.context.span_id:016x}" in job.metadata["traceparent"]


def test_enqueue_many_and_a_transactions_enqueue_are_traced_and_carry_the_context(
    raw_store: alkstore.Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = alkstore.otel.instrument(raw_store, tracer_provider=provider)
    queue = store.queue("emails")
    ids = queue.enqueue_many([1, 2, 3])
    with store.transaction() as tx:
        in_tx = tx.enqueue("emails", 4)
    batch, single = sorted(
        _spans(exporter, SpanKind.PRODUCER), key=lambda span: span.start_time or 0
    )
    assert (batch.attributes or {})["messaging.batch.message_count"] == 3
    assert (single.attributes or {})["messaging.message.id"] == str(in_tx)
    for job_id in [*ids, in_tx]:
        job = queue.get_job(job_id)
        assert job is not None
        assert job.metadata is not None
        assert "traceparent" in job.metadata


def test_the_async_surface_over_an_instrumented_store_is_traced(
    raw_store: alkstore.Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = alkstore.otel.instrument(raw_store, tracer_provider=provider)

    async def enqueue() -> int:
        aio = AsyncStore(store)  # type: ignore[arg-type]
        return int(await aio.queue("emails").enqueue({"n": 1}))

    job_id = asyncio.run(enqueue())
    (send,) = _spans(exporter, SpanKind.PRODUCER)
    assert (send.attributes or {})["messaging.message.id"] == str(job_id)

    async def handler(job: Job) -> None:
        await asyncio.sleep(0)

    worker = _worker(store, provider, handler)
    _run_until(worker, lambda: len(_spans(exporter, SpanKind.CONSUMER)) == 1)
    (process,) = _spans(exporter, SpanKind.CONSUMER)
    assert send.context is not None
    assert process.links[0].context.span_id == send.context.span_id
    assert (process.attributes or {})["alkstore.outcome"] == "acked"


def test_without_the_metadata_profile_enqueues_and_runs_are_traced_without_a_link(
    raw_store: alkstore.Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    context = raw_store._context  # type: ignore[attr-defined]
    context.capabilities = dataclasses.replace(context.capabilities, metadata=False)
    store = alkstore.otel.instrument(raw_store, tracer_provider=provider)
    queue = store.queue("emails")
    job_id = queue.enqueue({"n": 1})
    second = queue.enqueue({"n": 2})
    for each in (job_id, second):
        job = queue.get_job(each)
        assert job is not None
        assert job.metadata is None
    worker = _worker(store, provider, lambda job: None)
    _run_until(worker, lambda: len(_spans(exporter, SpanKind.CONSUMER)) == 2)
    assert len(_spans(exporter, SpanKind.PRODUCER)) == 2
    assert [span.links for span in _spans(exporter, SpanKind.CONSUMER)] == [(), ()]


def test_a_handlers_exception_is_recorded_on_its_run_span(
    raw_store: alkstore.Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = alkstore.otel.instrument(raw_store, tracer_provider=provider)
    store.queue("emails", QueueOpts(max_attempts=1)).enqueue({"n": 1})

    def handler(job: Job) -> None:
        raise RuntimeError("smtp is down")

    worker = _worker(store, provider, handler)
    _run_until(worker, lambda: len(_spans(exporter, SpanKind.CONSUMER)) == 1)
    (process,) = _spans(exporter, SpanKind.CONSUMER)
    (event,) = [e for e in process.events if e.name == "exception"]
    assert (event.attributes or {})["exception.type"] == "RuntimeError"
    assert (event.attributes or {})["exception.message"] == "smtp is down"
    assert (process.attributes or {})["alkstore.outcome"] == "dead"
    assert process.status.status_code is StatusCode.ERROR
