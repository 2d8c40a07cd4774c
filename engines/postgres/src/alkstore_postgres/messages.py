"""How a pub/sub message travels: a NOTIFY on the store's message channel.

A message that fits NOTIFY's payload limit travels inline, as
``<serial>:<length of channel>:<channel><payload>``. The serial is unique per
process: PostgreSQL delivers identical (channel, payload) notifications of one
transaction only once, and two equal messages published in one transaction
are two messages. A message too large for NOTIFY is stored in the
``messages`` table in the same statement, and the NOTIFY carries
``#<id>``, which the listener resolves with a read (see ``listener``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Final

NOTIFY_PAYLOAD_LIMIT: Final = 8000
"""NOTIFY refuses payloads of this many bytes or more (PostgreSQL's default build)."""

REFERENCE_PREFIX: Final = "#"
"""Starts the NOTIFY payload of a stored message; an inline one starts with a digit."""

_serials = itertools.count()

Message = tuple[str, str]
"""``(channel, payload as JSON text)``."""


def inline_message(channel: str, payload: str) -> str | None:
    """The NOTIFY payload carrying the message itself, or ``None`` when it is too large
    for NOTIFY (the message must be stored and referenced instead)."""
    encoded = f"{next(_serials)}:{len(channel)}:{channel}{payload}"
    # Measured as UTF-8, the encoding of the server (and of JSON text).
    if len(encoded.encode("utf-8")) >= NOTIFY_PAYLOAD_LIMIT:
        return None
    return encoded


def reference_id(notified: str) -> int | None:
    """The stored message's id if ``notified`` is a reference, else ``None``."""
    if notified.startswith(REFERENCE_PREFIX):
        return int(notified[len(REFERENCE_PREFIX) :])
    return None


def decode_message(notified: str, stored: Mapping[int, Message]) -> Message | None:
    """The message a NOTIFY payload carries; ``None`` for a reference to a message no
    longer stored (pruned before this listener read it) or a malformed payload."""
    try:
        ref = reference_id(notified)
        if ref is not None:
            return stored.get(ref)
        _serial, length, rest = notified.split(":", 2)
        size = int(length)
    except ValueError:
        return None
    if size > len(rest):
        return None
    return rest[:size], rest[size:]
