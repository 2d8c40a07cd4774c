"""A task: one queue, its handler and how many of its jobs may run at once."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidOptions

MAX_CONCURRENCY = 1000
"""Most jobs of one task running at once in one worker."""

Handler = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Task:
    """A registered handler (``Worker.task``).

    Attributes:
        queue: the queue it consumes.
        handler: called with the ``Job`` (and a ``JobContext`` if it takes two arguments).
        concurrency: how many of its jobs may run at once.
        is_async: the handler is a coroutine function (it runs on the worker's loop).
        takes_context: the handler takes a second argument, the ``JobContext``.
    """

    queue: str
    handler: Handler
    concurrency: int
    is_async: bool
    takes_context: bool


def make_task(queue: str, handler: object, concurrency: object) -> Task:
    """A checked ``Task``; bad arguments raise ``InvalidOptions`` at registration."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise InvalidOptions(f"concurrency must be an int, got {type(concurrency).__name__}")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise InvalidOptions(f"concurrency must be within 1..{MAX_CONCURRENCY}, got {concurrency}")
    if not callable(handler):
        raise InvalidOptions(f"a task handler must be callable, got {handler!r}")
    return Task(
        queue=queue,
        handler=handler,
        concurrency=concurrency,
        is_async=inspect.iscoroutinefunction(handler),
        takes_context=_takes_context(handler),
    )


def _takes_context(handler: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return False  # a builtin without a signature: call it with the job alone
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    variadic = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    if variadic or len(positional) >= 2:
        return True
    if len(positional) == 1:
        return False
    raise InvalidOptions(
        f"a task handler takes the job, or the job and a JobContext; {handler!r} takes neither"
    )
