"""How the ``alkstore worker`` command writes its log lines on stderr.

The worker hands its line per job outcome to logging from a thread of its own,
a batch at a time (``alkstore.worker.outcome_log``), so formatting is off the
job path already. The handler writes such a batch with one write when the
batch ends (every other record at once), and the formatter makes the time
text once per second rather than once per line: on a busy worker both keep
the log's share of the CPU, which the job path competes for, small.
"""

from __future__ import annotations

import logging
import time
from typing import TextIO

from ..worker.outcome_log import BATCH_FLUSH, BATCHED

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MOST_HELD = 1000
"""Lines of a batch held at most before they are written anyway."""


class JobFormatter(logging.Formatter):
    """``LOG_FORMAT``, naming the job a handler's ``ctx.logger`` line is about (its
    ``extra`` fields); the time text is made once per second, not once per line."""

    def __init__(self, fmt: str = LOG_FORMAT) -> None:
        super().__init__(fmt)
        self._second: tuple[int, str] = (-1, "")
        """A whole second and its text, replaced as one value (threads may share us)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second, text = self._second
        if second != int(record.created):
            second = int(record.created)
            text = time.strftime(self.default_time_format, self.converter(second))
            self._second = (second, text)
        return f"{text},{int(record.msecs):03d}"

    def formatMessage(self, record: logging.LogRecord) -> str:
        # The message line only: a traceback, if any, follows the job it belongs to.
        line = super().formatMessage(record)
        job_id = getattr(record, "job_id", None)
        if job_id is None:
            return line
        queue = getattr(record, "queue", "?")
        attempt = getattr(record, "attempt", "?")
        return f"{line} (queue={queue} id={job_id} attempt={attempt})"


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes a record's line at once, except the worker's batched outcome
    records: their lines are written together at the batch's ``flush()``."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._held: list[str] = []
        setattr(self, BATCH_FLUSH, True)  # the worker flushes us when a batch ends

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._held.append(self.format(record) + self.terminator)
            if not getattr(record, BATCHED, False) or len(self._held) >= MOST_HELD:
                self._write_held()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        self.acquire()
        try:
            self._write_held()
        finally:
            self.release()

    def _write_held(self) -> None:
        if self._held:
            text = "".join(self._held)
            self._held.clear()
            self.stream.write(text)
        self.stream.flush()
