"""Name validation (contract §0): one rule for every name-taking surface."""

from __future__ import annotations

from .constants import MAX_NAME_LENGTH, OUTBOX_QUEUE_PREFIX, RESERVED_PREFIX
from .errors import InvalidName, ReservedName


def validate_identifier(value: object, what: str) -> str:
    """Check a name-shaped value: a non-empty ``str`` of at most 200 characters, no NUL."""
    if not isinstance(value, str):
        raise InvalidName(f"{what} must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidName(f"{what} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidName(f"{what} is {len(value)} characters long; the limit is {MAX_NAME_LENGTH}")
    if "\x00" in value:
        raise InvalidName(f"{what} must not contain NUL")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidName(f"{what} contains a lone surrogate (not valid UTF-8)") from exc
    return value


def validate_name(value: object, what: str = "name") -> str:
    """Check a caller-supplied name and refuse the reserved prefix.

    A name is a non-empty ``str`` of at most ``MAX_NAME_LENGTH`` (200)
    characters, without NUL or lone surrogates, not starting with
    ``RESERVED_PREFIX`` (contract §0).

    Args:
        value: the name to check.
        what: how error messages refer to it, e.g. ``"queue name"``.

    Returns:
        ``value``, unchanged.

    Raises:
        InvalidName: ``value`` is not a valid name.
        ReservedName: ``value`` starts with the reserved prefix.
    """
    name = validate_identifier(value, what)
    if name.startswith(RESERVED_PREFIX):
        raise ReservedName(f"{what} {name!r} starts with the reserved prefix {RESERVED_PREFIX!r}")
    return name


def outbox_queue_name(outbox: str) -> str:
    """The reserved queue that backs the outbox named ``outbox`` (contract §4).

    Raises:
        InvalidName: ``outbox`` is not a valid name.
        ReservedName: ``outbox`` starts with the reserved prefix.
    """
    return OUTBOX_QUEUE_PREFIX + validate_name(outbox, "outbox name")


def outbox_of_queue(queue: str) -> str | None:
    """The outbox a queue name backs (``outbox_queue_name``'s inverse), else ``None``.

    ``store.stats()`` lists an outbox's reserved backing queue by that name; reach
    it through ``store.outbox(outbox_of_queue(name))``.
    """
    if queue.startswith(OUTBOX_QUEUE_PREFIX):
        return queue[len(OUTBOX_QUEUE_PREFIX) :]
    return None
