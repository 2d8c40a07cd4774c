"""A handler's outcome (contract §12.3): what it raises to choose one, and the value
the worker settles.

Returning acks the job (the return value its result, when the job keeps one);
``Retry``, ``Snooze`` and ``Fail`` say something else on purpose;
any other exception retries the job with the traceback as the error.
``outcome_of`` turns any of these into one ``Outcome`` value, the same for a
sync and an async handler, and ``settle`` applies that value whichever
handler made it.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidOptions, ResultError
from ..payload import encode_result
from ..timeconv import Duration, duration_seconds
from ..values import Job


class Retry(Exception):
    """Retry the job: after ``delay`` (default: the queue's backoff curve).

    ``error`` goes to the job's error history. At its attempt budget the job
    goes dead instead (``"max attempts exceeded"``), as ``JobHandle.retry`` does.

    Raises:
        InvalidOptions: ``error`` is not a ``str`` or ``delay`` is malformed.
    """

    def __init__(self, delay: Duration | None = None, error: str = "retry requested") -> None:
        if not isinstance(error, str):
            raise InvalidOptions(f"error must be a str, got {type(error).__name__}")
        # Checked here, where the handler raised it, not later on the worker's thread.
        self.delay_s = None if delay is None else duration_seconds(delay, "delay")
        self.error = error
        super().__init__(error)


class Snooze(Exception):
    """Put the job back to wait ``delay`` without spending an attempt (contract §14).

    As ``JobHandle.snooze``: its stamps and errors are kept, ``job.snoozes`` grows
    by one, and a job already snoozed ``MAX_SNOOZES`` times goes dead instead
    (``"max snoozes exceeded"``). Needs an engine with the snooze profile.

    Raises:
        InvalidOptions: ``delay`` is not a non-negative duration.
    """

    def __init__(self, delay: Duration) -> None:
        # Checked here, where the handler raised it, not later on the worker's thread.
        self.delay_s = duration_seconds(delay, "delay")
        super().__init__(f"snooze {self.delay_s}s")


class Fail(Exception):
    """Dead-letter the job now with ``last_error = error``; it is not retried.

    Raises:
        InvalidOptions: ``error`` is not a ``str``.
    """

    def __init__(self, error: str) -> None:
        if not isinstance(error, str):
            raise InvalidOptions(f"error must be a str, got {type(error).__name__}")
        self.error = error
        super().__init__(error)


@dataclass(frozen=True, slots=True)
class Ack:
    """The handler returned: ack the job, with what it returned as the job's result
    when the job keeps one (contract 1.2 §17; ``None`` otherwise).

    Attributes:
        result: the handler's return value, checked storable, or ``None``.
        durable: ``False`` for a worker with ``durable_acks=False``: the ack's commit
            need not wait for the disk (contract 1.2 §12.11).
    """

    result: Any = None
    durable: bool = True

    @property
    def why(self) -> str:
        return ""


@dataclass(frozen=True, slots=True)
class RetryLater:
    """Retry the job after ``delay_s`` (``None``: the queue's backoff curve).

    Attributes:
        error: what goes to the job's error history.
        delay_s: seconds until it runs again, or ``None``.
        raised: for an exception other than ``Retry``, its type and message (the
            log shows it, at WARNING); ``None`` for a ``Retry``, which was asked for.
    """

    error: str
    delay_s: float | None = None
    raised: str | None = None

    @property
    def why(self) -> str:
        return f" error={self.error!r}" if self.raised is None else f" error={self.raised}"


@dataclass(frozen=True, slots=True)
class Snoozed:
    """Put the job back to wait ``delay_s`` seconds, no attempt spent."""

    delay_s: int

    @property
    def why(self) -> str:
        return f" delay={self.delay_s}s"


@dataclass(frozen=True, slots=True)
class Failed:
    """Dead-letter the job now with ``last_error = error``."""

    error: str

    @property
    def why(self) -> str:
        return f" error={self.error!r}"


@dataclass(frozen=True, slots=True)
class Released:
    """Give the job back unspent (its attempt refunded): a job claimed for a
    slot as the worker stops, never started."""

    @property
    def why(self) -> str:
        return ""


@dataclass(frozen=True, slots=True)
class Abandoned:
    """Nothing is written: the run's claim lapses and the job runs again (an
    async handler cancelled under the worker)."""

    @property
    def why(self) -> str:
        return ""


Outcome = Ack | RetryLater | Snoozed | Failed | Released | Abandoned
"""What settling a run writes; a new outcome (a result) is a new variant here and
one case in ``settle.write``."""

ACK = Ack()
RELEASED = Released()
ABANDONED = Abandoned()


def returned(job: Job, value: Any) -> Outcome:
    """The outcome of a handler that returned ``value`` for ``job``: an ack; with the
    value as its result when the job is stamped to keep one (its queue's
    ``completed_retention_s``; otherwise the value is ignored, as it always was). A
    value that cannot be a result (not JSON, too deep, over ``MAX_RESULT_BYTES``)
    fails the attempt instead: a retry with the ``ResultError``'s message, as any
    exception of the handler's would be."""
    if value is None or job.completed_retention_s is None:
        return ACK
    try:
        encode_result(value)
    except ResultError as exc:
        error = f"the handler's return value cannot be the job's result: {exc}"
        return RetryLater(error, raised=f"ResultError: {exc}")
    return Ack(value)


def outcome_of(raised: BaseException | None) -> Outcome:
    """The outcome of a handler that returned (``None``) or raised ``raised``."""
    if raised is None:
        return ACK
    if isinstance(raised, Retry):
        return RetryLater(raised.error, raised.delay_s)
    if isinstance(raised, Snooze):
        return Snoozed(raised.delay_s)
    if isinstance(raised, Fail):
        return Failed(raised.error)
    trace = "".join(traceback.format_exception(raised))
    return RetryLater(trace or repr(raised), raised=f"{type(raised).__name__}: {raised}")
