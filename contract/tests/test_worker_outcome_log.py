"""``alkstore.worker.outcome_log``: the line per job outcome, handed to logging
from a thread of the worker's own, in order, with the outcome's time and thread."""

from __future__ import annotations

import logging
import logging.handlers
import threading
import time
from collections.abc import Iterator

import pytest

from alkstore.worker import outcome_log
from alkstore.worker.outcome_log import BATCH_FLUSH, BATCHED, OutcomeLog


class Collecting(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("alkstore.worker.test-outcomes")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger
    for handler in list(logger.handlers):
        logger.removeHandler(handler)


@pytest.fixture
def collected(logger: logging.Logger) -> Collecting:
    handler = Collecting()
    logger.addHandler(handler)
    return handler


def note_from(log: OutcomeLog, thread_name: str, job_id: int) -> None:
    thread = threading.Thread(
        target=lambda: log.note(logging.INFO, "ack", "q", job_id, 1, 0.25, ""), name=thread_name
    )
    thread.start()
    thread.join()


def test_outcomes_reach_the_handlers_in_order_from_the_log_s_thread(
    logger: logging.Logger, collected: Collecting
) -> None:
    log = OutcomeLog(logger)
    log.start()
    for job_id in range(1, 6):
        log.note(logging.INFO, "ack", "q", job_id, 1, 0.0, "")
    deadline = time.monotonic() + 10
    while len(collected.records) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    log.close()
    assert [r.getMessage() for r in collected.records] == [
        f"job ack: queue=q id={n} attempt=1 duration=0.000s" for n in range(1, 6)
    ]
    assert {r.threadName for r in collected.records} == {threading.current_thread().name}


def test_a_record_carries_the_outcome_s_own_time_and_thread(
    logger: logging.Logger, collected: Collecting
) -> None:
    log = OutcomeLog(logger)  # not started: close() hands the notes on
    before = time.time()
    note_from(log, "alkstore-handler-7", 42)
    after = time.time()
    time.sleep(0.05)  # a record made later must still say when the outcome happened
    log.close()
    (record,) = collected.records
    assert record.threadName == "alkstore-handler-7"
    assert before <= record.created <= after
    assert record.msecs == int((record.created - int(record.created)) * 1000)
    assert (record.name, record.levelno) == (logger.name, logging.INFO)
    assert record.getMessage() == "job ack: queue=q id=42 attempt=1 duration=0.250s"


def test_a_disabled_level_notes_nothing(logger: logging.Logger, collected: Collecting) -> None:
    logger.setLevel(logging.WARNING)
    log = OutcomeLog(logger)
    log.note(logging.INFO, "ack", "q", 1, 1, 0.0, "")
    log.note(logging.WARNING, "lost", "q", 2, 1, 0.0, "")
    log.close()
    assert [r.getMessage().split(":")[0] for r in collected.records] == ["job lost"]


def test_after_close_an_outcome_is_handed_on_at_once(
    logger: logging.Logger, collected: Collecting
) -> None:
    log = OutcomeLog(logger)
    log.start()
    log.close()
    log.note(logging.WARNING, "lost", "q", 1, 1, 0.0, "")
    assert len(collected.records) == 1


def test_a_log_thread_far_behind_makes_the_noting_thread_hand_on(
    logger: logging.Logger, collected: Collecting, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outcome_log, "MOST_NOTED", 3)
    log = OutcomeLog(logger)  # never started: only the bound hands notes on
    for job_id in range(1, 4):
        log.note(logging.INFO, "ack", "q", job_id, 1, 0.0, "")
    assert len(collected.records) == 3


def test_a_batch_ends_with_a_flush_of_the_handlers_that_ask_for_it_only(
    logger: logging.Logger, collected: Collecting
) -> None:
    flushed: list[str] = []
    collected.flush = lambda: flushed.append("asked")  # type: ignore[method-assign]
    setattr(collected, BATCH_FLUSH, True)
    # A buffering handler's flush means "pass the buffer on": not ours to call.
    buffering = logging.handlers.BufferingHandler(capacity=100)
    logger.addHandler(buffering)
    log = OutcomeLog(logger)
    for job_id in (1, 2):
        log.note(logging.INFO, "ack", "q", job_id, 1, 0.0, "")
    log.hand_on()
    assert flushed == ["asked"]
    assert len(buffering.buffer) == 2
    assert all(getattr(r, BATCHED) is True for r in collected.records)


def test_a_note_appended_beside_another_still_wakes_the_log_s_thread(
    logger: logging.Logger, collected: Collecting
) -> None:
    # Two handler threads append at once: each then counts two notes queued.
    log = OutcomeLog(logger)
    log.start()
    try:
        log._notes.append((logging.INFO, time.time(), 1, "other", ("ack", "q", 1, 1, 0.0, "")))
        log.note(logging.INFO, "ack", "q", 2, 1, 0.0, "")
        deadline = time.monotonic() + 5
        while len(collected.records) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(collected.records) == 2  # before close(), which would hand them on anyway
    finally:
        log.close()


def test_close_gives_up_on_a_log_thread_stuck_in_a_handler(
    logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outcome_log, "CLOSE_WAIT_S", 0.2)
    unblock = threading.Event()
    stuck = Collecting()
    stuck.emit = lambda record: unblock.wait(10)  # type: ignore[method-assign]
    logger.addHandler(stuck)
    log = OutcomeLog(logger)
    log.start()
    log.note(logging.INFO, "ack", "q", 1, 1, 0.0, "")
    time.sleep(0.2)  # the log's thread is in the handler now
    started = time.monotonic()
    log.close()
    waited = time.monotonic() - started
    unblock.set()
    assert waited < 5


def test_a_wrapping_record_factory_makes_every_record(
    logger: logging.Logger, collected: Collecting
) -> None:
    made: list[int] = []
    previous = logging.getLogRecordFactory()

    def numbering(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        record.number = len(made)
        made.append(1)
        return record

    logging.setLogRecordFactory(numbering)
    try:
        log = OutcomeLog(logger)
        for job_id in (1, 2, 3):
            log.note(logging.INFO, "ack", "q", job_id, 1, 0.0, "")
        log.close()
    finally:
        logging.setLogRecordFactory(previous)
    numbers = [getattr(r, "number", None) for r in collected.records]
    assert None not in numbers
    assert len(set(numbers)) == 3  # each record came from a factory call of its own


def test_an_application_s_record_factory_makes_the_records(
    logger: logging.Logger, collected: Collecting
) -> None:
    class AppRecord(logging.LogRecord):
        pass

    previous = logging.getLogRecordFactory()
    logging.setLogRecordFactory(AppRecord)
    try:
        log = OutcomeLog(logger)
        note_from(log, "alkstore-handler-3", 9)
        log.close()
    finally:
        logging.setLogRecordFactory(previous)
    (record,) = collected.records
    assert type(record) is AppRecord
    assert (record.threadName, record.getMessage()) == (
        "alkstore-handler-3",
        "job ack: queue=q id=9 attempt=1 duration=0.250s",
    )
