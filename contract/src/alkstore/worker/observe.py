"""What a worker tells its observers about each run (contract §12.8).

An observer is how metrics (``alkstore.prometheus.WorkerMetrics``), traces or
an app's own counters see the worker without wrapping every handler: it hears
when a run starts, how it ended (one ``OUTCOMES`` label, the same words the
outcome log's lines begin with) and when a heartbeat was refused. Observers
are called on the worker's own threads, between the store writes of a run:
they must be quick and must not block. One that raises is logged and ignored,
so counting can never change what happens to a job.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final, Protocol, runtime_checkable

from ..api import JobHandle
from ..constants import MAX_SNOOZES
from ..values import Job

log = logging.getLogger("alkstore.worker")

ACKED: Final = "acked"
RETRIED: Final = "retried"
FAILED: Final = "failed"
DEAD: Final = "dead"
RELEASED: Final = "released"
SNOOZED: Final = "snoozed"
LOST: Final = "lost"
ABANDONED: Final = "abandoned"
UNCONFIRMED: Final = "unconfirmed"

OUTCOMES: Final = (ACKED, RETRIED, FAILED, DEAD, RELEASED, SNOOZED, LOST, ABANDONED, UNCONFIRMED)
"""How a run can end, as observers hear it: ``acked``; ``retried`` (a retry with
attempts left); ``failed`` (``Fail``: dead-lettered at once); ``dead`` (a retry
or snooze past its budget dead-lettered the job); ``released``; ``snoozed``
(also a stop's ``snooze_on_stop``); ``lost`` (the claim was lost first: a
refused heartbeat or write, nothing applied); ``abandoned`` (a stop cut the
handler off: its claim lapses); ``unconfirmed`` (the store failed during the
write, which may or may not have committed)."""

CLAIM_LOST: Final = " refused (claim lost)"
"""How an outcome log line's first words end when the claim was lost before the
write (``refused("ack")`` is ``"ack refused (claim lost)"``)."""


def refused(name: str) -> str:
    """The outcome log's words for a write ``name`` refused because its claim was lost."""
    return name + CLAIM_LOST


def said_of(name: str, written: bool, handle: JobHandle) -> str:
    """The outcome log's words for the write ``name`` of ``handle``'s claim, alone or
    in a group: refused when its claim was lost; a retry or a snooze that spent the
    job's last attempt or snooze is the job's death."""
    if not written:
        return refused(name)
    if name == "retry" and handle.job.attempts >= handle.job.max_attempts:
        return "dead (max attempts exceeded)"
    if name == "snooze" and handle.job.snoozes >= MAX_SNOOZES:
        return "dead (max snoozes exceeded)"
    return name


_SAID: Final = {
    "ack": ACKED,
    "retry": RETRIED,
    "fail": FAILED,
    "release": RELEASED,
    "snooze": SNOOZED,
    "lost": LOST,
    "abandoned": ABANDONED,
}


def outcome_label(said: str) -> str:
    """The ``OUTCOMES`` label of an outcome log line's first words (``settle.write``)."""
    if said.endswith(CLAIM_LOST):
        return LOST
    if said.startswith("dead ("):
        return DEAD
    if said.startswith("not confirmed"):
        return UNCONFIRMED
    return _SAID[said]


@runtime_checkable
class WorkerObserver(Protocol):
    """Told about every run of a ``Worker`` it was given to (``Worker(observers=...)``)."""

    def run_started(self, job: Job) -> None:
        """A handler is about to run ``job`` (claimed, attempt counted)."""

    def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
        """The run of ``job`` ended with ``outcome`` (one of ``OUTCOMES``) after
        ``duration_s`` seconds of its handler (claim to settle)."""

    def heartbeat_lost(self, job: Job) -> None:
        """A heartbeat of ``job``'s claim was refused: another worker may hold it."""

    # Optional (contract 1.2), looked up on each observer rather than required:
    # ``run_raised(job, exc)``, the exception a handler raised, before the run's
    # ``run_finished``.


class Observers:
    """Every observer of one worker, each call handed to all of them."""

    def __init__(self, observers: Iterable[WorkerObserver] = ()) -> None:
        self._observers: tuple[WorkerObserver, ...] = tuple(observers)

    def __bool__(self) -> bool:
        return bool(self._observers)

    def add(self, observer: WorkerObserver) -> None:
        self._observers = (*self._observers, observer)

    def run_started(self, job: Job) -> None:
        for observer in self._observers:
            try:
                observer.run_started(job)
            except Exception:
                log.exception("worker observer %r failed in run_started", observer)

    def run_finished(self, job: Job, outcome: str, duration_s: float) -> None:
        for observer in self._observers:
            try:
                observer.run_finished(job, outcome, duration_s)
            except Exception:
                log.exception("worker observer %r failed in run_finished", observer)

    def run_raised(self, job: Job, exc: BaseException) -> None:
        """Each observer that has the optional ``run_raised(job, exc)`` (contract 1.2
        §12.8) hears the exception ``job``'s handler raised, before its
        ``run_finished``."""
        for observer in self._observers:
            hear = getattr(observer, "run_raised", None)
            if hear is None:
                continue
            try:
                hear(job, exc)
            except Exception:
                log.exception("worker observer %r failed in run_raised", observer)

    def heartbeat_lost(self, job: Job) -> None:
        for observer in self._observers:
            try:
                observer.heartbeat_lost(job)
            except Exception:
                log.exception("worker observer %r failed in heartbeat_lost", observer)
