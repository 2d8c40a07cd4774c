"""The error taxonomy (contract §8).

An error exists only where the caller acts differently: "no work" is ``None``,
a lapsed deadline is ``False``, a dead-lettered job is a state.
"""

from __future__ import annotations

from collections.abc import Sequence


class AlkstoreError(Exception):
    """Base of every error alkstore raises on purpose.

    Errors exist only where the caller acts differently (contract §8): no work
    is ``None``, a lost claim is ``False``, a dead-lettered job is a state.
    """


class InvalidName(AlkstoreError, ValueError):
    """A name (queue, outbox, stream, lock, schedule, channel) is malformed.

    A name is a non-empty ``str`` of at most 200 characters without NUL
    (contract §0). Also a ``ValueError``.
    """


class ReservedName(InvalidName):
    """A caller passed a name under the engine's reserved prefix (``__alkstore``).

    Names with that prefix are the engine's own (the outbox backing queues, the
    scheduler lock) and are refused everywhere a caller passes a name (contract §0).
    """


SPEC_FORMS = (
    "five cron fields (minute hour day-of-month month day-of-week), a nickname "
    "(@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually) "
    "or '@every <n><s|m|h|d>'"
)
"""What a schedule spec may be (contract §5.2), as refusals name it."""

_SPEC_AT_FAULT = object()  # InvalidSpec's ``timezone`` when the spec, not the zone, is refused


class InvalidSpec(AlkstoreError, ValueError):
    """A schedule spec is not in the grammar of contract §5.2, or a schedule's time
    zone is not one (§5.7).

    Also a ``ValueError`` (contract §5, §8).

    Attributes:
        spec: the refused spec, as given (``None`` when the time zone is refused).
        reason: what is wrong with it beyond not matching (for a cron spec: the field
            at fault), or ``None``.
        timezone: the refused time zone, as given, when the zone is at fault; else
            ``None``.
    """

    def __init__(
        self, spec: object, reason: str | None = None, *, timezone: object = _SPEC_AT_FAULT
    ) -> None:
        self.spec = spec
        self.reason = reason
        self.timezone = None if timezone is _SPEC_AT_FAULT else timezone
        detail = f": {reason}" if reason else ""
        if timezone is not _SPEC_AT_FAULT:
            message = (
                f"invalid schedule time zone {timezone!r}{detail}; "
                "expected an IANA name such as 'Europe/Berlin' or 'UTC'"
            )
        else:
            message = f"invalid schedule spec {spec!r}{detail}; expected {SPEC_FORMS}"
        super().__init__(message)


class InvalidOptions(AlkstoreError, ValueError):
    """An option value is out of range or of the wrong type; the message names the field.

    Raised before anything is written. Also a ``ValueError``.
    """


class PayloadError(AlkstoreError, TypeError):
    """A payload is not JSON-serializable (nothing was written).

    Also refused: payloads nested deeper than 64 lists/objects and strings with a
    lone surrogate. Also a ``TypeError`` (contract §0).
    """


class ResultError(PayloadError):
    """A job's result cannot be stored (contract 1.2 §17, the results profile): it is
    not JSON-serializable, nests deeper than 64 levels, or its JSON text is over
    ``MAX_RESULT_BYTES``; nothing was written. A ``PayloadError`` (so a ``TypeError``)."""


class StaleHandle(AlkstoreError):
    """``tx.ack`` of a claim that is no longer valid (contract 1.2 §3.8): its deadline
    passed, another claim superseded it, or it was already finished. Raised inside the
    transaction, before it commits, so the caller's business writes are not committed
    as the effect of a job someone else may run again: roll the transaction back
    (leaving the ``with`` block with the exception does). Outside a transaction a stale
    handle's ``ack`` returns ``False`` (§2.8)."""


class LeadershipLost(AlkstoreError):
    """The scheduler leader's lock lapsed or was taken; it stopped before ticking.

    Raised by ``store.run_schedules`` (contract §5): the caller may start again.
    """


class EngineNotFound(AlkstoreError, LookupError):
    """No installed engine matches the URL scheme or engine name (contract §1).

    Also a ``LookupError``.

    Attributes:
        wanted: the scheme or engine name asked for.
        installed: the names of the installed engines, sorted.
    """

    def __init__(self, wanted: str, installed: Sequence[str]) -> None:
        self.wanted = wanted
        self.installed = tuple(sorted(installed))
        names = ", ".join(self.installed) or "none"
        super().__init__(f"no alkstore engine named {wanted!r}; installed engines: {names}")


class StoreClosed(AlkstoreError):
    """The store (or the transaction) was closed; open a new one."""


class EngineUnavailable(AlkstoreError):
    """The database cannot be reached right now (transient: an outage, a restart, a lock
    held past the time limit); the driver's error is chained as ``__cause__``."""


class EngineMisconfigured(AlkstoreError):
    """The database was reached and refused this configuration: no such database or
    role, a wrong password, a missing permission. Not transient: retrying the same
    call will not help, so this is deliberately not an ``EngineUnavailable``."""


class WriteWouldDeadlock(AlkstoreError, RuntimeError):
    """A store write made on a thread that holds an open ``store.transaction()``,
    outside that transaction, on an engine with one writer at a time (SQLite, the
    memory engine): it could only wait for the transaction forever, so it is refused
    at once and writes nothing (contract §3.7). Make the write through the
    transaction (``tx.enqueue``, ...), or after it ends."""


class ProfileUnavailable(AlkstoreError, NotImplementedError):
    """The engine does not implement an optional profile (transactions, locks,
    scheduler, streams, pubsub, ops, snooze): its ``Capabilities`` say so. Use
    another engine, or do without the profile."""

    def __init__(self, engine: str, profile: str) -> None:
        self.engine = engine
        self.profile = profile
        super().__init__(
            f"the {engine or 'this'} engine does not implement the {profile} profile "
            f"(its Capabilities have {profile}=False)"
        )
