"""``alkstore.metrics``: the exposition text and the WSGI app over ``store.stats()``."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import metrics
from alkstore.constants import THROUGHPUT_BUCKET_S, THROUGHPUT_WINDOW_S
from alkstore.errors import EngineUnavailable, ProfileUnavailable
from alkstore.values import QueueStats, QueueThroughput

MINUTES = THROUGHPUT_WINDOW_S // THROUGHPUT_BUCKET_S


def _counted(queue: str, *per_minute: int) -> QueueThroughput:
    """A queue's throughput whose last minutes are ``per_minute`` (the rest zeros)."""
    minutes = (0,) * (MINUTES - len(per_minute)) + per_minute
    return QueueThroughput(queue, sum(minutes), minutes)


def _stats(queue: str = "emails", **counts: Any) -> QueueStats:
    fields: dict[str, Any] = {
        "ready": 0,
        "scheduled": 0,
        "processing": 0,
        "lapsed": 0,
        "dead": 0,
        "oldest_ready_age_s": None,
        "paused": False,
    }
    return QueueStats(queue=queue, **{**fields, **counts})


class StatsStore:
    """Just ``stats()``, counting calls, and ``throughput()`` (refused as by an engine
    without the workers profile unless counts are given): all ``metrics`` asks."""

    def __init__(
        self,
        stats: list[QueueStats] | Exception,
        throughput: list[QueueThroughput] | None = None,
    ) -> None:
        self._stats = stats
        self._throughput = throughput
        self.calls = 0
        self.throughput_calls = 0

    def throughput(self) -> list[QueueThroughput]:
        self.throughput_calls += 1
        if self._throughput is None:
            raise ProfileUnavailable("stats-only", "workers")
        return self._throughput

    def stats(self) -> list[QueueStats]:
        self.calls += 1
        if isinstance(self._stats, Exception):
            raise self._stats
        return self._stats


def _sample(text: str, name: str, queue: str) -> str:
    prefix = f'alkstore_queue_{name}{{queue="{queue}"}} '
    (line,) = [line for line in text.splitlines() if line.startswith(prefix)]
    return line[len(prefix) :]


def test_every_gauge_has_help_and_type() -> None:
    text = metrics.render_stats([])

    for gauge in metrics.GAUGES:
        assert f"# HELP alkstore_queue_{gauge.name} " in text
        assert f"# TYPE alkstore_queue_{gauge.name} gauge" in text


def test_counts_are_exported_per_queue() -> None:
    text = metrics.render_stats([_stats(ready=3, dead=2), _stats("reports", lapsed=1)])

    assert _sample(text, "ready", "emails") == "3"
    assert _sample(text, "dead", "emails") == "2"
    assert _sample(text, "lapsed", "reports") == "1"


def test_completed_jobs_are_exported_per_queue() -> None:
    text = metrics.render_stats([_stats("reports", completed=4), _stats("emails")])

    assert _sample(text, "completed", "reports") == "4"
    assert _sample(text, "completed", "emails") == "0"


def test_waiting_jobs_are_exported_per_queue() -> None:
    text = metrics.render_stats([_stats("ships", waiting=2), _stats("emails")])

    assert _sample(text, "waiting", "ships") == "2"
    assert _sample(text, "waiting", "emails") == "0"


def test_no_ready_job_exports_age_zero() -> None:
    text = metrics.render_stats([_stats(oldest_ready_age_s=None)])

    assert _sample(text, "oldest_ready_age_seconds", "emails") == "0"


def test_a_paused_queue_exports_one() -> None:
    text = metrics.render_stats([_stats(paused=True)])

    assert _sample(text, "paused", "emails") == "1"


def test_label_values_are_escaped() -> None:
    text = metrics.render_stats([_stats('a"b\\c\nd', ready=1)])

    assert 'alkstore_queue_ready{queue="a\\"b\\\\c\\nd"} 1' in text


def test_render_asks_the_store_once() -> None:
    store = StatsStore([_stats(), _stats("reports")], [_counted("emails", 1)])

    metrics.render(store)  # type: ignore[arg-type]

    assert (store.calls, store.throughput_calls) == (1, 1)


def test_every_throughput_gauge_has_help_and_type() -> None:
    text = metrics.render_stats([], {})

    for gauge in metrics.THROUGHPUT_GAUGES:
        assert f"# HELP alkstore_queue_{gauge.name} " in text
        assert f"# TYPE alkstore_queue_{gauge.name} gauge" in text


def test_acked_counts_of_the_last_minute_and_hour_are_exported_per_queue() -> None:
    store = StatsStore([_stats(), _stats("reports")], [_counted("emails", 4, 0, 3, 2)])

    text = metrics.render(store)  # type: ignore[arg-type]

    assert _sample(text, "acked_last_minute", "emails") == "2"
    assert _sample(text, "acked_last_hour", "emails") == "9"
    assert _sample(text, "acked_last_minute", "reports") == "0"
    assert _sample(text, "acked_last_hour", "reports") == "0"


def test_a_queue_with_acked_jobs_but_none_held_is_exported() -> None:
    text = metrics.render(StatsStore([], [_counted("emails", 5)]))  # type: ignore[arg-type]

    assert _sample(text, "acked_last_hour", "emails") == "5"
    assert _sample(text, "ready", "emails") == "0"


def test_an_engine_without_the_workers_profile_exports_no_throughput() -> None:
    text = metrics.render(StatsStore([_stats(ready=1)]))  # type: ignore[arg-type]

    assert _sample(text, "ready", "emails") == "1"
    assert "acked_last" not in text


def _call(app: Any, method: str = "GET") -> tuple[str, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app({"REQUEST_METHOD": method, "PATH_INFO": "/metrics"}, start_response))
    return seen["status"], seen["headers"], body


def test_the_wsgi_app_serves_the_exposition_text() -> None:
    store = StatsStore([_stats(ready=1)])

    status, headers, body = _call(metrics.wsgi_app(store))  # type: ignore[arg-type]

    assert status == "200 OK"
    assert headers["Content-Type"] == metrics.CONTENT_TYPE
    assert body.decode() == metrics.render_stats([_stats(ready=1)])


def test_the_wsgi_app_answers_head_without_a_body() -> None:
    status, headers, body = _call(metrics.wsgi_app(StatsStore([_stats()])), "HEAD")  # type: ignore[arg-type]

    assert status == "200 OK"
    assert body == b""
    assert int(headers["Content-Length"]) > 0


def test_the_wsgi_app_refuses_other_methods() -> None:
    status, headers, _ = _call(metrics.wsgi_app(StatsStore([])), "POST")  # type: ignore[arg-type]

    assert status.startswith("405")
    assert headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("error", [EngineUnavailable("database restarting")])
def test_the_wsgi_app_reports_an_unreachable_store_as_503(error: Exception) -> None:
    status, _, body = _call(metrics.wsgi_app(StatsStore(error)))  # type: ignore[arg-type]

    assert status.startswith("503")
    assert b"database restarting" in body


def test_render_shows_each_named_queue_with_zeros_when_it_holds_nothing() -> None:
    text = metrics.render(StatsStore([_stats(ready=2)]), queues=["reports"])  # type: ignore[arg-type]

    assert _sample(text, "ready", "emails") == "2"
    assert _sample(text, "ready", "reports") == "0"
    assert _sample(text, "paused", "reports") == "0"


def test_the_wsgi_app_keeps_a_queue_that_emptied_at_zero() -> None:
    store = StatsStore([_stats(ready=1)])
    app = metrics.wsgi_app(store)  # type: ignore[arg-type]
    _, _, before = _call(app)
    store._stats = []  # every job of the queue acked: stats() no longer lists it

    _, _, after = _call(app)

    assert _sample(before.decode(), "ready", "emails") == "1"
    assert _sample(after.decode(), "ready", "emails") == "0"
    assert _sample(after.decode(), "oldest_ready_age_seconds", "emails") == "0"
