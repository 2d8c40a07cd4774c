"""Queue metrics in the Prometheus text exposition format 0.0.4 (contract §11, §14).

An app mounts them next to its own routes; every scrape is one ``store.stats()``
call, which engines answer from their claim indexes::

    from alkstore import metrics

    text = metrics.render(store)          # the exposition text
    app = metrics.wsgi_app(store)         # a WSGI app serving it (mount it at /metrics)

``alkstore stats --format prometheus`` prints the same text. Every gauge has a
``queue`` label (reserved queues included: outboxes' backing queues):

* ``alkstore_queue_ready``, ``alkstore_queue_scheduled``, ``alkstore_queue_processing``,
  ``alkstore_queue_lapsed``, ``alkstore_queue_dead``, ``alkstore_queue_completed``,
  ``alkstore_queue_waiting``: job counts (``QueueStats``; completed jobs: the results
  profile, waiting ones: the dependencies profile, ``0`` without it);
* ``alkstore_queue_oldest_ready_age_seconds``: how long the oldest ready job has been
  due, ``0`` when nothing is ready (so the series never vanishes under an alert);
* ``alkstore_queue_paused``: ``1`` while the queue is paused, else ``0``.
* ``alkstore_queue_concurrency_limit``: the queue's concurrency limit (contract 1.2
  §16, the limits profile), ``0`` when it has none.
* ``alkstore_queue_acked_last_minute``, ``alkstore_queue_acked_last_hour``: how many
  of the queue's jobs workers acked in the current minute and in the last hour, as
  their heartbeats reported them (``store.throughput()``, contract 1.2 §19.6). Gauges,
  not counters: they are read from rows and fall as the minutes pass. Only from an
  engine with the workers profile (absent without it); a queue that acked jobs in the
  hour is shown even when it holds none now.

``store.stats()`` lists only queues holding a job or a pause, so a queue that
empties would drop out and its series vanish from every graph. A queue keeps
its series (zeros) once exported: ``wsgi_app`` remembers every queue it has
served (``QueueMemory``), and ``queues=`` names queues shown from the start
(a worker's). The worker's own metrics are in ``alkstore.prometheus``.

Only the standard library is used: the contract stays dependency-free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from .api import Store
from .constants import THROUGHPUT_BUCKET_S, THROUGHPUT_WINDOW_S
from .errors import AlkstoreError, ProfileUnavailable
from .values import QueueStats, QueueThroughput

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The ``Content-Type`` of the exposition format 0.0.4."""

METRIC_PREFIX = "alkstore_queue_"


@dataclass(frozen=True, slots=True)
class Gauge:
    """One exported gauge: its name after ``METRIC_PREFIX``, its help, its value."""

    name: str
    help: str
    value: Callable[[QueueStats], int]


GAUGES: tuple[Gauge, ...] = (
    Gauge("ready", "Pending jobs due now.", lambda s: s.ready),
    Gauge("scheduled", "Pending jobs due later.", lambda s: s.scheduled),
    Gauge("processing", "Claimed jobs whose deadline has not passed.", lambda s: s.processing),
    Gauge(
        "lapsed",
        "Claimed jobs past their deadline: the next claim takes them back.",
        lambda s: s.lapsed,
    ),
    Gauge("dead", "Dead jobs kept.", lambda s: s.dead),
    Gauge(
        "waiting",
        "Jobs waiting for the jobs they depend on (contract 1.2 §18).",
        lambda s: s.waiting,
    ),
    Gauge(
        "completed",
        "Completed jobs kept (a queue with a completed retention, contract 1.2 §17).",
        lambda s: s.completed,
    ),
    Gauge(
        "oldest_ready_age_seconds",
        "Seconds since the oldest ready job became due (0 when none is ready).",
        lambda s: s.oldest_ready_age_s or 0,
    ),
    Gauge("paused", "1 while the queue is paused, else 0.", lambda s: int(s.paused)),
    Gauge(
        "concurrency_limit",
        "The queue's concurrency limit: at most this many jobs processing (0: no limit).",
        lambda s: s.concurrency_limit or 0,
    ),
    Gauge(
        "rate_limit",
        "How many claims the queue's rate limit lets start per window (0: no rate limit).",
        lambda s: s.rate_limit or 0,
    ),
    Gauge(
        "rate_window_seconds",
        "The sliding window of the queue's rate limit, in seconds (0: no rate limit).",
        lambda s: s.rate_per_s or 0,
    ),
    Gauge(
        "concurrency_per_key_limit",
        "The queue's limit per limit key: at most this many jobs of one key processing "
        "(0: no per-key limit).",
        lambda s: s.concurrency_per_key or 0,
    ),
    Gauge(
        "rate_per_key_limit",
        "How many claims of one limit key the queue's per-key rate lets start per window "
        "(0: no per-key rate).",
        lambda s: s.rate_per_key or 0,
    ),
)


@dataclass(frozen=True, slots=True)
class ThroughputGauge:
    """One exported throughput gauge (contract 1.2 §19.6): its name after
    ``METRIC_PREFIX``, its help, its value."""

    name: str
    help: str
    value: Callable[[QueueThroughput], int]


THROUGHPUT_GAUGES: tuple[ThroughputGauge, ...] = (
    ThroughputGauge(
        "acked_last_minute",
        "Jobs workers acked in the current minute, as their heartbeats reported them "
        "(contract 1.2 §19.6).",
        lambda t: t.per_minute[-1] if t.per_minute else 0,
    ),
    ThroughputGauge(
        "acked_last_hour",
        "Jobs workers acked in the last hour, as their heartbeats reported them "
        "(contract 1.2 §19.6).",
        lambda t: t.total,
    ),
)
"""Gauges from ``store.throughput()``: an engine without the workers profile has none."""


def empty_throughput(queue: str) -> QueueThroughput:
    """What a queue no worker acked a job of in the last hour reports."""
    return QueueThroughput(queue, 0, (0,) * (THROUGHPUT_WINDOW_S // THROUGHPUT_BUCKET_S))


def read_throughput(store: Store) -> dict[str, QueueThroughput] | None:
    """``store.throughput()`` by queue, or ``None`` from an engine without the workers
    profile (which has no throughput to show, and is not wrong for it)."""
    try:
        return {counted.queue: counted for counted in store.throughput()}
    except ProfileUnavailable:
        return None


def empty_stats(queue: str) -> QueueStats:
    """What a queue holding nothing, unpaused, reports."""
    return QueueStats(queue, 0, 0, 0, 0, 0, None, False)


class QueueMemory:
    """The queues an exporter has shown, so an emptied one keeps its series."""

    def __init__(self, queues: Iterable[str] = ()) -> None:
        self._known: set[str] = set(queues)
        self._lock = threading.Lock()

    def fill(self, stats: Sequence[QueueStats], also: Iterable[str] = ()) -> list[QueueStats]:
        """``stats`` plus an ``empty_stats`` for each remembered queue it lacks, and for
        each of ``also`` (a queue with throughput but no job now), by name."""
        with self._lock:
            self._known.update(s.queue for s in stats)
            self._known.update(also)
            missing = self._known.difference(s.queue for s in stats)
        return sorted([*stats, *map(empty_stats, missing)], key=lambda s: s.queue)


def _label_value(text: str) -> str:
    # The format's three escapes; a queue name may hold any character but NUL.
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_stats(
    stats: Sequence[QueueStats], throughput: Mapping[str, QueueThroughput] | None = None
) -> str:
    """The exposition text of ``stats`` (one ``QueueStats`` per queue), with the
    ``THROUGHPUT_GAUGES`` of each of its queues when ``throughput`` is given (zeros
    for a queue it lacks)."""
    lines: list[str] = []
    for gauge in GAUGES:
        name = METRIC_PREFIX + gauge.name
        lines.append(f"# HELP {name} {gauge.help}")
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f'{name}{{queue="{_label_value(s.queue)}"}} {gauge.value(s)}' for s in stats)
    if throughput is not None:
        for counted in THROUGHPUT_GAUGES:
            name = METRIC_PREFIX + counted.name
            lines.append(f"# HELP {name} {counted.help}")
            lines.append(f"# TYPE {name} gauge")
            lines.extend(
                f'{name}{{queue="{_label_value(s.queue)}"}} '
                f"{counted.value(throughput.get(s.queue) or empty_throughput(s.queue))}"
                for s in stats
            )
    return "\n".join(lines) + "\n"


def render_store(store: Store, memory: QueueMemory) -> str:
    """The exposition text of ``store``: one ``store.stats()`` and, with the workers
    profile, one ``store.throughput()``; the queues ``memory`` remembers shown too."""
    stats = store.stats()
    throughput = read_throughput(store)
    return render_stats(memory.fill(stats, throughput or ()), throughput)


def render(store: Store, queues: Iterable[str] = ()) -> str:
    """The exposition text of every queue of ``store``: one ``store.stats()`` call (and
    one ``store.throughput()`` with the workers profile); each of ``queues`` is shown
    too, with zeros when it holds nothing.

    Raises:
        ProfileUnavailable: the engine has no ops profile.
        StoreClosed: the store was closed.
        EngineUnavailable: the database cannot be reached.
    """
    return render_store(store, QueueMemory(queues))


def wsgi_app(store: Store, queues: Iterable[str] = ()) -> WSGIApplication:
    """A WSGI app answering ``GET`` (and ``HEAD``) with the exposition text of every
    queue of ``store``, whatever the path: each of ``queues``, and every queue it
    has served before, is shown with zeros when it holds nothing.

    When the store cannot answer (``AlkstoreError``: the database is down, the store
    is closed) it responds ``503`` with the reason, so the scrape fails visibly
    instead of reporting stale numbers. Other methods get ``405``.
    """

    memory = QueueMemory(queues)

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            return _respond(start_response, "405 Method Not Allowed", b"", [("Allow", "GET, HEAD")])
        try:
            body = render_store(store, memory).encode("utf-8")
        except AlkstoreError as exc:
            reason = f"alkstore metrics unavailable: {exc}\n".encode()
            return _respond(start_response, "503 Service Unavailable", reason)
        return _respond(start_response, "200 OK", body, send_body=method != "HEAD")

    return app


def _respond(
    start_response: StartResponse,
    status: str,
    body: bytes,
    extra_headers: Sequence[tuple[str, str]] = (),
    *,
    send_body: bool = True,
) -> list[bytes]:
    headers = [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body))), *extra_headers]
    start_response(status, headers)
    return [body] if send_body else []
