"""The ``alkstore worker`` command's log lines: the formatter (the default format,
its time text made once per second, the job named on a handler's ``ctx.logger``
lines) and the handler (a batch of outcome lines written together)."""

from __future__ import annotations

import io
import logging
import time

import pytest

from alkstore.cli import logs
from alkstore.cli.logs import LOG_FORMAT, JobFormatter, StderrHandler
from alkstore.worker.outcome_log import BATCHED


def record_at(created: float, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("alkstore.worker", logging.INFO, __file__, 1, "hello", None, None)
    record.relativeCreated = 0.0
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def test_the_time_text_is_the_standard_formatter_s_across_seconds() -> None:
    ours, standard = JobFormatter(), logging.Formatter(LOG_FORMAT)
    # Back and forth across second boundaries: a stale cached second must never leak.
    for created in (1_700_000_000.001, 1_700_000_000.999, 1_700_000_001.5, 1_700_000_000.25):
        record = record_at(created)
        assert ours.format(record) == standard.format(record)


def test_a_context_logger_line_names_its_job() -> None:
    line = JobFormatter().format(record_at(1_700_000_000.0, job_id=7, queue="mail", attempt=2))
    assert line.endswith("alkstore.worker: hello (queue=mail id=7 attempt=2)")


class Stream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def handler_on(stream: Stream) -> StderrHandler:
    handler = StderrHandler(stream)
    handler.setFormatter(JobFormatter())
    return handler


def test_a_record_is_written_at_once() -> None:
    stream = Stream()
    handler_on(stream).handle(record_at(1_700_000_000.0))
    assert stream.getvalue().count("\n") == 1


def test_a_batch_of_outcome_records_is_written_together_at_its_flush() -> None:
    stream = Stream()
    handler = handler_on(stream)
    for n in range(3):
        handler.handle(record_at(1_700_000_000.0 + n, **{BATCHED: True}))
    assert stream.getvalue() == ""
    handler.flush()
    lines = stream.getvalue().splitlines()
    assert [line[:19] for line in lines] == [
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_000 + n)) for n in range(3)
    ]
    assert stream.writes == 1


def test_a_record_written_at_once_follows_the_held_batch() -> None:
    stream = Stream()
    handler = handler_on(stream)
    handler.handle(record_at(1_700_000_000.0, **{BATCHED: True}))
    handler.handle(record_at(1_700_000_001.0))
    assert [line[17:19] for line in stream.getvalue().splitlines()] == ["20", "21"]


def test_a_long_batch_is_written_before_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MOST_HELD", 2)
    stream = Stream()
    handler = handler_on(stream)
    for n in range(2):
        handler.handle(record_at(1_700_000_000.0 + n, **{BATCHED: True}))
    assert stream.getvalue().count("\n") == 2
