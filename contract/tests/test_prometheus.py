"""``alkstore.prometheus`` (the metrics extra): the worker's series counted from its
runs, the store's gauges at each scrape (an emptied queue kept at zero), the
exposition accepted by prometheus_client's parser and by ``promtool check metrics``,
and ``serve`` answering over HTTP on loopback.

The store is the core over the recording fake driver (ops profile) on a fake clock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from typing import Any

import pytest
from fakes import FakeDriver, FakeOpsDriver
from running import SAFETY_NET_S, eventually

from alkstore import QueueOpts
from alkstore.core import CoreStore
from alkstore.values import Job
from alkstore.worker import OUTCOMES, Fail, Worker

prometheus_client = pytest.importorskip("prometheus_client")  # the metrics extra

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from alkstore.prometheus import StoreCollector, WorkerMetrics, serve  # noqa: E402

HANG_GUARD_S = 60


@pytest.fixture
def driver() -> FakeDriver:
    return FakeOpsDriver()


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``registry``'s exposition, parsed back by prometheus_client."""
    text = generate_latest(registry).decode("utf-8")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return samples(registry).get((name, tuple(sorted(labels.items()))))


def test_declared_queues_have_every_series_at_zero_before_any_run() -> None:
    registry = CollectorRegistry()
    WorkerMetrics(registry).declare(["emails"])

    for outcome in OUTCOMES:
        assert (
            value(registry, "alkstore_worker_jobs_finished_total", queue="emails", outcome=outcome)
            == 0
        )
    assert value(registry, "alkstore_worker_jobs_in_flight", queue="emails") == 0
    assert value(registry, "alkstore_worker_heartbeats_lost_total", queue="emails") == 0
    assert value(registry, "alkstore_worker_run_duration_seconds_count", queue="emails") == 0
    assert value(registry, "alkstore_worker_pickup_latency_seconds_count", queue="emails") == 0


def test_finished_runs_are_counted_by_queue_and_outcome(store: CoreStore, running: Any) -> None:
    registry = CollectorRegistry()
    metrics = WorkerMetrics(registry)
    worker = Worker(store, name="w", observers=[metrics])

    @worker.task("emails", concurrency=2)
    def handler(job: Job) -> None:
        if job.payload == "fail":
            raise Fail("no")

    q = store.queue("emails", QueueOpts(max_attempts=3))
    for payload in ("ok", "ok", "ok", "fail"):
        q.enqueue(payload)
    running(worker)
    eventually(
        lambda: value(registry, "alkstore_worker_run_duration_seconds_count", queue="emails") == 4,
        "four runs ended",
    )
    worker.stop()

    assert (
        value(registry, "alkstore_worker_jobs_finished_total", queue="emails", outcome="acked") == 3
    )
    assert (
        value(registry, "alkstore_worker_jobs_finished_total", queue="emails", outcome="failed")
        == 1
    )
    assert value(registry, "alkstore_worker_pickup_latency_seconds_count", queue="emails") == 4
    assert value(registry, "alkstore_worker_jobs_in_flight", queue="emails") == 0


def test_in_flight_counts_the_handlers_running_now(store: CoreStore, running: Any) -> None:
    registry = CollectorRegistry()
    worker = Worker(store, name="w", observers=[WorkerMetrics(registry)])
    inside = threading.Barrier(3, timeout=SAFETY_NET_S)
    release = threading.Event()

    @worker.task("emails", concurrency=2)
    def handler(job: Job) -> None:
        inside.wait()
        release.wait(SAFETY_NET_S)

    store.queue("emails").enqueue_many(["a", "b"])
    running(worker)
    inside.wait()
    assert value(registry, "alkstore_worker_jobs_in_flight", queue="emails") == 2
    release.set()
    eventually(
        lambda: value(registry, "alkstore_worker_jobs_in_flight", queue="emails") == 0,
        "both runs ended",
    )


def test_the_store_gauges_keep_a_queue_that_emptied_at_zero(store: CoreStore) -> None:
    registry = CollectorRegistry()
    registry.register(StoreCollector(store, queues=["reports"]))
    q = store.queue("emails")
    job_id = q.enqueue("a")

    assert value(registry, "alkstore_queue_ready", queue="emails") == 1
    assert value(registry, "alkstore_queue_ready", queue="reports") == 0
    handle = q.claim("w")
    assert handle is not None
    assert handle.id == job_id
    assert handle.ack()
    assert store.stats() == []  # the store itself no longer lists the queue...
    assert value(registry, "alkstore_queue_ready", queue="emails") == 0  # ...the exporter does
    assert value(registry, "alkstore_queue_processing", queue="emails") == 0
    assert value(registry, "alkstore_store_up") == 1


def test_a_store_that_cannot_answer_is_reported_down(store: CoreStore) -> None:
    registry = CollectorRegistry()
    registry.register(StoreCollector(store))
    store.queue("emails").enqueue("a")
    store.close()

    assert value(registry, "alkstore_store_up") == 0
    assert value(registry, "alkstore_queue_ready", queue="emails") is None


@pytest.mark.parametrize("driver", [FakeDriver()])
def test_an_engine_without_the_ops_profile_gives_no_store_series(
    make_store: Any,
) -> None:
    registry = CollectorRegistry()
    registry.register(StoreCollector(make_store()))
    assert samples(registry) == {}


def exposition(store: CoreStore, running: Any) -> str:
    """A registry with a worker's and a store's series after a few runs, as text."""
    registry = CollectorRegistry()
    metrics = WorkerMetrics(registry)
    metrics.declare(["emails"])
    registry.register(StoreCollector(store, queues=["emails"]))
    worker = Worker(store, name="w", observers=[metrics])
    worker.task("emails")(lambda job: None)
    store.queue("emails").enqueue_many(["a", "b"])
    store.queue('quote"back\\slash\nline').enqueue("x")  # every escape of a label value
    running(worker)
    eventually(
        lambda: value(registry, "alkstore_worker_run_duration_seconds_count", queue="emails") == 2,
        "both runs ended",
    )
    return generate_latest(registry).decode("utf-8")


def test_the_exposition_parses_back_whole(store: CoreStore, running: Any) -> None:
    text = exposition(store, running)
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {
        "alkstore_worker_jobs_finished",
        "alkstore_worker_run_duration_seconds",
        "alkstore_worker_pickup_latency_seconds",
        "alkstore_worker_jobs_in_flight",
        "alkstore_worker_heartbeats_lost",
        "alkstore_queue_ready",
        "alkstore_store_up",
    } <= names
    ready = {
        sample.labels["queue"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "alkstore_queue_ready"
        for sample in family.samples
    }
    assert ready == {"emails": 0, 'quote"back\\slash\nline': 1}


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool (Debian package prometheus) is not installed; .ci/run installs it",
)
def test_promtool_accepts_the_exposition(store: CoreStore, running: Any) -> None:
    text = exposition(store, running)
    checked = subprocess.run(
        ["promtool", "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_serve_answers_a_scrape_on_loopback_and_stops(store: CoreStore) -> None:
    store.queue("emails").enqueue("a")
    server = serve(0, store=store)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=HANG_GUARD_S) as response:
            text = response.read().decode("utf-8")
    finally:
        server.shutdown()
        server.server_close()
    assert 'alkstore_queue_ready{queue="emails"} 1.0' in text
    assert "alkstore_store_up 1.0" in text


COUNTING_PROCESS = """
import sys
from alkstore.prometheus import WorkerMetrics
from alkstore.values import Job, JobState

metrics = WorkerMetrics()
job = Job(
    id=1, queue="emails", state=JobState.PROCESSING, payload=None, priority=0, attempts=1,
    max_attempts=3, created_at=0, run_at=0, claimed_at=0, expires_at=None, worker_id="w",
    visibility_timeout_s=30, backoff_base_s=1, dead_letter_retention_s=None,
    last_error=None, died_at=None,
)
for _ in range(int(sys.argv[1])):
    metrics.run_started(job)
    metrics.run_finished(job, "acked", 0.01)
metrics.run_started(job)  # still running as the process ends
"""

SERVING_PROCESS = """
from prometheus_client import generate_latest
from alkstore.prometheus import serving_registry

print(generate_latest(serving_registry()).decode("utf-8"))
"""


def test_multi_process_mode_adds_up_every_worker_process(tmp_path: Any) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for count in (3, 4):
        done = subprocess.run(
            [sys.executable, "-c", COUNTING_PROCESS, str(count)],
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    served = subprocess.run(
        [sys.executable, "-c", SERVING_PROCESS],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert served.returncode == 0, served.stderr
    found = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(served.stdout)
        for sample in family.samples
    }
    acked = (("outcome", "acked"), ("queue", "emails"))
    assert found[("alkstore_worker_jobs_finished_total", acked)] == 7
    assert found[("alkstore_worker_run_duration_seconds_count", (("queue", "emails"),))] == 7


def test_the_store_gauges_give_each_queues_acked_counts_with_the_workers_profile() -> None:
    import uuid

    import alkstore
    from alkstore import WorkerInfo
    from alkstore.testing import FakeClock

    # A fake clock mid-minute: the last-minute count is the current minute's bucket,
    # so a heartbeat and a read on the real clock could fall either side of a minute.
    clock = FakeClock(1_700_000_010)  # 30 s into a minute
    with alkstore.open(f"memory://prometheus-{uuid.uuid4().hex}", clock=clock) as store:
        registry = CollectorRegistry()
        registry.register(StoreCollector(store, queues=["reports"]))
        store.register_worker(WorkerInfo("w", "h", 1, ("emails",), 0))
        store.heartbeat_worker("w", {"emails": 3})

        assert value(registry, "alkstore_queue_acked_last_minute", queue="emails") == 3
        assert value(registry, "alkstore_queue_acked_last_hour", queue="emails") == 3
        assert value(registry, "alkstore_queue_acked_last_hour", queue="reports") == 0


@pytest.mark.parametrize("driver", [FakeOpsDriver()])
def test_the_store_gauges_have_no_throughput_without_the_workers_profile(
    make_store: Any,
) -> None:
    registry = CollectorRegistry()
    registry.register(StoreCollector(make_store(), queues=["emails"]))

    assert value(registry, "alkstore_queue_ready", queue="emails") == 0
    assert value(registry, "alkstore_queue_acked_last_hour", queue="emails") is None
