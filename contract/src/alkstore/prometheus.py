"""Prometheus metrics of workers and stores, through ``prometheus_client`` (the
``metrics`` extra: ``pip install 'alkstore[metrics]'``).

```python
from alkstore.prometheus import StoreCollector, WorkerMetrics, serve

metrics = WorkerMetrics()                    # on prometheus_client's default registry
worker = Worker(store, observers=[metrics])
serve(8000, store=store, queues=["emails"])  # GET http://127.0.0.1:8000/metrics
```

``alkstore worker app:worker --metrics-port 8000`` does the same. The worker's
series (``WorkerMetrics``; ``queue`` label on each, ``outcome`` one of
``alkstore.worker.OUTCOMES``):

* ``alkstore_worker_jobs_finished_total{queue, outcome}``: runs ended, by how;
* ``alkstore_worker_run_duration_seconds{queue}``: a histogram of claim-to-settle time;
* ``alkstore_worker_pickup_latency_seconds{queue}``: a histogram of the time from when
  a job became due (its ``run_at``: enqueue, retry or snooze; whole seconds, as the
  store keeps them) to its handler's start;
* ``alkstore_worker_jobs_in_flight{queue}``: handlers running now;
* ``alkstore_worker_heartbeats_lost_total{queue}``: heartbeats refused (the claim was
  lost to a lapse, a cancel or another worker).

``StoreCollector`` serves the store's queue gauges (``alkstore.metrics.GAUGES``, one
``store.stats()`` per scrape, an emptied queue kept at zero; with the workers profile
also ``alkstore.metrics.THROUGHPUT_GAUGES``, one ``store.throughput()``) and
``alkstore_store_up`` (``0`` while the store cannot answer). With
``PROMETHEUS_MULTIPROC_DIR`` set (prometheus_client's multi-process mode: several
worker processes behind one port), ``serve`` aggregates every process's files;
the store gauges are read live, once, by the serving process.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import start_http_server
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from .api import Store
from .errors import AlkstoreError, ProfileUnavailable
from .metrics import (
    GAUGES,
    METRIC_PREFIX,
    THROUGHPUT_GAUGES,
    QueueMemory,
    empty_throughput,
    read_throughput,
)
from .values import Job
from .worker.observe import OUTCOMES

RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
"""Seconds: from a fast handler's milliseconds to the longest visibility timeouts."""
PICKUP_BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400)
"""Seconds: the store keeps ``run_at`` in whole seconds, so nothing finer is known."""
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UP_METRIC = "alkstore_store_up"


class WorkerMetrics:
    """A ``WorkerObserver`` counting every run of the workers it is given to.

    Args:
        registry: where the series are registered; prometheus_client's default.
    """

    def __init__(self, registry: CollectorRegistry | None = REGISTRY) -> None:
        self.finished = Counter(
            "alkstore_worker_jobs_finished",
            "Runs ended, by queue and outcome (alkstore.worker.OUTCOMES).",
            ["queue", "outcome"],
            registry=registry,
        )
        self.duration = Histogram(
            "alkstore_worker_run_duration_seconds",
            "Seconds from a run's claim to its settle.",
            ["queue"],
            buckets=RUN_BUCKETS,
            registry=registry,
        )
        self.pickup = Histogram(
            "alkstore_worker_pickup_latency_seconds",
            "Seconds from when a job became due (run_at) to its handler's start.",
            ["queue"],
            buckets=PICKUP_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "alkstore_worker_jobs_in_flight",
            "Handlers running now.",
            ["queue"],
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.heartbeats_lost = Counter(
            "alkstore_worker_heartbeats_lost",
            "Heartbeats refused: the claim was lost before the handler finished.",
            ["queue"],
            registry=registry,
        )

    def declare(self, queues: Iterable[str]) -> None:
        """Make every series of ``queues`` exist (at zero) before its first run, so
        graphs and alerts see the queue from the worker's start."""
        for queue in queues:
            for outcome in OUTCOMES:
                self.finished.labels(queue, outcome)
            self.duration.labels(queue)
            self.pickup.labels(queue)
            self.in_flight.labels(queue)
            self.heartbeats_lost.labels(queue)

    def run_started(self, job: Job) -> None:
        self.in_flight.labels(job.queue).inc()
        self.pickup.labels(job.queue).observe(max(0.0, time.time() - job.run_at))

    def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
        self.in_flight.labels(job.queue).dec()
        self.finished.labels(job.queue, outcome).inc()
        self.duration.labels(job.queue).observe(duration_s)

    def heartbeat_lost(self, job: Job) -> None:
        self.heartbeats_lost.labels(job.queue).inc()


class StoreCollector(Collector):
    """The store's queue gauges for a prometheus_client registry, read at each scrape
    (nothing at all from an engine without the ops profile).

    Args:
        store: the store whose ``stats()`` each scrape reads.
        queues: queues shown from the start (zeros while they hold nothing); every
            queue once seen stays shown.
    """

    def __init__(self, store: Store, queues: Iterable[str] = ()) -> None:
        self._store = store
        self._memory = QueueMemory(queues)
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(UP_METRIC, "1 while the store answers stats(), else 0.")
        try:
            with self._lock:  # one stats() at a time, however many scrapers
                found = self._store.stats()
                throughput = read_throughput(self._store)
                stats = self._memory.fill(found, throughput or ())
        except ProfileUnavailable:
            return  # an engine without the ops profile has no gauges to give, ever
        except AlkstoreError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for gauge in GAUGES:
            family = GaugeMetricFamily(METRIC_PREFIX + gauge.name, gauge.help, labels=["queue"])
            for entry in stats:
                family.add_metric([entry.queue], gauge.value(entry))
            yield family
        if throughput is None:
            return  # no workers profile: no throughput series, and nothing wrong
        for counted in THROUGHPUT_GAUGES:
            family = GaugeMetricFamily(METRIC_PREFIX + counted.name, counted.help, labels=["queue"])
            for entry in stats:
                value = counted.value(throughput.get(entry.queue) or empty_throughput(entry.queue))
                family.add_metric([entry.queue], value)
            yield family


def serving_registry(
    registry: CollectorRegistry | None = None,
    *,
    store: Store | None = None,
    queues: Iterable[str] = (),
) -> CollectorRegistry:
    """What ``serve`` exposes: prometheus_client's default registry (an app's own
    metrics) and ``registry`` (a ``WorkerMetrics``'), or, in multi-process mode,
    every process's files aggregated; plus, given a ``store``, its ``StoreCollector``."""
    serving = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(serving)  # type: ignore[no-untyped-call]
    else:
        serving.register(_Forward(REGISTRY))
        if registry is not None and registry is not REGISTRY:
            serving.register(_Forward(registry))
    if store is not None:
        serving.register(StoreCollector(store, queues))
    return serving


def serve(
    port: int,
    host: str = "127.0.0.1",
    *,
    registry: CollectorRegistry | None = None,
    store: Store | None = None,
    queues: Iterable[str] = (),
) -> WSGIServer:
    """Serve ``serving_registry(registry, store=store, queues=queues)`` over HTTP on
    ``host:port`` (every path), from a daemon thread; ``shutdown()`` the returned
    server to stop it.

    Raises:
        OSError: the address cannot be bound (in use, not local).
    """
    serving = serving_registry(registry, store=store, queues=queues)
    server, _thread = start_http_server(port, host, registry=serving)
    return server


class _Forward(Collector):
    """Another registry's metrics, so the default one can sit beside a StoreCollector."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self._registry.collect()
