"""What a handler raises to choose its job's outcome (contract §12).

Returning acks the job; any other exception retries it with the traceback as
the error. These two say something else on purpose.
"""

from __future__ import annotations

from ..errors import InvalidOptions
from ..timeconv import Duration, duration_seconds


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
