"""The line per job outcome (contract §12.3), made off the job's thread.

A busy worker finishes thousands of jobs a second. Making a ``LogRecord`` and
passing it through the logging handlers costs more than the worker's own
bookkeeping for a job, and a handler that blocks (a full stderr pipe, a
network handler) would stall job processing. So a handler thread only notes
each outcome (a tuple, with the time and thread it happened on) and one thread
of the worker turns the notes into records, in order, a batch at a time: each
record carries the outcome's own time and thread, and reaches the handlers
within ``FLUSH_EVERY_S``. ``close`` hands on whatever is left (the worker calls
it before ``run`` returns); a process killed outright loses at most the last
``FLUSH_EVERY_S`` of lines. Whether a line is wanted at all is decided at once,
by the logger's level, so a quiet worker notes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

FLUSH_EVERY_S = 0.05
"""How long a noted outcome may wait before its record reaches the handlers."""
MOST_NOTED = 10_000
"""Outcomes noted at most; past that the noting thread hands them on itself."""
OUTCOME_MESSAGE = "job %s: queue=%s id=%d attempt=%d duration=%.3fs%s"

BATCHED = "alkstore_batched"
"""Set (``True``) on every outcome record."""
BATCH_FLUSH = "alkstore_batch_flush"
"""A handler with this attribute ``True`` is flushed when a batch of outcome records
ends, so it may hold the batch's lines and write them together then (the
``alkstore worker`` command's handler does). No other handler is flushed: for a
buffering handler a flush means something else."""
CLOSE_WAIT_S = 5.0
"""How long ``close`` waits for the log's thread to finish handing on."""

Note = tuple[int, float, int, str, tuple[object, ...]]
"""level, time.time(), thread ident, thread name, the message's arguments."""


class OutcomeLog:
    """Outcome lines for ``logger``, handed on by a thread of their own."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._notes: deque[Note] = deque()
        self._noted_again = threading.Event()
        self._handing_on = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="alkstore-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def note(
        self,
        level: int,
        outcome: str,
        queue: str,
        job_id: int,
        attempt: int,
        duration_s: float,
        why: str,
    ) -> None:
        """Log one outcome (if ``level`` is enabled), soon, from the log's thread."""
        if not self._logger.isEnabledFor(level):
            return
        current = threading.current_thread()
        notes = self._notes
        notes.append(
            (
                level,
                time.time(),
                current.ident or 0,
                current.name,
                (outcome, queue, job_id, attempt, duration_s, why),
            )
        )
        if len(notes) >= MOST_NOTED or self._closed:
            self.hand_on()
        elif not self._noted_again.is_set():
            # Wake the log's thread unless a wake is pending. (It clears the wake
            # before it takes the notes, so a note appended since is taken, or
            # wakes it again.) Not "the first note": two threads appending at
            # once would each count two, and neither would wake it.
            self._noted_again.set()

    def hand_on(self) -> None:
        """Turn every note into a record and pass it to the handlers, in order;
        then flush the handlers that saw them (the batch is over)."""
        logger = self._logger
        notes = self._notes
        with self._handing_on:
            if not notes:
                return
            make = _record_maker(logger)
            while notes:
                logger.handle(make(notes.popleft()))
            for handler in _handlers_of(logger):
                if getattr(handler, BATCH_FLUSH, False):
                    handler.flush()

    def close(self) -> None:
        """Stop the log's thread and hand on what is left (later notes go at once).

        A log's thread stuck in a handler (a blocked stderr) is waited for at most
        ``CLOSE_WAIT_S``; then what it has not handed on is dropped, rather than
        the worker never returning from ``run``."""
        self._closed = True
        self._noted_again.set()
        if self._thread.is_alive():
            self._thread.join(CLOSE_WAIT_S)
            if self._thread.is_alive():
                return
        self.hand_on()

    def _loop(self) -> None:
        while not self._closed:
            self._noted_again.wait()
            self._noted_again.clear()
            # Let a batch gather: the handlers see a burst, their code stays warm.
            time.sleep(FLUSH_EVERY_S)
            self.hand_on()


def _record_maker(logger: logging.Logger) -> Callable[[Note], logging.LogRecord]:
    """Makes the records of one batch. Every record of a batch shares all but a
    few fields (logger, source, process), so the batch's first ``makeRecord``
    serves as a template the others copy, unless the application makes its own
    records (then each note gets a ``makeRecord`` of its own, on the log's
    thread: fields a factory takes from its thread or context are that thread's)."""
    template = logger.makeRecord(
        logger.name, logging.INFO, __file__, 0, OUTCOME_MESSAGE, (), None, "note"
    )
    setattr(template, BATCHED, True)
    # relativeCreated is milliseconds since logging was imported: the same
    # offset from created for every record.
    offset_ms = template.relativeCreated - template.created * 1000
    shared = dict(template.__dict__)
    # Unless the application makes its own records: a replaced record factory (even
    # one wrapping LogRecord's) or a Logger class with its own makeRecord.
    lean = (
        logging.getLogRecordFactory() is logging.LogRecord
        and type(logger).makeRecord is logging.Logger.makeRecord
    )

    def make(note: Note) -> logging.LogRecord:
        level, created, ident, thread_name, args = note
        if lean:
            record = logging.LogRecord.__new__(logging.LogRecord)
            record.__dict__.update(shared)
        else:
            record = logger.makeRecord(
                logger.name, level, __file__, 0, OUTCOME_MESSAGE, args, None, "note"
            )
            setattr(record, BATCHED, True)
        # The outcome's own level, arguments, time and thread, not this thread's.
        record.levelno = level
        record.levelname = logging.getLevelName(level)
        record.args = args
        record.created = created
        record.msecs = int((created - int(created)) * 1000) + 0.0
        record.relativeCreated = created * 1000 + offset_ms
        record.thread = ident
        record.threadName = thread_name
        return record

    return make


def _handlers_of(logger: logging.Logger) -> list[logging.Handler]:
    """The handlers ``logger.handle`` passes a record to (propagation included)."""
    handlers: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        handlers.extend(current.handlers)
        if not current.propagate:
            break
        current = current.parent
    return handlers
